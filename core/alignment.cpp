// Alignments from attention, Pharaoh files, AER and attention statistics.
#include "core/alignment.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/decode.hpp"
#include "core/error.hpp"

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

// --- hard alignments -----------------------------------------------------------------

AlignmentLinks hard_alignment(const std::vector<std::vector<float>>& attention, size_t src_len, size_t tgt_len,
                              float threshold) {
    AlignmentLinks out;
    for (size_t t = 0; t < std::min(attention.size(), tgt_len); ++t) {
        const auto& row = attention[t];
        if (row.empty()) continue;
        if (threshold > 0) {
            for (size_t s = 0; s < std::min(row.size(), src_len); ++s)
                if (row[s] >= threshold) out.add(static_cast<int>(s), static_cast<int>(t));
            continue;
        }
        const size_t best = static_cast<size_t>(std::max_element(row.begin(), row.end()) - row.begin());
        if (best < src_len) out.add(static_cast<int>(best), static_cast<int>(t));
    }
    return out;
}

AlignmentLinks hard_alignment(const Translation& t, size_t hypothesis, const HardAlignmentOptions& options) {
    if (hypothesis >= t.hypotheses.size())
        throw Error("no hypothesis " + std::to_string(hypothesis) + " to align: the translation has " +
                    std::to_string(t.hypotheses.size()));
    const Hypothesis& h = t.hypotheses[hypothesis];
    if (!t.attention_available || h.attention.size() != h.tokens.size())
        throw Error("no attention to align: the hypothesis has " + std::to_string(h.tokens.size()) + " tokens but " +
                    std::to_string(h.attention.size()) + " attention rows");
    auto real = [&](const std::vector<std::string>& tokens) {
        if (options.include_eos) return tokens.size();
        return static_cast<size_t>(std::find(tokens.begin(), tokens.end(), Vocab::eos_token) - tokens.begin());
    };
    return hard_alignment(h.attention, real(t.src_tokens), real(h.tokens), options.threshold);
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

// --- scores ----------------------------------------------------------------------------

namespace {
double ratio(size_t num, size_t den) {
    return den > 0 ? static_cast<double>(num) / static_cast<double>(den) : std::numeric_limits<double>::quiet_NaN();
}
}  // namespace

double AlignmentScore::aer() const {
    const size_t den = predicted + sure;
    return den > 0 ? 1.0 - ratio(predicted_sure + predicted_possible, den) : std::numeric_limits<double>::quiet_NaN();
}
double AlignmentScore::precision() const { return ratio(predicted_possible, predicted); }
double AlignmentScore::recall() const { return ratio(predicted_sure, sure); }
double AlignmentScore::accuracy() const { return ratio(correct_tokens, gold_tokens); }

AlignmentScore& AlignmentScore::operator+=(const AlignmentScore& o) {
    sentences += o.sentences;
    predicted += o.predicted;
    sure += o.sure;
    predicted_sure += o.predicted_sure;
    predicted_possible += o.predicted_possible;
    gold_tokens += o.gold_tokens;
    correct_tokens += o.correct_tokens;
    return *this;
}

AlignmentScore score_alignment(const AlignmentLinks& predicted, const AlignmentLinks& gold) {
    AlignmentScore s;
    s.sentences = 1;
    s.predicted = predicted.size();
    s.sure = gold.sure_count();
    // Per target token: does it have gold links, predicted ones, a predicted one outside P?
    struct Token {
        bool gold = false, predicted = false, wrong = false;
    };
    std::vector<Token> tokens;
    auto at = [&](int t) -> Token& {
        if (static_cast<size_t>(t) >= tokens.size()) tokens.resize(static_cast<size_t>(t) + 1);
        return tokens[static_cast<size_t>(t)];
    };
    for (const auto& l : gold.links()) at(l.tgt).gold = true;
    for (const auto& l : predicted.links()) {
        const bool in_p = gold.contains(l.src, l.tgt);
        s.predicted_possible += in_p ? 1 : 0;
        s.predicted_sure += gold.contains_sure(l.src, l.tgt) ? 1 : 0;
        Token& tok = at(l.tgt);
        tok.predicted = true;
        tok.wrong = tok.wrong || !in_p;
    }
    for (const auto& tok : tokens)
        if (tok.gold) {
            ++s.gold_tokens;
            s.correct_tokens += tok.predicted && !tok.wrong ? 1 : 0;
        }
    return s;
}

AlignmentScore score_alignments(const std::vector<AlignmentLinks>& predicted, const std::vector<AlignmentLinks>& gold) {
    if (predicted.size() != gold.size())
        throw Error("alignment scores: " + std::to_string(predicted.size()) + " predicted alignments but " +
                    std::to_string(gold.size()) + " gold ones");
    AlignmentScore total;
    for (size_t i = 0; i < gold.size(); ++i) total += score_alignment(predicted[i], gold[i]);
    return total;
}

// --- attention statistics -------------------------------------------------------------------

AttentionStats attention_stats(const std::vector<std::vector<float>>& attention) {
    AttentionStats st;
    std::vector<double> coverage;
    for (const auto& row : attention) {
        double entropy = 0.0;
        float top = row.empty() ? std::numeric_limits<float>::quiet_NaN() : row.front();
        if (coverage.size() < row.size()) coverage.resize(row.size(), 0.0);
        for (size_t s = 0; s < row.size(); ++s) {
            const double w = row[s];
            if (w > 0) entropy -= w * std::log(w);
            top = std::max(top, row[s]);
            coverage[s] += w;
        }
        st.entropy.push_back(static_cast<float>(entropy));
        st.max_weight.push_back(top);
    }
    st.coverage.assign(coverage.begin(), coverage.end());
    return st;
}

}  // namespace attnviz
