#pragma once
// Arithmetic modes for training steps: ATen's autocast (mixed precision) and
// subnormal numbers flushed to zero, each scoped to the calling thread.
#include <cstdint>
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

/// While alive, the calling thread's CPU arithmetic treats subnormal floats (|x| below
/// 1.18e-38 in float32) as zero, on input and on output (x86: MXCSR's FTZ and DAZ bits;
/// ARM64: FPCR.FZ), as TensorFlow's CPU kernels do by default.
/// Why: a softmax puts weights near zero, and d2l's Transformer on the 5,000-pair file
/// then carries subnormals in 0.5% of its attention weights and 0.2% of its layers'
/// output gradients; every matrix product that reads one runs through the CPU's slow
/// microcode path, and those products took 3-4x their normal time (README "Subnormal
/// numbers"). No weight, loss or metric attnviz shows is that small: flushing changes
/// nothing a user reads, only the digits below 1e-38 of intermediate values.
/// The mode is per thread: a step split over threads holds one guard per thread; an ATen
/// operation's own intra-op worker threads keep the mode they started with (a thread
/// started while a guard lives starts with its mode, as Linux copies the register to new
/// threads). Nests: the mode before is restored on destruction. GPU arithmetic is not
/// affected (CUDA kernels choose their own). Where the CPU has no such mode the guard does
/// nothing (supported() false).
class ScopedFlushDenormal {
public:
    ScopedFlushDenormal();
    ~ScopedFlushDenormal();
    ScopedFlushDenormal(const ScopedFlushDenormal&) = delete;
    ScopedFlushDenormal& operator=(const ScopedFlushDenormal&) = delete;
    /// Whether this build and CPU can flush (x86 with SSE, ARM64).
    static bool supported();

private:
    uint64_t m_was = 0;  ///< the control register before
};

/// Whether this CPU computes bfloat16 matrix products in hardware (AMX or AVX-512 BF16),
/// i.e. whether --precision bf16 can be faster than fp32 on it; and a word for reports
/// ("amx", "avx512_bf16" or "none").
bool cpu_has_bf16_hardware();
std::string cpu_bf16_hardware();

}  // namespace attnviz
