#pragma once
// A corpus prepared for training: split into training and validation pairs,
// filtered by length, cut into subword pieces where asked, with vocabularies.
#include <cstddef>
#include <string>
#include <vector>

#include "core/config/config.hpp"
#include "core/data/data.hpp"
#include "core/text/text.hpp"
#include "core/text/tokenizer.hpp"
#include "core/text/vocab.hpp"

namespace attnviz {

/// The prepared data a Trainer works on.
struct TrainingData {
    std::string name;                  ///< corpus name for display
    TokenLevel level = TokenLevel::word;
    /// How the pairs were tokenised; the models trained on them keep it (subword: the
    /// SentencePiece model). Null is read as Tokenizer::for_level(level).
    TokenizerPtr tokenizer;
    std::vector<SentencePair> train;
    std::vector<SentencePair> val;
    Vocab src_vocab, tgt_vocab;
    size_t skipped_lines = 0;          ///< bad lines skipped while reading (for the summary)
};

/// Splits, filters and builds vocabularies from a corpus per the config. A corpus of
/// subword level (read as normalised words) is cut into pieces by `tokenizer` when given
/// (a model to continue or evaluate), else by a SentencePiece model trained here on the
/// training pairs, both sides (config.subword_vocab, config.subword_model); max_length
/// then counts pieces. Throws ConfigError (e.g. a vocabulary size the text cannot have).
TrainingData prepare_data(const Corpus& corpus, const TrainConfig& config, TokenizerPtr tokenizer = nullptr);

}  // namespace attnviz
