// The heap figures and giving free heap pages back (core/process_memory).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/process_memory.hpp"

using namespace attnviz;

namespace {
// Blocks of 64 KB come from the heap (below glibc's mmap threshold, which only ever rises).
constexpr size_t block_bytes = 64 * 1024;

std::vector<char*> allocate_touched(size_t count) {
    std::vector<char*> blocks;
    bool all = true;
    for (size_t i = 0; i < count; ++i) {
        auto* p = static_cast<char*>(std::malloc(block_bytes));
        all = all && p != nullptr;
        if (p) std::memset(p, int(i % 251) + 1, block_bytes);  // resident, not just reserved
        blocks.push_back(p);
    }
    REQUIRE(all);
    return blocks;
}

// What the live blocks hold, summed: their first and last bytes, as written.
bool intact(const std::vector<char*>& blocks) {
    for (size_t i = 0; i < blocks.size(); ++i) {
        if (!blocks[i]) continue;
        const auto expected = static_cast<unsigned char>(i % 251 + 1);
        if (static_cast<unsigned char>(blocks[i][0]) != expected ||
            static_cast<unsigned char>(blocks[i][block_bytes - 1]) != expected)
            return false;
    }
    return true;
}
}  // namespace

TEST_CASE("heap figures count the bytes in use", "[memory]") {
    if (!heap_stats().available) {
        WARN("no glibc mallinfo2 here; skipping");
        return;
    }
    const double before = heap_stats().in_use_mb;
    auto blocks = allocate_touched(512);  // 32 MB
    const double during = heap_stats().in_use_mb;
    CHECK(intact(blocks));
    for (char* p : blocks) std::free(p);
    CHECK(during - before > 30.0);
    CHECK(during - heap_stats().in_use_mb > 30.0);
    CHECK(resident_mb() > 0);
}

TEST_CASE("giving the heap's free pages back lowers the resident memory", "[memory]") {
    if (!heap_stats().available || resident_mb() < 0) {
        WARN("no glibc heap or /proc/self/status here; skipping");
        return;
    }
    // Free every other block: the free ones sit between live ones, so the heap cannot
    // shrink from its top and keeps their pages until they are handed back.
    auto blocks = allocate_touched(2048);  // 128 MB
    for (size_t i = 0; i < blocks.size(); i += 2) {
        std::free(blocks[i]);
        blocks[i] = nullptr;
    }
    const double held = resident_mb();
    const double free_held = heap_stats().free_mb;
    CHECK(free_held > 60.0);
    REQUIRE(release_free_heap());
    const double after = resident_mb();
    INFO("resident " << held << " MB -> " << after << " MB, the heap held " << free_held << " MB free");
    CHECK(held - after > 50.0);  // 64 MB were free
    CHECK(intact(blocks));  // the live half is intact
    for (char* p : blocks) std::free(p);
}

TEST_CASE("the heap releaser waits its interval between releases", "[memory]") {
    HeapReleaser hourly(3600.0);
    CHECK_FALSE(hourly.maybe_release());  // the first comes one interval after construction
    CHECK(hourly.releases() == 0);
    HeapReleaser always(0.0);
    CHECK(always.maybe_release());
    CHECK(always.maybe_release());
    CHECK(always.releases() == 2);
}
