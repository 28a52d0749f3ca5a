#include "app/cli_corpus.hpp"

#include <iostream>
#include <sstream>

#include "app/cli_common.hpp"
#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/data/tasks.hpp"

namespace attnviz::cli {

void CorpusFlags::add_to(CLI::App& app, bool required) {
    const std::string g = "data";
    task_opt = app.add_option("--task", task, "built-in task: reverse | lookup | dates | toy-french (see `tasks`)")
                   ->type_name("NAME")
                   ->group(g);
    data_opt = app.add_option("--data", data,
                              "corpus file: Tatoeba TSV source<TAB>target[<TAB>attribution] or Tatoeba-Challenge "
                              "lang<TAB>lang<TAB>source<TAB>target (detected); with --target-data, the source side "
                              "of parallel text")
                   ->type_name("FILE")
                   ->group(g);
    auto* target_opt = app.add_option("--target-data", target_data,
                                      "parallel text: the target side, one sentence per line, line N translating "
                                      "line N of --data (same line count)")
                           ->type_name("FILE")
                           ->group(g);
    auto* columns_opt =
        app.add_option("--columns", columns,
                       "TSV: the sentence columns SRC,TGT, 1-based numbers (3,4) or the language codes of a "
                       "Tatoeba-Challenge file (fra,eng); default: detect the layout")
            ->type_name("SRC,TGT")
            ->group(g);
    task_opt->excludes(data_opt);
    target_opt->needs(data_opt);
    columns_opt->excludes(target_opt);
    (void)required;  // one of --task/--data: CLI11 cannot express "exactly one of", checked in load()
    app.add_option("--level", level,
                   "corpus file tokenisation: word | char | subword (SentencePiece pieces of the words, trained on "
                   "the training pairs: --subword-vocab, --subword-model)")
        ->type_name("NAME")
        ->check(CLI::IsMember({"word", "char", "subword"}))
        ->default_str(level)
        ->group(g);
    app.add_option("--max-pairs", max_pairs,
                   "corpus file: stop reading after this many pairs, in file order (the rest is not read); 0 = all "
                   "(a file over 2 GiB is then refused)")
        ->type_name("INT")
        ->default_str("0")
        ->check(non_negative_int())
        ->group(g);
    app.add_flag("--reverse", reverse, "corpus file: swap source and target (translate target to source)")->group(g);
    app.add_option("--pairs", pairs, "task: how many pairs to generate (1..10000000)")
        ->type_name("INT")
        ->default_str(std::to_string(pairs))
        ->check(int_in_range(1, 10000000))
        ->group(g);
    app.add_option("--task-seed", task_seed, "task: generator seed (same seed, same pairs)")
        ->type_name("INT")
        ->default_str("0")
        ->check(non_negative_int())
        ->group(g);
}

TsvOptions CorpusFlags::tsv_options() const {
    TsvOptions o;
    o.level = token_level_from_string(level);
    o.max_pairs = max_pairs;
    o.reverse = reverse;
    o.columns = columns;
    if (!columns.empty()) {
        try {
            parse_column_choice(columns);
        } catch (const ConfigError& e) {
            throw UsageError(std::string("--columns: ") + e.what());
        }
    }
    return o;
}

void describe_corpus(const Corpus& c, const std::string& path) {
    if (c.layout != CorpusLayout::pairs && !c.detected.empty()) {
        std::ostringstream s;
        s << "attnviz-cli: " << quote(path, quote_path_max) << ": " << escape_controls(c.detected) << "; " << c.pairs.size() << " pairs from "
          << c.lines_read << " lines" << (c.stopped_early ? " (stopped there: --max-pairs)" : "") << "\n";
        std::cerr << s.str();
    }
    if (!c.skipped.empty()) {
        std::ostringstream w;
        w << quote(path, quote_path_max) << ": skipped " << count_of(static_cast<int64_t>(c.skipped.size()), "bad line", "bad lines")
          << ", first at line " << c.skipped.front().line
          << " (" << c.skipped.front().reason << ")";
        warn(w.str());
    }
}

Corpus CorpusFlags::load(bool verbose, TokenizerPtr tokenizer) const {
    if (task.empty() && data.empty()) throw UsageError("give --task NAME or --data FILE");
    if (!task.empty()) {
        TaskKind kind;
        try {
            kind = task_from_name(task);
        } catch (const Error& e) {
            throw UsageError(std::string("--task: ") + e.what());
        }
        TaskOptions o;
        o.num_pairs = pairs;
        o.seed = task_seed;
        return task_corpus(kind, o);
    }
    TsvOptions o = tsv_options();
    if (tokenizer)
        o.encode = [tokenizer](const std::string& text, bool target) {
            return target ? tokenizer->encode_target(text) : tokenizer->encode(text);
        };
    Corpus c = target_data.empty() ? read_tsv(data, o) : read_parallel(data, target_data, o);
    // A plain Tatoeba file reads as it always did; any other layout is announced.
    if (verbose) describe_corpus(c, target_data.empty() ? data : c.name);
    return c;
}

}  // namespace attnviz::cli
