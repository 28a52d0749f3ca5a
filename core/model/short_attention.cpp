// Short-sequence attention on the CPU (core/model/short_attention.hpp).
#include "core/model/short_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/Parallel.h>

#include "core/model/target_clones.hpp"

namespace attnviz {

namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The per-(row, head) loops are also built for AVX2 and AVX-512 CPUs (x86-64-v3, -v4),
// chosen at load time (core/model/target_clones.hpp).
#define ATTNVIZ_SHORT_CLONES ATTNVIZ_TARGET_CLONES("arch=x86-64-v4", "arch=x86-64-v3", "default")

/// What every (row, head) pair of one call shares. Pointers into the call's tensors.
struct Geometry {
    const float* q = nullptr;        ///< q_src's data
    int64_t q_ld = 0;                ///< its row stride
    const float* kv = nullptr;       ///< kv_src's data
    int64_t kv_ld = 0;
    const int64_t* q_rows = nullptr;  ///< [B, Tq]
    const int64_t* k_rows = nullptr;  ///< [B, Tk]
    const int64_t* key_len = nullptr;  ///< [B] or null
    const float* dropout = nullptr;    ///< [B, h, Tq, Tk] or null
    int64_t Tq = 0, Tk = 0, heads = 0, dh = 0;
    int64_t q_col = 0, k_col = 0, v_col = 0;
    bool causal = false;
    float scale = 1;  ///< 1/√dh

    /// Pair (b, h)'s part of the maps and the mask, and its columns.
    struct Pair {
        const int64_t* q_rows;  ///< [Tq]
        const int64_t* k_rows;  ///< [Tk]
        const float* dropout;   ///< [Tq, Tk] or null
        int64_t q_col, k_col, v_col;
    };
    Pair pair(int64_t b, int64_t h) const {
        return {q_rows + b * Tq, k_rows + b * Tk, dropout ? dropout + (b * heads + h) * Tq * Tk : nullptr,
                q_col + h * dh, k_col + h * dh, v_col + h * dh};
    }

    /// The keys query i of row b may see are among [0, seen(b, i)).
    int64_t seen(int64_t b, int64_t i) const {
        const int64_t n = key_len ? std::clamp<int64_t>(key_len[b], 0, Tk) : Tk;
        return causal ? std::min(n, i + 1) : n;
    }
};

inline __attribute__((always_inline)) float dot(const float* a, const float* b, int64_t n) {
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t u = 0; u < n; ++u) s += a[u] * b[u];
    return s;
}

/// y += a x
inline __attribute__((always_inline)) void axpy(float* y, float a, const float* x, int64_t n) {
#pragma omp simd
    for (int64_t u = 0; u < n; ++u) y[u] += a * x[u];
}

/// Pair (b, h): the softmax weights of each of its queries into w [Tq, Tk] (0 at keys not
/// seen), and the weighted sum of the values into the query's output row (zeros before).
ATTNVIZ_SHORT_CLONES
void forward_pair(const Geometry& g, int64_t b, int64_t h, float* w_pair, float* out, int64_t out_ld) {
    const int64_t Tq = g.Tq, Tk = g.Tk, dh = g.dh;
    const Geometry::Pair p = g.pair(b, h);
    for (int64_t i = 0; i < Tq; ++i) {
        float* w = w_pair + i * Tk;
        std::fill(w, w + Tk, 0.0f);
        if (p.q_rows[i] < 0) continue;
        const float* q = g.q + p.q_rows[i] * g.q_ld + p.q_col;
        const int64_t last = g.seen(b, i);
        float top = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < last; ++j) {
            if (p.k_rows[j] < 0) continue;
            w[j] = dot(q, g.kv + p.k_rows[j] * g.kv_ld + p.k_col, dh) * g.scale;
            top = std::max(top, w[j]);
        }
        if (top == -std::numeric_limits<float>::infinity()) continue;  // no key seen: weights and output 0
        float sum = 0;
        for (int64_t j = 0; j < last; ++j) {
            if (p.k_rows[j] < 0) continue;
            w[j] = std::exp(w[j] - top);
            sum += w[j];
        }
        const float inv = 1.0f / sum;
        float* o = out + p.q_rows[i] * out_ld + h * dh;
        for (int64_t j = 0; j < last; ++j) {
            if (p.k_rows[j] < 0) continue;
            w[j] *= inv;
            const float used = p.dropout ? w[j] * p.dropout[i * Tk + j] : w[j];
            if (used != 0.0f) axpy(o, used, g.kv + p.k_rows[j] * g.kv_ld + p.v_col, dh);
        }
    }
}

/// Pair (b, h)'s part of the gradient: from the output rows' gradient gout, into the query,
/// key and value columns of gq (q_src's gradient) and gkv (kv_src's; the same buffer for
/// self-attention, other columns). dw: Tk floats of scratch.
ATTNVIZ_SHORT_CLONES
void backward_pair(const Geometry& g, int64_t b, int64_t h, const float* w_pair, const float* gout, int64_t gout_ld,
                   float* gq, int64_t gq_ld, float* gkv, int64_t gkv_ld, float* dw) {
    const int64_t Tq = g.Tq, Tk = g.Tk, dh = g.dh;
    const Geometry::Pair p = g.pair(b, h);
    for (int64_t i = 0; i < Tq; ++i) {
        if (p.q_rows[i] < 0) continue;
        const float* w = w_pair + i * Tk;
        const float* go = gout + p.q_rows[i] * gout_ld + h * dh;
        const int64_t last = g.seen(b, i);
        // Through the weighted sum: d used_ij = go · v_j, d v_j += used_ij go; through the
        // dropout mask; through the softmax: ds_j = w_j (dw_j - Σ w dw), times 1/√dh.
        float c = 0;
        for (int64_t j = 0; j < last; ++j) {
            dw[j] = 0;
            if (p.k_rows[j] < 0 || w[j] == 0.0f) continue;
            const float m = p.dropout ? p.dropout[i * Tk + j] : 1.0f;
            if (m == 0.0f) continue;
            dw[j] = dot(go, g.kv + p.k_rows[j] * g.kv_ld + p.v_col, dh) * m;
            axpy(gkv + p.k_rows[j] * gkv_ld + p.v_col, w[j] * m, go, dh);
            c += w[j] * dw[j];
        }
        const float* q = g.q + p.q_rows[i] * g.q_ld + p.q_col;
        float* dq = gq + p.q_rows[i] * gq_ld + p.q_col;
        for (int64_t j = 0; j < last; ++j) {
            if (p.k_rows[j] < 0 || w[j] == 0.0f) continue;
            const float ds = w[j] * (dw[j] - c) * g.scale;
            if (ds == 0.0f) continue;
            axpy(dq, ds, g.kv + p.k_rows[j] * g.kv_ld + p.k_col, dh);
            axpy(gkv + p.k_rows[j] * gkv_ld + p.k_col, ds, q, dh);
        }
    }
}

/// Pairs per parallel chunk: about 32k multiply-adds each.
int64_t grain(const Geometry& g) { return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, g.Tq * g.Tk * g.dh)); }

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("short_attention: " + what); }

void check_map(const Tensor& t, const char* name, int64_t B, int64_t rows_available) {
    if (!t.defined() || t.dim() != 2 || t.size(0) != B || t.scalar_type() != torch::kInt64 || !t.device().is_cpu() ||
        !t.is_contiguous())
        fail(std::string(name) + " must be a contiguous [B, T] int64 tensor on the CPU");
    if (t.numel() > 0 && t.max().item<int64_t>() >= rows_available)
        fail(std::string(name) + " names a row past the end of its matrix");
}

void check(const Tensor& q_src, const Tensor& kv_src, const ShortAttentionOptions& o) {
    for (const Tensor* t : {&q_src, &kv_src})
        if (!t->defined() || t->dim() != 2 || t->scalar_type() != torch::kFloat || !t->device().is_cpu() ||
            t->stride(1) != 1)
            fail("q_src and kv_src must be float32 [rows, columns] on the CPU, columns contiguous");
    if (o.heads < 1 || o.width < 1 || o.width % o.heads != 0) fail("the width must be a multiple of the heads");
    if (o.q_column < 0 || o.q_column + o.width > q_src.size(1)) fail("the queries' columns are not all in q_src");
    for (const int64_t c : {o.k_column, o.v_column})
        if (c < 0 || c + o.width > kv_src.size(1)) fail("the keys' or values' columns are not all in kv_src");
    const int64_t B = o.q_rows.defined() ? o.q_rows.size(0) : 0;
    check_map(o.q_rows, "q_rows", B, q_src.size(0));
    check_map(o.k_rows, "k_rows", B, kv_src.size(0));
    if (o.key_len.defined() && (o.key_len.dim() != 1 || o.key_len.size(0) != B ||
                                o.key_len.scalar_type() != torch::kInt64 || !o.key_len.device().is_cpu() ||
                                !o.key_len.is_contiguous()))
        fail("key_len must be a contiguous [B] int64 tensor on the CPU");
    if (o.dropout.defined() &&
        (o.dropout.sizes() != torch::IntArrayRef({B, o.heads, o.q_rows.size(1), o.k_rows.size(1)}) ||
         o.dropout.scalar_type() != torch::kFloat || !o.dropout.device().is_cpu() || !o.dropout.is_contiguous()))
        fail("the dropout mask must be a contiguous float [B, h, Tq, Tk] tensor on the CPU");
}

Geometry geometry(const Tensor& q_src, const Tensor& kv_src, const ShortAttentionOptions& o) {
    Geometry g;
    g.q = q_src.data_ptr<float>();
    g.q_ld = q_src.stride(0);
    g.kv = kv_src.data_ptr<float>();
    g.kv_ld = kv_src.stride(0);
    g.q_rows = o.q_rows.data_ptr<int64_t>();
    g.k_rows = o.k_rows.data_ptr<int64_t>();
    g.key_len = o.key_len.defined() ? o.key_len.data_ptr<int64_t>() : nullptr;
    g.dropout = o.dropout.defined() ? o.dropout.data_ptr<float>() : nullptr;
    g.Tq = o.q_rows.size(1);
    g.Tk = o.k_rows.size(1);
    g.heads = o.heads;
    g.dh = o.width / o.heads;
    g.q_col = o.q_column;
    g.k_col = o.k_column;
    g.v_col = o.v_column;
    g.causal = o.causal;
    g.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(g.dh)));
    return g;
}

Tensor tensor_or_none(const at::IValue& v) { return v.isTensor() ? v.toTensor() : Tensor(); }

struct ShortAttentionFunction : public torch::autograd::Function<ShortAttentionFunction> {
    static Tensor forward(AutogradContext* ctx, const Tensor& q_src, const Tensor& kv_src,
                          const ShortAttentionOptions& o) {
        const Geometry g = geometry(q_src, kv_src, o);
        const int64_t B = o.q_rows.size(0);
        auto weights = at::empty({B, o.heads, g.Tq, g.Tk}, q_src.options());
        auto out = at::zeros({q_src.size(0), o.width}, q_src.options());
        float* w = weights.data_ptr<float>();
        float* po = out.data_ptr<float>();
        at::parallel_for(0, B * o.heads, grain(g), [&](int64_t begin, int64_t end) {
            for (int64_t p = begin; p < end; ++p)
                forward_pair(g, p / g.heads, p % g.heads, w + p * g.Tq * g.Tk, po, o.width);
        });
        ctx->save_for_backward({q_src, kv_src});
        ctx->saved_data["self"] = q_src.is_same(kv_src);
        ctx->saved_data["weights"] = weights;
        ctx->saved_data["heads"] = o.heads;
        ctx->saved_data["width"] = o.width;
        ctx->saved_data["columns"] = std::vector<int64_t>{o.q_column, o.k_column, o.v_column};
        ctx->saved_data["q_rows"] = o.q_rows;
        ctx->saved_data["k_rows"] = o.k_rows;
        ctx->saved_data["key_len"] = o.key_len;
        ctx->saved_data["causal"] = o.causal;
        ctx->saved_data["dropout"] = o.dropout;
        return out;
    }

    static variable_list backward(AutogradContext* ctx, variable_list grads) {
        const auto saved = ctx->get_saved_variables();
        const Tensor &q_src = saved[0], &kv_src = saved[1];
        variable_list result(3);
        if (!grads[0].defined()) return result;
        ShortAttentionOptions o;
        o.heads = ctx->saved_data.at("heads").toInt();
        o.width = ctx->saved_data.at("width").toInt();
        const auto columns = ctx->saved_data.at("columns").toIntVector();
        o.q_column = columns[0];
        o.k_column = columns[1];
        o.v_column = columns[2];
        o.q_rows = ctx->saved_data.at("q_rows").toTensor();
        o.k_rows = ctx->saved_data.at("k_rows").toTensor();
        o.key_len = tensor_or_none(ctx->saved_data.at("key_len"));
        o.causal = ctx->saved_data.at("causal").toBool();
        o.dropout = tensor_or_none(ctx->saved_data.at("dropout"));
        const bool self = ctx->saved_data.at("self").toBool();
        const Tensor weights = ctx->saved_data.at("weights").toTensor();

        const Geometry g = geometry(q_src, kv_src, o);
        const Tensor gout = grads[0].to(torch::kFloat).contiguous();
        Tensor gq = at::zeros(q_src.sizes(), q_src.options());
        Tensor gkv = self ? gq : at::zeros(kv_src.sizes(), kv_src.options());
        const float* w = weights.data_ptr<float>();
        const float* pg = gout.data_ptr<float>();
        float* pq = gq.data_ptr<float>();
        float* pkv = gkv.data_ptr<float>();
        at::parallel_for(0, o.q_rows.size(0) * o.heads, grain(g), [&](int64_t begin, int64_t end) {
            std::vector<float> dw(static_cast<size_t>(g.Tk));
            for (int64_t p = begin; p < end; ++p)
                backward_pair(g, p / g.heads, p % g.heads, w + p * g.Tq * g.Tk, pg, o.width, pq, gq.stride(0), pkv,
                              gkv.stride(0), dw.data());
        });
        result[0] = gq;
        if (!self) result[1] = gkv;
        return result;
    }
};

}  // namespace

torch::Tensor short_attention(const torch::Tensor& q_src, const torch::Tensor& kv_src,
                              const ShortAttentionOptions& options) {
    check(q_src, kv_src, options);
    return ShortAttentionFunction::apply(q_src, kv_src, options);
}

}  // namespace attnviz
