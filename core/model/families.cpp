// Building a network of any family.
#include "core/model/families.hpp"

#include "core/model/pretrained_model.hpp"
#include "core/model/rnn_model.hpp"
#include "core/model/t5_model.hpp"
#include "core/model/transformer_model.hpp"

namespace attnviz {

Network build_network(const ModelConfig& config, NetworkFill fill) {
    switch (config.arch) {
    case ModelArch::transformer: return std::make_shared<TransformerImpl>(config);
    case ModelArch::pretrained:
        if (is_t5_config(config)) return std::make_shared<T5Impl>(config, fill == NetworkFill::initialised);
        return std::make_shared<PretrainedImpl>(config, fill == NetworkFill::initialised);
    case ModelArch::rnn: break;
    }
    return std::make_shared<Seq2SeqImpl>(config);
}

Network clone_network(const EncoderDecoder& network, const torch::Device& device) {
    Network copy = build_network(network.config(), NetworkFill::unfilled);
    copy_weights(*copy, network);
    copy->to(device);
    copy->eval();
    // Masked heads stay masked in the copy (a model moved to another device translates alike).
    copy->set_head_gates(copied_head_gates(network));
    return copy;
}

HeadGates copied_head_gates(const EncoderDecoder& network) {
    HeadGates gates = network.head_gates();
    for (const auto kind : {AttentionKind::encoder_self, AttentionKind::cross, AttentionKind::decoder_self})
        if (gates.of(kind).defined()) gates.of(kind) = gates.of(kind).detach().clone();
    return gates;
}

Network share_network(const EncoderDecoder& network) {
    Network shared = build_network(network.config(), NetworkFill::unfilled);
    torch::NoGradGuard no_grad;
    auto params = network.named_parameters();
    for (auto& item : shared->named_parameters()) item.value().set_data(params[item.key()]);
    auto buffers = network.named_buffers();
    for (auto& item : shared->named_buffers()) item.value().set_data(buffers[item.key()]);
    shared->eval();
    return shared;
}

}  // namespace attnviz
