#pragma once
// What the two fused GRU nodes (fused_decoder.cpp, fused_encoder.cpp) share:
// the gate arithmetic and its backward, layer 0's embedded input product,
// where the per-layer weights stand in a node's input list, and the buffers
// saved for backward, by name. Internal to core; the API is fused_gru.hpp.
//
// Notation: N packed rows (all steps), n rows at the current step, H hidden
// size, E embedding size, L layers. GRU (PyTorch's layout, gates r, z, n):
//   r = sigma(Wir x + bir + Whr h + bhr), z = sigma(Wiz x + biz + Whz h + bhz)
//   n = tanh(Win x + bin + r * (Whn h + bhn)),  h' = n + z * (h - n)
#include <cstdint>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "core/model/fused_gru.hpp"

namespace attnviz::fused_internal {

using torch::Tensor;
using torch::autograd::AutogradContext;

// --- GRU arithmetic -----------------------------------------------------------

/// Layer 0's input half for packed tokens [N]: emb(token) [E] x w^T [E, 3H] + b
/// -> [N, 3H]. With fewer vocabulary entries than packed rows the vocabulary is
/// projected once and rows are looked up (the embedding folded into the
/// product); otherwise embeddings are looked up and projected, and *emb
/// receives them [N, E] (undefined when folded).
Tensor embedded_input_gates(const Tensor& embedding, const Tensor& tokens, const Tensor& w, const Tensor& b,
                            Tensor* emb);

/// Backward of embedded_input_gates for gate gradients dg [N, 3H]: the
/// gradients of the embedding table [V, E] and of w [3H, E].
std::pair<Tensor, Tensor> embedded_input_gates_backward(const Tensor& embedding, const Tensor& tokens, const Tensor& w,
                                                        const Tensor& emb, const Tensor& dg);

/// The gate arithmetic after the two matrix products: gi, gh [n, 3H] (input
/// and recurrent pre-activations), h_prev [n, H]; writes r | z | n to g
/// [n, 3H] and h' to h_new [n, H].
void gru_gates_forward(const Tensor& gi, const Tensor& gh, const Tensor& h_prev, const Tensor& g,
                       const Tensor& h_new);

/// Its backward for dh [n, H], the gradient of h': writes the pre-activation
/// gradients dgi [n, 3H] (input side) and dgh [n, 3H] (recurrent side, whose n
/// part is scaled by r), and dh * z (the direct path to h) to dhz [n, H].
void gru_gates_backward(const Tensor& dh, const Tensor& g, const Tensor& gh, const Tensor& h_prev,
                        const Tensor& dgi, const Tensor& dgh, const Tensor& dhz, GateArithmetic how);

// --- a node's inputs ----------------------------------------------------------

/// Each layer's GRU weights in a node's flat input list: after the node's own
/// inputs (layer 0's first at `first`), one slot of each a layer.
enum class WeightSlot : size_t { w_ih, w_hh, b_ih, b_hh, count };
constexpr size_t weight_index(size_t first, int64_t layer, WeightSlot s) {
    return first + static_cast<size_t>(layer) * size_t(WeightSlot::count) + size_t(s);
}

/// Reads (and indexes the gradients of) the per-layer weights of a flat list.
class LayerWeights {
public:
    LayerWeights(at::TensorList t, size_t first) : m_t(t), m_first(first) {}
    int64_t layers() const { return static_cast<int64_t>((m_t.size() - m_first) / size_t(WeightSlot::count)); }
    size_t index(int64_t layer, WeightSlot s) const { return weight_index(m_first, layer, s); }
    const Tensor& w_ih(int64_t l) const { return m_t[index(l, WeightSlot::w_ih)]; }  ///< [3H, in]
    const Tensor& w_hh(int64_t l) const { return m_t[index(l, WeightSlot::w_hh)]; }  ///< [3H, H]
    const Tensor& b_ih(int64_t l) const { return m_t[index(l, WeightSlot::b_ih)]; }  ///< [3H]
    const Tensor& b_hh(int64_t l) const { return m_t[index(l, WeightSlot::b_hh)]; }  ///< [3H]

private:
    at::TensorList m_t;
    size_t m_first;
};

/// Checks one set of weights per layer and the step sizes (non-increasing,
/// >= 1, first <= batch, summing to packed's rows), then appends the weights to
/// t in LayerWeights' layout. what: the caller's name for messages.
void append_layer_weights(std::vector<Tensor>& t, const char* what, const std::vector<Tensor>& w_ih,
                          const std::vector<Tensor>& w_hh, const std::vector<Tensor>& b_ih,
                          const std::vector<Tensor>& b_hh, const std::vector<int64_t>& steps, int64_t batch,
                          const Tensor& packed);

// --- buffers saved for backward -----------------------------------------------

/// What each GRU layer keeps for backward, packed [N, ...], one tensor a layer.
struct LayerBuffers {
    std::vector<Tensor> input;      ///< [N, in] the layer's input; undefined where backward does not need it
    std::vector<Tensor> h_prev;     ///< [N, H] state before each step
    std::vector<Tensor> gates;      ///< [N, 3H] r | z | n after their nonlinearities
    std::vector<Tensor> gh;         ///< [N, 3H] recurrent pre-activations (n's is needed backwards)
    std::vector<Tensor> drop_mask;  ///< [N, H] dropout mask on the output to the next layer; undefined: none

    LayerBuffers() = default;
    explicit LayerBuffers(int64_t L) : input(L), h_prev(L), gates(L), gh(L), drop_mask(L) {}
    /// Every field with its name, for save_buffers / load_buffers.
    template <typename Self, typename F>
    static void each(Self& b, F&& f) {
        f("input", b.input);
        f("h_prev", b.h_prev);
        f("gates", b.gates);
        f("gh", b.gh);
        f("drop_mask", b.drop_mask);
    }
};

// Undefined tensors would not survive an IValue list: they travel as empty
// ones (no real buffer is empty: every node has N >= 1 rows).
inline Tensor storable(const Tensor& x) { return x.defined() ? x : at::empty({0}); }
inline std::vector<Tensor> storable(const std::vector<Tensor>& xs) {
    std::vector<Tensor> out;
    for (const auto& x : xs) out.push_back(storable(x));
    return out;
}
inline void restore(const at::IValue& v, Tensor& x) {
    x = v.toTensor();
    if (x.numel() == 0) x = Tensor();
}
inline void restore(const at::IValue& v, std::vector<Tensor>& xs) {
    xs = v.toTensorVector();
    for (auto& x : xs)
        if (x.numel() == 0) x = Tensor();
}

/// Saves a buffer struct (fields listed by its each()) in ctx, every field
/// under its own name; load_buffers reads it back in backward.
template <typename Buffers>
void save_buffers(AutogradContext* ctx, const Buffers& b) {
    Buffers::each(b, [&](const char* name, const auto& field) { ctx->saved_data[name] = storable(field); });
}
template <typename Buffers>
Buffers load_buffers(AutogradContext* ctx) {
    Buffers b;
    Buffers::each(b, [&](const char* name, auto& field) { restore(ctx->saved_data.at(name), field); });
    return b;
}

/// A forward pass's dropout mask [n, units] (1/keep kept, 0 dropped): hashed
/// from `stream` where the node was given one and keys (hashed_dropout_mask),
/// else drawn from ATen's generator.
Tensor dropout_mask(const DropoutStream* stream, const std::vector<uint64_t>& keys, uint64_t which, int64_t n,
                    int64_t units, double keep,
                    const torch::TensorOptions& options);

}  // namespace attnviz::fused_internal
