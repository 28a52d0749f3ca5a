#pragma once
// The model families behind the seam of core/model/encoder_decoder.hpp, built
// from one configuration (Joey NMT's build_model): the RNN encoder-decoder with
// attention (core/model/rnn_model.hpp) and d2l's Transformer (core/model/transformer_model.hpp).
#include "core/config/config.hpp"
#include "core/model/encoder_decoder.hpp"

namespace attnviz {

/// Whether build_network writes the weights.
enum class NetworkFill {
    initialised,  ///< the family's own initialisation (from config.seed)
    /// Allocated, not written, where the family can (the pretrained family: its weights are only
    /// ever loaded): for callers that overwrite every parameter next (loading, copying), so a
    /// 300 MB model's random copy never takes memory beside the loaded one.
    unfilled,
};

/// The network of the configuration's family, weights initialised from config.seed unless `fill`
/// says otherwise (ConfigError when the configuration is invalid or its vocabulary sizes unset).
Network build_network(const ModelConfig& config, NetworkFill fill = NetworkFill::initialised);

/// A deep copy (weights cloned, built unfilled; its head gates copied: masked heads stay masked) on
/// `device`, in evaluation mode.
Network clone_network(const EncoderDecoder& network, const torch::Device& device);

/// `network`'s head gates as copies of its own (the heads it masks, for another network to mask alike).
HeadGates copied_head_gates(const EncoderDecoder& network);

/// A network that shares `network`'s weights and buffers (the same storage: no copy, built
/// unfilled where the family can), on its device, in evaluation mode, with no head gates: for a
/// run-wide change of its own (masked heads, HeadGates) while other threads go on translating
/// with the original. Neither may be trained while the other lives (they are one set of weights).
Network share_network(const EncoderDecoder& network);

}  // namespace attnviz
