// Fuzzes parse_attention_csv (core/analysis/export.cpp): the attention CSV a user opens
// in the GUI or hands back to attnviz, written by anything.
#include "core/io/error.hpp"
#include "core/analysis/export.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        const attnviz::AttentionTable t = attnviz::parse_attention_csv(attnviz_fuzz::as_text(data, size));
        FUZZ_CHECK(t.weights.size() == t.output.size());
        for (const auto& row : t.weights) FUZZ_CHECK(row.size() == t.source.size());
        FUZZ_CHECK(t.entropy.empty() || t.entropy.size() == t.output.size());
        FUZZ_CHECK(t.max_weight.size() == t.entropy.size());
        FUZZ_CHECK(t.coverage.empty() || t.coverage.size() == t.source.size());
    } catch (const attnviz::Error&) {
    }
    return 0;
}
