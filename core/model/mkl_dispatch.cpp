// MKL's code paths on AMD CPUs (core/model/mkl_dispatch.hpp).
#include "core/model/mkl_dispatch.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <cstdlib>
#include <cstring>
#include <string>

/// MKL's dispatcher: the code path its kernels take on this CPU (weak: absent where LibTorch carries
/// no MKL).
extern "C" int mkl_serv_cpu_detect() __attribute__((weak));

namespace attnviz {

namespace {

/// The CPU's vendor string (cpuid leaf 0); "" elsewhere.
std::string cpu_vendor() {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return {};
    char vendor[13] = {};
    std::memcpy(vendor, &b, 4);
    std::memcpy(vendor + 4, &d, 4);
    std::memcpy(vendor + 8, &c, 4);
    return vendor;
#else
    return {};
#endif
}

bool cpu_has_avx2_and_fma() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

/// What MKL's own check answers: whether the CPU is Intel's.
bool mkl_own_answer() { return cpu_vendor() == "GenuineIntel"; }

bool decide_intel_paths() {
    const char* env = std::getenv("ATTNVIZ_MKL_INTEL_PATHS");
    if (env && std::strcmp(env, "0") == 0) return false;
    const std::string vendor = cpu_vendor();
    return (vendor == "AuthenticAMD" || vendor == "HygonGenuine") && cpu_has_avx2_and_fma();
}

}  // namespace

bool mkl_intel_paths_enabled() {
    static const bool enabled = decide_intel_paths();
    return enabled;
}

std::string mkl_code_path() {
    if (!mkl_serv_cpu_detect) return {};
    switch (const int code = mkl_serv_cpu_detect()) {
        case 0: return "generic";
        case 3: return "SSE4.2";
        case 5: return "AVX2";
        case 7: return "AVX-512";  // on an Ice Lake Xeon: MKL_ENABLE_INSTRUCTIONS=AVX512 keeps 7, =AVX2 gives 5
        default: return "code " + std::to_string(code);
    }
}

}  // namespace attnviz

/// MKL's check whether it may take its Intel code paths (called by MKL through the dynamic linker,
/// which finds this definition before LibTorch's own): the CPU's answer, or yes where
/// mkl_intel_paths_enabled(). Computed once (MKL asks at its first product).
extern "C" __attribute__((visibility("default"))) int mkl_serv_intel_cpu_true() {
    static const int answer = attnviz::mkl_intel_paths_enabled() || attnviz::mkl_own_answer() ? 1 : 0;
    return answer;
}
