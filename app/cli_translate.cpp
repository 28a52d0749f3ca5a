// attnviz-cli translate and eval: a checkpoint applied to sentences or a corpus.
#include <cmath>
#include <iostream>

#include "app/cli_alignment.hpp"
#include "app/cli_common.hpp"
#include "core/persist/model_file.hpp"
#include "core/decode/beam_tree.hpp"
#include "core/persist/checkpoint.hpp"
#include "core/decode/translation.hpp"
#include "core/model/device.hpp"
#include "core/model/memory_bound.hpp"
#include "core/train/split_step.hpp"
#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/analysis/export.hpp"
#include "core/analysis/subword_merge.hpp"
#include "core/analysis/metrics.hpp"

namespace attnviz::cli {

namespace {

/// Decoding flags shared by translate and eval.
struct DecodeFlags {
    int64_t beam = 1, nbest = 1, max_length = 30, batch = 64;
    double length_penalty = 1.0;
    std::string device = "cpu";
    CLI::Option* beam_opt = nullptr;

    void add_to(CLI::App& app, bool with_nbest) {
        DecodeOptions d;
        beam_opt = app.add_option("--beam", beam, "beam width; 1 = greedy")
                       ->type_name("INT")->default_str("1")->check(positive_int())->group("decoding");
        if (with_nbest)
            app.add_option("--nbest", nbest, "hypotheses per sentence (raises --beam to at least this)")
                ->type_name("INT")->default_str("1")->check(positive_int())->group("decoding");
        app.add_option("--max-length", max_length, "maximum output tokens per sentence, <eos> included")
            ->type_name("INT")->default_str(std::to_string(d.max_length))->check(positive_int())
            ->group("decoding");
        app.add_option("--length-penalty", length_penalty, "beam: score = log P / length^this (0 = none)")
            ->type_name("FLOAT")->default_str("1")->check(non_negative_number())->group("decoding");
        app.add_option("--decode-batch", batch, "sentences decoded together")
            ->type_name("INT")->default_str(std::to_string(d.batch_size))->check(positive_int())
            ->group("decoding");
        app.add_option("--device", device, "auto | cpu | cuda | cuda:N")
            ->type_name("NAME")->default_str(device)->group("decoding");
    }

    DecodeOptions options() const {
        DecodeOptions d;
        d.max_length = max_length;
        d.num_hypotheses = nbest;
        d.beam_size = beam;
        if (nbest > beam) {
            if (beam_opt->count() > 0)
                throw UsageError("--nbest " + std::to_string(nbest) + " needs --beam of at least " +
                                 std::to_string(nbest));
            d.beam_size = nbest;
        }
        d.length_penalty = length_penalty;
        d.batch_size = batch;
        return d;
    }
};

/// Loads a checkpoint's model onto the requested device.
TranslationModelPtr load_model_on(const std::string& path, const std::string& device) {
    return load_model(path)->on_device(resolve_device(device));
}

// --- translate ----------------------------------------------------------------

struct TranslateOptions {
    std::string model, attention_out, attention_format, beam_tree;
    std::vector<std::string> sentences;
    DecodeFlags decode;
    bool show_unk = false;
    bool merge_subwords = false;    ///< --merge-subwords: attention and alignments over words, not pieces
    int64_t topk = 0;               ///< --topk: candidates per step in --attention-out
    bool force = false, prefix = false;  ///< input lines are `source ||| target`
    AlignmentOutFlags alignment;    ///< --alignment-out, --alignment-threshold
};

/// `source ||| target` lines for --force / --prefix.
std::vector<std::pair<std::string, std::string>> split_pairs(const std::vector<std::string>& lines, bool from_stdin,
                                                             const std::string& flag) {
    std::vector<std::pair<std::string, std::string>> pairs;
    for (size_t i = 0; i < lines.size(); ++i) {
        const auto bar = lines[i].find("|||");
        if (bar == std::string::npos)
            throw UsageError((from_stdin ? "<stdin>:" + std::to_string(i + 1) : "sentence " + std::to_string(i + 1)) +
                             ": " + flag + " expects 'SOURCE ||| TARGET', got " + quote(lines[i]));
        pairs.emplace_back(lines[i].substr(0, bar), lines[i].substr(bar + 3));
    }
    return pairs;
}

std::string attention_format_of(const TranslateOptions& o) {
    if (!o.attention_format.empty()) return o.attention_format;
    std::string ext = extension_of(o.attention_out);
    if (ext == "json" || ext == "csv") return ext;
    throw UsageError("--attention-out " + o.attention_out +
                     ": cannot tell the format from the extension; use .json or .csv, or --attention-format");
}

std::string attention_file(const std::vector<Translation>& ts, const std::string& format, const TranslationModel& m,
                           const DecodeOptions& d) {
    if (format == "json") {
        nlohmann::json all = nlohmann::json::array();
        nlohmann::json model = m.config().to_json(), decoding = d.to_json();
        for (size_t i = 0; i < ts.size(); ++i) {
            if (ts[i].empty()) {  // keep one entry per sentence so indices line up
                all.push_back({{"sentence", i}, {"hypothesis", 0}, {"input", ts[i].input}, {"source", nlohmann::json::array()},
                               {"output", nlohmann::json::array()}, {"weights", nlohmann::json::array()},
                               {"raw_scores", nlohmann::json::array()}, {"text", ""}});
                continue;
            }
            for (size_t h = 0; h < ts[i].hypotheses.size(); ++h) {
                nlohmann::json j = attention_json(ts[i], h, model, decoding);
                j["sentence"] = i;  // "hypothesis" (the rank) is attention_json's own
                all.push_back(std::move(j));
            }
        }
        return all.dump(1) + "\n";
    }
    std::string out;
    for (const auto& t : ts)
        for (size_t h = 0; h < t.hypotheses.size(); ++h) {
            if (!out.empty()) out += "\n";  // blank line between tables
            out += attention_csv(t, h);
            if (out.back() != '\n') out += "\n";
        }
    return out;
}

/// --beam-tree: one tree per sentence in input order, with "sentence" and "input" added
/// (an empty input keeps an entry with no nodes, so indices line up).
std::string beam_tree_file(const std::vector<Translation>& ts, const TranslationModel& m, const DecodeOptions& d) {
    nlohmann::json all = nlohmann::json::array();
    for (size_t i = 0; i < ts.size(); ++i) {
        BeamTree none;
        none.level = m.level();
        none.beam_size = d.beam_size;
        none.num_hypotheses = d.num_hypotheses;
        none.length_penalty = d.length_penalty;
        none.attention_available = m.has_attention();
        nlohmann::json j = (ts[i].beam_tree ? *ts[i].beam_tree : none).to_json();
        j["sentence"] = i;
        j["input"] = ts[i].input;
        j["model"] = m.config().to_json();
        j["decode"] = d.to_json();
        all.push_back(std::move(j));
    }
    return all.dump(1) + "\n";
}

int run_translate(TranslateOptions& o) {
    DecodeOptions d = o.decode.options();
    std::string format = o.attention_out.empty() ? "" : attention_format_of(o);
    TranslationModelPtr model = load_model_on(o.model, o.decode.device);
    if (o.merge_subwords && model->level() != TokenLevel::subword)
        throw UsageError("--merge-subwords: the model works on " + level_noun(model->level()) +
                         ", not subwords: there are no pieces to merge");
    if (format == "csv" && !model->has_attention())
        throw UsageError("--attention-out " + o.attention_out +
                         ": the model has no attention (scoring none), so there is no CSV table; use .json");
    o.alignment.check(*model);
    if (!o.attention_out.empty()) check_writable("--attention-out", o.attention_out);

    std::vector<std::string> sentences = o.sentences;
    if (sentences.empty()) {
        std::string line;
        while (std::getline(std::cin, line)) {
            if (!line.empty() && line.back() == '\r') line.pop_back();
            sentences.push_back(line);
        }
    }
    for (size_t i = 0; i < sentences.size(); ++i)
        if (!is_valid_utf8(sentences[i]))
            throw FileError((o.sentences.empty() ? "<stdin>:" + std::to_string(i + 1)
                                                 : "sentence " + std::to_string(i + 1)) +
                            ": invalid UTF-8");
    if (o.force && o.prefix) throw UsageError("--force and --prefix exclude each other");
    // A reference is one given path: there is nothing to search.
    if (o.force && (d.beam_size > 1 || !o.beam_tree.empty()))
        throw UsageError(std::string(d.beam_size > 1 ? "--beam and --nbest" : "--beam-tree") +
                         " do not apply to --force, which scores the given reference as it is");
    if (!o.beam_tree.empty()) check_writable("--beam-tree", o.beam_tree);
    d.top_k = o.topk;
    d.beam_tree = !o.beam_tree.empty();
    std::vector<Translation> ts;
    if (o.force || o.prefix)
        ts = model->force(split_pairs(sentences, o.sentences.empty(), o.force ? "--force" : "--prefix"),
                          o.force ? ForceMode::reference : ForceMode::prefix, d);
    else
        ts = model->translate(sentences, d);

    if (o.show_unk)
        for (size_t i = 0; i < ts.size(); ++i)
            if (!ts[i].unknown.empty()) {
                std::string words;
                for (const auto& w : ts[i].unknown) words += (words.empty() ? "" : " ") + w;
                std::cerr << "attnviz-cli: sentence " << i + 1 << ": unknown words (read as <unk>): " << words << "\n";
            }
    // --merge-subwords: the files show words (pieces' columns summed, rows averaged); the
    // printed text and the beam tree are the same either way.
    std::vector<Translation> shown;
    if (o.merge_subwords)
        for (const auto& t : ts) shown.push_back(merge_subwords(t));
    const std::vector<Translation>& files = o.merge_subwords ? shown : ts;
    if (!format.empty()) write_file_atomic(o.attention_out, attention_file(files, format, *model, d));
    if (d.beam_tree) write_file_atomic(o.beam_tree, beam_tree_file(ts, *model, d));
    if (o.alignment.given()) o.alignment.write(files);

    std::string out;
    for (size_t i = 0; i < ts.size(); ++i) {
        if (o.force) {  // the reference as the model saw it: "TEXT ||| LOG_PROB ||| FIRST_DIVERGENCE"
            const Hypothesis* h = ts[i].empty() ? nullptr : &ts[i].best();
            out += h ? h->text + " ||| " + fixed(h->log_prob, 6) + " ||| " + std::to_string(h->first_divergence) : "";
            out += "\n";
            continue;
        }
        if (d.num_hypotheses <= 1) {
            out += ts[i].empty() ? "" : ts[i].best().text;
            out += "\n";
            continue;
        }
        // N-best: Moses-style "index ||| text ||| score", best first.
        for (const auto& h : ts[i].hypotheses)
            out += std::to_string(i) + " ||| " + h.text + " ||| " + fixed(h.score, 6) + "\n";
    }
    std::cout << out << std::flush;
    return exit_ok;
}

// --- eval -------------------------------------------------------------------------

struct EvalOptions {
    std::string model, split = "val";
    CorpusFlags corpus;
    DecodeFlags decode;
    bool json = false;
    GoldAlignmentFlags gold;  ///< --alignments, --alignments-one-based
};

int run_eval(EvalOptions& o) {
    DecodeOptions d = o.decode.options();
    d.num_hypotheses = 1;
    TranslationModelPtr model = load_model_on(o.model, o.decode.device);
    Corpus corpus = o.corpus.load();
    o.gold.attach(corpus, o.corpus);  // before the split, so each pair keeps its line
    if (corpus.level != model->level())
        throw UsageError("the model works on " + level_noun(model->level()) +
                         " but the corpus is tokenised differently (see --level)");
    // The held-out pairs are re-derived exactly as training split them (subword: cut
    // into pieces by the model's own SentencePiece model).
    std::vector<SentencePair> pairs;
    if (o.split == "all") {
        pairs = corpus.pairs;
        if (model->level() == TokenLevel::subword)
            for (auto& p : pairs) {
                p.src = model->tokenizer().split_words(p.src);
                p.tgt = model->tokenizer().split_words(p.tgt);
                p.alignment.reset();  // word alignments do not hold for pieces
            }
    } else {
        TrainingData data = prepare_data(corpus, model->trained_with(), model->tokenizer_ptr());
        pairs = data.val;
    }
    if (pairs.empty()) throw ConfigError(corpus.name + ": no pairs to evaluate (split '" + o.split + "')");

    // Teacher-forced loss and token accuracy, token-weighted like the trainer's (and with
    // its --steps padding/truncation, so the numbers match training's validation), in chunks
    // within the step memory bound; a pair too long for it is refused first, naming its line.
    const torch::Device dev = model->device();
    Network network = model->network();  // teacher-forced loss: read-only use of the weights
    check_pairs_fit(pairs, training_cost(*network), model->trained_with().fixed_steps, model->config().source_steps,
                    corpus.name, "pair");
    const ValidationSums sums = validation_sums(*network, pairs, model->src_vocab(), model->tgt_vocab(), d.batch_size,
                                                model->trained_with().fixed_steps, dev);
    const double loss_sum = sums.loss, tf_correct = sums.correct;
    const int64_t tokens = static_cast<int64_t>(sums.tokens);
    // Free-running decoding for exact match, token accuracy and BLEU.
    std::vector<std::vector<std::string>> sources, refs, hyps;
    for (const auto& p : pairs) {
        sources.push_back(p.src);
        refs.push_back(p.tgt);
    }
    for (const auto& t : model->translate_tokens(sources, d)) hyps.push_back(t.empty() ? std::vector<std::string>{} : until_eos(t.best().tokens));
    BleuResult bleu = corpus_bleu(hyps, refs);

    nlohmann::json j;
    j["pairs"] = pairs.size();
    j["split"] = o.split;
    j["corpus"] = corpus.name;
    j["val_loss"] = number_or_null(loss_sum / double(std::max<int64_t>(tokens, 1)));
    j["accuracy"] = exact_match(hyps, refs);
    j["token_accuracy"] = token_accuracy(hyps, refs);
    j["teacher_forced_token_accuracy"] = tf_correct / double(std::max<int64_t>(tokens, 1));
    j["bleu"] = bleu.score;
    j["bleu_precisions"] = bleu.precisions;
    j["brevity_penalty"] = bleu.brevity_penalty;
    j["beam"] = d.beam_size;
    // Where the pairs know their alignment (a task, --alignments): the attention on the forced references.
    const AlignmentScore align = alignment_metrics(*model, pairs, d, j);
    if (o.json) {
        std::cout << j.dump() << std::endl;
    } else {
        std::cout << corpus.name << " (" << pairs.size() << " pairs, split " << o.split << ")\n"
                  << "loss             " << fixed(loss_sum / double(std::max<int64_t>(tokens, 1)), 4) << "\n"
                  << "exact match      " << fixed(j["accuracy"].get<double>(), 4) << "\n"
                  << "token accuracy   " << fixed(j["token_accuracy"].get<double>(), 4) << "  (teacher-forced "
                  << fixed(j["teacher_forced_token_accuracy"].get<double>(), 4) << ")\n"
                  << "BLEU-4           " << fixed(bleu.score, 2) << "\n";
        if (align.sentences > 0)
            std::cout << "alignment acc    " << fixed(align.accuracy(), 4) << "  (" << align.sentences
                      << " pairs, attention argmax on the forced reference)\n"
                      << "AER              " << fixed(align.aer(), 4) << "  (precision "
                      << fixed(align.precision(), 4) << ", recall " << fixed(align.recall(), 4) << ")\n";
    }
    return exit_ok;
}

}  // namespace

Command add_translate_command(CLI::App& parent) {
    auto o = std::make_shared<TranslateOptions>();
    CLI::App* app = parent.add_subcommand("translate", "Translate sentences with a trained checkpoint");
    app->footer(
        "Sentences come from the arguments or, when there are none, from stdin (one per line);\n"
        "stdout gets one translation per line in input order (an empty input gives an empty line).\n"
        "With --nbest N > 1 each sentence gives N lines `INDEX ||| TRANSLATION ||| SCORE` (0-based, best first).\n"
        "--attention-out: JSON is an array with one object per sentence and hypothesis, in input order:\n"
        "the fields of attention_json (source, output, weights, raw_scores, ..., \"hypothesis\" = rank)\n"
        "plus \"sentence\" (0-based); an empty input keeps its entry with empty arrays. CSV holds one\n"
        "table per sentence and hypothesis in the same order, separated by a blank line (empty inputs\n"
        "have no table; a model without attention has no CSV). Both are written atomically.\n"
        "--beam-tree: JSON array with one tree per sentence, in input order: every candidate beam search\n"
        "looked at, per step the 2K best (K = --beam; 1 = the tree of greedy decoding), as \"nodes\"\n"
        "{id, parent (null: first token), step, token, token_log_prob, log_prob, score, status\n"
        "kept | pruned | finished, rank, token_rank, forced, attention}; \"finished\" lists the finished\n"
        "nodes best first, the first --nbest of them being the printed hypotheses (same scores).");
    app->add_option("--model", o->model, "checkpoint written by train --save")->type_name("FILE")->required();
    app->add_option("sentences", o->sentences, "sentences to translate (default: read stdin)")->type_name("SENTENCE");
    o->decode.add_to(*app, true);
    app->add_option("--attention-out", o->attention_out, "write the attention matrices here (.json or .csv)")
        ->type_name("FILE")->group("output");
    app->add_option("--attention-format", o->attention_format, "json | csv (default: from the file extension)")
        ->type_name("NAME")->check(CLI::IsMember({"json", "csv"}))->group("output");
    app->add_option("--beam-tree", o->beam_tree, "write every candidate of the search here (JSON, see below)")
        ->type_name("FILE")->group("output");
    app->add_flag("--show-unk", o->show_unk, "report words missing from the vocabulary on stderr")->group("output");
    app->add_flag("--merge-subwords", o->merge_subwords,
                  "subword models: --attention-out and --alignment-out over words, not pieces (a word's\n"
                  "columns summed, its rows averaged; the files say \"merged\")")
        ->group("output");
    app->add_option("--topk", o->topk, "per step, the K most probable tokens (in --attention-out JSON as top_k)")
        ->type_name("INT")->default_str("0")->check(CLI::Range(int64_t{0}, int64_t{100}))->group("why");
    app->add_flag("--force", o->force,
                  "inputs are 'SOURCE ||| REFERENCE': score the reference teacher-forced; prints\n"
                  "'TEXT ||| LOG_PROB ||| FIRST_DIVERGENCE' (the first step where the model would have\n"
                  "chosen otherwise, -1: none); per-token log-probabilities and ranks in --attention-out")
        ->group("why");
    app->add_flag("--prefix", o->prefix,
                  "inputs are 'SOURCE ||| PREFIX': force the prefix, then decode on (greedy,\n"
                  "or beam search with --beam / --nbest)")
        ->group("why");
    o->alignment.add_to(*app);
    return {app, [o] { return run_translate(*o); }};
}

Command add_eval_command(CLI::App& parent) {
    auto o = std::make_shared<EvalOptions>();
    CLI::App* app = parent.add_subcommand("eval", "Loss, exact match, token accuracy and BLEU of a checkpoint on a corpus");
    app->footer(
        "--split val re-splits the corpus as training did (the checkpoint's seed, --val-fraction and\n"
        "--max-length), so the same --task/--data gives the held-out pairs; --split all uses every pair.\n"
        "Pairs with a known alignment (built-in tasks, --alignments) also get alignment accuracy and\n"
        "AER (Och & Ney) of the attention argmax on the teacher-forced reference, <eos> left out.");
    app->add_option("--model", o->model, "checkpoint written by train --save")->type_name("FILE")->required();
    o->corpus.add_to(*app, true);
    app->add_option("--split", o->split, "val | all")->type_name("NAME")->default_str("val")
        ->check(CLI::IsMember({"val", "all"}))->group("data");
    o->decode.add_to(*app, false);
    app->add_flag("--json", o->json, "print the metrics as one JSON object")->group("output");
    o->gold.add_to(*app);
    return {app, [o] { return run_eval(*o); }};
}

}  // namespace attnviz::cli
