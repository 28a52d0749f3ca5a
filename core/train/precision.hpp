#pragma once
// Mixed precision for training steps: ATen's autocast, scoped.
#include <string>

#include <torch/torch.h>

#include "core/config/config.hpp"

namespace attnviz {

/// While alive, a forward pass on `device` runs in `precision`: for bf16, ATen's
/// autocast computes matrix products in bfloat16 and the loss in float32; the
/// Transformer's residual stream stays float32 (a product's bfloat16 result added to
/// float32 is float32), so its LayerNorms and its attention softmax (scores plus the
/// float32 mask) compute in float32 too. Parameters, gradients and the optimiser stay float32.
/// The backward pass needs no guard (each node computes in its forward's types).
/// Autocast is per thread: a step split over threads holds one guard per thread.
/// fp32 does nothing. Nests: the state before is restored on destruction.
class ScopedPrecision {
public:
    ScopedPrecision(Precision precision, const torch::Device& device);
    ~ScopedPrecision();
    ScopedPrecision(const ScopedPrecision&) = delete;
    ScopedPrecision& operator=(const ScopedPrecision&) = delete;

private:
    bool m_on = false;
    at::DeviceType m_type = at::kCPU;
    bool m_was_enabled = false;
    at::ScalarType m_was_dtype = at::kBFloat16;
};

/// Whether this CPU computes bfloat16 matrix products in hardware (AMX or AVX-512 BF16),
/// i.e. whether --precision bf16 can be faster than fp32 on it; and a word for reports
/// ("amx", "avx512_bf16" or "none").
bool cpu_has_bf16_hardware();
std::string cpu_bf16_hardware();

}  // namespace attnviz
