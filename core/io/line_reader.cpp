// Bounded line reading for corpora: file checks, encoding sniffing, lines.
#include "core/io/line_reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <istream>

#include "core/io/error.hpp"
#include "core/io/file_read.hpp"
#include "core/io/message.hpp"

namespace attnviz::detail {

namespace {

constexpr size_t chunk_bytes = size_t{1} << 16;

std::string quoted(const std::string& s) { return quote(s, 400); }

/// "1.5 GB" style, for messages.
std::string human_bytes(uint64_t n) {
    char buf[32];
    if (n >= (uint64_t{1} << 30)) std::snprintf(buf, sizeof buf, "%.1f GiB", double(n) / double(uint64_t{1} << 30));
    else if (n >= (uint64_t{1} << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", double(n) / double(uint64_t{1} << 20));
    else std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(n));
    return buf;
}

void refuse_non_regular(const std::string& path, mode_t mode) {
    if (S_ISDIR(mode)) throw FileError("cannot open " + quoted(path) + ": " + std::strerror(EISDIR));
    if (!S_ISREG(mode))
        throw FileError(quoted(path) + " is " + describe_file_type(mode) +
                        ", not a regular file: corpora are read from regular files only");
}

/// Base name for a converted copy: "dir/x.tsv" -> "x-utf8.tsv".
std::string converted_name(const std::string& path, const std::string& suffix) {
    std::string base = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
    const size_t dot = base.find_last_of('.');
    if (dot == std::string::npos || dot == 0) return base + suffix;
    return base.substr(0, dot) + suffix + base.substr(dot);
}

}  // namespace

LineReader LineReader::open_file(const std::string& path, uint64_t max_bytes) {
    // stat first, so that a FIFO or a device is never even opened; fstat after opening
    // guards against the path being swapped in between.
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw FileError("cannot open " + quoted(path) + ": " + std::strerror(errno));
    refuse_non_regular(path, st.st_mode);
    // O_NONBLOCK: should a FIFO have been swapped in after the stat, open() does not wait for a writer.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) throw FileError("cannot open " + quoted(path) + ": " + std::strerror(errno));
    LineReader r;
    r.m_fd = fd;  // closed by r's destructor from here on
    r.m_name = path;
    if (::fstat(fd, &st) != 0) throw FileError("cannot read " + quoted(path) + ": " + std::strerror(errno));
    refuse_non_regular(path, st.st_mode);
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    r.m_total = static_cast<uint64_t>(st.st_size);
    r.m_max_bytes = max_bytes;
    if (max_bytes > 0 && r.m_total > max_bytes)
        throw FileError(quoted(path) + " is " + human_bytes(r.m_total) + ", more than the " + human_bytes(max_bytes) +
                        " a corpus read whole may be: read its first pairs only (max pairs, e.g. --max-pairs "
                        "1000000), or split the file");
    r.m_buf.resize(chunk_bytes);
    r.sniff();
    return r;
}

LineReader LineReader::from_memory(const std::string& text, const std::string& name) {
    LineReader r;
    r.m_name = name;
    r.m_text = &text;
    r.m_total = text.size();
    r.sniff();
    return r;
}

LineReader::LineReader(LineReader&& o) noexcept
    : m_name(std::move(o.m_name)), m_fd(o.m_fd), m_text(o.m_text), m_max_bytes(o.m_max_bytes),
      m_buf(std::move(o.m_buf)), m_pos(o.m_pos), m_end(o.m_end), m_eof(o.m_eof), m_bytes(o.m_bytes),
      m_total(o.m_total), m_line(std::move(o.m_line)), m_length(o.m_length), m_line_no(o.m_line_no),
      m_too_long(o.m_too_long), m_on_chunk(std::move(o.m_on_chunk)) {
    o.m_fd = -1;
}

LineReader::~LineReader() {
    if (m_fd >= 0) ::close(m_fd);
}

bool LineReader::refill() {
    m_pos = m_end = 0;
    if (m_eof) return false;
    if (m_text) {  // memory: the whole text is one chunk, read in place
        m_eof = true;
        m_end = m_text->size();
        m_bytes = m_end;
        if (m_on_chunk) m_on_chunk();
        return m_end > 0;
    }
    while (m_end < m_buf.size()) {  // fill the chunk (a read may return less)
        const ssize_t n = ::read(m_fd, m_buf.data() + m_end, m_buf.size() - m_end);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw FileError("cannot read " + quoted(m_name) + ": " + std::strerror(errno));
        if (n == 0) {
            m_eof = true;
            break;
        }
        m_end += static_cast<size_t>(n);
    }
    m_bytes += m_end;
    if (m_max_bytes > 0 && m_bytes > m_max_bytes)
        throw FileError(quoted(m_name) + " grew past " + human_bytes(m_max_bytes) +
                        " while being read: a corpus read whole may not be larger");
    if (m_on_chunk) m_on_chunk();
    return m_end > 0;
}

void LineReader::sniff() {
    refill();
    const char* data = m_text ? m_text->data() : m_buf.data();
    const auto* b = reinterpret_cast<const unsigned char*>(data);
    const size_t n = std::min(m_end, chunk_bytes);
    const std::string iconv_hint = " " + quote(m_name, quote_path_max) + " > " + quote(converted_name(m_name, "-utf8"), quote_path_max);
    auto starts = [&](std::initializer_list<unsigned char> bom) {
        return n >= bom.size() && std::equal(bom.begin(), bom.end(), b);
    };
    if (starts({0xFF, 0xFE, 0x00, 0x00}) || starts({0x00, 0x00, 0xFE, 0xFF}))
        throw FileError(quoted(m_name) + " is UTF-32 (it starts with a UTF-32 byte order mark); corpora must be "
                        "UTF-8: convert it with  iconv -f UTF-32 -t UTF-8" + iconv_hint);
    if (starts({0xFF, 0xFE}) || starts({0xFE, 0xFF})) {
        const bool le = b[0] == 0xFF;
        throw FileError(quoted(m_name) + " is UTF-16 (" + (le ? "little" : "big") + "-endian: it starts with the byte "
                        "order mark " + (le ? "FF FE" : "FE FF") + "); corpora must be UTF-8: convert it with  "
                        "iconv -f UTF-16 -t UTF-8" + iconv_hint);
    }
    if (starts({0xEF, 0xBB, 0xBF})) m_pos = 3;  // a UTF-8 byte order mark is not part of the first line
    size_t nul_even = 0, nul_odd = 0, lf = 0, bare_cr = 0;
    for (size_t i = m_pos; i < n; ++i) {
        if (b[i] == 0) ++((i - m_pos) % 2 == 0 ? nul_even : nul_odd);
        else if (b[i] == '\n') ++lf;
        else if (b[i] == '\r' && i + 1 < n && b[i + 1] != '\n') ++bare_cr;
    }
    const size_t nul = nul_even + nul_odd;
    if (nul > 0) {
        // UTF-16 text of mostly ASCII has a NUL in every other byte: in the odd bytes when
        // little-endian, in the even ones when big-endian.
        const size_t half = (n - m_pos) / 2;
        if (nul_odd * 4 >= half && nul_even * 8 < nul_odd)
            throw FileError(quoted(m_name) + " looks like UTF-16 little-endian without a byte order mark (a NUL in "
                            "every other byte); corpora must be UTF-8: convert it with  iconv -f UTF-16LE -t UTF-8" +
                            iconv_hint);
        if (nul_even * 4 >= half && nul_odd * 8 < nul_even)
            throw FileError(quoted(m_name) + " looks like UTF-16 big-endian without a byte order mark (a NUL in "
                            "every other byte); corpora must be UTF-8: convert it with  iconv -f UTF-16BE -t UTF-8" +
                            iconv_hint);
        if (nul * 16 >= n - m_pos || lf == 0)
            throw FileError(quoted(m_name) + " contains NUL bytes (" + std::to_string(nul) + " in its first " +
                            human_bytes(n) + "): it is a binary file, not UTF-8 text with one pair per line");
    }
    if (bare_cr > 0 && bare_cr > lf)
        throw FileError(quoted(m_name) + " has CR-only line endings (classic Mac OS): lines must end with LF or "
                        "CRLF; convert it with  tr '\\r' '\\n' < " + quote(m_name, quote_path_max) + " > " +
                        quote(converted_name(m_name, "-lf"), quote_path_max));
}

bool LineReader::next(std::string_view& line, size_t limit) {
    const size_t cap = limit == 0 ? hard_line_limit : std::min(limit, hard_line_limit);
    m_line.clear();
    m_length = 0;
    m_too_long = false;
    bool any = false;
    char last = 0;
    for (;;) {
        if (m_pos == m_end && !refill()) {
            if (!any) return false;
            break;
        }
        const char* data = (m_text ? m_text->data() : m_buf.data()) + m_pos;
        const size_t avail = m_end - m_pos;
        const auto* nl = static_cast<const char*>(std::memchr(data, '\n', avail));
        const size_t n = nl ? static_cast<size_t>(nl - data) : avail;
        any = true;
        m_length += n;
        if (n > 0) last = data[n - 1];
        if (m_length <= cap + 1) m_line.append(data, n);  // + 1: room for a final '\r'
        else if (!m_too_long) {
            m_too_long = true;
            std::string().swap(m_line);  // give the memory back: only the length is reported
        }
        m_pos += n;
        if (nl) {
            ++m_pos;
            break;
        }
    }
    ++m_line_no;
    if (last == '\r') {
        --m_length;
        if (!m_too_long) m_line.pop_back();
    }
    if (m_length > cap && !m_too_long) {  // over by a byte: kept, but still too long
        m_too_long = true;
        std::string().swap(m_line);
    }
    line = m_too_long ? std::string_view() : std::string_view(m_line);
    return true;
}

}  // namespace attnviz::detail

namespace attnviz {

std::vector<std::string> read_stream_lines(std::istream& in, const std::string& name, size_t line_limit,
                                           uint64_t total_limit) {
    const size_t limit = line_limit == 0 ? hard_line_limit : std::min(line_limit, hard_line_limit);
    std::vector<std::string> lines;
    std::string line;
    bool open_line = false;  // bytes read since the last '\n'
    uint64_t total = 0;      // bytes of the lines so far, their '\n's included
    std::vector<char> buf(size_t{64} << 10);
    auto refuse = [&](const std::string& what) { throw FileError(name + ":" + std::to_string(lines.size() + 1) + ": " + what); };
    auto too_long = [&] { refuse("a line longer than " + std::to_string(limit) + " bytes; split it into sentences of at most that"); };
    auto finish = [&] {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.size() > limit) too_long();
        lines.push_back(std::move(line));
        line.clear();
        open_line = false;
    };
    std::streambuf* sb = in.rdbuf();
    while (sb) {
        const std::streamsize got = sb->sgetn(buf.data(), static_cast<std::streamsize>(buf.size()));
        if (got <= 0) break;
        const char* p = buf.data();
        const char* const end = p + got;
        while (p < end) {
            const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
            const char* stop = nl ? nl : end;
            const auto n = static_cast<size_t>(stop - p) + (nl ? 1 : 0);
            total += n;
            if (total_limit > 0 && total > total_limit)
                refuse("the input passes " + std::to_string(total_limit) + " bytes, more than is read at once; give it in parts");
            // One byte more than the limit is allowed for a '\r' the line may end with.
            if (line.size() + static_cast<size_t>(stop - p) > limit + 1) too_long();
            line.append(p, stop);
            open_line = true;
            if (!nl) break;
            finish();
            p = nl + 1;
        }
    }
    if (open_line) finish();
    return lines;
}

}  // namespace attnviz
