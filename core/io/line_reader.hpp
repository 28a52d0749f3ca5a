#pragma once
// Lines from a corpus file or from bytes in memory, one at a time, with a
// bounded length: memory stays at one 64 KiB chunk plus the longest line kept,
// whatever the input. Opening checks the file first (regular files only, never
// a FIFO or a device; a size bound) and the first chunk is sniffed for what
// cannot be read as UTF-8 lines (UTF-16, NUL bytes, CR-only line endings).
// What the corpus reader (core/data/corpus_reader.cpp) and the reader of gold
// alignment files read through; free of LibTorch.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace attnviz {

/// The longest line ever held in memory: longer lines are skipped as "line too long"
/// whatever a reader's own limit says (1 MiB).
constexpr size_t hard_line_limit = size_t{1} << 20;

/// Every line of a stream (standard input) that is not a file the LineReader may open: each
/// without '\n' and a final '\r'. A line longer than line_limit bytes (0: hard_line_limit; at
/// most that) or input of more than total_limit bytes (0: no bound) is refused with FileError
/// ("NAME:N: ...") as soon as its bytes pass the limit, before memory grows for the rest:
/// memory stays at one 64 KiB chunk beside the lines kept. Sentences typed or piped in are
/// read through it (an 80 MB line once grew to 3.8 GB before the sentence was refused).
std::vector<std::string> read_stream_lines(std::istream& in, const std::string& name, size_t line_limit = 0,
                                           uint64_t total_limit = 0);

}  // namespace attnviz

namespace attnviz::detail {

class LineReader {
public:
    /// Opens a regular file. Throws FileError naming the path when it cannot be opened,
    /// is a directory ("cannot open 'P': Is a directory"), is not a regular file (FIFO,
    /// device, socket: refused before anything is read, so nothing blocks), is larger than
    /// max_bytes (0 = no bound), or is not UTF-8 lines (see sniff).
    static LineReader open_file(const std::string& path, uint64_t max_bytes);
    /// Lines of text in memory (not copied: text must outlive the reader); name is used in messages.
    static LineReader from_memory(const std::string& text, const std::string& name);

    LineReader(LineReader&& other) noexcept;
    LineReader& operator=(LineReader&&) = delete;
    LineReader(const LineReader&) = delete;
    ~LineReader();

    /// Reads the next line: its bytes without '\n' and without a final '\r'. Returns false at
    /// the end of the input. A line longer than limit bytes (or hard_line_limit, whichever is
    /// smaller; 0 = hard_line_limit) is not kept: too_long() is then true, line is empty and
    /// length() says how long it was. line stays valid until the next call.
    bool next(std::string_view& line, size_t limit);
    bool too_long() const { return m_too_long; }
    size_t length() const { return m_length; }   ///< length of the last line, in bytes
    size_t line_number() const { return m_line_no; }  ///< 1-based number of the last line read
    uint64_t bytes_read() const { return m_bytes; }
    uint64_t total_bytes() const { return m_total; }  ///< the file's size at opening, or the text's
    const std::string& name() const { return m_name; }
    /// Called after each chunk is read (progress reports, cancellation: it may throw).
    void on_chunk(std::function<void()> callback) { m_on_chunk = std::move(callback); }

private:
    LineReader() = default;
    /// Reads the next chunk into the buffer; false at the end of the input.
    bool refill();
    /// Refuses the first chunk when it is UTF-16/UTF-32, binary or has CR-only line endings;
    /// skips a UTF-8 byte order mark.
    void sniff();

    std::string m_name;
    int m_fd = -1;                  ///< the open file (-1: memory)
    const std::string* m_text = nullptr;  ///< the memory input
    uint64_t m_max_bytes = 0;       ///< a file growing past this while read is refused too (0: no bound)
    std::vector<char> m_buf;
    size_t m_pos = 0, m_end = 0;    ///< unread bytes are m_buf[m_pos, m_end)
    bool m_eof = false;
    uint64_t m_bytes = 0, m_total = 0;
    std::string m_line;             ///< the current line (at most the limit)
    size_t m_length = 0, m_line_no = 0;
    bool m_too_long = false;
    std::function<void()> m_on_chunk;
};

}  // namespace attnviz::detail
