#pragma once
// A corpus as training will see it: the length filter, the split and the
// vocabularies come from prepare_data (core/train/train.hpp) under the given
// settings, so the sizes a summary shows are the sizes a run reports
// (SessionInfo). Used by the GUI's corpus panel; Qt-free.
#include <cstddef>
#include <string>
#include <vector>

#include "core/config/config.hpp"
#include "core/data/data.hpp"

namespace attnviz {

/// What a corpus gives training under one set of data settings.
struct CorpusSummary {
    std::string name;                      ///< the corpus' name
    TokenLevel level = TokenLevel::word;
    std::string detected;                  ///< Corpus::detected: the layout read (empty for tasks)
    size_t lines_read = 0;                 ///< lines read
    bool stopped_early = false;            ///< reading stopped at the maximum pairs
    size_t pairs = 0;                      ///< good pairs read
    size_t skipped_lines = 0;              ///< bad lines skipped while reading
    std::vector<SkippedLine> first_skipped;  ///< the first of them (at most max_skipped_listed)
    size_t too_long = 0;                   ///< pairs left out by max_length
    size_t train_pairs = 0;                ///< after the length filter and the split
    size_t val_pairs = 0;
    size_t src_vocab = 0;                  ///< vocabulary sizes, special tokens included
    size_t tgt_vocab = 0;
    /// Pairs per sentence length in tokens, over every pair read: index = length,
    /// the last bin counts that length or more.
    std::vector<size_t> src_lengths, tgt_lengths;
    /// Why training cannot use the corpus with these settings (prepare_data's
    /// ConfigError, e.g. no pair short enough); empty when it can. The sizes are 0 then.
    std::string problem;
};

/// Skipped lines CorpusSummary::first_skipped lists at most.
constexpr size_t max_skipped_listed = 20;

/// The settings prepare_data reads (max_length, val_fraction, seed, split_shuffle,
/// min_freq, max_vocab, vocab_includes_val) copied over TrainConfig's defaults: a summary does
/// not depend on (nor fail for) the optimisation settings.
TrainConfig data_settings(const TrainConfig& config);
/// True when both give the same data (the same data_settings).
bool same_data_settings(const TrainConfig& a, const TrainConfig& b);

/// Summarises corpus as prepare_data(corpus, data_settings(config)) prepares it.
/// Length histograms have length_bins bins (lengths 0 .. length_bins - 1, the last
/// one "or more"). Throws ConfigError only for length_bins < 2; a data setting out
/// of range is reported in `problem`, like an unusable corpus.
CorpusSummary summarize_corpus(const Corpus& corpus, const TrainConfig& config, size_t length_bins = 31);

}  // namespace attnviz
