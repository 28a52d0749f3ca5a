// Mixed precision for training steps (core/train/precision.hpp).
#include "core/train/precision.hpp"

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
