// Shapes to bytes, saturating; the process's memory bound.
#include "core/model/memory_cost.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <limits>

namespace attnviz {

namespace {

constexpr int64_t k_max = std::numeric_limits<int64_t>::max();

std::atomic<int64_t> g_bound{0};  ///< set_memory_bound()'s value; 0: none

int64_t environment_bound() {
    static const int64_t value = [] {
        const char* text = std::getenv("ATTNVIZ_MEMORY_BOUND");
        const int64_t v = text ? parse_memory_size(text) : -1;
        return v >= (int64_t{1} << 20) ? v : 0;
    }();
    return value;
}

}  // namespace

int64_t bytes_times(int64_t a, int64_t b) {
    if (a <= 0 || b <= 0) return 0;
    return a > k_max / b ? k_max : a * b;
}

int64_t bytes_plus(int64_t a, int64_t b) {
    a = std::max<int64_t>(a, 0), b = std::max<int64_t>(b, 0);
    return a > k_max - b ? k_max : a + b;
}

int64_t parse_memory_size(const char* text) {
    if (!text || *text < '0' || *text > '9') return -1;
    errno = 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text, &end, 10);
    if (errno != 0 || v > static_cast<unsigned long long>(k_max)) return -1;
    int shift = 0;
    switch (*end) {
    case '\0': break;
    case 'k': case 'K': shift = 10; ++end; break;
    case 'm': case 'M': shift = 20; ++end; break;
    case 'g': case 'G': shift = 30; ++end; break;
    default: return -1;
    }
    if (*end == 'i' || *end == 'B') ++end;  // "64MiB", "64MB": the same binary units
    if (*end == 'B') ++end;
    if (*end != '\0') return -1;
    const auto n = static_cast<int64_t>(v);
    return n > (k_max >> shift) ? -1 : n << shift;
}

int64_t memory_bound() {
    const int64_t set = g_bound.load();
    if (set > 0) return set;
    const int64_t env = environment_bound();
    return env > 0 ? env : step_memory_bound;
}

void set_memory_bound(int64_t bytes) { g_bound.store(bytes > 0 ? bytes : 0); }

int64_t ShapeCost::per_row(int64_t S, int64_t T) const {
    int64_t b = one;
    b = bytes_plus(b, bytes_times(ss, bytes_times(S, S)));
    b = bytes_plus(b, bytes_times(st, bytes_times(S, T)));
    b = bytes_plus(b, bytes_times(tt, bytes_times(T, T)));
    b = bytes_plus(b, bytes_times(s, S));
    b = bytes_plus(b, bytes_times(t, T));
    return b;
}

int64_t ShapeCost::bytes(int64_t rows, int64_t S, int64_t T) const { return bytes_times(rows, per_row(S, T)); }

ShapeCost ShapeCost::operator+(const ShapeCost& o) const {
    return {bytes_plus(ss, o.ss), bytes_plus(st, o.st), bytes_plus(tt, o.tt), bytes_plus(s, o.s), bytes_plus(t, o.t), bytes_plus(one, o.one)};
}

ShapeCost ShapeCost::operator*(int64_t k) const {
    return {bytes_times(ss, k), bytes_times(st, k), bytes_times(tt, k), bytes_times(s, k), bytes_times(t, k), bytes_times(one, k)};
}

}  // namespace attnviz
