// Fuzzes parse_tsv (core/corpus_reader, no LibTorch): Tatoeba-style TSV from anywhere. The
// first byte picks the options (word/char level, --reverse, a pair limit, a
// line-length limit) so that every path of the reader is reached.
#include "core/data/corpus_reader.hpp"
#include "core/io/error.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    attnviz::TsvOptions o;
    if (size > 0) {
        const uint8_t k = data[0];
        o.level = (k & 1) ? attnviz::TokenLevel::character : attnviz::TokenLevel::word;
        o.reverse = (k & 2) != 0;
        o.max_pairs = (k & 4) ? (k >> 5) : 0;
        o.max_line_bytes = (k & 8) ? 64 : 10000;
        ++data, --size;
    }
    try {
        const attnviz::Corpus c = attnviz::parse_tsv(attnviz_fuzz::as_text(data, size), "fuzz.tsv", o);
        FUZZ_CHECK(o.max_pairs == 0 || c.pairs.size() <= o.max_pairs);
        for (const auto& p : c.pairs) FUZZ_CHECK(!p.src.empty() && !p.tgt.empty());
    } catch (const attnviz::Error&) {
    }
    return 0;
}
