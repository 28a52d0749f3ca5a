// Lines from a stream (standard input: core/io/line_reader.hpp read_stream_lines): split as
// std::getline splits them, and bounded as the corpus reader bounds a file's lines -- a line
// too long, or too much input, is refused as soon as its bytes pass the limit, before memory
// grows for the rest (an 80 MB line on stdin once grew to 3.8 GB before its refusal).
#include "catch_torch.hpp"

#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

#include "core/io/error.hpp"
#include "core/io/line_reader.hpp"
#include "core/io/process_memory.hpp"

using namespace attnviz;
using Catch::Contains;
using Lines = std::vector<std::string>;

namespace {

Lines read(const std::string& text, size_t line_limit = 0, uint64_t total_limit = 0) {
    std::istringstream in(text);
    return read_stream_lines(in, "<stdin>", line_limit, total_limit);
}

/// A stream of `line` repeated without end (no '\n' unless `line` has one), counting what
/// was read from it: a reader that does not stop never returns.
class Endless : public std::streambuf {
public:
    explicit Endless(std::string pattern) : m_pattern(std::move(pattern)) {
        while (m_chunk.size() < (size_t{1} << 16)) m_chunk += m_pattern;
    }
    size_t served = 0;

protected:
    int_type underflow() override {
        char* p = m_chunk.data();
        setg(p, p, p + m_chunk.size());
        served += m_chunk.size();
        return traits_type::to_int_type(*p);
    }

private:
    std::string m_pattern, m_chunk;
};

}  // namespace

TEST_CASE("stream lines: split as getline splits them, a final CR dropped", "[io][stdin]") {
    CHECK(read("").empty());
    CHECK(read("a") == Lines{"a"});
    CHECK(read("a\n") == Lines{"a"});
    CHECK(read("a\nb") == Lines{"a", "b"});
    CHECK(read("\n\n") == Lines{"", ""});
    CHECK(read("a\r\nb\r\n") == Lines{"a", "b"});
    CHECK(read("a\rb\n") == Lines{"a\rb"});  // a CR inside a line stays
    std::string many;
    for (int i = 0; i < 100000; ++i) many += std::to_string(i) + "\n";  // more than one 64 KiB chunk
    const Lines lines = read(many);
    REQUIRE(lines.size() == 100000);
    CHECK(lines[70000] == "70000");
}

TEST_CASE("stream lines: a line over the limit is refused with its number", "[io][stdin]") {
    CHECK(read(std::string(10, 'x') + "\n", 10) == Lines{std::string(10, 'x')});
    CHECK(read(std::string(10, 'x') + "\r\n", 10) == Lines{std::string(10, 'x')});  // its CR is not counted
    CHECK_THROWS_AS(read("ok\n" + std::string(11, 'x') + "\n", 10), FileError);
    CHECK_THROWS_WITH(read("ok\n" + std::string(11, 'x') + "\n", 10), Contains("<stdin>:2: a line longer than 10 bytes"));
    CHECK_THROWS_WITH(read(std::string(12, 'x'), 10), Contains("<stdin>:1:"));  // the last line, unterminated
    // No limit given, or a larger one: the hard limit, 1 MiB.
    CHECK_THROWS_WITH(read(std::string(hard_line_limit + 2, 'x')), Contains("longer than 1048576 bytes"));
    CHECK_THROWS_WITH(read(std::string(hard_line_limit + 2, 'x'), hard_line_limit * 4), Contains("1048576"));
    CHECK(read(std::string(hard_line_limit, 'x')).front().size() == hard_line_limit);
}

TEST_CASE("stream lines: an endless line is refused before memory grows for it", "[io][stdin][memory]") {
    Endless endless("abcdefgh");  // 80 MB and more, never a newline
    std::istream in(&endless);
    release_free_heap();
    const bool peak = reset_peak_resident();
    const double base = resident_mb();
    CHECK_THROWS_WITH(read_stream_lines(in, "<stdin>"), Contains("<stdin>:1: a line longer than 1048576 bytes"));
    CHECK(endless.served < (size_t{4} << 20));  // it stopped reading at once
    if (peak) CHECK(peak_resident_mb() - base < 16);
}

TEST_CASE("stream lines: more input than the total bound is refused where it passes it", "[io][stdin][memory]") {
    Endless endless("a short line\n");
    std::istream in(&endless);
    CHECK_THROWS_WITH(read_stream_lines(in, "<stdin>", 0, uint64_t{8} << 20),
                      Contains("the input passes 8388608 bytes"));
    CHECK(endless.served < (size_t{9} << 20));
    CHECK(read("a\nb\n", 0, 4) == Lines{"a", "b"});
    CHECK_THROWS_WITH(read("a\nb\nc\n", 0, 4), Contains("passes 4 bytes"));
}
