#pragma once
// The parts of d2l 1.0.3's Transformer (sections 11.5 multi-head attention, 11.6
// positional encoding, 11.7 the Transformer), named as d2l names them so that a
// module's parameters have d2l's state_dict names (W_q, addnorm1.ln, ffn.dense1, ...):
// MultiHeadAttention (no biases in W_q, W_k, W_v, W_o), AddNorm (post-norm:
// LayerNorm(X + Dropout(Y))), PositionWiseFFN (dense1 - ReLU - dense2, with biases),
// the encoder and decoder blocks. The model that puts them together, and the family
// seam, is core/model/transformer_model.hpp.
//
// Shapes: B batch, T (or Tq) query positions, Tk key positions, d width, h heads,
// dh = d / h per head.
#include <array>
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "core/model/dropout_stream.hpp"
#include "core/model/short_attention.hpp"

namespace attnviz {

/// d2l's PositionalEncoding table for positions 0..n-1: P[i][2j] = sin(i / 10000^(2j/d)),
/// P[i][2j+1] = cos(i / 10000^(2j/d)), float, [n, d] (computed as d2l does, in float).
torch::Tensor positional_encoding(int64_t positions, int64_t width);

/// Where a pass's tokens lie: every position of a [B, T] grid (dense), or only the real
/// ones, packed into rows [N] in grid order. Training's loss packs where padding fills a fifth
/// of the grid or more (TokenLayout::packing): the position-wise work (the
/// projections, the feed-forward networks, AddNorm, dropout) on padding computes results
/// nobody reads, and on d2l's data (num_steps 9, ~4 real tokens a sentence) that is more
/// than half of it. attend() runs on the grid either way (layout.grid puts the packed
/// rows back, zeros at padding, which the masks keep out of every real token's result);
/// short_attention() reads the packed rows where they are (row_map()).
struct TokenLayout {
    torch::Tensor index;       ///< [N] int64 grid index b * T + t of each packed token, on the pass's device; undefined: dense
    torch::Tensor host_index;  ///< the same on the CPU (hashed dropout masks key their tokens by it)
    int64_t rows = 0;          ///< B
    int64_t positions = 0;     ///< T
    bool packed() const { return index.defined(); }
    /// The layout of the first len[b] positions of each row of a [B, T] grid (len [B], any device).
    static TokenLayout prefix(const torch::Tensor& len, int64_t positions, const torch::Device& device);
    /// prefix(), or the dense layout where the real tokens fill more than max_fill of the grid:
    /// moving rows in and out of the grid costs more than a little padding does (on the
    /// 16,000-pair speed corpus, bucketed batches ~93% full, packing was 6% slower).
    static TokenLayout packing(const torch::Tensor& len, int64_t positions, const torch::Device& device,
                               double max_fill = 0.8);
    /// [B, T, U] -> [N, U] (dense: as is).
    torch::Tensor pack(const torch::Tensor& grid) const;
    /// [N, U] -> [B, T, U] with zeros at the positions not packed (dense: as is).
    torch::Tensor grid(const torch::Tensor& x) const;
    /// [B, T] int64 on the CPU: the row of each grid position among the pass's token rows
    /// (packed: its place in index, -1 where not packed; dense: b * T + t). B and T: the grid's
    /// (a dense layout made without packing() knows neither).
    torch::Tensor row_map(int64_t B, int64_t T) const;
};

/// Where a pass's dropout comes from: nowhere (evaluation, or p = 0), ATen's generator, or
/// masks hashed from a DropoutStream (a training step split into parts draws the whole
/// batch's masks: core/train/split_step.hpp). `which` names the mask within the step.
struct Dropout {
    double p = 0;                            ///< drop probability (0: off)
    const DropoutStream* stream = nullptr;   ///< hashed masks; null: ATen's generator
    bool on() const { return p > 0; }
    /// x [B, T, U], or [N, U] packed by layout: element u of row b, position t (the same
    /// mask element for a token either way).
    torch::Tensor tokens(const torch::Tensor& x, uint64_t which, const TokenLayout& layout = {}) const;
    /// Attention weights w [B, h, Tq, Tk]: one mask per head, per query row.
    torch::Tensor weights(const torch::Tensor& w, uint64_t which) const;
    /// The mask weights() multiplies in, [B, h, Tq, Tk] float on the CPU (0 or 1/keep); undefined
    /// when dropout is off. std::logic_error without a stream (ATen's dropout draws its own).
    torch::Tensor head_mask(int64_t B, int64_t h, int64_t Tq, int64_t Tk, uint64_t which) const;
};

/// What scaled dot-product attention computed for every head.
struct HeadAttention {
    torch::Tensor out;      ///< [B, h, Tq, dh] the weighted sums of the values
    torch::Tensor weights;  ///< [B, h, Tq, Tk] softmax weights (0 where masked), when kept
    torch::Tensor scores;   ///< [B, h, Tq, Tk] q·k/√dh before the softmax (-inf where masked), when kept
};

/// How attend() runs.
struct AttendOptions {
    torch::Tensor bias;         ///< added to the scores, broadcastable to [B, h, Tq, Tk]: 0 where a key
                                ///< may be attended, -inf where not (padding, the future); undefined: none
    const Dropout* dropout = nullptr;  ///< on the weights (d2l: DotProductAttention's dropout); null: none
    uint64_t which = 0;         ///< the dropout mask's name
    bool keep = false;          ///< keep weights and scores in the result
    torch::Tensor weights;      ///< replaces the softmax weights (an intervention), broadcastable to
                                ///< [B, h, Tq, Tk]; undefined: the model's own
    torch::Tensor head_keep;    ///< [h] each head's output times this: 1 for a head that works, 0 for one
                                ///< switched off, a head gate (core/model/head_gates.hpp); undefined: 1
    bool zero_empty_rows = false;  ///< a query whose every key the bias masks (an erasure of every source
                                   ///< position) attends to nothing: weights 0 instead of NaN
};

/// softmax(q kᵀ / √dh + bias) v for q [B, h, Tq, dh], k and v [B, h, Tk, dh].
HeadAttention attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     const AttendOptions& options);

/// d2l's MultiHeadAttention: W_q, W_k, W_v, W_o [d, d], no biases.
class MultiHeadAttentionImpl : public torch::nn::Module {
public:
    MultiHeadAttentionImpl(int64_t width, int64_t heads);
    int64_t heads() const { return m_heads; }
    /// [B, T, d] -> [B, h, T, dh] (d2l's transpose_qkv, without folding h into B).
    torch::Tensor split(const torch::Tensor& x) const;
    /// [B, T, n·d] (n products side by side) -> n tensors [B, h, T, dh], each contiguous.
    std::vector<torch::Tensor> split_stacked(const torch::Tensor& x, int64_t n) const;
    /// [B, h, T, dh] -> [B, T, d] (d2l's transpose_output).
    torch::Tensor merge(const torch::Tensor& x) const;
    /// Queries, keys and values of one input x [B, T, d] (self-attention) in one product, split
    /// into heads [B, h, T, dh]; x may be packed [N, d] by layout (then the product runs on N rows).
    std::array<torch::Tensor, 3> project_qkv(const torch::Tensor& x, const TokenLayout& layout = {}) const;
    /// Keys and values of x [B, T, d] (or packed) in one product (cross-attention's encoder output), split into heads.
    std::array<torch::Tensor, 2> project_kv(const torch::Tensor& x, const TokenLayout& layout = {}) const;
    /// Queries of x [B, T, d] (or packed), split into heads.
    torch::Tensor project_q(const torch::Tensor& x, const TokenLayout& layout = {}) const;
    /// The heads' outputs [B, h, T, dh] merged and through W_o: [B, T, d], or [N, d] packed by layout.
    torch::Tensor output(const torch::Tensor& heads_out, const TokenLayout& layout = {}) const;
    /// Self-attention of x ([B, T, d], or [N, d] packed) through short_attention(), through W_o:
    /// what output(attend(project_qkv(x)).out) gives, shaped as x. `where`: the rows, masks and
    /// dropout mask (heads, width and columns are filled in here).
    torch::Tensor short_self(const torch::Tensor& x, ShortAttentionOptions where) const;
    /// Cross-attention of queries from x over keys and values from memory (each [B, T, d] or
    /// packed [N, d]) through short_attention(), through W_o, shaped as x.
    torch::Tensor short_cross(const torch::Tensor& x, const torch::Tensor& memory, ShortAttentionOptions where) const;

    torch::nn::Linear W_q{nullptr}, W_k{nullptr}, W_v{nullptr}, W_o{nullptr};

private:
    int64_t m_heads;
};
TORCH_MODULE(MultiHeadAttention);

/// d2l's AddNorm: LayerNorm(X + Dropout(Y)), post-norm.
class AddNormImpl : public torch::nn::Module {
public:
    explicit AddNormImpl(int64_t width);
    /// x and y [B, T, d], or [N, d] packed by layout.
    torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& y, const Dropout& dropout, uint64_t which,
                          const TokenLayout& layout = {});
    torch::nn::LayerNorm ln{nullptr};
};
TORCH_MODULE(AddNorm);

/// d2l's PositionWiseFFN: dense2(ReLU(dense1(X))), dense1 [f, d] and dense2 [d, f] with biases.
class PositionWiseFFNImpl : public torch::nn::Module {
public:
    PositionWiseFFNImpl(int64_t width, int64_t ffn);
    torch::Tensor forward(const torch::Tensor& x);
    torch::nn::Linear dense1{nullptr}, dense2{nullptr};
};
TORCH_MODULE(PositionWiseFFN);

/// d2l's TransformerEncoderBlock: self-attention, AddNorm, feed-forward, AddNorm.
class EncoderBlockImpl : public torch::nn::Module {
public:
    EncoderBlockImpl(int64_t width, int64_t ffn, int64_t heads);
    /// x [B, S, d], or [N, d] packed by layout; bias [B, 1, 1, S] (padding -inf). kept: the
    /// self-attention's weights and scores. short_where: attention through short_attention()
    /// with these rows and masks (then kept must be null, bias is not read, and the dropout mask
    /// is this block's); null: attend(). head_gate [h]: each head's output times its gate (head
    /// gates, core/model/head_gates.hpp; attend() only); undefined: none.
    torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& bias, const Dropout& dropout, uint64_t which,
                          HeadAttention* kept, const TokenLayout& layout = {},
                          const ShortAttentionOptions* short_where = nullptr, const torch::Tensor& head_gate = {});
    MultiHeadAttention attention{nullptr};
    AddNorm addnorm1{nullptr};
    PositionWiseFFN ffn{nullptr};
    AddNorm addnorm2{nullptr};
};
TORCH_MODULE(EncoderBlock);

/// d2l's TransformerDecoderBlock: masked self-attention (attention1), AddNorm,
/// cross-attention over the encoder (attention2), AddNorm, feed-forward, AddNorm.
class DecoderBlockImpl : public torch::nn::Module {
public:
    DecoderBlockImpl(int64_t width, int64_t ffn, int64_t heads);
    MultiHeadAttention attention1{nullptr};
    AddNorm addnorm1{nullptr};
    MultiHeadAttention attention2{nullptr};
    AddNorm addnorm2{nullptr};
    PositionWiseFFN ffn{nullptr};
    AddNorm addnorm3{nullptr};
};
TORCH_MODULE(DecoderBlock);

}  // namespace attnviz
