// Alignment links, and Pharaoh files (read and written).
#include "core/data/alignment_links.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "core/io/error.hpp"
#include "core/io/line_reader.hpp"
#include "core/io/message.hpp"

namespace attnviz {

// --- links ----------------------------------------------------------------------

namespace {
bool position_less(const AlignmentLink& a, int src, int tgt) { return a.src < src || (a.src == src && a.tgt < tgt); }
}  // namespace

void AlignmentLinks::add(int src, int tgt, bool sure) {
    if (src < 0 || tgt < 0)
        throw Error("alignment link " + std::to_string(src) + "-" + std::to_string(tgt) +
                    ": positions must be 0 or more");
    auto it = std::lower_bound(m_links.begin(), m_links.end(), 0, [&](const AlignmentLink& l, int) {
        return position_less(l, src, tgt);
    });
    if (it != m_links.end() && it->src == src && it->tgt == tgt)
        it->sure = it->sure || sure;
    else
        m_links.insert(it, AlignmentLink{src, tgt, sure});
}

const AlignmentLink* AlignmentLinks::find(int src, int tgt) const {
    auto it = std::lower_bound(m_links.begin(), m_links.end(), 0, [&](const AlignmentLink& l, int) {
        return position_less(l, src, tgt);
    });
    return it != m_links.end() && it->src == src && it->tgt == tgt ? &*it : nullptr;
}

size_t AlignmentLinks::sure_count() const {
    return static_cast<size_t>(std::count_if(m_links.begin(), m_links.end(), [](const auto& l) { return l.sure; }));
}

bool AlignmentLinks::contains(int src, int tgt) const { return find(src, tgt) != nullptr; }

bool AlignmentLinks::contains_sure(int src, int tgt) const {
    const AlignmentLink* l = find(src, tgt);
    return l && l->sure;
}

AlignmentLinks AlignmentLinks::transposed() const {
    AlignmentLinks out;
    for (const auto& l : m_links) out.add(l.tgt, l.src, l.sure);
    return out;
}

AlignmentLinks links_from_positions(const std::vector<int>& positions) {
    AlignmentLinks out;
    for (size_t t = 0; t < positions.size(); ++t)
        if (positions[t] >= 0) out.add(positions[t], static_cast<int>(t));
    return out;
}

// --- Pharaoh -------------------------------------------------------------------------

std::string to_pharaoh(const AlignmentLinks& links) {
    std::string out;
    for (const auto& l : links.links()) {
        if (!out.empty()) out += ' ';
        out += std::to_string(l.src) + (l.sure ? "-" : "p") + std::to_string(l.tgt);
    }
    return out;
}

std::string to_pharaoh(const std::vector<AlignmentLinks>& alignments) {
    std::string out;
    for (const auto& a : alignments) out += to_pharaoh(a) + "\n";
    return out;
}

namespace {
// A non-negative decimal number (the whole of s), or -1.
long parse_position(std::string_view s) {
    if (s.empty() || s.size() > 9) return -1;
    long v = 0;
    for (const char c : s) {
        if (c < '0' || c > '9') return -1;
        v = v * 10 + (c - '0');
    }
    return v;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r'; }

AlignmentLinks parse_pharaoh_line(std::string_view line, const std::string& where, PharaohBase base) {
    AlignmentLinks out;
    const int offset = base == PharaohBase::one ? 1 : 0;
    size_t i = 0;
    while (i < line.size()) {
        if (is_space(line[i])) {
            ++i;
            continue;
        }
        size_t end = i;
        while (end < line.size() && !is_space(line[end])) ++end;
        const std::string_view w = line.substr(i, end - i);
        i = end;
        const size_t sep = w.find_first_of("-p?");
        const long src = sep == std::string::npos ? -1 : parse_position(w.substr(0, sep));
        const long tgt = sep == std::string::npos ? -1 : parse_position(w.substr(sep + 1));
        if (src < 0 || tgt < 0)
            throw FileError(where + quote(w) + " is not a link: expected 'i-j' (sure) or 'ipj' / 'i?j' (possible), " +
                            "i and j " + (offset ? "1" : "0") + "-based source and target positions");
        if (src < offset || tgt < offset)
            throw FileError(where + quote(w) + ": position 0 in a 1-based file (is the file 0-based?)");
        out.add(static_cast<int>(src - offset), static_cast<int>(tgt - offset), w[sep] == '-');
    }
    return out;
}

/// Every line of a reader, as alignments.
std::vector<AlignmentLinks> parse_lines(detail::LineReader& reader, PharaohBase base) {
    std::vector<AlignmentLinks> out;
    std::string_view line;
    while (reader.next(line, hard_line_limit)) {
        const std::string where = reader.name() + ":" + std::to_string(reader.line_number()) + ": ";
        if (reader.too_long())
            throw FileError(where + "the line is " + std::to_string(reader.length()) + " bytes long, more than the " +
                            std::to_string(hard_line_limit) + " a line of links may be");
        out.push_back(parse_pharaoh_line(line, where, base));
    }
    return out;
}
}  // namespace

std::vector<AlignmentLinks> parse_pharaoh(const std::string& text, const std::string& name, PharaohBase base) {
    auto reader = detail::LineReader::from_memory(text, name);
    return parse_lines(reader, base);
}

std::vector<AlignmentLinks> read_pharaoh(const std::string& path, PharaohBase base) {
    // Checked like a corpus (core/io/line_reader.hpp): a regular file (never a FIFO or a
    // device), at most max_pharaoh_file_bytes, read a line at a time.
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > max_pharaoh_file_bytes)
        throw FileError(quote(path, 400) + " is " + std::to_string(st.st_size) + " bytes, more than the " +
                        std::to_string(max_pharaoh_file_bytes) + " an alignment file may be");
    auto reader = detail::LineReader::open_file(path, max_pharaoh_file_bytes);
    return parse_lines(reader, base);
}

}  // namespace attnviz
