#pragma once
// Models to and from d2l's PyTorch code (Seq2SeqEncoder + Seq2SeqAttentionDecoder, or
// TransformerEncoder + TransformerDecoder), through one safetensors file:
//   tensors       the d2l model's state_dict() under its own names (core/persist/parameter_names.hpp)
//   __metadata__  "src_vocab", "tgt_vocab": JSON arrays, the vocabularies' idx_to_token in
//                 index order; "config": a JSON object with embed, hidden, layers and
//                 optionally num_steps, dropout, cell, scoring, bidirectional,
//                 reverse_source, attention_size, level (absent ones are d2l's: GRU,
//                 additive attention, unidirectional, word level) -- or for a Transformer
//                 "arch": "transformer", hidden, layers, heads, ffn and optionally num_steps,
//                 dropout, level and d2l_decode_positions (absent: true, decoding as d2l's
//                 predict_step does; attnviz writes false for its own models); "format":
//                 "d2l-seq2seq" (optional on import; an attnviz checkpoint names its own)
// tools/d2l_safetensors.py writes and reads the same layout on the Python side.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/persist/checkpoint.hpp"
#include "core/decode/translation_model.hpp"

namespace attnviz {

/// __metadata__["format"] of the files export_d2l writes.
extern const char* const d2l_format;

/// True when safetensors metadata describes a d2l model: "format" is d2l_format, or
/// absent while src_vocab, tgt_vocab and config are all there.
bool is_d2l_metadata(const std::map<std::string, std::string>& metadata);

/// One side's vocabulary in attnviz's order (<pad> <bos> <eos> <unk> first, then d2l's
/// other tokens in d2l's order) and where each attnviz id's embedding (or output) row
/// comes from in the d2l tensors.
struct D2lVocabMap {
    Vocab vocab;
    std::vector<int64_t> rows;  ///< rows[id]: the d2l index; a special token d2l's vocabulary
                                ///< lacks takes <unk>'s, which is what d2l's lookup gives it
    std::vector<bool> added;    ///< added[id]: a special token d2l's vocabulary lacks
                                ///< (a d2l source vocabulary has no <bos>)
};

/// Maps d2l's idx_to_token (what: "src_vocab" or "tgt_vocab", for messages). Throws FileError
/// for a token listed twice, an empty list or one without <unk> (d2l's Vocab always has it).
D2lVocabMap map_d2l_vocab(const std::vector<std::string>& idx_to_token, const std::string& what);

/// The model's shape from the file's config (vocabulary sizes left 0): embed, hidden,
/// layers required (a Transformer: hidden, layers, heads, ffn); num_steps becomes
/// ModelConfig::source_steps (absent: natural lengths); dropout defaults to d2l's 0.2; a
/// Transformer's d2l_decode_positions to true. Throws FileError naming the key for a bad or
/// missing value.
ModelConfig d2l_model_config(const nlohmann::json& config);

/// The config object export_d2l writes for a model (num_steps only when source_steps > 0).
nlohmann::json d2l_config_json(const ModelConfig& config, TokenLevel level);

/// Whether d2l's classes can hold a model of this shape: GRU, additive attention (of the
/// hidden width), unidirectional, reading left to right; a Transformer of an even width.
/// Empty when they can, else what differs ("LSTM cell, dot scoring").
std::string d2l_variant(const ModelConfig& config);

/// Reads a d2l file (tensors and metadata) as a model; `name` labels messages and becomes
/// the corpus name. Throws FileError naming the file and what is wrong.
TranslationModelPtr import_d2l(const std::string& path);
/// import_d2l on bytes already in memory (`name` for messages); the fuzz harness feeds it.
TranslationModelPtr parse_d2l(std::string bytes, const std::string& name);

/// Writes the model in the layout above, atomically; returns d2l_variant(model.config()),
/// empty when d2l's classes can load the file. Throws FileError.
std::string export_d2l(const TranslationModel& model, const std::string& path);

}  // namespace attnviz
