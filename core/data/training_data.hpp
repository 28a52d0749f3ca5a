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

/// Pairs to teacher-force a multilingual pretrained model on (M2M100, NLLB, mBART-50), as transformers'
/// tokenizer(source, text_target=target) gives them: the source language's code before each source
/// (input_ids [src] tokens </s>) and the target language's before each target (labels [tgt] tokens
/// </s>; the decoder reads decoder_start_token_id, then the labels shifted: </s> [tgt] tokens). The
/// languages: those given, else the tokenizer's (tokenizer_config.json's src_lang and tgt_lang);
/// ConfigError naming the languages there are for one the model lacks, or when no target language is
/// named anywhere. Any other model's pairs are left as they are. A pair already starting with the code
/// keeps one.
void add_language_codes(std::vector<SentencePair>& pairs, const Tokenizer& tokenizer, const std::string& source_lang = "",
                        const std::string& target_lang = "");

}  // namespace attnviz
