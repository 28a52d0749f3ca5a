// Fuzzes parse_pharaoh (core/data/alignment_links.cpp, no LibTorch): gold word
// alignments given to `eval --alignments`, read through the bounded line reader.
// The first byte picks 0- or 1-based positions. What is accepted writes back as
// Pharaoh lines that read back the same.
#include "core/data/alignment_links.hpp"
#include "core/io/error.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    attnviz::PharaohBase base = attnviz::PharaohBase::zero;
    if (size > 0) {
        base = (data[0] & 1) ? attnviz::PharaohBase::one : attnviz::PharaohBase::zero;
        ++data, --size;
    }
    try {
        const auto lines = attnviz::parse_pharaoh(attnviz_fuzz::as_text(data, size), "fuzz.txt", base);
        for (const auto& links : lines)
            for (const auto& l : links.links()) FUZZ_CHECK(l.src >= 0 && l.tgt >= 0);
        FUZZ_CHECK(attnviz::parse_pharaoh(attnviz::to_pharaoh(lines), "again.txt") == lines);
    } catch (const attnviz::Error&) {
    }
    return 0;
}
