#pragma once
// The corpus flags of attnviz-cli (train, eval, compare, bench-decode): a
// built-in task, a TSV file (layout detected or --columns), or two-file
// parallel text (--data SRC --target-data TGT).
#include <cstddef>
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "core/data/corpus_reader.hpp"
#include "core/text/tokenizer.hpp"

namespace attnviz::cli {

/// Where the pairs come from: --task, --data, or --data with --target-data.
struct CorpusFlags {
    std::string task;            ///< built-in task name
    std::string data;            ///< TSV file, or the source side of parallel text
    std::string target_data;     ///< the target side of parallel text (empty: --data is a TSV file)
    std::string columns;         ///< TSV: "SRC,TGT" column numbers or language codes; empty = detect
    std::string level = "word";  ///< word | char | subword (files only)
    size_t max_pairs = 0;        ///< files: read at most this many pairs
    size_t pairs = 2000;         ///< task: pairs to generate
    uint64_t task_seed = 0;      ///< task: generator seed
    bool reverse = false;        ///< files: swap source and target
    CLI::Option* task_opt = nullptr;
    CLI::Option* data_opt = nullptr;

    void add_to(CLI::App& app, bool required);
    bool given() const { return !task.empty() || !data.empty(); }
    /// The reading options the file flags ask for (--level, --max-pairs, --reverse, --columns);
    /// throws UsageError for a bad --columns.
    TsvOptions tsv_options() const;
    /// Reads or generates the corpus. verbose: prints on stderr the layout when it is not a
    /// plain Tatoeba file (describe_corpus) and how many lines were skipped.
    /// `tokenizer`: a pretrained model's, which then cuts the sentences as they are (TsvOptions::encode).
    Corpus load(bool verbose = true, TokenizerPtr tokenizer = nullptr) const;
};

/// Prints what reading found on stderr: a line with the layout, the pairs and the lines read
/// (unless it is a plain source<TAB>target file), and a warning for skipped lines.
void describe_corpus(const Corpus& corpus, const std::string& path);

}  // namespace attnviz::cli
