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
    auto pairs = filter_by_length(corpus.pairs, static_cast<size_t>(config.max_length));
    if (pairs.empty())
        throw ConfigError("corpus '" + corpus.name + "': no pair is short enough for max length " +
                          std::to_string(config.max_length));
    std::tie(d.train, d.val) = split_train_val(pairs, config.val_fraction, config.seed, config.split_shuffle);
    if (d.train.empty()) throw ConfigError("corpus '" + corpus.name + "': no training pairs left after the split");
    std::vector<std::vector<std::string>> src, tgt;
    auto collect = [&](const std::vector<SentencePair>& ps) {
        for (const auto& p : ps) {
            src.push_back(p.src);
            tgt.push_back(p.tgt);
        }
    };
    collect(d.train);
    if (config.vocab_includes_val) collect(d.val);
    d.src_vocab = Vocab::build(src, config.min_freq);
    d.tgt_vocab = Vocab::build(tgt, config.min_freq);
    return d;
}

}  // namespace attnviz
