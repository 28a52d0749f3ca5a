#pragma once
// Multi-head scaled dot-product attention for short sequences on the CPU, as one
// autograd node with hand-written loops.
//
// Why: on d2l's data a sentence is 3 to 9 tokens, so a batch's attention is B x h
// products of [T, 64] x [64, T] and [T, T] x [T, 64], each a few thousand
// multiply-adds. ATen runs them as batched GEMMs whose per-matrix overhead is larger
// than the arithmetic, and around them the layers split the projections into heads
// (a copy), put packed rows back on the [B, T] grid (zeros and a scatter), add the
// mask, take the softmax, multiply in the dropout mask, merge the heads (a copy) and
// pack the rows again; the backward pass does each again. In d2l's configuration on
// one thread that was about a fifth of a training step. Here one pass per (row,
// head) reads the queries, keys and values where the projection wrote them (token
// rows, packed or not, the heads side by side in columns), and writes the merged
// heads' output rows where W_o reads them; the backward pass writes the gradient of
// the projection's output the same way.
//
// The numbers are attend()'s (core/model/transformer_layers.hpp) up to float
// rounding (the sums run in another order); the tests compare the two, values and
// gradients. A query that sees no key at all (every key masked) gets weights 0 and
// output 0, where attend()'s softmax gives NaN.
//
// Shapes: B batch rows, Tq query and Tk key positions, h heads, dh per head, d = h·dh.
#include <cstdint>

#include <torch/torch.h>

namespace attnviz {

/// Where short_attention() finds its inputs and which keys each query sees.
struct ShortAttentionOptions {
    int64_t heads = 1;      ///< h: the d columns of queries (keys, values) are h heads of dh side by side
    int64_t width = 0;      ///< d, the columns of the queries (and of the keys, the values, the output)
    int64_t q_column = 0;   ///< the queries' first column in q_src
    int64_t k_column = 0;   ///< the keys' first column in kv_src
    int64_t v_column = 0;   ///< the values' first column in kv_src
    torch::Tensor q_rows;   ///< [B, Tq] int64 on the CPU: the row of q_src holding query (b, i); -1: none
                            ///< (that query is not computed and writes no output row)
    torch::Tensor k_rows;   ///< [B, Tk] int64 on the CPU: the row of kv_src holding key and value (b, j); -1: none
                            ///< (masked). A row may appear once in each map, not twice.
    torch::Tensor key_len;  ///< [B] int64 on the CPU: keys j >= key_len[b] are masked; undefined: none
    bool causal = false;    ///< keys j > i are masked for query i (a decoder's self-attention)
    torch::Tensor dropout;  ///< [B, h, Tq, Tk] float on the CPU, multiplied into the weights after the softmax
                            ///< (0 dropped, 1/keep kept: hashed_dropout_head_masks); undefined: none
};

/// For every query (b, i): the h heads' softmax(q kᵀ / √dh over the keys it sees) (times the
/// dropout mask) times the values, merged: out[q_rows[b, i]] = [head 0's dh values, head 1's, ...].
/// q_src [Nq, *] and kv_src [Nk, *] float32 on the CPU, rows of tokens (the projections'
/// outputs); q_src and kv_src may be the same tensor (self-attention, one product's Q, K and V
/// columns). Returns [Nq, d]; rows no query names are 0. Differentiable with respect to
/// q_src and kv_src (the gradient lands in their columns read here, zeros elsewhere).
/// std::invalid_argument when the shapes, types or devices do not fit.
torch::Tensor short_attention(const torch::Tensor& q_src, const torch::Tensor& kv_src,
                              const ShortAttentionOptions& options);

/// The longest key or query sequence short_attention() is meant for: beyond it ATen's
/// batched products are as fast and the per-query buffers grow.
constexpr int64_t k_short_attention_max_steps = 64;

}  // namespace attnviz
