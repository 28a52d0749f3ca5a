#pragma once
// ATTNVIZ_TARGET_CLONES("arch=x86-64-v4", ..., "default") before a function builds it once
// per listed x86 level, the one the CPU has chosen at load time (gcc's target_clones).
// Only where that works: gcc on x86-64 Linux, and not under ThreadSanitizer, whose runtime
// the clones' resolver runs before (gcc 12 crashes there: a ten-line program with one
// cloned function does). Elsewhere it expands to nothing and the function is built once.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__) && \
    !defined(__SANITIZE_THREAD__)
#define ATTNVIZ_TARGET_CLONES(...) __attribute__((target_clones(__VA_ARGS__)))
#else
#define ATTNVIZ_TARGET_CLONES(...)
#endif
