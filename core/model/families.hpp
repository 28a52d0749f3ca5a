#pragma once
// The model families behind the seam of core/model/encoder_decoder.hpp, built
// from one configuration (Joey NMT's build_model): the RNN encoder-decoder with
// attention (core/model/rnn_model.hpp) and d2l's Transformer (core/model/transformer_model.hpp).
#include "core/config/config.hpp"
#include "core/model/encoder_decoder.hpp"

namespace attnviz {

/// The network of the configuration's family, weights initialised from config.seed
/// (ConfigError when the configuration is invalid or its vocabulary sizes unset).
Network build_network(const ModelConfig& config);

/// A deep copy (weights cloned) on `device`, in evaluation mode.
Network clone_network(const EncoderDecoder& network, const torch::Device& device);

}  // namespace attnviz
