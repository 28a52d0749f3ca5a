// d2l's Transformer parts (core/model/transformer_layers.hpp).
#include "core/model/transformer_layers.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "core/model/inference_precision.hpp"

namespace F = torch::nn::functional;

namespace attnviz {

namespace {
/// x W^T (+ b): ATen's linear for float32 (and the tests' float64) weights, as d2l computes it; precision_linear for weights
/// converted to int8 or bf16 (--precision, core/model/inference_precision.hpp).
torch::Tensor linear_of(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b = {}) {
    return is_converted(w.scalar_type()) ? precision_linear(x, w, b) : F::linear(x, w, b);
}
/// x times the matrices stacked ([..., n out]): one product in float32, one per matrix when converted.
torch::Tensor stacked_linear(const torch::Tensor& x, const std::vector<torch::Tensor>& ws) {
    if (!is_converted(ws.front().scalar_type())) return F::linear(x, torch::cat(ws));
    std::vector<torch::Tensor> outs;
    for (const auto& w : ws) outs.push_back(precision_linear(x, w));
    return torch::cat(outs, -1);
}
}  // namespace

torch::Tensor positional_encoding(int64_t positions, int64_t width) {
    // As d2l's PositionalEncoding, in float: X = i / 10000^(2j / d).
    auto x = torch::arange(positions, torch::kFloat).reshape({-1, 1}) /
             torch::pow(10000.0, torch::arange(0, width, 2, torch::kFloat) / static_cast<double>(width));
    auto p = torch::zeros({positions, width}, torch::kFloat);
    p.slice(1, 0, width, 2).copy_(torch::sin(x));
    p.slice(1, 1, width, 2).copy_(torch::cos(x).narrow(1, 0, width / 2));  // an odd width has one cosine fewer
    return p;
}

// --- token layout ----------------------------------------------------------------

TokenLayout TokenLayout::prefix(const torch::Tensor& len, int64_t positions, const torch::Device& device) {
    const auto l = len.to(torch::kCPU, torch::kInt64).contiguous();
    const auto* p = l.data_ptr<int64_t>();
    std::vector<int64_t> index;
    for (int64_t b = 0; b < l.size(0); ++b)
        for (int64_t t = 0; t < std::min(p[b], positions); ++t) index.push_back(b * positions + t);
    TokenLayout layout;
    layout.host_index = torch::tensor(index, torch::kInt64);
    layout.index = layout.host_index.to(device);
    layout.rows = l.size(0);
    layout.positions = positions;
    return layout;
}

TokenLayout TokenLayout::packing(const torch::Tensor& len, int64_t positions, const torch::Device& device,
                                 double max_fill) {
    const auto host = len.to(torch::kCPU, torch::kInt64);  // once: prefix() reads it as it is
    const auto real = host.clamp_max(positions).sum().item<int64_t>();
    if (static_cast<double>(real) > max_fill * static_cast<double>(len.size(0) * positions)) {
        TokenLayout dense;
        dense.rows = len.size(0);
        dense.positions = positions;
        return dense;
    }
    return prefix(host, positions, device);
}

torch::Tensor TokenLayout::pack(const torch::Tensor& grid) const {
    if (!packed()) return grid;
    return grid.reshape({rows * positions, grid.size(-1)}).index_select(0, index);
}

torch::Tensor TokenLayout::grid(const torch::Tensor& x) const {
    if (!packed()) return x;
    return torch::zeros({rows * positions, x.size(-1)}, x.options()).index_copy(0, index, x).view({rows, positions, -1});
}

torch::Tensor TokenLayout::row_map(int64_t B, int64_t T) const {
    if (!packed()) return torch::arange(B * T, torch::kInt64).view({B, T});
    auto map = torch::full({B * T}, -1, torch::kInt64);
    map.index_copy_(0, host_index, torch::arange(host_index.numel(), torch::kInt64));
    return map.view({B, T});
}

// --- dropout -----------------------------------------------------------------

namespace {
/// The hashed masks' keys of a [B, T] grid: each row's place in the whole batch, and the position.
std::vector<uint64_t> grid_keys(const DropoutStream& stream, int64_t rows, int64_t positions) {
    std::vector<uint64_t> keys;
    keys.reserve(static_cast<size_t>(rows * positions));
    for (int64_t b = 0; b < rows; ++b)
        for (int64_t t = 0; t < positions; ++t) keys.push_back(dropout_key(stream.batch_row(b), t));
    return keys;
}

/// The keys of a layout's packed tokens, in their order.
std::vector<uint64_t> packed_keys(const DropoutStream& stream, const TokenLayout& layout) {
    const auto* p = layout.host_index.data_ptr<int64_t>();
    std::vector<uint64_t> keys(static_cast<size_t>(layout.host_index.numel()));
    for (size_t i = 0; i < keys.size(); ++i) keys[i] = dropout_key(stream.batch_row(p[i] / layout.positions), p[i] % layout.positions);
    return keys;
}
}  // namespace

torch::Tensor Dropout::tokens(const torch::Tensor& x, uint64_t which, const TokenLayout& layout) const {
    if (!on()) return x;
    if (!stream) return torch::dropout(x, p, /*train=*/true);
    const auto keys = layout.packed() ? packed_keys(*stream, layout) : grid_keys(*stream, x.size(0), x.size(1));
    return x * hashed_dropout_mask(*stream, which, keys, x.size(-1), 1.0 - p, x.options()).view(x.sizes());
}

torch::Tensor Dropout::weights(const torch::Tensor& w, uint64_t which) const {
    if (!on()) return w;
    if (!stream) return torch::dropout(w, p, /*train=*/true);
    return w * head_mask(w.size(0), w.size(1), w.size(2), w.size(3), which).to(w.options());
}

torch::Tensor Dropout::head_mask(int64_t B, int64_t h, int64_t Tq, int64_t Tk, uint64_t which) const {
    if (!on()) return {};
    if (!stream) throw std::logic_error("Dropout::head_mask: ATen's dropout has no mask to hand out");
    // One mask per head whose columns are the keys: a part of a batch, narrower than the
    // whole, reads a prefix of each row's mask, so splitting the batch changes no mask.
    return hashed_dropout_head_masks(*stream, which, grid_keys(*stream, B, Tq), h, Tq, Tk, 1.0 - p,
                                     torch::TensorOptions().dtype(torch::kFloat));
}

// --- attention ---------------------------------------------------------------

HeadAttention attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     const AttendOptions& o) {
    // d2l's DotProductAttention: q kᵀ / √dh, masked softmax, dropout on the weights, times v.
    auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));
    if (o.bias.defined()) scores = scores + o.bias;
    auto weights = torch::softmax(scores, -1);
    if (o.zero_empty_rows) weights = torch::nan_to_num(weights, 0.0);
    if (o.weights.defined()) weights = o.weights.to(weights.options()).expand_as(weights);
    auto used = o.dropout ? o.dropout->weights(weights, o.which) : weights;
    HeadAttention a;
    a.out = torch::matmul(used, v);
    if (o.head_keep.defined()) a.out = a.out * o.head_keep.to(a.out.options()).view({1, -1, 1, 1});
    if (o.keep) {
        a.weights = weights;
        a.scores = scores;
    }
    return a;
}

MultiHeadAttentionImpl::MultiHeadAttentionImpl(int64_t width, int64_t heads) : m_heads(heads) {
    namespace nn = torch::nn;
    W_q = register_module("W_q", nn::Linear(nn::LinearOptions(width, width).bias(false)));
    W_k = register_module("W_k", nn::Linear(nn::LinearOptions(width, width).bias(false)));
    W_v = register_module("W_v", nn::Linear(nn::LinearOptions(width, width).bias(false)));
    W_o = register_module("W_o", nn::Linear(nn::LinearOptions(width, width).bias(false)));
}

torch::Tensor MultiHeadAttentionImpl::split(const torch::Tensor& x) const {
    return x.view({x.size(0), x.size(1), m_heads, -1}).permute({0, 2, 1, 3});
}

torch::Tensor MultiHeadAttentionImpl::merge(const torch::Tensor& x) const {
    return x.permute({0, 2, 1, 3}).reshape({x.size(0), x.size(2), -1});
}

std::vector<torch::Tensor> MultiHeadAttentionImpl::split_stacked(const torch::Tensor& x, int64_t n) const {
    // One copy puts every head's rows together; the attention products then read them as they are.
    return x.view({x.size(0), x.size(1), n, m_heads, -1}).permute({2, 0, 3, 1, 4}).contiguous().unbind(0);
}

std::array<torch::Tensor, 3> MultiHeadAttentionImpl::project_qkv(const torch::Tensor& x, const TokenLayout& layout) const {
    // One product with the three matrices stacked: [B, T, 3d].
    const auto qkv = split_stacked(layout.grid(stacked_linear(x, {W_q->weight, W_k->weight, W_v->weight})), 3);
    return {qkv[0], qkv[1], qkv[2]};
}

std::array<torch::Tensor, 2> MultiHeadAttentionImpl::project_kv(const torch::Tensor& x, const TokenLayout& layout) const {
    const auto kv = split_stacked(layout.grid(stacked_linear(x, {W_k->weight, W_v->weight})), 2);
    return {kv[0], kv[1]};
}

torch::Tensor MultiHeadAttentionImpl::project_q(const torch::Tensor& x, const TokenLayout& layout) const {
    return split_stacked(layout.grid(linear_of(x, W_q->weight)), 1)[0];
}

torch::Tensor MultiHeadAttentionImpl::output(const torch::Tensor& heads_out, const TokenLayout& layout) const {
    return linear_of(layout.pack(merge(heads_out)), W_o->weight);
}

torch::Tensor MultiHeadAttentionImpl::short_self(const torch::Tensor& x, ShortAttentionOptions where) const {
    const int64_t d = W_q->weight.size(0);
    // float: under bf16 autocast the product comes back in bfloat16; the kernel sums in float.
    const auto qkv =
        stacked_linear(x, {W_q->weight, W_k->weight, W_v->weight}).reshape({-1, 3 * d}).to(torch::kFloat);
    where.heads = m_heads;
    where.width = d;
    where.q_column = 0;
    where.k_column = d;
    where.v_column = 2 * d;
    return linear_of(short_attention(qkv, qkv, where), W_o->weight).view(x.sizes());
}

torch::Tensor MultiHeadAttentionImpl::short_cross(const torch::Tensor& x, const torch::Tensor& memory,
                                                  ShortAttentionOptions where) const {
    const int64_t d = W_q->weight.size(0);
    const auto q = linear_of(x, W_q->weight).reshape({-1, d}).to(torch::kFloat);
    const auto kv = stacked_linear(memory, {W_k->weight, W_v->weight}).reshape({-1, 2 * d}).to(torch::kFloat);
    where.heads = m_heads;
    where.width = d;
    where.q_column = 0;
    where.k_column = 0;
    where.v_column = d;
    return linear_of(short_attention(q, kv, where), W_o->weight).view(x.sizes());
}

// --- AddNorm, feed-forward, blocks ----------------------------------------------

AddNormImpl::AddNormImpl(int64_t width) {
    ln = register_module("ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
}

torch::Tensor AddNormImpl::forward(const torch::Tensor& x, const torch::Tensor& y, const Dropout& dropout,
                                   uint64_t which, const TokenLayout& layout) {
    return ln->forward(dropout.tokens(y, which, layout) + x);
}

PositionWiseFFNImpl::PositionWiseFFNImpl(int64_t width, int64_t ffn) {
    dense1 = register_module("dense1", torch::nn::Linear(width, ffn));
    dense2 = register_module("dense2", torch::nn::Linear(ffn, width));
}

torch::Tensor PositionWiseFFNImpl::forward(const torch::Tensor& x) {
    return linear_of(torch::relu(linear_of(x, dense1->weight, dense1->bias)), dense2->weight, dense2->bias);
}

EncoderBlockImpl::EncoderBlockImpl(int64_t width, int64_t ffn_size, int64_t heads) {
    attention = register_module("attention", MultiHeadAttention(width, heads));
    addnorm1 = register_module("addnorm1", AddNorm(width));
    ffn = register_module("ffn", PositionWiseFFN(width, ffn_size));
    addnorm2 = register_module("addnorm2", AddNorm(width));
}

torch::Tensor EncoderBlockImpl::forward(const torch::Tensor& x, const torch::Tensor& bias, const Dropout& dropout,
                                        uint64_t which, HeadAttention* kept, const TokenLayout& layout,
                                        const ShortAttentionOptions* short_where, const torch::Tensor& head_gate) {
    torch::Tensor attended;  // through W_o, laid out as x
    if (short_where) {
        if (kept) throw std::logic_error("EncoderBlock: short_attention keeps no weights");
        if (head_gate.defined()) throw std::logic_error("EncoderBlock: short_attention has no head gates");
        ShortAttentionOptions where = *short_where;
        where.dropout = dropout.head_mask(where.q_rows.size(0), attention->heads(), where.q_rows.size(1),
                                          where.k_rows.size(1), which);
        attended = attention->short_self(x, where);
    } else {
        const auto [q, k, v] = attention->project_qkv(x, layout);
        AttendOptions o;
        o.bias = bias;
        o.dropout = &dropout;
        o.which = which;
        o.keep = kept != nullptr;
        o.head_keep = head_gate;
        HeadAttention a = attend(q, k, v, o);
        attended = attention->output(a.out, layout);
        if (kept) *kept = std::move(a);
    }
    auto y = addnorm1->forward(x, attended, dropout, which + 1, layout);
    return addnorm2->forward(y, ffn->forward(y), dropout, which + 2, layout);
}

DecoderBlockImpl::DecoderBlockImpl(int64_t width, int64_t ffn_size, int64_t heads) {
    attention1 = register_module("attention1", MultiHeadAttention(width, heads));
    addnorm1 = register_module("addnorm1", AddNorm(width));
    attention2 = register_module("attention2", MultiHeadAttention(width, heads));
    addnorm2 = register_module("addnorm2", AddNorm(width));
    ffn = register_module("ffn", PositionWiseFFN(width, ffn_size));
    addnorm3 = register_module("addnorm3", AddNorm(width));
}

}  // namespace attnviz
