#pragma once
// LibTorch's CUDA half, loaded when this machine can use it. The build links LibTorch's CPU
// library only (CMakeLists.txt, ATTNVIZ_CUDA_ON_DEMAND) and loads libtorch_cuda.so, with cuDNN,
// cuBLAS and the rest of the CUDA libraries, at start-up when an NVIDIA driver is installed. On a
// machine without one nothing of CUDA could run, and mapping those libraries cost every process
// ~235 MB of resident memory (`attnviz-cli --help` peaked at 484 MB) and start-up time.
#include <string>

namespace attnviz {

/// What load_cuda_runtime() found.
struct CudaRuntime {
    bool loaded = false;  ///< LibTorch's CUDA kernels and hooks are registered (a GPU may still be absent)
    std::string status;   ///< one line for --version and the app's About box, e.g. "loaded (CUDA runtime 13.0)"
                          ///< or "not loaded: no NVIDIA driver (libcuda.so.1: ...)"
};

/// Loads LibTorch's CUDA library once per process, before anything asks LibTorch about CUDA (it
/// decides once: a question asked before the library is there leaves CUDA off for the process).
/// main() calls it first; cuda_available() calls it too. ATTNVIZ_CUDA=0 never loads it, =1 loads
/// it without a driver (a check that the library and its kernels load); unset: when
/// libcuda.so.1 (the driver) opens. Thread-safe; later calls return the first call's result.
const CudaRuntime& load_cuda_runtime();

}  // namespace attnviz
