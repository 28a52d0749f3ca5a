#include "core/io/process_memory.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

// Under a sanitizer the sanitizer's allocator serves every block: glibc's heap
// figures say nothing about it and trimming glibc's heap releases nothing.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ATTNVIZ_GLIBC_HEAP 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define ATTNVIZ_GLIBC_HEAP 0
#endif
#endif
#if !defined(ATTNVIZ_GLIBC_HEAP) && defined(__GLIBC__)
#define ATTNVIZ_GLIBC_HEAP 1
#elif !defined(ATTNVIZ_GLIBC_HEAP)
#define ATTNVIZ_GLIBC_HEAP 0
#endif

namespace attnviz {

HeapStats heap_stats() {
    HeapStats s;
#if ATTNVIZ_GLIBC_HEAP
    const struct mallinfo2 m = mallinfo2();
    constexpr double mb = 1024.0 * 1024.0;
    s.available = true;
    s.in_use_mb = double(m.uordblks + m.hblkhd) / mb;
    s.free_mb = double(m.fordblks) / mb;
    s.mapped_mb = double(m.hblkhd) / mb;
#endif
    return s;
}

namespace {
/// A "Key:   N kB" line of /proc/self/status in MB; negative where absent.
double status_mb(const char* key) {
    std::FILE* f = std::fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    double kb = -1;
    const size_t n = std::strlen(key);
    while (std::fgets(line, sizeof line, f))
        if (std::strncmp(line, key, n) == 0) {
            std::sscanf(line + n, "%lf", &kb);
            break;
        }
    std::fclose(f);
    return kb < 0 ? -1 : kb / 1024.0;
}
}  // namespace

double resident_mb() { return status_mb("VmRSS:"); }

double peak_resident_mb() { return status_mb("VmHWM:"); }

bool reset_peak_resident() {
    std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
    if (!f) return false;
    const bool written = std::fputs("5", f) >= 0;
    return std::fclose(f) == 0 && written;
}

bool release_free_heap() {
#if ATTNVIZ_GLIBC_HEAP
    return malloc_trim(0) == 1;
#else
    return false;
#endif
}

bool glibc_tunable_set(const char* tunable) {
    const char* tunables = std::getenv("GLIBC_TUNABLES");
    return tunables && tunable && std::strstr(tunables, tunable) != nullptr;
}

bool limit_heap_arenas(int arenas) {
#if ATTNVIZ_GLIBC_HEAP
    if (arenas < 1 || glibc_tunable_set("glibc.malloc.arena_max")) return false;
    return mallopt(M_ARENA_MAX, arenas) == 1;
#else
    (void)arenas;
    return false;
#endif
}

bool tune_heap_for_training() {
#if ATTNVIZ_GLIBC_HEAP
    if (glibc_tunable_set("glibc.malloc.mmap_threshold") || glibc_tunable_set("glibc.malloc.trim_threshold"))
        return false;
    // 32 MiB is the most glibc takes for the mmap threshold on 64-bit systems (half its
    // heap size); setting either value also turns its dynamic adjustment off.
    const bool mmap_set = mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024) == 1;
    const bool trim_set = mallopt(M_TRIM_THRESHOLD, 256 * 1024 * 1024) == 1;
    return mmap_set && trim_set;
#else
    return false;
#endif
}

bool keep_large_blocks_in_heap() {
#if ATTNVIZ_GLIBC_HEAP
    if (glibc_tunable_set("glibc.malloc.mmap_max") || glibc_tunable_set("glibc.malloc.arena_max") ||
        glibc_tunable_set("glibc.malloc.trim_threshold"))
        return false;
    const bool mmap_off = mallopt(M_MMAP_MAX, 0) == 1;
    const bool one_arena = mallopt(M_ARENA_MAX, 1) == 1;
    // A step's blocks freed at the heap's top stay for the next step: up to 1 GiB (256 MiB
    // still gave 1.65 million page faults in the fine-tuning epoch below).
    const bool top_kept = mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1;
    return mmap_off && one_arena && top_kept;
#else
    return false;
#endif
}

int heap_arena_count() {
#if ATTNVIZ_GLIBC_HEAP
    // malloc_info writes one <heap nr="N"> element per arena.
    char* text = nullptr;
    size_t size = 0;
    std::FILE* f = open_memstream(&text, &size);
    if (!f) return 0;
    const bool ok = malloc_info(0, f) == 0;
    std::fclose(f);
    int count = 0;
    for (const char* p = text; ok && p && (p = std::strstr(p, "<heap nr=")); ++p) ++count;
    std::free(text);
    return count;
#else
    return 0;
#endif
}

ResidentLimit::ResidentLimit(long long limit_bytes) {
    if (limit_bytes <= 0) return;
    const double now = resident_mb();
    if (now < 0) return;
    m_half_mb = static_cast<double>(limit_bytes) / (2.0 * 1024 * 1024);
    m_limit_mb = now + 2 * m_half_mb;
}

bool ResidentLimit::check() {
    if (m_limit_mb < 0) return false;
    if (resident_mb() <= m_limit_mb) return false;
    release_free_heap();
    ++m_releases;
    const double after = resident_mb();
    if (after > m_limit_mb) m_limit_mb = after + m_half_mb;  // in use, not free: nothing more to release
    return true;
}

HeapReleaser::HeapReleaser(double interval_seconds)
    : m_interval(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(interval_seconds > 0 ? interval_seconds : 0))),
      m_last(std::chrono::steady_clock::now()) {}

bool HeapReleaser::maybe_release() {
    const auto now = std::chrono::steady_clock::now();
    if (now - m_last < m_interval) return false;
    m_last = now;
    ++m_releases;
    release_free_heap();
    return true;
}

}  // namespace attnviz
