// The output layer with its cross-entropy as one node (fused_output.hpp).
#include "core/model/fused_output.hpp"

namespace attnviz {

namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct OutputCrossEntropy : public torch::autograd::Function<OutputCrossEntropy> {
    static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& weight, const Tensor& bias,
                          const Tensor& targets, int64_t ignore_index) {
        // Linear's product, then cross_entropy's own two steps (log-softmax, NLL).
        Tensor log_probs = at::_log_softmax(at::addmm(bias, x, weight.t()), 1, false);
        auto [loss, total_weight] =
            at::nll_loss_forward(log_probs, targets, std::nullopt, at::Reduction::Mean, ignore_index);
        const Tensor valid = targets.ne(ignore_index);
        ctx->save_for_backward({x, weight});
        ctx->saved_data["log_probs"] = log_probs;
        ctx->saved_data["targets"] = targets;
        ctx->saved_data["count"] = total_weight.item<double>();  // rows not ignored
        ctx->saved_data["all_valid"] = valid.all().item<bool>();
        ctx->saved_data["ignore_index"] = ignore_index;
        return loss;
    }

    static variable_list backward(AutogradContext* ctx, variable_list grads) {
        const auto saved = ctx->get_saved_variables();
        const Tensor &x = saved[0], &weight = saved[1];
        const at::IValue stored = ctx->saved_data.at("log_probs");
        TORCH_CHECK(stored.isTensor() && stored.toTensor().defined(),
                    "fused_output_cross_entropy: backward can run only once (it reuses its buffer)");
        Tensor d = stored.toTensor();
        ctx->saved_data["log_probs"] = at::IValue();  // consumed below
        const Tensor targets = ctx->saved_data.at("targets").toTensor();
        const int64_t ignore_index = ctx->saved_data.at("ignore_index").toInt();
        const double count = ctx->saved_data.at("count").toDouble();
        variable_list g(5);
        if (count == 0) {  // every row ignored: the loss is NaN and no parameter had a say in it
            g[0] = at::zeros_like(x);
            g[1] = at::zeros_like(weight);
            g[2] = at::zeros({weight.size(0)}, weight.options());
            return g;
        }
        // d loss / d logits = (softmax - onehot(target)) * grad / count on
        // rows not ignored: the saved log-probabilities become it in place.
        const Tensor valid = targets.ne(ignore_index);
        d.exp_();
        const Tensor column = targets.masked_fill(valid.logical_not(), 0).unsqueeze(1);
        d.scatter_add_(1, column, valid.to(d.scalar_type()).neg().unsqueeze(1));
        if (!ctx->saved_data.at("all_valid").toBool()) d.mul_(valid.unsqueeze(1));
        // The common factor is applied to the smaller products, not to [N, V].
        const double scale = grads[0].item<double>() / count;
        g[0] = at::mm(d, weight).mul_(scale);
        g[1] = at::mm(d.t(), x).mul_(scale);
        g[2] = d.sum(0).mul_(scale);
        return g;
    }
};

}  // namespace

Tensor fused_output_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& targets,
                                  int64_t ignore_index) {
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && bias.dim() == 1 && x.size(1) == weight.size(1) &&
                    bias.size(0) == weight.size(0),
                "fused_output_cross_entropy: expected x [N, H], weight [V, H], bias [V]; got ", x.sizes(), ", ",
                weight.sizes(), ", ", bias.sizes());
    TORCH_CHECK(targets.dim() == 1 && targets.size(0) == x.size(0) && targets.scalar_type() == torch::kLong,
                "fused_output_cross_entropy: expected targets [", x.size(0), "] long, got ", targets.sizes(), " ",
                targets.scalar_type());
    return OutputCrossEntropy::apply(x, weight, bias, targets, ignore_index);
}

}  // namespace attnviz
