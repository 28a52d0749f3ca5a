// What every family shares: weights copied by name, parameters counted, d2l's loss.
#include "core/model/encoder_decoder.hpp"

#include "core/io/error.hpp"
#include "core/text/vocab.hpp"

namespace F = torch::nn::functional;

namespace attnviz {

void copy_weights(EncoderDecoder& dst, const EncoderDecoder& src) {
    torch::NoGradGuard no_grad;
    auto params = src.named_parameters();
    for (auto& item : dst.named_parameters()) item.value().copy_(params[item.key()]);
    auto buffers = src.named_buffers();
    for (auto& item : dst.named_buffers()) item.value().copy_(buffers[item.key()]);
}

int64_t count_parameters(const torch::nn::Module& module) {
    int64_t n = 0;
    for (const auto& p : module.parameters())
        // A weight converted for inference (--precision int8 / bf16) was trainable and counts as it did.
        if (p.requires_grad() || p.scalar_type() == torch::kChar || p.scalar_type() == torch::kBFloat16) n += p.numel();
    return n;
}

TokenLogits EncoderDecoder::real_token_logits(const torch::Tensor& src, const torch::Tensor& src_len,
                                              const torch::Tensor& tgt_in, const torch::Tensor& tgt_out) {
    const auto logits = forward(src, src_len, tgt_in);
    const auto rows = tgt_out.reshape(-1).ne(Vocab::pad_id).nonzero().squeeze(1);
    return {logits.reshape({-1, logits.size(-1)}).index_select(0, rows), tgt_out.reshape(-1).index_select(0, rows)};
}

void EncoderDecoder::set_head_gates(HeadGates gates) {
    const auto groups = head_groups();
    for (const auto kind : {AttentionKind::encoder_self, AttentionKind::cross, AttentionKind::decoder_self}) {
        const auto& t = gates.of(kind);
        if (!t.defined()) continue;
        const HeadGroup* group = nullptr;
        for (const auto& g : groups)
            if (g.kind == kind) group = &g;
        if (!group || t.dim() != 2 || t.size(0) != group->layers || t.size(1) != group->heads)
            throw ConfigError("head gates of " + to_string(kind) + " attention do not fit this model (it has " +
                              describe_heads(groups) + ")");
    }
    // On the weights' device once, not copied there in every layer of every step (gate_row's
    // .to() is then a no-op); a gate that needs its gradient stays the leaf it was made as.
    const auto params = parameters();
    if (!params.empty())
        for (const auto kind : {AttentionKind::encoder_self, AttentionKind::cross, AttentionKind::decoder_self}) {
            auto& t = gates.of(kind);
            if (t.defined() && t.device() != params.front().device() && !t.requires_grad())
                t = t.to(params.front().device());
        }
    m_gates = std::move(gates);
}

torch::Tensor masked_cross_entropy(const torch::Tensor& logits, const torch::Tensor& target, int64_t pad_id) {
    // d2l's Seq2Seq.loss: cross-entropy averaged over the non-pad target tokens.
    return F::cross_entropy(logits.reshape({-1, logits.size(-1)}), target.reshape(-1),
                            F::CrossEntropyFuncOptions().ignore_index(pad_id));
}

}  // namespace attnviz
