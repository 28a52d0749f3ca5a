#pragma once
// MKL's code paths on AMD CPUs. LibTorch's float32 products (ATen's linear, matmul, addmm) run on
// the MKL it carries, which takes its AVX2 / AVX-512 code paths only when its own check
// (mkl_serv_intel_cpu_true) finds an Intel CPU; on AMD's it ran its generic kernels. Measured on
// an AVX2-only AMD EPYC (Zen 3, 2 threads; docs/benchmarks.md): opus-mt-sized float32 decoding of
// 64 sentences in batches of 32 took 88-101 ms a sentence greedy and 218-220 at beam 4 on the
// generic path, 57 and 140-146 on the AVX2 one; [32, 512] x 59,514 62-69 against 29-31 ms.
// This file defines that check for the process (mkl_dispatch.cpp): the executable's definition
// comes before LibTorch's in the dynamic linker's search, as the MKL users' known workaround
// does with LD_PRELOAD. It answers yes on an AMD (or Hygon) CPU with AVX2 and FMA, and as MKL
// would elsewhere; MKL still picks among its paths by the CPU's feature bits (AVX2 here, never
// an instruction the CPU lacks). ATTNVIZ_MKL_INTEL_PATHS=0 leaves MKL's own answer (to compare).
//
// Linked into every executable through attnviz_torch_runtime (whole archive: nothing calls the
// check by name, MKL does).
#include <string>

namespace attnviz {

/// Whether this process lets MKL take its Intel code paths on this CPU: an AMD or Hygon CPU with
/// AVX2 and FMA, unless the environment has ATTNVIZ_MKL_INTEL_PATHS=0.
bool mkl_intel_paths_enabled();

/// The code path MKL's products take in this process (its dispatcher's choice, mkl_serv_cpu_detect,
/// which asks the check above): "generic", "SSE4.2", "AVX2" (the codes seen with
/// MKL_ENABLE_INSTRUCTIONS on this project's AMD EPYC: 0, 3, 5), otherwise "code N" (N > 5: AVX-512
/// and later paths); "" where LibTorch carries no MKL. For --version and benchmark reports. (MKL's
/// own version record names its processor from another check and says "Intel(R) Architecture
/// processors" on AMD whatever path the products take.)
std::string mkl_code_path();

}  // namespace attnviz
