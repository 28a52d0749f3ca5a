// Preparing a corpus for training: filter by length, split, build vocabularies.
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/train.hpp"

namespace attnviz {

TrainingData prepare_data(const Corpus& corpus, const TrainConfig& config) {
    config.validate();
    TrainingData d;
    d.name = corpus.name;
    d.level = corpus.level;
    d.skipped_lines = corpus.skipped.size();
    // Positions rather than copies: each pair is copied once, into train or val (a corpus
    // of 200,000 pairs is ~100 MB of token strings; see README "Corpora").
    const auto max_length = static_cast<size_t>(config.max_length);
    std::vector<size_t> keep;
    keep.reserve(corpus.pairs.size());
    for (size_t i = 0; i < corpus.pairs.size(); ++i) {
        const SentencePair& p = corpus.pairs[i];
        if (max_length == 0 || (p.src.size() <= max_length && p.tgt.size() <= max_length)) keep.push_back(i);
    }
    if (keep.empty())
        throw ConfigError("corpus '" + corpus.name + "': no pair is short enough for max length " +
                          std::to_string(config.max_length));
    const auto [train, val] = split_indices(keep.size(), config.val_fraction, config.seed, config.split_shuffle);
    if (train.empty()) throw ConfigError("corpus '" + corpus.name + "': no training pairs left after the split");
    d.train.reserve(train.size());
    d.val.reserve(val.size());
    for (size_t i : train) d.train.push_back(corpus.pairs[keep[i]]);
    for (size_t i : val) d.val.push_back(corpus.pairs[keep[i]]);
    // One side at a time: only one side's tokens are copied for Vocab::build at once.
    auto side = [&](std::vector<std::string> SentencePair::*member) {
        std::vector<std::vector<std::string>> sentences;
        sentences.reserve(d.train.size() + (config.vocab_includes_val ? d.val.size() : 0));
        for (const auto& p : d.train) sentences.push_back(p.*member);
        if (config.vocab_includes_val)
            for (const auto& p : d.val) sentences.push_back(p.*member);
        return Vocab::build(sentences, config.min_freq, static_cast<size_t>(config.max_vocab));
    };
    d.src_vocab = side(&SentencePair::src);
    d.tgt_vocab = side(&SentencePair::tgt);
    return d;
}

}  // namespace attnviz
