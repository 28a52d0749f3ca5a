// The fused attention decoder of fused_gru.hpp: every step of the
// teacher-forced GRU decoder with attention as one autograd node. Notation as
// in fused_gru_internal.hpp, and B batch, S source steps, K value size, A
// attention size, o the current step's first packed row.
#include <limits>

#include "core/model/fused_gru.hpp"
#include "core/model/fused_gru_internal.hpp"

namespace attnviz {

namespace {

using namespace fused_internal;
using torch::autograd::variable_list;

// The node's inputs before the per-layer weights (LayerWeights).
enum Input : size_t { i_values, i_keys, i_mask, i_final_ctx, i_h0, i_tokens, i_embedding, i_wq, i_wv, i_layers };

// Saved for backward besides each layer's LayerBuffers, packed [N, ...].
struct AttentionBuffers {
    Tensor context;       ///< [N, K] the context fed to layer 0
    Tensor weights;       ///< [N, S] attention weights; undefined for none
    Tensor weights_mask;  ///< [N, S] dropout mask on them; undefined without dropout
    Tensor features;      ///< [N, S, A] additive attention's tanh features; undefined otherwise
    Tensor embedded;      ///< [N, E] looked-up inputs; undefined when folded into layer 0's product
    template <typename Self, typename F>
    static void each(Self& b, F&& f) {
        f("context", b.context);
        f("weights", b.weights);
        f("weights_mask", b.weights_mask);
        f("features", b.features);
        f("embedded", b.embedded);
    }
};

void save_options(AutogradContext* ctx, const FusedDecoderOptions& o) {
    ctx->saved_data["scoring"] = static_cast<int64_t>(o.scoring);
    ctx->saved_data["scale"] = o.scale;
    ctx->saved_data["dropout"] = o.dropout;
    ctx->saved_data["steps"] = o.steps;
    ctx->saved_data["gate_arithmetic"] = static_cast<int64_t>(o.gates);
}

FusedDecoderOptions load_options(AutogradContext* ctx) {
    FusedDecoderOptions o;
    o.scoring = static_cast<FusedScoring>(ctx->saved_data.at("scoring").toInt());
    o.scale = ctx->saved_data.at("scale").toDouble();
    o.dropout = ctx->saved_data.at("dropout").toDouble();
    o.steps = ctx->saved_data.at("steps").toIntVector();
    o.gates = static_cast<GateArithmetic>(ctx->saved_data.at("gate_arithmetic").toInt());
    return o;
}

struct DecoderFunction : public torch::autograd::Function<DecoderFunction> {
    // t: the Input slots, then LayerWeights; returns the top layer's outputs [N, H].
    static Tensor forward(AutogradContext* ctx, at::TensorList t, const FusedDecoderOptions& opts) {
        const LayerWeights w(t, i_layers);
        const Tensor& V = t[i_values];
        const Tensor& PK = t[i_keys];
        const Tensor& mask = t[i_mask];
        const Tensor& h0 = t[i_h0];
        const Tensor& tokens = t[i_tokens];
        const Tensor& embedding = t[i_embedding];
        const auto& steps = opts.steps;
        const int64_t L = w.layers(), T = static_cast<int64_t>(steps.size());
        const int64_t N = tokens.size(0), H = h0.size(2), K = V.size(2), S = V.size(1);
        const auto opt = embedding.options();
        const bool drop = opts.dropout > 0;
        const double keep = 1.0 - opts.dropout;

        AttentionBuffers ab;
        LayerBuffers lb(L);
        auto &X = lb.input, &HP = lb.h_prev, &G = lb.gates, &GH = lb.gh, &M = lb.drop_mask;
        ab.context = at::empty({N, K}, opt);
        for (int64_t l = 0; l < L; ++l) {
            if (l > 0) X[l] = at::empty({N, H}, opt);  // layer 0's input is context and embedding
            HP[l] = at::empty({N, H}, opt);
            G[l] = at::empty({N, 3 * H}, opt);
            GH[l] = at::empty({N, 3 * H}, opt);
            if (drop && l + 1 < L)
                M[l] = dropout_mask(opts.dropout_stream, opts.dropout_keys, 200 + static_cast<uint64_t>(l), N, H, keep, opt);
        }
        if (opts.scoring != FusedScoring::none) {
            ab.weights = at::empty({N, S}, opt);
            if (drop) ab.weights_mask = dropout_mask(opts.dropout_stream, opts.dropout_keys, 300, N, S, keep, opt);
            if (opts.scoring == FusedScoring::additive) ab.features = at::empty({N, S, PK.size(2)}, opt);
        }
        Tensor out = at::empty({N, H}, opt);
        Tensor not_mask = mask.logical_not();

        // Layer 0's input is [context; embedding]: the embedding half of its
        // product is one matrix product for all steps, bias included.
        const Tensor w_ctx = w.w_ih(0).narrow(1, 0, K), w_emb = w.w_ih(0).narrow(1, K, embedding.size(1));
        Tensor GE = embedded_input_gates(embedding, tokens, w_emb, w.b_ih(0), &ab.embedded);

        std::vector<Tensor> h(L);
        for (int64_t l = 0; l < L; ++l) h[l] = h0[l];
        int64_t o = 0;
        for (int64_t s = 0; s < T; ++s) {
            const int64_t n = steps[s];
            auto ctx_s = ab.context.narrow(0, o, n);
            if (opts.scoring == FusedScoring::none) {
                ctx_s.copy_(t[i_final_ctx].narrow(0, 0, n));
            } else {
                const auto q = h[L - 1].narrow(0, 0, n);  // the query: top layer's previous state
                Tensor sc;
                if (opts.scoring == FusedScoring::additive) {
                    auto f = ab.features.narrow(0, o, n);
                    at::add_out(f, PK.narrow(0, 0, n), at::mm(q, t[i_wq].t()).unsqueeze(1));
                    f.tanh_();
                    sc = at::matmul(f, t[i_wv][0]);  // [n, S]
                } else {
                    sc = at::bmm(PK.narrow(0, 0, n), q.unsqueeze(2)).squeeze(2);
                    if (opts.scale != 1.0) sc.mul_(opts.scale);
                }
                sc.masked_fill_(not_mask.narrow(0, 0, n), -std::numeric_limits<double>::infinity());
                auto a = ab.weights.narrow(0, o, n);
                at::_softmax_out(a, sc, -1, false);
                auto read = drop ? a * ab.weights_mask.narrow(0, o, n) : a;
                Tensor ctx_out = ctx_s.unsqueeze(1);
                at::bmm_out(ctx_out, read.unsqueeze(1), V.narrow(0, 0, n));
            }
            for (int64_t l = 0; l < L; ++l) {
                auto hp = HP[l].narrow(0, o, n);
                hp.copy_(h[l].narrow(0, 0, n));
                auto gh = GH[l].narrow(0, o, n);
                at::addmm_out(gh, w.b_hh(l), hp, w.w_hh(l).t());
                Tensor gi = l == 0 ? at::addmm(GE.narrow(0, o, n), ctx_s, w_ctx.t())
                                   : at::addmm(w.b_ih(l), X[l].narrow(0, o, n), w.w_ih(l).t());
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
        save_buffers(ctx, ab);
        save_buffers(ctx, lb);
        save_options(ctx, opts);
        ctx->save_for_backward(t.vec());
        return out;
    }

    static variable_list backward(AutogradContext* ctx, variable_list grads) {
        const auto t = ctx->get_saved_variables();
        const LayerWeights w(t, i_layers);
        const auto opts = load_options(ctx);
        const auto ab = load_buffers<AttentionBuffers>(ctx);
        const auto lb = load_buffers<LayerBuffers>(ctx);
        const auto &X = lb.input, &HP = lb.h_prev, &G = lb.gates, &GH = lb.gh, &M = lb.drop_mask;
        const auto& steps = opts.steps;
        const auto scoring = opts.scoring;
        const bool drop = opts.dropout > 0;

        const Tensor& V = t[i_values];
        const Tensor& PK = t[i_keys];
        const Tensor& tokens = t[i_tokens];
        const Tensor& embedding = t[i_embedding];
        Tensor d_out = grads[0].contiguous();
        const int64_t L = w.layers(), T = static_cast<int64_t>(steps.size());
        const int64_t N = tokens.size(0), B = t[i_h0].size(1), H = t[i_h0].size(2), K = V.size(2);
        const auto opt = embedding.options();
        const Tensor w_ctx = w.w_ih(0).narrow(1, 0, K), w_emb = w.w_ih(0).narrow(1, K, embedding.size(1));

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
        if (scoring == FusedScoring::none) {
            d_final_ctx = at::zeros_like(t[i_final_ctx]);
        } else {
            d_values = at::zeros_like(V);
            d_keys = at::zeros_like(PK);
            if (scoring == FusedScoring::additive) {
                DSC = at::empty({N, V.size(1)}, opt);    // score gradients
                DQP = at::empty({N, PK.size(2)}, opt);   // gradients of the projected queries
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
                    at::addcmul_out(dh_s, carry[l].narrow(0, 0, n), dx, M[l].narrow(0, o, n));
                else
                    at::add_out(dh_s, carry[l].narrow(0, 0, n), dx);
                auto dgi = DGI[l].narrow(0, o, n), dgh = DGH[l].narrow(0, o, n);
                auto dhz_s = dhz.narrow(0, 0, n);
                gru_gates_backward(dh_s, G[l].narrow(0, o, n), GH[l].narrow(0, o, n), HP[l].narrow(0, o, n), dgi,
                                   dgh, dhz_s, opts.gates);
                Tensor carry_s = carry[l].narrow(0, 0, n);
                at::addmm_out(carry_s, dhz_s, dgh, w.w_hh(l));
                dx = l > 0 ? at::mm(dgi, w.w_ih(l)) : at::mm(dgi, w_ctx);
            }
            // dx is now the gradient of this step's context.
            if (scoring == FusedScoring::none) {
                d_final_ctx.narrow(0, 0, n).add_(dx);
                continue;
            }
            const auto a = ab.weights.narrow(0, o, n);
            Tensor d_read = at::bmm(V.narrow(0, 0, n), dx.unsqueeze(2)).squeeze(2);  // [n, S]
            Tensor read = drop ? a * ab.weights_mask.narrow(0, o, n) : a;
            d_values.narrow(0, 0, n).baddbmm_(read.unsqueeze(2), dx.unsqueeze(1));
            if (drop) d_read.mul_(ab.weights_mask.narrow(0, o, n));
            Tensor d_sc = at::_softmax_backward_data(d_read, a, -1, a.scalar_type());
            const auto q = HP[L - 1].narrow(0, o, n);  // the query: top layer's previous state
            if (scoring == FusedScoring::additive) {
                DSC.narrow(0, o, n).copy_(d_sc);
                Tensor d_pre = at::tanh_backward(d_sc.unsqueeze(2) * t[i_wv][0], ab.features.narrow(0, o, n));
                d_keys.narrow(0, 0, n).add_(d_pre);  // [n, S, A]
                auto dqp = DQP.narrow(0, o, n);
                at::sum_out(dqp, d_pre, {1});
                carry[L - 1].narrow(0, 0, n).addmm_(dqp, t[i_wq]);
            } else {
                if (opts.scale != 1.0) d_sc.mul_(opts.scale);
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
        std::tie(g[i_embedding], dw_emb) =
            embedded_input_gates_backward(embedding, tokens, w_emb, ab.embedded, DGI[0]);
        if (scoring == FusedScoring::additive) {
            g[i_wq] = at::mm(DQP.t(), HP[L - 1]);
            g[i_wv] = at::mm(DSC.view({1, -1}), ab.features.view({-1, ab.features.size(2)}));
        }
        for (int64_t l = 0; l < L; ++l) {
            g[w.index(l, WeightSlot::w_ih)] =
                l == 0 ? at::cat({at::mm(DGI[0].t(), ab.context), dw_emb}, 1) : at::mm(DGI[l].t(), X[l]);
            g[w.index(l, WeightSlot::w_hh)] = at::mm(DGH[l].t(), HP[l]);
            g[w.index(l, WeightSlot::b_ih)] = DGI[l].sum(0);
            g[w.index(l, WeightSlot::b_hh)] = DGH[l].sum(0);
        }
        g.emplace_back();  // forward()'s options
        return g;
    }
};

}  // namespace

Tensor fused_gru_decoder(const FusedDecoderInputs& in, const FusedDecoderOptions& opts) {
    auto placeholder = [&](const Tensor& x) { return x.defined() ? x : at::empty({0}, in.embedding.options()); };
    std::vector<Tensor> t(i_layers);
    t[i_values] = in.values;
    t[i_keys] = placeholder(in.proj_keys);
    t[i_mask] = in.mask;
    t[i_final_ctx] = placeholder(in.final_ctx);
    t[i_h0] = in.h0;
    t[i_tokens] = in.tokens;
    t[i_embedding] = in.embedding;
    t[i_wq] = placeholder(in.W_q);
    t[i_wv] = placeholder(in.w_v);
    append_layer_weights(t, "fused_gru_decoder", in.w_ih, in.w_hh, in.b_ih, in.b_hh, opts.steps, in.h0.size(1),
                         in.tokens);
    return DecoderFunction::apply(at::TensorList(t), opts);
}

}  // namespace attnviz
