// The process's work bound and work counts as text.
#include "core/model/work_cost.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace attnviz {

namespace {

std::atomic<int64_t> g_work_bound{0};  ///< set_work_bound()'s value; 0: none
std::atomic<int> g_work_threads{k_work_bound_threads};  ///< set_work_threads()'s value

int64_t environment_work_bound() {
    static const int64_t value = [] {
        const char* text = std::getenv("ATTNVIZ_WORK_BOUND");
        const int64_t v = text ? parse_work_size(text) : -1;
        return v >= 1'000'000 ? v : 0;
    }();
    return value;
}

}  // namespace

int64_t parse_work_size(const char* text) {
    if (!text || !((*text >= '0' && *text <= '9') || *text == '.')) return -1;
    errno = 0;
    char* end = nullptr;
    double v = std::strtod(text, &end);
    if (errno != 0 || end == text || !std::isfinite(v) || v < 0) return -1;
    switch (*end) {
    case '\0': break;
    case 'k': case 'K': v *= 1e3; ++end; break;
    case 'm': case 'M': v *= 1e6; ++end; break;
    case 'g': case 'G': v *= 1e9; ++end; break;
    case 't': case 'T': v *= 1e12; ++end; break;
    default: return -1;
    }
    if (*end != '\0' || v >= 9.2e18) return -1;
    return static_cast<int64_t>(v);
}

int64_t work_bound() {
    const int64_t set = g_work_bound.load();
    if (set > 0) return set;
    const int64_t env = environment_work_bound();
    if (env > 0) return env;
    const int threads = std::clamp(g_work_threads.load(), 1, k_work_bound_threads);
    return default_work_bound / k_work_bound_threads * threads;
}

void set_work_threads(int threads) { g_work_threads.store(threads > 0 ? threads : k_work_bound_threads); }

void set_work_bound(int64_t operations) { g_work_bound.store(operations > 0 ? operations : 0); }

std::string work_text(int64_t operations) {
    if (operations == std::numeric_limits<int64_t>::max()) return "more than 9.2 x 10^18 operations";
    if (operations < 1000) return std::to_string(operations) + " operations";
    auto e = static_cast<int>(std::floor(std::log10(static_cast<double>(operations))));
    double mantissa = static_cast<double>(operations) / std::pow(10.0, e);
    if (mantissa >= 9.95) mantissa /= 10, ++e;  // "1.0 x 10^12", not "10.0 x 10^11"
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f x 10^%d operations", mantissa, e);
    return buf;
}

}  // namespace attnviz
