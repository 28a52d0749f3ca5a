// Fuzzes read_stream_lines (core/io/line_reader.cpp, no LibTorch): sentences read from
// standard input. The first byte picks a small line limit (1..64 bytes, 0: the hard limit)
// and the second a total bound (0..255 bytes, 0: none). What is accepted keeps every byte
// but the '\n's and the final '\r' of each line, within the limits; the lines written back
// with '\n' read back as as many lines.
#include <sstream>

#include "core/io/error.hpp"
#include "core/io/line_reader.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    size_t line_limit = 0;
    uint64_t total_limit = 0;
    if (size >= 2) {
        line_limit = data[0] % 65;
        total_limit = data[1];
        data += 2, size -= 2;
    }
    const std::string text = attnviz_fuzz::as_text(data, size);
    try {
        std::istringstream in(text);
        const auto lines = attnviz::read_stream_lines(in, "<stdin>", line_limit, total_limit);
        size_t bytes = 0;
        std::string again;
        for (const auto& l : lines) {
            FUZZ_CHECK(l.find('\n') == std::string::npos);
            FUZZ_CHECK(l.size() <= (line_limit == 0 ? attnviz::hard_line_limit : line_limit));
            bytes += l.size() + 1;
            again += l + "\n";
        }
        FUZZ_CHECK(bytes <= text.size() + 1);
        FUZZ_CHECK(total_limit == 0 || text.size() <= total_limit);
        std::istringstream in2(again);
        const auto back = attnviz::read_stream_lines(in2, "<stdin>", line_limit, 0);
        FUZZ_CHECK(back.size() == lines.size());
    } catch (const attnviz::FileError&) {
    }
    return 0;
}
