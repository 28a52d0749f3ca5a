// See fused_gru.hpp. Notation: N packed rows (all steps), n rows at the
// current step, o its first packed row, B batch, S source steps, K value size,
// A attention size, H hidden size, E embedding size, L layers.
// GRU (PyTorch's layout, gates r, z, n):
//   r = sigma(Wir x + bir + Whr h + bhr), z = sigma(Wiz x + biz + Whz h + bhz)
//   n = tanh(Win x + bin + r * (Whn h + bhn)),  h' = n + z * (h - n)
#include "core/fused_gru.hpp"

#include <limits>
#include <numeric>

namespace attnviz {

namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t additive = int64_t(FusedScoring::additive), no_attention = int64_t(FusedScoring::none);

// Tensor order in the flat list handed to the autograd function.
enum : size_t { i_values, i_keys, i_mask, i_final_ctx, i_h0, i_tokens, i_embedding, i_wq, i_wv, i_layers };

// Layer 0's input half for packed tokens, W [3H, E] x emb(token) + b. With
// fewer vocabulary entries than packed rows it is cheaper to project the
// vocabulary once and look rows up (the embedding folded into the product);
// otherwise the embeddings are looked up and projected. *emb receives the
// looked-up embeddings in the second case (undefined in the first).
bool fold_embedding(const Tensor& embedding, const Tensor& tokens) { return embedding.size(0) < tokens.size(0); }

Tensor embedded_input_gates(const Tensor& embedding, const Tensor& tokens, const Tensor& w, const Tensor& b,
                            Tensor* emb) {
    if (fold_embedding(embedding, tokens)) return at::addmm(b, embedding, w.t()).index_select(0, tokens);
    *emb = embedding.index_select(0, tokens);
    return at::addmm(b, *emb, w.t());
}

// Backward of embedded_input_gates for gate gradients dg [N, 3H]: returns the
// gradients of the embedding table and of w.
std::pair<Tensor, Tensor> embedded_input_gates_backward(const Tensor& embedding, const Tensor& tokens, const Tensor& w,
                                                        const Tensor& emb, const Tensor& dg) {
    if (fold_embedding(embedding, tokens)) {
        Tensor d_table = at::zeros({embedding.size(0), dg.size(1)}, dg.options()).index_add_(0, tokens, dg);
        return {at::mm(d_table, w), at::mm(d_table.t(), embedding)};
    }
    Tensor d_embedding = at::zeros_like(embedding).index_add_(0, tokens, at::mm(dg, w));
    return {d_embedding, at::mm(dg.t(), emb)};
}

// The GRU's gate arithmetic after the two matrix products: writes r, z, n to
// g [n, 3H] and h' to h_new. gi and gh are [n, 3H] (gh stays: its n part is
// needed backwards).
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

// Backward of the gate arithmetic for gradient dh of h': writes the gradients
// of the pre-activations, dgi [n, 3H] (input side) and dgh [n, 3H] (recurrent
// side, whose n part is scaled by r), and dh * z (the direct path to h) to dhz.
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

// Buffers saved for backward; unused ones as empty tensors (undefined ones
// would not survive the IValue list).
Tensor keep_or_empty(const Tensor& x, const at::TensorOptions& opt) { return x.defined() ? x : at::empty({0}, opt); }

// Appends five buffers per layer: input, previous state, gates, recurrent
// pre-activations, dropout mask on the layer's output.
void save_layers(std::vector<Tensor>& saved, const std::vector<Tensor>& X, const std::vector<Tensor>& HP,
                 const std::vector<Tensor>& G, const std::vector<Tensor>& GH, const std::vector<Tensor>& M,
                 const at::TensorOptions& opt) {
    for (size_t l = 0; l < X.size(); ++l) {
        saved.push_back(keep_or_empty(X[l], opt));
        saved.push_back(HP[l]);
        saved.push_back(G[l]);
        saved.push_back(GH[l]);
        saved.push_back(keep_or_empty(M[l], opt));
    }
}

bool g_generic_gates = false;  // tests: run the device-independent version on the CPU too

void gru_gates_backward(const Tensor& dh, const Tensor& g, const Tensor& gh, const Tensor& h_prev,
                        const Tensor& dgi, const Tensor& dgh, const Tensor& dhz) {
    if (dh.is_cpu() && !g_generic_gates && dh.is_contiguous() && h_prev.is_contiguous()) {
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

struct DecoderFunction : public torch::autograd::Function<DecoderFunction> {
    static Tensor forward(AutogradContext* ctx, at::TensorList t, int64_t L, int64_t scoring, double scale,
                          double dropout, std::vector<int64_t> steps) {
        const Tensor& V = t[i_values];
        const Tensor& PK = t[i_keys];
        const Tensor& mask = t[i_mask];
        const Tensor& h0 = t[i_h0];
        const Tensor& tokens = t[i_tokens];
        const Tensor& embedding = t[i_embedding];
        const int64_t T = static_cast<int64_t>(steps.size());
        const int64_t N = tokens.size(0), H = h0.size(2), K = V.size(2);
        const int64_t S = V.size(1);
        auto w_ih = [&](int64_t l) { return t[i_layers + 4 * l]; };
        auto w_hh = [&](int64_t l) { return t[i_layers + 4 * l + 1]; };
        auto b_ih = [&](int64_t l) { return t[i_layers + 4 * l + 2]; };
        auto b_hh = [&](int64_t l) { return t[i_layers + 4 * l + 3]; };
        const auto opt = embedding.options();
        const bool drop = dropout > 0;
        const double keep = 1.0 - dropout;

        // Saved for backward, packed [N, ...]: the context fed to layer 0,
        // each layer's input (layers >= 1), previous state, gates r|z|n and
        // recurrent pre-activations, dropout masks, attention weights,
        // additive attention's tanh features.
        Tensor CTX = at::empty({N, K}, opt);
        std::vector<Tensor> X(L), HP(L), G(L), GH(L), M(L);
        for (int64_t l = 0; l < L; ++l) {
            if (l > 0) X[l] = at::empty({N, H}, opt);
            HP[l] = at::empty({N, H}, opt);
            G[l] = at::empty({N, 3 * H}, opt);
            GH[l] = at::empty({N, 3 * H}, opt);
            if (drop && l + 1 < L) M[l] = at::empty({N, H}, opt).bernoulli_(keep).div_(keep);
        }
        Tensor AW, MA, FE;
        if (scoring != no_attention) {
            AW = at::empty({N, S}, opt);
            if (drop) MA = at::empty({N, S}, opt).bernoulli_(keep).div_(keep);
            if (scoring == additive) FE = at::empty({N, S, PK.size(2)}, opt);
        }
        Tensor out = at::empty({N, H}, opt);
        Tensor not_mask = mask.logical_not();

        // Layer 0's input is [context; embedding]: the embedding half of its
        // product is one matrix product for all steps, bias included.
        const Tensor w_ctx = w_ih(0).narrow(1, 0, K), w_emb = w_ih(0).narrow(1, K, embedding.size(1));
        Tensor emb;
        Tensor GE = embedded_input_gates(embedding, tokens, w_emb, b_ih(0), &emb);

        std::vector<Tensor> h(L);
        for (int64_t l = 0; l < L; ++l) h[l] = h0[l];
        int64_t o = 0;
        for (int64_t s = 0; s < T; ++s) {
            const int64_t n = steps[s];
            auto ctx_s = CTX.narrow(0, o, n);
            if (scoring == no_attention) {
                ctx_s.copy_(t[i_final_ctx].narrow(0, 0, n));
            } else {
                const auto q = h[L - 1].narrow(0, 0, n);
                Tensor sc;
                if (scoring == additive) {
                    auto f = FE.narrow(0, o, n);
                    at::add_out(f, PK.narrow(0, 0, n), at::mm(q, t[i_wq].t()).unsqueeze(1));
                    f.tanh_();
                    sc = at::matmul(f, t[i_wv][0]);  // [n, S]
                } else {
                    sc = at::bmm(PK.narrow(0, 0, n), q.unsqueeze(2)).squeeze(2);
                    if (scale != 1.0) sc.mul_(scale);
                }
                sc.masked_fill_(not_mask.narrow(0, 0, n), -std::numeric_limits<double>::infinity());
                auto a = AW.narrow(0, o, n);
                at::_softmax_out(a, sc, -1, false);
                auto read = drop ? a * MA.narrow(0, o, n) : a;
                Tensor ctx_out = ctx_s.unsqueeze(1);
                at::bmm_out(ctx_out, read.unsqueeze(1), V.narrow(0, 0, n));
            }
            for (int64_t l = 0; l < L; ++l) {
                auto hp = HP[l].narrow(0, o, n);
                hp.copy_(h[l].narrow(0, 0, n));
                auto gh = GH[l].narrow(0, o, n);
                at::addmm_out(gh, b_hh(l), hp, w_hh(l).t());
                Tensor gi = l == 0 ? at::addmm(GE.narrow(0, o, n), ctx_s, w_ctx.t())
                                   : at::addmm(b_ih(l), X[l].narrow(0, o, n), w_ih(l).t());
                Tensor h_new = l + 1 == L ? out.narrow(0, o, n) : at::empty({n, H}, opt);
                gru_gates_forward(gi, gh, hp, G[l].narrow(0, o, n), h_new);
                if (l + 1 < L) {
                    auto x_next = X[l + 1].narrow(0, o, n);
                    if (drop)
                        at::mul_out(x_next, h_new, M[l].narrow(0, o, n));
                    else
                        x_next.copy_(h_new);
                }
                h[l] = h_new;
            }
            o += n;
        }
        std::vector<Tensor> saved{CTX, keep_or_empty(AW, opt), keep_or_empty(MA, opt), keep_or_empty(FE, opt),
                                  keep_or_empty(emb, opt)};
        save_layers(saved, X, HP, G, GH, M, opt);
        ctx->saved_data["buffers"] = saved;
        ctx->saved_data["L"] = L;
        ctx->saved_data["scoring"] = scoring;
        ctx->saved_data["scale"] = scale;
        ctx->saved_data["dropout"] = dropout;
        ctx->saved_data["steps"] = steps;
        ctx->save_for_backward(t.vec());
        return out;
    }

    static variable_list backward(AutogradContext* ctx, variable_list grads) {
        const auto t = ctx->get_saved_variables();
        const auto buf = ctx->saved_data["buffers"].toTensorVector();
        const int64_t L = ctx->saved_data["L"].toInt();
        const int64_t scoring = ctx->saved_data["scoring"].toInt();
        const double scale = ctx->saved_data["scale"].toDouble();
        const bool drop = ctx->saved_data["dropout"].toDouble() > 0;
        const auto steps = ctx->saved_data["steps"].toIntVector();
        const Tensor& CTX = buf[0];
        const Tensor& AW = buf[1];
        const Tensor& MA = buf[2];
        const Tensor& FE = buf[3];
        const Tensor& emb = buf[4];
        auto X = [&](int64_t l) { return buf[5 + 5 * l]; };
        auto HP = [&](int64_t l) { return buf[6 + 5 * l]; };
        auto G = [&](int64_t l) { return buf[7 + 5 * l]; };
        auto GH = [&](int64_t l) { return buf[8 + 5 * l]; };
        auto M = [&](int64_t l) { return buf[9 + 5 * l]; };
        auto w_ih = [&](int64_t l) { return t[i_layers + 4 * l]; };
        auto w_hh = [&](int64_t l) { return t[i_layers + 4 * l + 1]; };

        const Tensor& V = t[i_values];
        const Tensor& PK = t[i_keys];
        const Tensor& tokens = t[i_tokens];
        const Tensor& embedding = t[i_embedding];
        Tensor d_out = grads[0].contiguous();
        const int64_t T = static_cast<int64_t>(steps.size());
        const int64_t N = tokens.size(0), B = t[i_h0].size(1), H = t[i_h0].size(2), K = V.size(2);
        const auto opt = embedding.options();
        const Tensor w_ctx = w_ih(0).narrow(1, 0, K), w_emb = w_ih(0).narrow(1, K, embedding.size(1));

        // Gradients of the gate pre-activations for every packed row: the
        // weight gradients are products of these with the saved inputs.
        std::vector<Tensor> DGI(L), DGH(L), carry(L);
        for (int64_t l = 0; l < L; ++l) {
            DGI[l] = at::empty({N, 3 * H}, opt);
            DGH[l] = at::empty({N, 3 * H}, opt);
            // Gradient reaching h_l at the previous step; rows not running at
            // a step are still zero there, as walking backwards only adds rows.
            carry[l] = at::zeros({B, H}, opt);
        }
        Tensor d_values, d_keys, d_final_ctx, DSC, DQP;
        if (scoring == no_attention) {
            d_final_ctx = at::zeros_like(t[i_final_ctx]);
        } else {
            d_values = at::zeros_like(V);
            d_keys = at::zeros_like(PK);
            if (scoring == additive) {
                DSC = at::empty({N, V.size(1)}, opt);
                DQP = at::empty({N, PK.size(2)}, opt);
            }
        }
        Tensor dh = at::empty({B, H}, opt), dhz = at::empty({B, H}, opt);

        int64_t o = N;
        for (int64_t s = T - 1; s >= 0; --s) {
            const int64_t n = steps[s];
            o -= n;
            Tensor dx;  // gradient reaching this step's input of the layer above
            for (int64_t l = L - 1; l >= 0; --l) {
                auto dh_s = dh.narrow(0, 0, n);
                if (l + 1 == L)
                    at::add_out(dh_s, carry[l].narrow(0, 0, n), d_out.narrow(0, o, n));
                else if (drop)
                    at::addcmul_out(dh_s, carry[l].narrow(0, 0, n), dx, M(l).narrow(0, o, n));
                else
                    at::add_out(dh_s, carry[l].narrow(0, 0, n), dx);
                auto dgi = DGI[l].narrow(0, o, n), dgh = DGH[l].narrow(0, o, n);
                auto dhz_s = dhz.narrow(0, 0, n);
                gru_gates_backward(dh_s, G(l).narrow(0, o, n), GH(l).narrow(0, o, n), HP(l).narrow(0, o, n), dgi,
                                   dgh, dhz_s);
                Tensor carry_s = carry[l].narrow(0, 0, n);
                at::addmm_out(carry_s, dhz_s, dgh, w_hh(l));
                dx = l > 0 ? at::mm(dgi, w_ih(l)) : at::mm(dgi, w_ctx);
            }
            // dx is now the gradient of this step's context.
            if (scoring == no_attention) {
                d_final_ctx.narrow(0, 0, n).add_(dx);
                continue;
            }
            const auto a = AW.narrow(0, o, n);
            Tensor d_read = at::bmm(V.narrow(0, 0, n), dx.unsqueeze(2)).squeeze(2);  // [n, S]
            Tensor read = drop ? a * MA.narrow(0, o, n) : a;
            d_values.narrow(0, 0, n).baddbmm_(read.unsqueeze(2), dx.unsqueeze(1));
            if (drop) d_read.mul_(MA.narrow(0, o, n));
            Tensor d_sc = at::_softmax_backward_data(d_read, a, -1, a.scalar_type());
            const auto q = HP(L - 1).narrow(0, o, n);  // the query: top layer's previous state
            if (scoring == additive) {
                DSC.narrow(0, o, n).copy_(d_sc);
                Tensor d_pre = at::tanh_backward(d_sc.unsqueeze(2) * t[i_wv][0], FE.narrow(0, o, n));  // [n,S,A]
                d_keys.narrow(0, 0, n).add_(d_pre);
                auto dqp = DQP.narrow(0, o, n);
                at::sum_out(dqp, d_pre, {1});
                carry[L - 1].narrow(0, 0, n).addmm_(dqp, t[i_wq]);
            } else {
                if (scale != 1.0) d_sc.mul_(scale);
                carry[L - 1].narrow(0, 0, n).unsqueeze(1).baddbmm_(d_sc.unsqueeze(1), PK.narrow(0, 0, n));
                d_keys.narrow(0, 0, n).baddbmm_(d_sc.unsqueeze(2), q.unsqueeze(1));
            }
        }

        variable_list g(t.size());
        g[i_values] = d_values;
        g[i_keys] = d_keys;
        g[i_final_ctx] = d_final_ctx;
        g[i_h0] = at::stack(carry);
        Tensor dw_emb;
        std::tie(g[i_embedding], dw_emb) = embedded_input_gates_backward(embedding, tokens, w_emb, emb, DGI[0]);
        if (scoring == additive) {
            g[i_wq] = at::mm(DQP.t(), HP(L - 1));
            g[i_wv] = at::mm(DSC.view({1, -1}), FE.view({-1, FE.size(2)}));
        }
        for (int64_t l = 0; l < L; ++l) {
            Tensor dw_ih;
            if (l == 0)
                dw_ih = at::cat({at::mm(DGI[0].t(), CTX), dw_emb}, 1);
            else
                dw_ih = at::mm(DGI[l].t(), X(l));
            g[i_layers + 4 * l] = dw_ih;
            g[i_layers + 4 * l + 1] = at::mm(DGH[l].t(), HP(l));
            g[i_layers + 4 * l + 2] = DGI[l].sum(0);
            g[i_layers + 4 * l + 3] = DGH[l].sum(0);
        }
        // One slot per non-tensor argument of forward().
        for (int k = 0; k < 5; ++k) g.emplace_back();
        return g;
    }
};


struct EncoderFunction : public torch::autograd::Function<EncoderFunction> {
    // t = [tokens, embedding, (w_ih, w_hh, b_ih, b_hh) per layer];
    // returns {outputs [N, H], h_n [L, B, H]}.
    static variable_list forward(AutogradContext* ctx, at::TensorList t, int64_t L, double dropout,
                                 std::vector<int64_t> steps) {
        const Tensor& tokens = t[0];
        const Tensor& embedding = t[1];
        auto w_ih = [&](int64_t l) { return t[2 + 4 * l]; };
        auto w_hh = [&](int64_t l) { return t[3 + 4 * l]; };
        auto b_ih = [&](int64_t l) { return t[4 + 4 * l]; };
        auto b_hh = [&](int64_t l) { return t[5 + 4 * l]; };
        const int64_t T = static_cast<int64_t>(steps.size()), N = tokens.size(0), B = steps[0];
        const int64_t H = w_hh(0).size(1);
        const auto opt = embedding.options();
        const bool drop = dropout > 0;
        const double keep = 1.0 - dropout;
        // Packed row holding each (sorted) row's last state.
        std::vector<int64_t> offset(T + 1, 0), last(B);
        for (int64_t s = 0; s < T; ++s) offset[s + 1] = offset[s] + steps[s];
        for (int64_t s = 0; s < T; ++s)
            for (int64_t i = (s + 1 < T ? steps[s + 1] : 0); i < steps[s]; ++i) last[i] = offset[s] + i;
        const Tensor last_idx = torch::tensor(last, torch::kLong).to(tokens.device());

        std::vector<Tensor> X(L), HP(L), G(L), GH(L), M(L), OUT(L), h_n(L);
        for (int64_t l = 0; l < L; ++l) {
            if (l == 0) {
                // set below with the input gates (undefined when the embedding is folded)
            } else if (drop) {
                M[l - 1] = at::empty({N, H}, opt).bernoulli_(keep).div_(keep);
                X[l] = OUT[l - 1] * M[l - 1];
            } else {
                X[l] = OUT[l - 1];
            }
            HP[l] = at::empty({N, H}, opt);
            G[l] = at::empty({N, 3 * H}, opt);
            GH[l] = at::empty({N, 3 * H}, opt);
            OUT[l] = at::empty({N, H}, opt);
            // The input half of every step at once.
            const Tensor GI = l == 0 ? embedded_input_gates(embedding, tokens, w_ih(0), b_ih(0), &X[0])
                                     : at::addmm(b_ih(l), X[l], w_ih(l).t());
            Tensor h = at::zeros({B, H}, opt);
            for (int64_t s = 0; s < T; ++s) {
                const int64_t n = steps[s], o = offset[s];
                auto hp = HP[l].narrow(0, o, n);
                hp.copy_(h.narrow(0, 0, n));
                auto gh = GH[l].narrow(0, o, n);
                at::addmm_out(gh, b_hh(l), hp, w_hh(l).t());
                gru_gates_forward(GI.narrow(0, o, n), gh, hp, G[l].narrow(0, o, n), OUT[l].narrow(0, o, n));
                h = OUT[l].narrow(0, o, n);
            }
            h_n[l] = OUT[l].index_select(0, last_idx);
        }
        std::vector<Tensor> saved;
        save_layers(saved, X, HP, G, GH, M, opt);
        ctx->saved_data["buffers"] = saved;
        ctx->saved_data["L"] = L;
        ctx->saved_data["steps"] = steps;
        ctx->saved_data["last"] = last_idx;
        ctx->save_for_backward(t.vec());
        return {OUT[L - 1], at::stack(h_n)};
    }

    static variable_list backward(AutogradContext* ctx, variable_list grads) {
        const auto t = ctx->get_saved_variables();
        const auto buf = ctx->saved_data["buffers"].toTensorVector();
        const int64_t L = ctx->saved_data["L"].toInt();
        const auto steps = ctx->saved_data["steps"].toIntVector();
        const Tensor last_idx = ctx->saved_data["last"].toTensor();
        const Tensor& tokens = t[0];
        const Tensor& embedding = t[1];
        auto w_ih = [&](int64_t l) { return t[2 + 4 * l]; };
        auto w_hh = [&](int64_t l) { return t[3 + 4 * l]; };
        const int64_t T = static_cast<int64_t>(steps.size()), N = tokens.size(0), B = steps[0];
        const int64_t H = w_hh(0).size(1);
        const auto opt = embedding.options();
        std::vector<int64_t> offset(T + 1, 0);
        for (int64_t s = 0; s < T; ++s) offset[s + 1] = offset[s] + steps[s];

        variable_list g(t.size());
        Tensor d_out = grads[0].contiguous();  // gradient of the layer's outputs, packed
        Tensor d_hn = grads[1];
        Tensor DGI = at::empty({N, 3 * H}, opt), DGH = at::empty({N, 3 * H}, opt);
        Tensor dh = at::empty({B, H}, opt), dhz = at::empty({B, H}, opt);
        for (int64_t l = L - 1; l >= 0; --l) {
            const Tensor& X = buf[5 * l];
            const Tensor &HP = buf[5 * l + 1], &G = buf[5 * l + 2], &GH = buf[5 * l + 3];
            // A row's final-state gradient joins at its last step; until then
            // the row is not running (walking backwards), so it just waits here.
            Tensor carry = d_hn[l].clone();
            for (int64_t s = T - 1; s >= 0; --s) {
                const int64_t n = steps[s], o = offset[s];
                auto dh_s = dh.narrow(0, 0, n), dhz_s = dhz.narrow(0, 0, n);
                at::add_out(dh_s, carry.narrow(0, 0, n), d_out.narrow(0, o, n));
                auto dgi = DGI.narrow(0, o, n), dgh = DGH.narrow(0, o, n);
                gru_gates_backward(dh_s, G.narrow(0, o, n), GH.narrow(0, o, n), HP.narrow(0, o, n), dgi, dgh, dhz_s);
                Tensor carry_s = carry.narrow(0, 0, n);
                at::addmm_out(carry_s, dhz_s, dgh, w_hh(l));
            }
            g[3 + 4 * l] = at::mm(DGH.t(), HP);
            g[4 + 4 * l] = DGI.sum(0);
            g[5 + 4 * l] = DGH.sum(0);
            if (l > 0) {
                g[2 + 4 * l] = at::mm(DGI.t(), X);
                Tensor d_x = at::mm(DGI, w_ih(l));
                const Tensor& M = buf[5 * (l - 1) + 4];
                d_out = M.numel() > 0 ? d_x.mul_(M) : d_x;
            } else {
                std::tie(g[1], g[2]) = embedded_input_gates_backward(embedding, tokens, w_ih(0), X, DGI);
            }
        }
        for (int k = 0; k < 3; ++k) g.emplace_back();  // the non-tensor arguments
        return g;
    }
};
}  // namespace

namespace fused_detail {
void set_generic_gates(bool on) { g_generic_gates = on; }
}  // namespace fused_detail

namespace {
// Checks the per-layer weights and the step sizes; returns the number of layers.
int64_t check_shapes(const char* what, const std::vector<Tensor>& w_ih, const std::vector<Tensor>& w_hh,
                     const std::vector<Tensor>& b_ih, const std::vector<Tensor>& b_hh,
                     const std::vector<int64_t>& steps, int64_t batch, const Tensor& packed) {
    const int64_t L = static_cast<int64_t>(w_ih.size());
    TORCH_CHECK(L >= 1 && w_hh.size() == w_ih.size() && b_ih.size() == w_ih.size() && b_hh.size() == w_ih.size(),
                what, ": one set of GRU weights per layer expected");
    TORCH_CHECK(!steps.empty(), what, ": no steps");
    int64_t N = 0, prev = batch;
    for (int64_t n : steps) {
        TORCH_CHECK(n >= 1 && n <= prev, what, ": rows per step must be non-increasing and >= 1");
        prev = n;
        N += n;
    }
    TORCH_CHECK(packed.size(0) == N, what, ": the packed input has ", packed.size(0), " rows, steps sum to ", N);
    return L;
}
}  // namespace

LengthPacking pack_by_length(const Tensor& lengths, int64_t T) {
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

FusedEncoderOutputs fused_gru_encoder(const FusedEncoderInputs& in, const std::vector<int64_t>& steps,
                                      double dropout) {
    const int64_t L = check_shapes("fused_gru_encoder", in.w_ih, in.w_hh, in.b_ih, in.b_hh, steps,
                                   steps.empty() ? 0 : steps[0], in.tokens);
    std::vector<Tensor> t{in.tokens, in.embedding};
    for (int64_t l = 0; l < L; ++l) {
        t.push_back(in.w_ih[l]);
        t.push_back(in.w_hh[l]);
        t.push_back(in.b_ih[l]);
        t.push_back(in.b_hh[l]);
    }
    auto out = EncoderFunction::apply(at::TensorList(t), L, dropout, steps);
    return {out[0], out[1]};
}

Tensor fused_gru_decoder(const FusedDecoderInputs& in, const FusedDecoderOptions& opts) {
    const int64_t L = check_shapes("fused_gru_decoder", in.w_ih, in.w_hh, in.b_ih, in.b_hh, opts.steps,
                                   in.h0.size(1), in.tokens);
    auto placeholder = [&](const Tensor& x) { return x.defined() ? x : at::empty({0}, in.embedding.options()); };
    std::vector<Tensor> t{in.values,   placeholder(in.proj_keys), in.mask,          placeholder(in.final_ctx),
                          in.h0,       in.tokens,                 in.embedding,
                          placeholder(in.W_q), placeholder(in.w_v)};
    for (int64_t l = 0; l < L; ++l) {
        t.push_back(in.w_ih[l]);
        t.push_back(in.w_hh[l]);
        t.push_back(in.b_ih[l]);
        t.push_back(in.b_hh[l]);
    }
    return DecoderFunction::apply(at::TensorList(t), L, static_cast<int64_t>(opts.scoring), opts.scale, opts.dropout,
                                  opts.steps);
}

}  // namespace attnviz
