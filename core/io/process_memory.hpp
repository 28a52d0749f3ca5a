#pragma once
// The process's memory as the C library's allocator sees it, and handing its
// free pages back to the system during long training runs. Qt-free and
// LibTorch-free.
//
// Why: training allocates tensors whose sizes change with every batch
// (natural-length batches), and glibc's malloc keeps the pages of freed blocks
// that sit between blocks still in use. Over a 30-minute soak the heap's bytes
// in use stayed flat (~475 MB) while the free bytes it held grew (190 -> 233 MB)
// and the resident memory with them; malloc_trim gave ~200 MB back at once.
// Mapping large blocks afresh every time instead (a fixed low mmap threshold)
// kept the memory lower but trained 23% fewer batches in the same time.
#include <chrono>

namespace attnviz {

/// Heap figures from glibc's mallinfo2 (all arenas); `available` is false elsewhere and under a
/// sanitizer (whose own allocator serves the blocks; release_free_heap() then does nothing).
struct HeapStats {
    bool available = false;
    double in_use_mb = 0;  ///< bytes handed out and not yet freed (heap blocks + mapped blocks)
    double free_mb = 0;    ///< bytes the heap arenas hold free (freed blocks kept for reuse)
    double mapped_mb = 0;  ///< of in_use_mb, large blocks that have their own mapping
};

/// The current figures. Takes every arena's lock briefly: call it seldom (every few seconds).
HeapStats heap_stats();

/// The process's resident memory in MB (VmRSS from /proc/self/status); negative where unknown.
double resident_mb();

/// The process's peak resident memory in MB since it started or since the last
/// reset_peak_resident() (VmHWM from /proc/self/status); negative where unknown.
/// Mapped file pages that were touched count, as they do in VmRSS.
double peak_resident_mb();

/// Starts the peak over from the current resident memory (writes "5" to
/// /proc/self/clear_refs, Linux 4.0 and later), so that a test can bound the peak of
/// one operation. Returns false where that is not possible (then the peak keeps counting).
bool reset_peak_resident();

/// Hands the pages of the heap's free blocks back to the system (glibc's malloc_trim):
/// the resident memory falls to what is in use. Takes milliseconds for hundreds of MB;
/// the pages cost a page fault each when reused. Returns true when memory was released.
bool release_free_heap();

/// Whether the user's GLIBC_TUNABLES names `tunable` (e.g. "glibc.malloc.arena_max"):
/// then the user's value rules and the functions below leave that setting alone.
bool glibc_tunable_set(const char* tunable);

/// Caps how many malloc arenas glibc creates (mallopt M_ARENA_MAX), unless the user's
/// GLIBC_TUNABLES already sets glibc.malloc.arena_max; call first thing in main, before
/// other threads start. Every thread that allocates gets an arena of its own (up to 8 per
/// core) and an arena's free blocks serve only its threads. Not called by the apps: in
/// 30-minute GUI soaks two arenas held ~40 MB free instead of ~210 MB when the training
/// worker had the second arena to itself (RSS +0.95% after warm-up), but +3.75% when it
/// shared the main arena with the GUI thread; which arena a thread gets depends on which
/// threads allocate first. Returns whether the cap was set (false: set by the user, under a
/// sanitizer, or not glibc).
bool limit_heap_arenas(int arenas);

/// Keeps freed blocks of up to 32 MiB in the heap for reuse (mallopt M_MMAP_THRESHOLD) and
/// lets the heap's top hold up to 256 MiB free before shrinking it (M_TRIM_THRESHOLD), unless
/// the user's GLIBC_TUNABLES sets either; call first thing in main. Why: a training step
/// frees and allocates megabytes of tensors, and with glibc's defaults the heap kept being
/// shrunk and grown again, each page faulted in and zeroed anew: d2l's configuration took
/// 280,000-430,000 page faults in 30 epochs, ~80,000 with these settings, 10% less CPU time
/// and 12% more tokens/s (4 interleaved pairs, 2026-11-25). HeapReleaser's periodic
/// malloc_trim still hands the free pages back during long runs. The command-line tool
/// calls it; the GUI does not: in a 30-minute GUI soak with it (bfc9c19) training ran 21%
/// more batches and the memory held (+0.79% after warm-up), but 15 timer ticks of 357,438
/// came 16-40 ms late while the GUI thread waited (0 in the run before; not investigated
/// further: a likely cause is the GUI thread's large blocks, mapped afresh by default, then
/// sharing the main arena that the trainer's minute-by-minute malloc_trim locks).
/// Returns whether both were set (false: set by the user, under a sanitizer, or not glibc).
bool tune_heap_for_training();

/// For training whose tensors pass the 32 MiB that tune_heap_for_training() keeps (a
/// pretrained model's [batch, T, 59,514] logits and their gradients, a 122 MB vocabulary
/// gradient): keeps blocks of every size in the heap (mallopt M_MMAP_MAX 0), every thread
/// on the main arena (M_ARENA_MAX 1: a worker thread's own arena would map such blocks
/// afresh all the same) and up to 1 GiB free at the heap's top (M_TRIM_THRESHOLD), unless
/// the user's GLIBC_TUNABLES sets any of them. Call it before any
/// other thread starts (LibTorch's too: a thread that allocated has an arena of its own). Why: fine-tuning an opus-mt-sized Marian took 4.56 million page
/// faults in one epoch of 256 pairs (each freed block unmapped, each new one faulted in and
/// zeroed), 0.63 million with these settings: 105 -> 137 target tokens/s on one thread, peak
/// resident memory 2.7 -> 3.0 GB (2026-11-28). Free pages still go back between chunks and
/// passes (release_free_heap) and in long runs (HeapReleaser). The command-line tool
/// calls it for train, bench and compare; the GUI does not (its thread shares the main arena,
/// see above). Returns whether all three were set.
bool keep_large_blocks_in_heap();

/// How many arenas glibc's malloc has now (from malloc_info); 0 where unknown.
int heap_arena_count();

/// Holds the resident memory of a loop of steps (a decoding's) to what was planned for it.
/// Decoding's tensors grow step by step (a Transformer's cache is copied one position longer
/// at every step, and reordered for beam search), and with the command line's heap settings
/// (tune_heap_for_training: blocks up to 32 MiB kept in the heap) each freed block left a hole
/// the next, larger one did not fit: beam search of 100 hypotheses over 1,000 steps held
/// 1.15 GB resident with ~10 MB of tensors in use. After each step, check() hands the heap's
/// free pages back (release_free_heap) once the resident memory has grown past the limit (the
/// caller's plan less one step's tensors, so that the next step stays within the plan). Where
/// the memory in use is itself past the limit (what no release can give back: the plan was
/// short), the limit moves up to it plus half the limit, so that it is not released at every step.
class ResidentLimit {
public:
    /// limit_bytes: how far the resident memory may grow from now before check() releases (0 or
    /// less: it never does).
    explicit ResidentLimit(long long limit_bytes);
    /// After a step: releases the heap's free pages when the resident memory is past the
    /// limit; returns whether it did. Reads /proc/self/status: microseconds.
    bool check();
    /// How many releases check() has made.
    int releases() const { return m_releases; }

private:
    double m_limit_mb = -1;  ///< resident memory (MB) past which check() releases; < 0: never
    double m_half_mb = 0;    ///< half of limit_bytes (MB)
    int m_releases = 0;
};

/// Calls release_free_heap() at most once per interval: cheap to call after every batch.
class HeapReleaser {
public:
    /// interval_seconds: the least time between two releases; the first comes one interval after construction.
    explicit HeapReleaser(double interval_seconds = 60.0);
    /// Calls release_free_heap() when the interval has passed since the last call (or
    /// construction); returns whether it did.
    bool maybe_release();
    /// How many releases maybe_release() has made.
    int releases() const { return m_releases; }

private:
    std::chrono::steady_clock::duration m_interval;
    std::chrono::steady_clock::time_point m_last;
    int m_releases = 0;
};

}  // namespace attnviz
