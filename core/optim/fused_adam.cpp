// Clipping and Adam in one pass over the parameters (fused_adam.hpp).
#include "core/optim/fused_adam.hpp"

#include <cmath>

namespace attnviz {

namespace {

using torch::Tensor;
using torch::optim::AdamOptions;
using torch::optim::AdamParamState;

// Adam::step's lazily created state, created the same way.
AdamParamState& state_of(torch::optim::Adam& adam, const Tensor& p, bool amsgrad) {
    auto& states = adam.state();
    auto it = states.find(p.unsafeGetTensorImpl());
    if (it == states.end()) {
        auto s = std::make_unique<AdamParamState>();
        s->step(0);
        s->exp_avg(torch::zeros_like(p, at::MemoryFormat::Preserve));
        s->exp_avg_sq(torch::zeros_like(p, at::MemoryFormat::Preserve));
        if (amsgrad) s->max_exp_avg_sq(torch::zeros_like(p, at::MemoryFormat::Preserve));
        it = states.emplace(p.unsafeGetTensorImpl(), std::move(s)).first;
    }
    return static_cast<AdamParamState&>(*it->second);
}

// What at::_fused_adam_ takes: contiguous tensors of one floating type on one device.
bool fusable(const Tensor& p, const AdamParamState& s, bool amsgrad) {
    auto same = [&](const Tensor& t) {
        return t.defined() && t.is_contiguous() && t.scalar_type() == p.scalar_type() && t.device() == p.device();
    };
    return at::isFloatingType(p.scalar_type()) && p.is_contiguous() && same(p.grad()) && same(s.exp_avg()) &&
           same(s.exp_avg_sq()) && (!amsgrad || same(s.max_exp_avg_sq()));
}

// Adam::step's ATen ops for one parameter whose state was advanced already;
// the gradient divided by scale first when it is defined (as the fused kernel does).
void adam_step_aten(const Tensor& p, AdamParamState& s, const AdamOptions& o, const Tensor& scale) {
    Tensor grad = p.grad();
    if (scale.defined()) grad.div_(scale.to(grad.device(), grad.scalar_type()));
    const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
    const double bias_correction1 = 1 - std::pow(beta1, s.step());
    const double bias_correction2 = 1 - std::pow(beta2, s.step());
    if (o.weight_decay() != 0) grad = grad.add(p, o.weight_decay());
    s.exp_avg().mul_(beta1).add_(grad, 1 - beta1);
    s.exp_avg_sq().mul_(beta2).addcmul_(grad, grad, 1 - beta2);
    Tensor second = s.exp_avg_sq();
    if (o.amsgrad()) {
        at::max_out(s.max_exp_avg_sq(), s.exp_avg_sq(), s.max_exp_avg_sq());
        second = s.max_exp_avg_sq();
    }
    Tensor denom = (second.sqrt() / std::sqrt(bias_correction2)).add_(o.eps());
    p.addcdiv_(s.exp_avg(), denom, -o.lr() / bias_correction1);
}

}  // namespace

double clip_and_adam_step(torch::optim::Adam& adam, const ClipAdamOptions& options) {
    torch::NoGradGuard no_grad;
    std::vector<Tensor> grads;
    for (auto& group : adam.param_groups())
        for (const auto& p : group.params())
            if (p.grad().defined()) grads.push_back(p.grad());
    if (grads.empty()) return 0.0;

    // The global norm as clip_grad_norm_ forms it: each gradient's norm, then
    // the norm of those. One read of every gradient, one sync for the value.
    bool one_device = true;
    for (const auto& g : grads) one_device = one_device && g.device() == grads[0].device();
    std::vector<Tensor> norms;
    norms.reserve(grads.size());
    for (const auto& g : grads) norms.push_back(at::linalg_vector_norm(g, 2).to(grads[0].device()));
    const Tensor total = norms.size() == 1 ? norms[0] : at::stack(norms).norm(2);
    const double norm = total.item<double>();
    if (!std::isfinite(norm)) return norm;

    // clip_grad_norm_'s factor min(1, max_norm / (norm + 1e-6)), in the
    // gradients' type, only when it clips. Float gradients: the fused kernel
    // divides them by a float scale on its way, so it gets the reciprocal.
    // Others (double) are multiplied first, exactly as clip_grad_norm_ does:
    // a float reciprocal would cost them precision.
    Tensor scale;
    if (std::isfinite(options.max_norm)) {
        const Tensor coef = (options.max_norm / (total + 1e-6)).clamp_max(1.0);
        if (coef.item<double>() < 1.0) {
            bool all_float = true;
            for (const auto& g : grads) all_float = all_float && g.scalar_type() == torch::kFloat;
            if (all_float && one_device)
                scale = coef.reciprocal();
            else
                for (auto& g : grads) g.mul_(coef.to(g.device()));
        }
    }

    for (auto& group : adam.param_groups()) {
        const auto& o = static_cast<const AdamOptions&>(group.options());
        std::vector<Tensor> ps, gs, ms, vs, maxs, steps;
        for (const auto& p : group.params()) {
            if (!p.grad().defined()) continue;
            AdamParamState& s = state_of(adam, p, o.amsgrad());
            s.step(s.step() + 1);
            if (!one_device || !fusable(p, s, o.amsgrad())) {
                adam_step_aten(p, s, o, scale);
                continue;
            }
            ps.push_back(p);
            gs.push_back(p.grad());
            ms.push_back(s.exp_avg());
            vs.push_back(s.exp_avg_sq());
            if (o.amsgrad()) maxs.push_back(s.max_exp_avg_sq());
            // The kernels read the step from a tensor (CPU: any type; CUDA: float).
            steps.push_back(at::scalar_tensor(static_cast<double>(s.step()),
                                              p.options().dtype(p.is_cpu() ? torch::kDouble : torch::kFloat)));
        }
        if (ps.empty()) continue;
        std::optional<Tensor> grad_scale;
        if (scale.defined()) grad_scale = scale.to(ps[0].device());
        at::_fused_adam_(ps, gs, ms, vs, maxs, steps, o.lr(), std::get<0>(o.betas()), std::get<1>(o.betas()),
                         o.weight_decay(), o.eps(), o.amsgrad(), /*maximize=*/false, grad_scale, std::nullopt);
    }
    return norm;
}

double clip_and_step(torch::optim::Optimizer& optimizer, const std::vector<Tensor>& parameters, double max_norm) {
    if (auto* adam = dynamic_cast<torch::optim::Adam*>(&optimizer))
        return clip_and_adam_step(*adam, ClipAdamOptions{max_norm});
    const double norm = torch::nn::utils::clip_grad_norm_(parameters, max_norm);
    if (std::isfinite(norm)) optimizer.step();
    return norm;
}

}  // namespace attnviz
