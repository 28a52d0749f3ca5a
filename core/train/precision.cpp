// Arithmetic modes for training steps (core/train/precision.hpp).
#include "core/train/precision.hpp"

#if defined(__SSE__) || defined(__x86_64__) || defined(_M_X64)
#include <xmmintrin.h>
#define ATTNVIZ_MXCSR 1
#endif

#include <ATen/autocast_mode.h>
#include <ATen/cpu/Utils.h>

namespace attnviz {

ScopedPrecision::ScopedPrecision(Precision precision, const torch::Device& device) {
    if (precision != Precision::bf16) return;
    m_on = true;
    m_type = device.type();
    m_was_enabled = at::autocast::is_autocast_enabled(m_type);
    m_was_dtype = at::autocast::get_autocast_dtype(m_type);
    at::autocast::set_autocast_dtype(m_type, at::kBFloat16);
    at::autocast::set_autocast_enabled(m_type, true);
    at::autocast::increment_nesting();
}

ScopedPrecision::~ScopedPrecision() {
    if (!m_on) return;
    at::autocast::set_autocast_enabled(m_type, m_was_enabled);
    at::autocast::set_autocast_dtype(m_type, m_was_dtype);
    // The outermost guard drops the weights' bf16 copies: the next step's weights differ.
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
}

namespace {
#if defined(ATTNVIZ_MXCSR)
constexpr uint64_t flush_bits = 0x8040;  // MXCSR: FTZ (bit 15, results) and DAZ (bit 6, inputs)
uint64_t read_mode() { return _mm_getcsr(); }
void write_mode(uint64_t mode) { _mm_setcsr(static_cast<unsigned int>(mode)); }
#elif defined(__aarch64__)
constexpr uint64_t flush_bits = uint64_t{1} << 24;  // FPCR.FZ: inputs and results
uint64_t read_mode() {
    uint64_t fpcr = 0;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(fpcr));
    return fpcr;
}
void write_mode(uint64_t mode) { __asm__ __volatile__("msr fpcr, %0" : : "r"(mode)); }
#else
constexpr uint64_t flush_bits = 0;
uint64_t read_mode() { return 0; }
void write_mode(uint64_t) {}
#endif
}  // namespace

ScopedFlushDenormal::ScopedFlushDenormal() : m_was(read_mode()) {
    if (flush_bits != 0) write_mode(m_was | flush_bits);
}

ScopedFlushDenormal::~ScopedFlushDenormal() {
    if (flush_bits != 0) write_mode(m_was);
}

bool ScopedFlushDenormal::supported() { return flush_bits != 0; }

std::string cpu_bf16_hardware() {
    const auto caps = at::cpu::get_cpu_capabilities();
    const auto has = [&](const char* key) {
        const auto it = caps.find(key);
        return it != caps.end() && it->second.isBool() && it->second.toBool();
    };
    if (has("amx_bf16")) return "amx";
    if (has("avx512_bf16")) return "avx512_bf16";
    return "none";
}

bool cpu_has_bf16_hardware() { return cpu_bf16_hardware() != "none"; }

}  // namespace attnviz
