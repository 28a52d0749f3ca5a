#pragma once
// Training-time GRU recurrences as ONE autograd node each, with hand-written
// backward passes (backpropagation through time): the teacher-forced attention
// decoder and the (unidirectional) encoder.
//
// Why: run step by step under autograd, every step records dozens of small
// nodes, and the backward pass computes and accumulates each weight gradient
// once per step ([3H x B] x [B x in] products, then an add into .grad). Here
// the backward pass walks the steps once for the data gradients (which are
// truly sequential) and computes every weight gradient afterwards as one large
// product over all steps, as cuDNN's fused RNNs do. Rows are sorted by length,
// longest first, and step t only computes the n_t rows still running, so
// padding costs nothing.
//
// The maths is exactly that of Seq2SeqImpl::step (d2l's decoder: the query is
// the top layer's previous state, the context from dropped-out attention
// weights is concatenated before the embedding, dropout sits between layers)
// and of torch::nn::GRU on packed sequences. tests/core/test_fused.cpp checks
// outputs and every gradient against the step-by-step autograd versions, and
// against finite differences with dropout.
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "core/model/dropout_stream.hpp"

namespace attnviz {

/// Everything the fused decoder reads. Rows are in the caller's sorted order
/// (target length descending); step t uses rows [0, steps[t]).
struct FusedDecoderInputs {
    torch::Tensor values;     ///< [B, S, K] encoder outputs (attention values)
    torch::Tensor proj_keys;  ///< [B, S, A] projected keys (additive), [B, S, H] (dot, general); unused for none
    torch::Tensor mask;       ///< [B, S] bool, true at valid source positions (no gradient)
    torch::Tensor final_ctx;  ///< [B, K] context for scoring "none"; unused otherwise
    torch::Tensor h0;         ///< [L, B, H] initial decoder state
    torch::Tensor tokens;     ///< [N] decoder input ids (long), packed step-major: step t's rows follow step t-1's
    torch::Tensor embedding;  ///< [V, E] the decoder's embedding table
    torch::Tensor W_q;        ///< [A, H] additive query projection; unused otherwise
    torch::Tensor w_v;        ///< [1, A] additive score vector; unused otherwise
    std::vector<torch::Tensor> w_ih, w_hh, b_ih, b_hh;  ///< per layer, PyTorch's GRU layout (r, z, n)
};

/// The fused decoder's scorer: additive, dot-like (dot, scaled dot, general:
/// q . proj_key times a scale) or none (the context is the final encoder state).
enum class FusedScoring : int64_t { additive = 0, dot_like = 1, none = 2 };

/// Where the GRU gate arithmetic of the backward passes runs.
enum class GateArithmetic : int64_t {
    automatic = 0,  ///< a hand-written loop on the CPU (contiguous inputs), ATen element-wise ops elsewhere
    generic = 1     ///< ATen element-wise ops everywhere: the code CUDA runs, so CPU tests can check it
};

/// How the fused decoder scores and regularises.
struct FusedDecoderOptions {
    FusedScoring scoring = FusedScoring::additive;  ///< how queries meet keys
    double scale = 1.0;           ///< dot-like scores are multiplied by this (1/sqrt(d) for scaled dot)
    double dropout = 0.0;         ///< dropout on attention weights and between layers (training only)
    std::vector<int64_t> steps;   ///< rows running at each step, non-increasing, steps[0] <= B
    GateArithmetic gates = GateArithmetic::automatic;  ///< backward's gate arithmetic
    std::vector<uint64_t> dropout_keys;  ///< per packed token (dropout_keys()): hashed masks; empty: ATen's generator
    const DropoutStream* dropout_stream = nullptr;  ///< the stream the keys belong to (must outlive the forward pass)
};

/// Runs every step; returns the top layer's outputs packed like `tokens`: [N, H]
/// with N = sum(steps). Differentiable with respect to every tensor in `in`
/// except the mask and the token ids. Works on any device and floating type
/// ATen supports. When the vocabulary has fewer entries than the batch has
/// tokens, layer 0's embedding product is done once per vocabulary entry
/// instead of once per token (same result, fewer operations).
torch::Tensor fused_gru_decoder(const FusedDecoderInputs& in, const FusedDecoderOptions& opts);

/// Input of the fused encoder: rows sorted by length, packed step-major.
struct FusedEncoderInputs {
    torch::Tensor tokens;     ///< [N] source ids (long), packed like FusedDecoderInputs::tokens
    torch::Tensor embedding;  ///< [V, E] the encoder's embedding table
    std::vector<torch::Tensor> w_ih, w_hh, b_ih, b_hh;  ///< per layer, PyTorch's GRU layout (r, z, n)
};

/// The encoder's result, rows in the same sorted order.
struct FusedEncoderOutputs {
    torch::Tensor outputs;  ///< [N, H] top layer's states, packed like the input
    torch::Tensor h_n;      ///< [L, B, H] every layer's state after each row's last token
};

/// How the fused encoder runs.
struct FusedEncoderOptions {
    std::vector<int64_t> steps;  ///< rows running at each step, non-increasing
    double dropout = 0.0;        ///< dropout between layers (training only)
    GateArithmetic gates = GateArithmetic::automatic;  ///< backward's gate arithmetic
    std::vector<uint64_t> dropout_keys;  ///< per packed token (dropout_keys()): hashed masks; empty: ATen's generator
    const DropoutStream* dropout_stream = nullptr;  ///< the stream the keys belong to (must outlive the forward pass)
};

/// A multi-layer unidirectional GRU from a zero state over packed rows
/// (steps[t] rows at step t); dropout between layers. Same results as
/// torch::nn::GRU on the equivalent PackedSequence.
FusedEncoderOutputs fused_gru_encoder(const FusedEncoderInputs& in, const FusedEncoderOptions& opts);

/// Rows of a padded batch ordered for the fused nodes: sorted by length,
/// longest first, and packed step-major.
struct LengthPacking {
    torch::Tensor perm;                  ///< [B] long (CPU): sorted row i is the caller's row perm[i]
    std::vector<int64_t> steps;          ///< rows still running at each step (non-increasing)
    std::vector<int64_t> sorted_index;   ///< per packed row: its place in the sorted [B * T] batch
    std::vector<int64_t> caller_index;   ///< per packed row: its place in the caller's [B * T] batch
};

/// lengths: [B] long on the CPU, each >= 1; T: the padded length.
LengthPacking pack_by_length(const torch::Tensor& lengths, int64_t T);

/// Keys of the packed tokens of a LengthPacking (T: the padded length) for the
/// hashed masks of `stream` (core/model/dropout_stream.hpp): each token's row in the
/// whole batch and its step. Empty without a stream.
std::vector<uint64_t> dropout_keys(const DropoutStream* stream, const LengthPacking& packing, int64_t T);

}  // namespace attnviz
