#pragma once
// The names and shapes of a model's parameters in files: one table from
// attnviz's module names (Seq2Seq::named_parameters(), core/model/rnn_model.cpp) to the
// names of d2l's PyTorch model (Seq2SeqEncoder + Seq2SeqAttentionDecoder, as its
// state_dict() spells them), with each tensor's shape derived from a
// ModelConfig alone -- no model is built, so a file can be checked against its
// configuration before any weight memory is reserved. Checkpoints (v2) and the
// d2l safetensors import/export both use it; keep the names stable.
//
//   attnviz (module)                 file (d2l / PyTorch)                 shape
//   enc_embedding.weight             encoder.embedding.weight             [Vs, E]
//   enc_rnn.weight_ih_l{k}           encoder.rnn.weight_ih_l{k}           [G*H, k == 0 ? E : D*H]
//   enc_rnn.weight_hh_l{k}           encoder.rnn.weight_hh_l{k}           [G*H, H]
//   enc_rnn.bias_ih_l{k}             encoder.rnn.bias_ih_l{k}             [G*H]
//   enc_rnn.bias_hh_l{k}             encoder.rnn.bias_hh_l{k}             [G*H]
//   enc_rnn.*_l{k}_reverse           encoder.rnn.*_l{k}_reverse           (bidirectional: backward direction)
//   bridge.weight, bridge.bias       decoder.bridge.weight, .bias         [H, 2H], [H]   (bidirectional only)
//   attention.W_k.weight             decoder.attention.W_k.weight         [A, K] additive, [H, K] general
//   attention.W_q.weight             decoder.attention.W_q.weight         [A, H] (additive only)
//   attention.w_v.weight             decoder.attention.w_v.weight         [1, A] (additive only)
//   dec_embedding.weight             decoder.embedding.weight             [Vt, E]
//   dec_rnn_weight_ih_l{k}           decoder.rnn.weight_ih_l{k}           [G*H, k == 0 ? K + E : H]
//   dec_rnn_weight_hh_l{k}           decoder.rnn.weight_hh_l{k}           [G*H, H]
//   dec_rnn_bias_ih_l{k}             decoder.rnn.bias_ih_l{k}             [G*H]
//   dec_rnn_bias_hh_l{k}             decoder.rnn.bias_hh_l{k}             [G*H]
//   dense.weight, dense.bias         decoder.dense.weight, .bias          [Vt, H], [Vt]
//
// E embedding, H hidden, L layers, G gates (GRU 3, LSTM 4, PyTorch's gate
// order), D directions (2 bidirectional), K = D*H key size, A attention size
// (0 in the config: H). The decoder RNN's layer-0 input is [context; embedding]
// (context first, as d2l concatenates it). Dot, scaled-dot and no attention have
// no attention parameters. Parameters are listed in this table's order.
//
// The Transformer (core/model/transformer_model.hpp) has d2l's names as its module
// names, so both names are the same (TransformerEncoder + TransformerDecoder's state_dict()):
//
//   encoder.embedding.weight                          [Vs, H]
//   encoder.blks.block{k}.attention.W_{q,k,v,o}.weight [H, H]       (no biases)
//   encoder.blks.block{k}.addnorm1.ln.weight, .bias   [H], [H]
//   encoder.blks.block{k}.ffn.dense1.weight, .bias    [F, H], [F]
//   encoder.blks.block{k}.ffn.dense2.weight, .bias    [H, F], [H]
//   encoder.blks.block{k}.addnorm2.ln.weight, .bias   [H], [H]
//   decoder.embedding.weight                          [Vt, H]
//   decoder.blks.block{k}.attention1.W_{q,k,v,o}.weight, addnorm1.ln.*,   (causal self-attention)
//   decoder.blks.block{k}.attention2.W_{q,k,v,o}.weight, addnorm2.ln.*,   (cross-attention)
//   decoder.blks.block{k}.ffn.dense1.*, ffn.dense2.*, addnorm3.ln.*
//   decoder.dense.weight, .bias                       [Vt, H], [Vt]
//
// H the width (hidden_size), F the feed-forward width (ffn_size), k = 0..L-1 blocks.
#include <cstdint>
#include <string>
#include <vector>

#include "core/config/config.hpp"
#include "core/io/message.hpp"  // shape_to_string

namespace attnviz {

/// Which vocabulary a parameter's rows follow (its first dimension), if any.
enum class VocabRows {
    none,
    source,  ///< the source embedding: a row per source token
    target,  ///< the target embedding: a row per target token
    output   ///< the output layer (weight and bias): a row per target token it scores
};

/// One parameter of a model: its two names and its shape.
struct ParameterName {
    std::string module;          ///< attnviz's name, a key of the network's named_parameters()
    std::string file;            ///< its name in files (d2l's PyTorch state_dict() name)
    std::vector<int64_t> shape;  ///< shape for the configuration
    VocabRows rows = VocabRows::none;  ///< which vocabulary indexes its rows
};

/// Every parameter of build_network(config), in the table's order. The configuration
/// must be valid (ModelConfig::validate_for_build, ConfigError otherwise), so
/// that no dimension can overflow.
std::vector<ParameterName> parameter_names(const ModelConfig& config);

/// Bytes of all parameters as float32; ConfigError if it would not fit in 64 bits.
uint64_t parameter_bytes(const std::vector<ParameterName>& params);

/// True when the configuration has d2l's shape exactly (GRU cells, unidirectional
/// encoder reading left to right, additive attention with attention size ==
/// hidden size; a Transformer of an even width, which d2l's positional encoding needs),
/// i.e. its tensors load into d2l's PyTorch classes.
bool has_d2l_shape(const ModelConfig& config);


/// Every parameter of a T5 network in its construction order (ConfigError when `config` is not
/// T5's); defined in core/persist/t5_parameter_names.cpp, parameter_names() calls it for T5.
std::vector<ParameterName> t5_parameter_names(const ModelConfig& config);

}  // namespace attnviz
