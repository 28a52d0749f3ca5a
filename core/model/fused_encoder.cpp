// The fused encoder of fused_gru.hpp: a multi-layer unidirectional GRU over
// packed rows as one autograd node, layer by layer (each layer's input
// product is one matrix product for all steps). Notation as in
// fused_gru_internal.hpp, and B batch (rows at step 0), o a step's first
// packed row.
#include "core/model/fused_gru.hpp"
#include "core/model/fused_gru_internal.hpp"

namespace attnviz {

namespace {

using namespace fused_internal;
using torch::autograd::variable_list;

// The node's inputs before the per-layer weights (LayerWeights).
enum Input : size_t { i_tokens, i_embedding, i_layers };

// First packed row of each step; offsets[T] = N.
std::vector<int64_t> step_offsets(const std::vector<int64_t>& steps) {
    std::vector<int64_t> offset(steps.size() + 1, 0);
    for (size_t s = 0; s < steps.size(); ++s) offset[s + 1] = offset[s] + steps[s];
    return offset;
}

struct EncoderFunction : public torch::autograd::Function<EncoderFunction> {
    // t: the Input slots, then LayerWeights; returns {outputs [N, H], h_n [L, B, H]}.
    static variable_list forward(AutogradContext* ctx, at::TensorList t, const FusedEncoderOptions& opts) {
        const LayerWeights w(t, i_layers);
        const Tensor& tokens = t[i_tokens];
        const Tensor& embedding = t[i_embedding];
        const auto& steps = opts.steps;
        const int64_t L = w.layers(), T = static_cast<int64_t>(steps.size()), N = tokens.size(0), B = steps[0];
        const int64_t H = w.w_hh(0).size(1);
        const auto opt = embedding.options();
        const bool drop = opts.dropout > 0;
        const double keep = 1.0 - opts.dropout;
        // Packed row holding each (sorted) row's last state.
        const std::vector<int64_t> offset = step_offsets(steps);
        std::vector<int64_t> last(B);
        for (int64_t s = 0; s < T; ++s)
            for (int64_t i = (s + 1 < T ? steps[s + 1] : 0); i < steps[s]; ++i) last[i] = offset[s] + i;
        const Tensor last_idx = torch::tensor(last, torch::kLong).to(tokens.device());

        LayerBuffers lb(L);
        auto &X = lb.input, &HP = lb.h_prev, &G = lb.gates, &GH = lb.gh, &M = lb.drop_mask;
        std::vector<Tensor> OUT(L), h_n(L);
        for (int64_t l = 0; l < L; ++l) {
            if (l == 0) {
                // set below with the input gates (undefined when the embedding is folded)
            } else if (drop) {
                M[l - 1] = dropout_mask(opts.dropout_stream, opts.dropout_keys, 100 + static_cast<uint64_t>(l), N, H,
                                        keep, opt);
                X[l] = OUT[l - 1] * M[l - 1];
            } else {
                X[l] = OUT[l - 1];
            }
            HP[l] = at::empty({N, H}, opt);
            G[l] = at::empty({N, 3 * H}, opt);
            GH[l] = at::empty({N, 3 * H}, opt);
            OUT[l] = at::empty({N, H}, opt);
            // The input half of every step at once.
            const Tensor GI = l == 0 ? embedded_input_gates(embedding, tokens, w.w_ih(0), w.b_ih(0), &X[0])
                                     : at::addmm(w.b_ih(l), X[l], w.w_ih(l).t());
            Tensor h = at::zeros({B, H}, opt);
            for (int64_t s = 0; s < T; ++s) {
                const int64_t n = steps[s], o = offset[s];
                auto hp = HP[l].narrow(0, o, n);
                hp.copy_(h.narrow(0, 0, n));
                auto gh = GH[l].narrow(0, o, n);
                at::addmm_out(gh, w.b_hh(l), hp, w.w_hh(l).t());
                gru_gates_forward(GI.narrow(0, o, n), gh, hp, G[l].narrow(0, o, n), OUT[l].narrow(0, o, n));
                h = OUT[l].narrow(0, o, n);
            }
            h_n[l] = OUT[l].index_select(0, last_idx);
        }
        save_buffers(ctx, lb);
        ctx->saved_data["steps"] = steps;
        ctx->saved_data["gate_arithmetic"] = static_cast<int64_t>(opts.gates);
        ctx->save_for_backward(t.vec());
        return {OUT[L - 1], at::stack(h_n)};
    }

    static variable_list backward(AutogradContext* ctx, variable_list grads) {
        const auto t = ctx->get_saved_variables();
        const LayerWeights w(t, i_layers);
        const auto lb = load_buffers<LayerBuffers>(ctx);
        const auto steps = ctx->saved_data.at("steps").toIntVector();
        const auto gates = static_cast<GateArithmetic>(ctx->saved_data.at("gate_arithmetic").toInt());
        const Tensor& tokens = t[i_tokens];
        const Tensor& embedding = t[i_embedding];
        const int64_t L = w.layers(), T = static_cast<int64_t>(steps.size()), N = tokens.size(0), B = steps[0];
        const int64_t H = w.w_hh(0).size(1);
        const auto opt = embedding.options();
        const std::vector<int64_t> offset = step_offsets(steps);

        variable_list g(t.size());
        Tensor d_out = grads[0].contiguous();  // gradient of the layer's outputs, packed
        Tensor d_hn = grads[1];
        Tensor DGI = at::empty({N, 3 * H}, opt), DGH = at::empty({N, 3 * H}, opt);
        Tensor dh = at::empty({B, H}, opt), dhz = at::empty({B, H}, opt);
        for (int64_t l = L - 1; l >= 0; --l) {
            const Tensor &X = lb.input[l], &HP = lb.h_prev[l], &G = lb.gates[l], &GH = lb.gh[l];
            // A row's final-state gradient joins at its last step; until then
            // the row is not running (walking backwards), so it just waits here.
            Tensor carry = d_hn[l].clone();
            for (int64_t s = T - 1; s >= 0; --s) {
                const int64_t n = steps[s], o = offset[s];
                auto dh_s = dh.narrow(0, 0, n), dhz_s = dhz.narrow(0, 0, n);
                at::add_out(dh_s, carry.narrow(0, 0, n), d_out.narrow(0, o, n));
                auto dgi = DGI.narrow(0, o, n), dgh = DGH.narrow(0, o, n);
                gru_gates_backward(dh_s, G.narrow(0, o, n), GH.narrow(0, o, n), HP.narrow(0, o, n), dgi, dgh, dhz_s,
                                   gates);
                Tensor carry_s = carry.narrow(0, 0, n);
                at::addmm_out(carry_s, dhz_s, dgh, w.w_hh(l));
            }
            g[w.index(l, WeightSlot::w_hh)] = at::mm(DGH.t(), HP);
            g[w.index(l, WeightSlot::b_ih)] = DGI.sum(0);
            g[w.index(l, WeightSlot::b_hh)] = DGH.sum(0);
            if (l > 0) {
                g[w.index(l, WeightSlot::w_ih)] = at::mm(DGI.t(), X);
                Tensor d_x = at::mm(DGI, w.w_ih(l));
                const Tensor& M = lb.drop_mask[l - 1];  // on the output of the layer below
                d_out = M.defined() ? d_x.mul_(M) : d_x;
            } else {
                std::tie(g[i_embedding], g[w.index(0, WeightSlot::w_ih)]) =
                    embedded_input_gates_backward(embedding, tokens, w.w_ih(0), X, DGI);
            }
        }
        g.emplace_back();  // forward()'s options
        return g;
    }
};

}  // namespace

FusedEncoderOutputs fused_gru_encoder(const FusedEncoderInputs& in, const FusedEncoderOptions& opts) {
    std::vector<Tensor> t(i_layers);
    t[i_tokens] = in.tokens;
    t[i_embedding] = in.embedding;
    append_layer_weights(t, "fused_gru_encoder", in.w_ih, in.w_hh, in.b_ih, in.b_hh, opts.steps,
                         opts.steps.empty() ? 0 : opts.steps[0], in.tokens);
    auto out = EncoderFunction::apply(at::TensorList(t), opts);
    return {out[0], out[1]};
}

}  // namespace attnviz
