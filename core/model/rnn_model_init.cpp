// Seq2SeqImpl::reset_parameters: the initial weights of each scheme, by the
// role each parameter plays (embedding, recurrent layer, linear layer).
#include "core/model/rnn_model.hpp"

namespace attnviz {

namespace {

enum class Role { embedding, rnn_input, rnn_recurrent, rnn_bias, linear_weight, linear_bias };
enum class Init { keep, uniform, xavier, orthogonal_gates, zero };

// What each scheme does with each role.
Init init_for(InitScheme scheme, Role role) {
    switch (scheme) {
    case InitScheme::uniform:  // Sutskever et al.: every parameter in [-0.08, 0.08]
        return Init::uniform;
    case InitScheme::xavier:
        // d2l's init_seq2seq runs before its LazyLinear layers exist, so in
        // effect only the recurrent layers get Xavier-uniform weights; the
        // attention and output layers keep PyTorch's default.
        return role == Role::rnn_input || role == Role::rnn_recurrent ? Init::xavier : Init::keep;
    case InitScheme::orthogonal:  // Bahdanau et al.; embeddings keep N(0, 1)
        switch (role) {
        case Role::embedding: return Init::keep;
        case Role::rnn_recurrent: return Init::orthogonal_gates;
        case Role::rnn_bias:
        case Role::linear_bias: return Init::zero;
        case Role::rnn_input:
        case Role::linear_weight: return Init::xavier;
        }
    }
    return Init::keep;
}

// Initialises parameters by role. Every draw comes from the global CPU
// stream, so the caller visits them in named_parameters() order, as the
// name-matching loop this replaced did (existing seeds keep their weights);
// param() checks that order.
class Initialiser {
public:
    Initialiser(InitScheme scheme, int64_t hidden, std::vector<torch::Tensor> order)
        : m_scheme(scheme), m_hidden(hidden), m_order(std::move(order)) {}

    // One recurrent layer (one direction), PyTorch's layout and order.
    void recurrent(const torch::Tensor& w_ih, const torch::Tensor& w_hh, const torch::Tensor& b_ih,
                   const torch::Tensor& b_hh) {
        param(w_ih, Role::rnn_input);
        param(w_hh, Role::rnn_recurrent);
        param(b_ih, Role::rnn_bias);
        param(b_hh, Role::rnn_bias);
    }
    void linear(const torch::nn::Linear& layer) {
        param(layer->weight, Role::linear_weight);
        param(layer->bias, Role::linear_bias);  // undefined without a bias
    }
    void param(torch::Tensor p, Role role) {
        if (!p.defined()) return;
        TORCH_INTERNAL_ASSERT(m_next < m_order.size() && m_order[m_next].is_same(p),
                              "reset_parameters: parameters visited out of registration order");
        ++m_next;
        switch (init_for(m_scheme, role)) {
        case Init::keep: break;
        case Init::uniform: p.uniform_(-0.08, 0.08); break;
        case Init::xavier: torch::nn::init::xavier_uniform_(p); break;
        case Init::zero: p.zero_(); break;
        case Init::orthogonal_gates:  // one orthogonal [H, H] block per gate
            for (int64_t g = 0; g * m_hidden < p.size(0); ++g)
                torch::nn::init::orthogonal_(p.narrow(0, g * m_hidden, m_hidden));
            break;
        }
    }
    void done() const { TORCH_INTERNAL_ASSERT(m_next == m_order.size(), "reset_parameters: parameters left out"); }

private:
    InitScheme m_scheme;
    int64_t m_hidden;
    std::vector<torch::Tensor> m_order;
    size_t m_next = 0;
};

}  // namespace

void Seq2SeqImpl::reset_parameters() {
    torch::NoGradGuard no_grad;
    Initialiser init(m_config.init, m_config.hidden_size, named_parameters().values());
    // Registration order: this module's own parameters (the decoder RNN), then
    // the submodules in the order the constructor registered them.
    for (int64_t l = 0; l < m_config.num_layers; ++l) init.recurrent(m_w_ih[l], m_w_hh[l], m_b_ih[l], m_b_hh[l]);
    init.param(enc_embedding->weight, Role::embedding);
    init.param(dec_embedding->weight, Role::embedding);
    for (int64_t l = 0; l < m_config.num_layers; ++l) {
        for (bool reverse : {false, true}) {
            if (reverse && !m_config.bidirectional) continue;
            const auto w = encoder_layer(l, reverse);
            init.recurrent(w.w_ih, w.w_hh, w.b_ih, w.b_hh);
        }
    }
    if (bridge) init.linear(bridge);
    for (const auto& layer : attention->layers()) init.linear(layer);
    init.linear(dense);
    init.done();
}

}  // namespace attnviz
