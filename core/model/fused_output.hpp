#pragma once
// The output layer and d2l's masked cross-entropy as one autograd node over
// the real target tokens only.
//
// Why: the model's forward returns logits [B, T, V] for every position, pads
// included, and cross_entropy then takes a log-softmax of all of them; its
// backward builds a one-hot gradient [B*T, V], a log-softmax gradient [B*T, V]
// and picks the real rows back out. Here the rows are the packed real tokens
// [N, H] (N <= B*T), the log-softmax is taken once, and the backward turns the
// saved log-probabilities into the logit gradient in place (softmax minus one
// at the target, times the loss's scale): two passes over [N, V] instead of
// about seven over [B*T, V].
#include <cstdint>

#include <torch/torch.h>

namespace attnviz {

/// loss = mean over rows i with targets[i] != ignore_index of
/// -log_softmax(x W^T + b)_i[targets[i]]: the value F::cross_entropy(x W^T + b,
/// targets, ignore_index) gives (NaN when every row is ignored, as it does).
/// x [N, H], weight [V, H], bias [V], targets [N] long (on x's device).
/// Differentiable with respect to x, weight and bias; backward may run once.
/// Any device and floating type ATen supports.
torch::Tensor fused_output_cross_entropy(const torch::Tensor& x, const torch::Tensor& weight,
                                         const torch::Tensor& bias, const torch::Tensor& targets,
                                         int64_t ignore_index);

}  // namespace attnviz
