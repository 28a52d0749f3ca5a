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

/// LibTorch version string, e.g. "2.11.0".
std::string libtorch_version();

}  // namespace attnviz
