// Preparing a corpus for training: subword pieces, filter by length, split, build vocabularies.
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/train.hpp"

namespace attnviz {

namespace {

// Subword corpora are read as normalised words: train a SentencePiece model on the
// training pairs (unless one is given) and cut every pair into its pieces.
TokenizerPtr split_into_subwords(std::vector<SentencePair>& train, std::vector<SentencePair>& val,
                                 const TrainConfig& config, TokenizerPtr tokenizer) {
    if (!tokenizer) {
        std::vector<std::string> sentences;
        sentences.reserve(2 * train.size());
        for (const auto& p : train) {
            sentences.push_back(detokenize(p.src, TokenLevel::word));
            sentences.push_back(detokenize(p.tgt, TokenLevel::word));
        }
        tokenizer = Tokenizer::train_subword(sentences, SubwordOptions::from(config));
    }
    for (auto* pairs : {&train, &val})
        for (auto& p : *pairs) {
            p.src = tokenizer->split_words(p.src);
            p.tgt = tokenizer->split_words(p.tgt);
            p.alignment.reset();  // a word alignment does not hold for pieces
        }
    return tokenizer;
}

}  // namespace

TrainingData prepare_data(const Corpus& corpus, const TrainConfig& config, TokenizerPtr tokenizer) {
    config.validate();
    if (tokenizer && tokenizer->level() != corpus.level)
        throw ConfigError("corpus '" + corpus.name + "' is tokenised into " + level_noun(corpus.level) +
                          " but the model works on " + level_noun(tokenizer->level()));
    TrainingData d;
    d.name = corpus.name;
    d.level = corpus.level;
    d.skipped_lines = corpus.skipped.size();
    std::vector<SentencePair> pairs;
    if (corpus.level == TokenLevel::subword) {
        // Split first and train the model on the training side only; lengths count pieces.
        std::vector<SentencePair> train, val;
        std::tie(train, val) = split_train_val(corpus.pairs, config.val_fraction, config.seed, config.split_shuffle);
        tokenizer = split_into_subwords(train, val, config, tokenizer);
        const size_t max_len = static_cast<size_t>(config.max_length);
        d.train = filter_by_length(train, max_len);
        d.val = filter_by_length(val, max_len);
        if (d.train.empty() && d.val.empty())
            throw ConfigError("corpus '" + corpus.name + "': no pair is short enough for max length " +
                              std::to_string(config.max_length));
    } else {
        pairs = filter_by_length(corpus.pairs, static_cast<size_t>(config.max_length));
        if (pairs.empty())
            throw ConfigError("corpus '" + corpus.name + "': no pair is short enough for max length " +
                              std::to_string(config.max_length));
        std::tie(d.train, d.val) = split_train_val(pairs, config.val_fraction, config.seed, config.split_shuffle);
    }
    d.tokenizer = tokenizer ? tokenizer : Tokenizer::for_level(corpus.level);
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
