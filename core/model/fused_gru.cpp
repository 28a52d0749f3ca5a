// What both fused GRU nodes share (fused_gru_internal.hpp), and the length
// packing of fused_gru.hpp. The nodes: fused_decoder.cpp, fused_encoder.cpp.
#include "core/model/fused_gru.hpp"

#include <algorithm>

#include "core/model/fused_gru_internal.hpp"

namespace attnviz {

namespace fused_internal {

namespace {
bool fold_embedding(const Tensor& embedding, const Tensor& tokens) { return embedding.size(0) < tokens.size(0); }
}  // namespace

Tensor embedded_input_gates(const Tensor& embedding, const Tensor& tokens, const Tensor& w, const Tensor& b,
                            Tensor* emb) {
    if (fold_embedding(embedding, tokens)) return at::addmm(b, embedding, w.t()).index_select(0, tokens);
    *emb = embedding.index_select(0, tokens);
    return at::addmm(b, *emb, w.t());
}

std::pair<Tensor, Tensor> embedded_input_gates_backward(const Tensor& embedding, const Tensor& tokens, const Tensor& w,
                                                        const Tensor& emb, const Tensor& dg) {
    if (fold_embedding(embedding, tokens)) {
        Tensor d_table = at::zeros({embedding.size(0), dg.size(1)}, dg.options()).index_add_(0, tokens, dg);
        return {at::mm(d_table, w), at::mm(d_table.t(), embedding)};
    }
    Tensor d_embedding = at::zeros_like(embedding).index_add_(0, tokens, at::mm(dg, w));
    return {d_embedding, at::mm(dg.t(), emb)};
}

void gru_gates_forward(const Tensor& gi, const Tensor& gh, const Tensor& h_prev, const Tensor& g,
                       const Tensor& h_new) {
    const int64_t H = h_prev.size(1);
    auto rz = g.narrow(1, 0, 2 * H);
    at::add_out(rz, gi.narrow(1, 0, 2 * H), gh.narrow(1, 0, 2 * H));
    rz.sigmoid_();
    auto r = g.narrow(1, 0, H), z = g.narrow(1, H, H), nn = g.narrow(1, 2 * H, H);
    at::addcmul_out(nn, gi.narrow(1, 2 * H, H), r, gh.narrow(1, 2 * H, H));
    nn.tanh_();
    Tensor out = h_new;
    at::addcmul_out(out, nn, z, h_prev - nn);
}

namespace {
// gru_gates_backward as one pass over the rows: on the CPU, ATen's version
// below makes a dozen passes and temporaries.
template <typename scalar_t>
void gru_gates_backward_cpu(const Tensor& dh, const Tensor& g, const Tensor& gh, const Tensor& h_prev,
                            const Tensor& dgi, const Tensor& dgh, const Tensor& dhz) {
    const int64_t n = dh.size(0), H = dh.size(1);
    const scalar_t* dh_p = dh.data_ptr<scalar_t>();
    const scalar_t* g_p = g.data_ptr<scalar_t>();
    const scalar_t* gh_p = gh.data_ptr<scalar_t>();
    const scalar_t* hp_p = h_prev.data_ptr<scalar_t>();
    scalar_t* dgi_p = dgi.data_ptr<scalar_t>();
    scalar_t* dgh_p = dgh.data_ptr<scalar_t>();
    scalar_t* dhz_p = dhz.data_ptr<scalar_t>();
    const int64_t gs = g.stride(0), ghs = gh.stride(0), dgis = dgi.stride(0), dghs = dgh.stride(0);
    const auto body = [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            const scalar_t* gr = g_p + i * gs;
            const scalar_t* ghn = gh_p + i * ghs + 2 * H;
            const scalar_t* d = dh_p + i * H;
            const scalar_t* hp = hp_p + i * H;
            scalar_t* di = dgi_p + i * dgis;
            scalar_t* dg = dgh_p + i * dghs;
            scalar_t* dz_out = dhz_p + i * H;
            for (int64_t j = 0; j < H; ++j) {
                const scalar_t r = gr[j], z = gr[H + j], nn = gr[2 * H + j];
                const scalar_t dn = d[j] * (1 - z) * (1 - nn * nn);
                const scalar_t dr = dn * ghn[j] * r * (1 - r);
                const scalar_t dz = d[j] * (hp[j] - nn) * z * (1 - z);
                di[j] = dr;
                di[H + j] = dz;
                di[2 * H + j] = dn;
                dg[j] = dr;
                dg[H + j] = dz;
                dg[2 * H + j] = dn * r;
                dz_out[j] = d[j] * z;
            }
        }
    };
    // Rows split across threads in chunks of at least ~16k elements each.
    at::parallel_for(0, n, std::max<int64_t>(1, 16384 / (7 * H)), body);
}
}  // namespace

void gru_gates_backward(const Tensor& dh, const Tensor& g, const Tensor& gh, const Tensor& h_prev,
                        const Tensor& dgi, const Tensor& dgh, const Tensor& dhz, GateArithmetic how) {
    if (how == GateArithmetic::automatic && dh.is_cpu() && dh.is_contiguous() && h_prev.is_contiguous()) {
        AT_DISPATCH_FLOATING_TYPES(dh.scalar_type(), "gru_gates_backward",
                                   [&] { gru_gates_backward_cpu<scalar_t>(dh, g, gh, h_prev, dgi, dgh, dhz); });
        return;
    }
    const int64_t H = dh.size(1);
    auto r = g.narrow(1, 0, H), z = g.narrow(1, H, H), nn = g.narrow(1, 2 * H, H);
    auto dn = dh * (1 - z) * (1 - nn * nn);
    auto dr = dn * gh.narrow(1, 2 * H, H) * r * (1 - r);
    auto dz = dh * (h_prev - nn) * z * (1 - z);
    dgi.narrow(1, 0, H).copy_(dr);
    dgi.narrow(1, H, H).copy_(dz);
    dgi.narrow(1, 2 * H, H).copy_(dn);
    dgh.narrow(1, 0, 2 * H).copy_(dgi.narrow(1, 0, 2 * H));
    Tensor dgh_n = dgh.narrow(1, 2 * H, H), dhz_out = dhz;
    at::mul_out(dgh_n, dn, r);
    at::mul_out(dhz_out, dh, z);
}

void append_layer_weights(std::vector<Tensor>& t, const char* what, const std::vector<Tensor>& w_ih,
                          const std::vector<Tensor>& w_hh, const std::vector<Tensor>& b_ih,
                          const std::vector<Tensor>& b_hh, const std::vector<int64_t>& steps, int64_t batch,
                          const Tensor& packed) {
    TORCH_CHECK(!w_ih.empty() && w_hh.size() == w_ih.size() && b_ih.size() == w_ih.size() &&
                    b_hh.size() == w_ih.size(),
                what, ": one set of GRU weights per layer expected");
    TORCH_CHECK(!steps.empty(), what, ": no steps");
    int64_t N = 0, prev = batch;
    for (int64_t n : steps) {
        TORCH_CHECK(n >= 1 && n <= prev, what, ": rows per step must be non-increasing and >= 1");
        prev = n;
        N += n;
    }
    TORCH_CHECK(packed.size(0) == N, what, ": the packed input has ", packed.size(0), " rows, steps sum to ", N);
    const size_t first = t.size();
    const int64_t L = static_cast<int64_t>(w_ih.size());
    t.resize(weight_index(first, L, WeightSlot::w_ih));
    for (int64_t l = 0; l < L; ++l) {
        t[weight_index(first, l, WeightSlot::w_ih)] = w_ih[l];
        t[weight_index(first, l, WeightSlot::w_hh)] = w_hh[l];
        t[weight_index(first, l, WeightSlot::b_ih)] = b_ih[l];
        t[weight_index(first, l, WeightSlot::b_hh)] = b_hh[l];
    }
}

Tensor dropout_mask(const DropoutStream* stream, const std::vector<uint64_t>& keys, uint64_t which, int64_t n,
                    int64_t units, double keep, const torch::TensorOptions& options) {
    if (stream && !keys.empty()) return hashed_dropout_mask(*stream, which, keys, units, keep, options);
    return at::empty({n, units}, options).bernoulli_(keep).div_(keep);
}

}  // namespace fused_internal

LengthPacking pack_by_length(const torch::Tensor& lengths, int64_t T) {
    LengthPacking p;
    auto [sorted, perm] = lengths.sort(/*stable=*/true, /*dim=*/0, /*descending=*/true);
    p.perm = perm;
    const int64_t B = lengths.size(0);
    const int64_t* len = sorted.data_ptr<int64_t>();
    const int64_t* rows = perm.data_ptr<int64_t>();
    for (int64_t t = 0; t < T && B > 0 && len[0] > t; ++t) {
        int64_t n = 0;
        for (; n < B && len[n] > t; ++n) {
            p.sorted_index.push_back(n * T + t);
            p.caller_index.push_back(rows[n] * T + t);
        }
        p.steps.push_back(n);
    }
    return p;
}

std::vector<uint64_t> dropout_keys(const DropoutStream* stream, const LengthPacking& packing, int64_t T) {
    std::vector<uint64_t> keys;
    if (!stream) return keys;
    keys.reserve(packing.caller_index.size());
    for (int64_t i : packing.caller_index) keys.push_back(dropout_key(stream->batch_row(i / T), i % T));
    return keys;
}

}  // namespace attnviz
