#pragma once
// The metadata of a checkpoint (both versions), read from untrusted JSON with
// every value checked: configuration against the registry's ranges,
// vocabularies against the configuration, the training history's numbers.
#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "core/config/config.hpp"
#include "core/config/history.hpp"
#include "core/text/text.hpp"
#include "core/text/vocab.hpp"
#include "core/text/tokenizer.hpp"

namespace attnviz {

class TranslationModel;

/// Everything of a checkpoint except tensors.
struct CheckpointMeta {
    ModelConfig model;
    TrainConfig train;
    TokenLevel level = TokenLevel::word;
    /// How the model tokenises: from "tokenizer" (a subword model's SentencePiece model
    /// as base64, core/text/tokenizer.hpp), or for files without it the stateless one of `level`.
    TokenizerPtr tokenizer;
    std::shared_ptr<const Vocab> src_vocab, tgt_vocab;
    TrainHistory history;
    std::string corpus;
};

/// The "attnviz" object of a version-2 file (written_by, model, train, level, tokenizer,
/// history, corpus); the vocabularies and the optimiser are stored beside it.
nlohmann::json meta_to_json(const TranslationModel& model);

/// Reads and validates the metadata: `attnviz` is the object meta_to_json wrote (or
/// version 1's, which has the same keys), src/tgt the vocabularies (an array of tokens
/// or an {"tokens": [...]} object). Throws FileError starting with `what`.
CheckpointMeta meta_from_json(const nlohmann::json& attnviz, const nlohmann::json& src, const nlohmann::json& tgt,
                              const std::string& what);

/// The model's shape under d2l-style keys (the "config" of a checkpoint and of a
/// d2l safetensors file): embed, hidden, layers, cell, scoring, bidirectional,
/// attention_size, reverse_source, dropout, level; a Transformer's: arch ("transformer"),
/// hidden, layers, heads, ffn, dropout, d2l_decode_positions, level.
nlohmann::json d2l_style_config(const ModelConfig& model, TokenLevel level);

std::string level_name(TokenLevel level);  ///< "word" / "char" / "subword"

}  // namespace attnviz
