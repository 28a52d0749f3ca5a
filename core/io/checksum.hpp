#pragma once
// FNV-1a 64: the checkpoints' checksum. It catches truncation and damage after
// writing (not tampering: a file's author can always write a matching sum).
#include <cstddef>
#include <cstdint>

namespace attnviz {

constexpr uint64_t fnv1a_init = 1469598103934665603ull;

/// Continues an FNV-1a 64 hash over n more bytes.
inline uint64_t fnv1a(const char* data, size_t n, uint64_t h = fnv1a_init) {
    for (size_t i = 0; i < n; ++i) {
        h ^= static_cast<unsigned char>(data[i]);
        h *= 1099511628211ull;
    }
    return h;
}

}  // namespace attnviz
