// The heap figures and giving free heap pages back (core/process_memory).
#include "catch_torch.hpp"  // not <catch2/catch.hpp>: see there (unity batches)

#include <malloc.h>

#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/io/process_memory.hpp"

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

TEST_CASE("with large blocks kept, a worker thread's 64 MB block is reused from the heap, not mapped afresh",
          "[memory]") {
    if (!heap_stats().available || glibc_tunable_set("glibc.malloc.mmap_max") ||
        glibc_tunable_set("glibc.malloc.arena_max")) {
        WARN("glibc's heap is not in use here, or GLIBC_TUNABLES sets mmap_max or arena_max; skipping");
        return;
    }
    if (heap_arena_count() > 1) {  // a thread before this test has an arena a new thread may be given
        WARN("another thread made a heap arena before this test: run it on its own to check it");
        return;
    }
    tune_heap_for_training();  // as the command line does first: the heap's top is kept, not trimmed
    REQUIRE(keep_large_blocks_in_heap());
    // A training step's logits and their gradient on a thread of its own (the session's worker):
    // past the 32 MiB tune_heap_for_training() keeps, a block glibc would map and unmap each step.
    constexpr size_t size = 64u << 20;
    double mapped_growth = -1, free_after = -1;
    std::thread worker([&] {
        const double before = heap_stats().mapped_mb;
        char* volatile block = static_cast<char*>(std::malloc(size));
        if (!block) return;
        std::memset(block, 1, size);
        mapped_growth = heap_stats().mapped_mb - before;
        std::free(block);
        free_after = heap_stats().free_mb;
    });
    worker.join();
    INFO("mapped grew by " << mapped_growth << " MB; free in the heap after: " << free_after << " MB");
    CHECK(mapped_growth >= 0);
    CHECK(mapped_growth < 1.0);  // glibc's default maps it: 64 MB
    CHECK(free_after >= 64.0);   // and the heap keeps it for the next step
    release_free_heap();         // its pages go back when asked
    mallopt(M_MMAP_MAX, 65536);  // glibc's default again for the tests after this one
}

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

TEST_CASE("a cap on the heap's arenas holds while many threads allocate", "[memory]") {
    if (!heap_stats().available || heap_arena_count() == 0 || glibc_tunable_set("glibc.malloc.arena_max")) {
        WARN("glibc's heap is not in use here (sanitizer, other C library, or the cap set by GLIBC_TUNABLES)");
        return;
    }
    CHECK_FALSE(limit_heap_arenas(0));
    REQUIRE(limit_heap_arenas(2));
    // Eight threads holding a block each at the same time: without the cap, glibc gives
    // each its own arena (up to 8 per core).
    constexpr int threads = 8;
    std::mutex mutex;
    std::condition_variable cv;
    int holding = 0;
    bool release = false;
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; ++i)
        pool.emplace_back([&] {
            std::vector<char*> blocks;  // no Catch2 assertion off the test's thread
            for (int k = 0; k < 4; ++k)
                if (auto* p = static_cast<char*>(std::malloc(block_bytes))) blocks.push_back(static_cast<char*>(std::memset(p, 1, block_bytes)));
            std::unique_lock<std::mutex> lock(mutex);
            ++holding;
            cv.notify_all();
            cv.wait(lock, [&] { return release; });
            lock.unlock();
            for (char* b : blocks) std::free(b);
        });
    {
        std::unique_lock<std::mutex> lock(mutex);
        cv.wait(lock, [&] { return holding == threads; });
        CHECK(heap_arena_count() <= 2);
        release = true;
        cv.notify_all();
    }
    for (auto& t : pool) t.join();
    CHECK(heap_arena_count() >= 1);
}

TEST_CASE("the user's GLIBC_TUNABLES arena setting wins over the app's cap", "[memory]") {
    const char* old = std::getenv("GLIBC_TUNABLES");
    const std::string saved = old ? old : "";
    setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=4", 1);
    CHECK_FALSE(limit_heap_arenas(2));
    if (old) setenv("GLIBC_TUNABLES", saved.c_str(), 1);
    else unsetenv("GLIBC_TUNABLES");
}

TEST_CASE("after tuning, a training step's large blocks are reused from the heap, not mapped afresh", "[memory]") {
    if (!heap_stats().available || glibc_tunable_set("glibc.malloc.mmap_threshold") ||
        glibc_tunable_set("glibc.malloc.trim_threshold")) {
        WARN("glibc's heap is not in use here, or GLIBC_TUNABLES sets its thresholds; skipping");
        return;
    }
    REQUIRE(tune_heap_for_training());
    constexpr size_t size = 8u << 20;  // a [2048, 1024] float tensor
    const double mapped_before = heap_stats().mapped_mb;
    char* volatile block = static_cast<char*>(std::malloc(size));  // volatile: the allocation stays
    REQUIRE(block != nullptr);
    std::memset(block, 1, size);
    const double mapped_during = heap_stats().mapped_mb;
    CHECK(block[size - 1] == 1);
    std::free(block);
    const HeapStats after = heap_stats();
    INFO("mapped " << mapped_before << " -> " << mapped_during << " MB; free in the heap after: " << after.free_mb);
    CHECK(mapped_during - mapped_before < 1.0);  // glibc's default would map 8 MB of its own
    CHECK(after.free_mb >= 8.0);                 // and the heap keeps the freed block for the next step
    CHECK(tune_heap_for_training());             // calling it again is harmless
}
