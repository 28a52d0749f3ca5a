// Alignment links, and Pharaoh files (read and written).
#include "core/data/alignment_links.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/io/error.hpp"

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
long parse_position(const std::string& s) {
    if (s.empty() || s.size() > 9) return -1;
    long v = 0;
    for (const char c : s) {
        if (c < '0' || c > '9') return -1;
        v = v * 10 + (c - '0');
    }
    return v;
}

AlignmentLinks parse_pharaoh_line(const std::string& line, const std::string& where, PharaohBase base) {
    AlignmentLinks out;
    std::istringstream words(line);
    std::string w;
    const int offset = base == PharaohBase::one ? 1 : 0;
    while (words >> w) {
        const size_t sep = w.find_first_of("-p?");
        const long src = sep == std::string::npos ? -1 : parse_position(w.substr(0, sep));
        const long tgt = sep == std::string::npos ? -1 : parse_position(w.substr(sep + 1));
        if (src < 0 || tgt < 0)
            throw FileError(where + "'" + w + "' is not a link: expected 'i-j' (sure) or 'ipj' / 'i?j' (possible), " +
                            "i and j " + (offset ? "1" : "0") + "-based source and target positions");
        if (src < offset || tgt < offset)
            throw FileError(where + "'" + w + "': position 0 in a 1-based file (is the file 0-based?)");
        out.add(static_cast<int>(src - offset), static_cast<int>(tgt - offset), w[sep] == '-');
    }
    return out;
}
}  // namespace

std::vector<AlignmentLinks> parse_pharaoh(const std::string& text, const std::string& name, PharaohBase base) {
    std::vector<AlignmentLinks> out;
    size_t pos = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
    size_t line_no = 0;
    while (pos < text.size()) {
        size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        std::string line = text.substr(pos, end - pos);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        ++line_no;
        out.push_back(parse_pharaoh_line(line, name + ":" + std::to_string(line_no) + ": ", base));
        pos = end + 1;
    }
    return out;
}

std::vector<AlignmentLinks> read_pharaoh(const std::string& path, PharaohBase base) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw FileError("cannot open '" + path + "': " + std::strerror(errno));
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) throw FileError("cannot read '" + path + "'");
    return parse_pharaoh(text.str(), path, base);
}

}  // namespace attnviz
