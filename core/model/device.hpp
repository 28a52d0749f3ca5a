#pragma once
// Device choice: CUDA when LibTorch sees a GPU, CPU otherwise, or an explicit override.
#include <string>

#include <torch/types.h>

namespace attnviz {

/// "auto" (CUDA if available, else CPU), "cpu", "cuda" or "cuda:N".
/// Throws attnviz::ConfigError for an unknown name or CUDA asked for but absent.
torch::Device resolve_device(const std::string& name);

/// True when LibTorch can use a CUDA device.
bool cuda_available();

/// "cpu" or "cuda:0 (NVIDIA H100 ...)" style description for status bars.
std::string describe_device(const torch::Device& device);

/// The CPU cores this process may run on (its affinity mask, e.g. under taskset or a
/// container's CPU set; the machine's count where that cannot be read), at least 1.
int available_cores();

/// While alive, LibTorch runs RNNs with its own kernels instead of cuDNN's. cuDNN's RNNs
/// compute gradients only in training mode, and attribution differentiates a model in
/// evaluation mode (no dropout): on a GPU those passes need this. LibTorch's switch is
/// process-wide, so nested and concurrent guards keep it off until the last one ends, then
/// restore what was set before (a training run on another thread meanwhile uses the same
/// kernels without cuDNN: slower, the same results to rounding).
class CudnnOffGuard {
public:
    CudnnOffGuard();
    ~CudnnOffGuard();
    CudnnOffGuard(const CudnnOffGuard&) = delete;
    CudnnOffGuard& operator=(const CudnnOffGuard&) = delete;
};

/// LibTorch version string, e.g. "2.11.0".
std::string libtorch_version();

}  // namespace attnviz
