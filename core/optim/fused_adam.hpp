#pragma once
// Gradient-norm clipping and LibTorch's Adam step in one go.
//
// Why: torch::nn::utils::clip_grad_norm_ reads every gradient for the norm and
// writes every gradient again to scale it; torch::optim::Adam::step then runs
// about eight ATen ops a parameter (mul_, add_, mul_, addcmul_, sqrt, div,
// add_, addcdiv_), each a pass over the parameter with its own temporaries.
// Here the norm is one reduction over the gradients, and the step is ATen's
// fused Adam kernel (at::_fused_adam_: one vectorised, threaded pass a
// parameter that reads the gradient, the moments and the weight once), which
// also applies the clipping factor (as a gradient scale) on the way.
//
// The state stays LibTorch's own: the optimiser is a torch::optim::Adam, its
// per-parameter AdamParamState (step, exp_avg, exp_avg_sq, max_exp_avg_sq)
// is created and advanced exactly as Adam::step does, so saving, loading and
// continuing with Adam::step all see the same thing.
#include <limits>
#include <vector>

#include <torch/torch.h>

namespace attnviz {

/// What clip_and_adam_step does besides the step.
struct ClipAdamOptions {
    double max_norm = std::numeric_limits<double>::infinity();  ///< clip the gradients' global 2-norm to this
                                                                ///< (clip_grad_norm_'s rule); infinity: no clipping
};

/// Same effect as clip_grad_norm_(parameters, max_norm) followed by
/// adam.step() (up to rounding: on float gradients the clipping factor is
/// applied as a division by its reciprocal inside the fused pass; other types
/// are scaled first as clip_grad_norm_ does), over the parameters of
/// adam's groups that have a gradient. Returns the gradients' global 2-norm
/// before clipping, as clip_grad_norm_ does. When that norm is not finite,
/// nothing changes (no step, gradients untouched) and the norm is returned for
/// the caller to report. Runs on any device: at::_fused_adam_ exists for the
/// CPU and CUDA; parameters it cannot take (non-contiguous ones) get
/// Adam::step's ATen ops instead.
double clip_and_adam_step(torch::optim::Adam& adam, const ClipAdamOptions& options);

/// The training step after backward: clip_grad_norm_(parameters, max_norm)
/// then optimizer.step(), except that a torch::optim::Adam goes through
/// clip_and_adam_step (over its own groups' parameters, which the caller
/// passes as parameters too). Other optimisers take exactly the two calls.
/// Returns the norm before clipping; when it is not finite no step is taken
/// and the weights stay as they were.
double clip_and_step(torch::optim::Optimizer& optimizer, const std::vector<torch::Tensor>& parameters,
                     double max_norm);

}  // namespace attnviz
