// Seq2SeqImpl::loss: the training loss, fused with the output layer where the
// decoder runs fused (core/model/fused_output.hpp).
#include <algorithm>

#include "core/model/fused_output.hpp"
#include "core/model/rnn_model.hpp"
#include "core/text/text.hpp"
#include "core/text/vocab.hpp"

namespace attnviz {

torch::Tensor Seq2SeqImpl::loss(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                                const torch::Tensor& tgt_out, const LossOptions& options) {
    if (!takes_fused_path(options.teacher_forcing))
        return masked_cross_entropy(forward(src, src_len, tgt_in, options.teacher_forcing), tgt_out, Vocab::pad_id);
    LengthPacking packing;
    const torch::Tensor top = decode_fused(src, src_len, tgt_in, packing, options.dropout);  // [N, H], real tokens only
    const auto rows = torch::tensor(packing.caller_index, torch::kLong).to(tgt_out.device());
    const torch::Tensor targets = tgt_out.reshape(-1).index_select(0, rows);
    return fused_output_cross_entropy(top, dense->weight, dense->bias, targets, Vocab::pad_id);
}

bool Seq2SeqImpl::trains_fused(double teacher_forcing) const {
    return takes_fused_path(teacher_forcing) && encodes_fused();
}

int64_t Seq2SeqImpl::attention_bytes_per_cell(bool training) const {
    const ModelConfig& c = m_config;
    // Float32 throughout. A: additive attention's feature width (the others score without one).
    const int64_t A = c.scoring == Scoring::additive ? (c.attention_size > 0 ? c.attention_size : c.hidden_size) : 0;
    const int64_t K = c.hidden_size * (c.bidirectional ? 2 : 1);
    // Training, per target token and source position: the features and their gradient,
    // scores, weights, a dropout mask and their gradients.
    if (training) return 4 * (2 * A + 6);
    // Decoding, per hypothesis and source position: its keys (projected: at most max(A, K)) and
    // values, the features, scores and weights.
    return 4 * (std::max(A, K) + K + A + 4);
}

}  // namespace attnviz
