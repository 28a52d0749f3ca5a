#pragma once
// Shared by the libFuzzer harnesses (tests/fuzz/fuzz_*.cpp). A harness feeds
// one input to one parser: the parser may refuse it with attnviz::Error (that
// is its contract), anything else -- another exception, a crash, a sanitizer
// report, a broken invariant (FUZZ_CHECK) -- is a bug libFuzzer stops on.
// The same sources build without libFuzzer as replay tools (replay_main.cpp)
// that ctest runs over the seed corpora and the regression inputs.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

/// Stops the run (libFuzzer saves the input) when an invariant of a parsed result is broken.
#define FUZZ_CHECK(cond)                                                                        \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            std::fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond); \
            std::abort();                                                                       \
        }                                                                                       \
    } while (0)

namespace attnviz_fuzz {

inline std::string as_text(const uint8_t* data, size_t size) {
    return std::string(reinterpret_cast<const char*>(data), size);
}

}  // namespace attnviz_fuzz
