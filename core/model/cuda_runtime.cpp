#include "core/model/cuda_runtime.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/util/Exception.h>

namespace attnviz {

namespace {

std::string dl_error() {
    const char* e = dlerror();
    return e ? e : "unknown error";
}

/// The folder of the library that holds LibTorch's CUDA hooks registry (libtorch_cpu.so): its
/// CUDA half sits beside it in every LibTorch layout (the wheel's torch/lib, a LibTorch zip's lib).
std::string torch_library_folder() {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&at::detail::getCUDAHooks), &info) == 0 || !info.dli_fname) return {};
    std::string path = info.dli_fname;
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

/// Whether LibTorch's dispatcher has CUDA kernels (aten::add's) and its CUDA hooks are the real ones.
std::string registered_runtime() {
    const auto op = c10::Dispatcher::singleton().findSchema({"aten::add", "Tensor"});
    if (!op || !op->hasKernelForDispatchKey(c10::DispatchKey::CUDA)) return {};
    try {
        const long v = at::detail::getCUDAHooks().versionCUDART();
        return "CUDA runtime " + std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
    } catch (const c10::Error&) {
        return {};  // LibTorch asked about CUDA before the library was there (see the header)
    }
}

CudaRuntime load() {
    CudaRuntime r;
#ifndef ATTNVIZ_CUDA_ON_DEMAND
    const std::string linked = registered_runtime();  // LibTorch as its CMake package links it
    r.loaded = !linked.empty();
    r.status = r.loaded ? "linked (" + linked + ")" : "none: this LibTorch was built without CUDA";
    return r;
#else
    const char* env = std::getenv("ATTNVIZ_CUDA");
    const std::string wanted = env ? env : "";
    if (wanted == "0") {
        r.status = "not loaded: ATTNVIZ_CUDA=0";
        return r;
    }
    if (wanted != "1") {
        // Opened only to see that it is there; LibTorch's CUDA runtime opens it again itself.
        if (!dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
            r.status = "not loaded: no NVIDIA driver (" + dl_error() + ")";
            return r;
        }
    }
    const std::string beside = torch_library_folder() + "libtorch_cuda.so";
    void* lib = dlopen(beside.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
        const std::string first = dl_error();
        lib = dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_GLOBAL);
        if (!lib) {
            r.status = "not loaded: " + first + " (a CPU-only LibTorch has no CUDA library)";
            return r;
        }
    }
    const std::string runtime = registered_runtime();
    if (runtime.empty()) {
        r.status = "not usable: libtorch_cuda.so loaded, but LibTorch had already decided without it";
        return r;
    }
    r.loaded = true;
    r.status = "loaded (" + runtime + ")";
    return r;
#endif
}

}  // namespace

const CudaRuntime& load_cuda_runtime() {
    static std::once_flag once;
    static CudaRuntime runtime;
    std::call_once(once, [] { runtime = load(); });
    return runtime;
}

}  // namespace attnviz
