// Seq2SeqImpl::loss: the training loss, fused with the output layer where the
// decoder runs fused (core/model/fused_output.hpp).
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

}  // namespace attnviz
