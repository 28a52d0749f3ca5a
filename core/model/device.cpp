#include "core/model/device.hpp"

#include <sched.h>

#include <algorithm>
#include <mutex>
#include <thread>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/model/cuda_runtime.hpp"

namespace attnviz {

bool cuda_available() { return load_cuda_runtime().loaded && torch::cuda::is_available(); }

namespace {
std::mutex cudnn_mutex;
int cudnn_off_count = 0;      // guards alive
bool cudnn_was_enabled = true;  // the switch before the first of them
}  // namespace

CudnnOffGuard::CudnnOffGuard() {
    const std::lock_guard<std::mutex> lock(cudnn_mutex);
    if (cudnn_off_count++ == 0) {
        cudnn_was_enabled = at::globalContext().userEnabledCuDNN();
        at::globalContext().setUserEnabledCuDNN(false);
    }
}

CudnnOffGuard::~CudnnOffGuard() {
    const std::lock_guard<std::mutex> lock(cudnn_mutex);
    if (--cudnn_off_count == 0) at::globalContext().setUserEnabledCuDNN(cudnn_was_enabled);
}

int available_cores() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

torch::Device resolve_device(const std::string& name) {
    if (name.empty() || name == "auto") return cuda_available() ? torch::Device(torch::kCUDA, 0) : torch::kCPU;
    if (name == "cpu") return torch::kCPU;
    if (name.rfind("cuda", 0) == 0) {
        if (!cuda_available())
            throw ConfigError("device " + quote(name) + " asked for, but LibTorch sees no CUDA GPU (CUDA: " +
                              load_cuda_runtime().status + "; use --device cpu or auto)");
        try {
            torch::Device d(name);
            if (d.index() >= static_cast<int>(torch::cuda::device_count()))
                throw ConfigError("device " + quote(name) + ": only " +
                                  count_of(torch::cuda::device_count(), "CUDA device", "CUDA devices") + " present");
            return d;
        } catch (const c10::Error&) {
            throw ConfigError("unknown device " + quote(name) + " (expected auto, cpu, cuda or cuda:N)");
        }
    }
    throw ConfigError("unknown device " + quote(name) + " (expected auto, cpu, cuda or cuda:N)");
}

std::string describe_device(const torch::Device& device) {
    if (device.is_cpu()) {
        const int threads = at::get_num_threads();
        return "cpu (" + std::to_string(threads) + (threads == 1 ? " thread)" : " threads)");
    }
    return device.str();
}

std::string libtorch_version() { return TORCH_VERSION; }

}  // namespace attnviz
