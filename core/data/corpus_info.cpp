#include "core/data/corpus_info.hpp"

#include <algorithm>

#include "core/io/error.hpp"
#include "core/data/training_data.hpp"

namespace attnviz {

TrainConfig data_settings(const TrainConfig& config) {
    TrainConfig d;
    d.max_length = config.max_length;
    d.val_fraction = config.val_fraction;
    d.seed = config.seed;
    d.split_shuffle = config.split_shuffle;
    d.min_freq = config.min_freq;
    d.max_vocab = config.max_vocab;
    d.vocab_includes_val = config.vocab_includes_val;
    d.subword_vocab = config.subword_vocab;  // subword corpora: the vocabulary comes from the pieces
    d.subword_model = config.subword_model;
    return d;
}

bool same_data_settings(const TrainConfig& a, const TrainConfig& b) {
    return a.max_length == b.max_length && a.val_fraction == b.val_fraction && a.seed == b.seed &&
           a.split_shuffle == b.split_shuffle && a.min_freq == b.min_freq && a.max_vocab == b.max_vocab &&
           a.vocab_includes_val == b.vocab_includes_val && a.subword_vocab == b.subword_vocab &&
           a.subword_model == b.subword_model;
}

CorpusSummary summarize_corpus(const Corpus& corpus, const TrainConfig& config, size_t length_bins) {
    if (length_bins < 2) throw ConfigError("summarize_corpus: length_bins must be at least 2");
    CorpusSummary s;
    s.name = corpus.name;
    s.level = corpus.level;
    s.detected = corpus.detected;
    s.lines_read = corpus.lines_read;
    s.stopped_early = corpus.stopped_early;
    s.pairs = corpus.pairs.size();
    s.skipped_lines = corpus.skipped.size();
    s.first_skipped.assign(corpus.skipped.begin(),
                           corpus.skipped.begin() + std::min(corpus.skipped.size(), max_skipped_listed));
    s.src_lengths.assign(length_bins, 0);
    s.tgt_lengths.assign(length_bins, 0);
    const size_t max_length = config.max_length > 0 ? static_cast<size_t>(config.max_length) : 0;
    for (const auto& p : corpus.pairs) {
        ++s.src_lengths[std::min(p.src.size(), length_bins - 1)];
        ++s.tgt_lengths[std::min(p.tgt.size(), length_bins - 1)];
        if (max_length > 0 && (p.src.size() > max_length || p.tgt.size() > max_length)) ++s.too_long;
    }
    try {
        const TrainingData d = prepare_data(corpus, data_settings(config));
        s.train_pairs = d.train.size();
        s.val_pairs = d.val.size();
        s.src_vocab = d.src_vocab.size();
        s.tgt_vocab = d.tgt_vocab.size();
    } catch (const ConfigError& e) {
        s.problem = e.what();
    }
    return s;
}

}  // namespace attnviz
