// tokenizer.json read and run as the `tokenizers` library runs it (core/text/tokenizer_json.hpp).
//
// Each component mirrors the library's (tokenizers 0.2x, src/{models,normalizers,pre_tokenizers,
// processors,decoders}, added_vocabulary.rs), without the offsets it also tracks: attnviz needs ids,
// tokens and text. Where the library's behaviour is surprising it is kept and said so (a Unigram
// piece matched by a Precompiled rule on its first grapheme prefix, Metaspace's decoder dropping every
// "▁" of the first token, BPE's byte fallback not flushing a pending unknown token).
#include "core/text/tokenizer_json.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/uchar.h>
#include <unicode/utext.h>
#include <unicode/utf8.h>

#include "core/io/base64.hpp"
#include "core/io/error.hpp"
#include "core/io/json_bounded.hpp"
#include "core/io/message.hpp"
#include "core/text/sentencepiece_charsmap.hpp"
#include "core/text/unicode.hpp"

namespace attnviz {

// A named namespace, not an anonymous one: the unity build puts this file beside others that
// define helpers of the same names.
namespace tokenizer_json_detail {

using json = nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Unicode helpers (the text is valid UTF-8 throughout: checked on entry, and every component
// writes valid UTF-8)

/// The code point at s[i], advancing i; U+FFFD for a byte that does not start a character.
inline UChar32 next_cp(const std::string& s, size_t& i) {
    const auto* p = reinterpret_cast<const uint8_t*>(s.data());
    const auto n = static_cast<int32_t>(s.size());
    auto k = static_cast<int32_t>(i);
    UChar32 c = 0;
    U8_NEXT(p, k, n, c);
    i = static_cast<size_t>(k);
    return c < 0 ? 0xFFFD : c;
}

inline void append_cp(std::string& out, UChar32 c) {
    char buf[4];
    int32_t n = 0;
    UBool error = false;
    U8_APPEND(reinterpret_cast<uint8_t*>(buf), n, 4, c, error);
    if (!error) out.append(buf, static_cast<size_t>(n));
}

/// Rust's char::is_whitespace (the White_Space property).
inline bool is_ws(UChar32 c) {
    if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
    return u_hasBinaryProperty(c, UCHAR_WHITE_SPACE);
}
/// Rust's char::is_numeric (general categories Nd, Nl, No).
inline bool is_numeric(UChar32 c) {
    if (c < 0x80) return c >= '0' && c <= '9';
    const int8_t t = u_charType(c);
    return t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER;
}
/// Rust's char::is_alphanumeric.
inline bool is_alnum(UChar32 c) {
    if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    return u_hasBinaryProperty(c, UCHAR_ALPHABETIC) || is_numeric(c);
}
/// The regex crate's \w: Alphabetic, marks, decimal digits, connector punctuation, join controls.
inline bool is_word(UChar32 c) {
    if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (c == 0x200C || c == 0x200D || u_hasBinaryProperty(c, UCHAR_ALPHABETIC)) return true;
    const int8_t t = u_charType(c);
    return t == U_NON_SPACING_MARK || t == U_ENCLOSING_MARK || t == U_COMBINING_SPACING_MARK ||
           t == U_DECIMAL_DIGIT_NUMBER || t == U_CONNECTOR_PUNCTUATION;
}
/// The tokenizers library's is_punc: ASCII punctuation (symbols such as $ + < = > ^ ` | ~ too) or P*.
inline bool is_punc(UChar32 c) {
    if (c < 0x80) return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
    const int8_t t = u_charType(c);
    return t == U_CONNECTOR_PUNCTUATION || t == U_DASH_PUNCTUATION || t == U_START_PUNCTUATION ||
           t == U_END_PUNCTUATION || t == U_INITIAL_PUNCTUATION || t == U_FINAL_PUNCTUATION || t == U_OTHER_PUNCTUATION;
}

inline bool is_ascii(const std::string& s) {
    for (const char c : s)
        if (static_cast<unsigned char>(c) >= 0x80) return false;
    return true;
}

void icu_check(UErrorCode status, const char* what) {
    if (U_FAILURE(status)) throw Error(std::string("ICU ") + what + " failed: " + u_errorName(status));
}

/// Bytes as Rust's String::from_utf8_lossy makes them text: each maximal ill-formed part one U+FFFD.
std::string utf8_lossy(const std::string& bytes) {
    std::string out;
    out.reserve(bytes.size());
    const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
    const auto n = static_cast<int32_t>(std::min<size_t>(bytes.size(), INT32_MAX));
    int32_t i = 0;
    while (i < n) {
        const int32_t start = i;
        UChar32 c = 0;
        U8_NEXT(p, i, n, c);
        if (c < 0) out += "\xEF\xBF\xBD";
        else out.append(bytes, static_cast<size_t>(start), static_cast<size_t>(i - start));
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// GPT-2's byte-to-unicode map (ByteLevel): printable bytes stand for themselves, the others for
// U+0100 onwards in byte order.

struct ByteMap {
    std::string to_char[256];
    std::unordered_map<UChar32, uint8_t> to_byte;
    ByteMap() {
        int n = 0;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            const UChar32 c = printable ? b : 256 + n++;
            append_cp(to_char[b], c);
            to_byte[c] = static_cast<uint8_t>(b);
        }
    }
};
const ByteMap& byte_map() {
    static const ByteMap m;
    return m;
}

// ---------------------------------------------------------------------------------------------
// A byte trie over a set of strings: longest match at a position (added tokens) and every prefix
// match (Unigram). Built from sorted keys into arrays: a node's edges are contiguous and sorted.

class Trie {
public:
    /// keys: (bytes, value); values >= 0. A key given twice keeps the last value.
    void build(std::vector<std::pair<std::string, int32_t>> keys) {
        std::stable_sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        m_value.assign(1, -1);
        struct Edge {
            uint32_t parent, child;
            uint8_t label;
        };
        std::vector<Edge> edges;
        std::vector<uint32_t> path{0};  // path[d]: the node after d bytes of the previous key
        std::string prev;
        for (const auto& [key, value] : keys) {
            size_t common = 0;
            while (common < key.size() && common < prev.size() && key[common] == prev[common]) ++common;
            path.resize(std::min(path.size(), common + 1));
            for (size_t d = common; d < key.size(); ++d) {
                const auto child = static_cast<uint32_t>(m_value.size());
                m_value.push_back(-1);
                edges.push_back({path[d], child, static_cast<uint8_t>(key[d])});
                path.push_back(child);
            }
            m_value[path[key.size()]] = value;
            prev = key;
        }
        std::stable_sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.parent < b.parent; });
        m_begin.assign(m_value.size() + 1, 0);
        m_label.resize(edges.size());
        m_child.resize(edges.size());
        for (size_t e = 0; e < edges.size(); ++e) {
            ++m_begin[edges[e].parent + 1];
            m_label[e] = edges[e].label;
            m_child[e] = edges[e].child;
        }
        for (size_t n = 0; n < m_value.size(); ++n) m_begin[n + 1] += m_begin[n];
        std::fill(std::begin(m_root), std::end(m_root), 0u);
        for (uint32_t e = m_begin[0]; e < m_begin[1]; ++e) m_root[m_label[e]] = m_child[e];
    }
    bool empty() const { return m_value.size() <= 1; }

    /// The node after byte c from `node`, or 0 (the root is never a child).
    uint32_t step(uint32_t node, uint8_t c) const {
        if (node == 0) return m_root[c];
        const uint32_t b = m_begin[node], e = m_begin[node + 1];
        if (e - b <= 8) {
            for (uint32_t k = b; k < e; ++k)
                if (m_label[k] == c) return m_child[k];
            return 0;
        }
        const auto* first = m_label.data() + b;
        const auto* last = m_label.data() + e;
        const auto* it = std::lower_bound(first, last, c);
        return it != last && *it == c ? m_child[b + static_cast<uint32_t>(it - first)] : 0;
    }
    int32_t value(uint32_t node) const { return m_value[node]; }

    /// Calls f(end, value) for every key that starts at `at`, shortest first.
    template <class F>
    void prefixes(const std::string& s, size_t at, F&& f) const {
        uint32_t node = 0;
        for (size_t i = at; i < s.size(); ++i) {
            node = step(node, static_cast<uint8_t>(s[i]));
            if (node == 0) return;
            if (m_value[node] >= 0) f(i + 1, m_value[node]);
        }
    }
    /// The longest key starting at `at`: (length, value), or (0, -1).
    std::pair<size_t, int32_t> longest(const std::string& s, size_t at) const {
        std::pair<size_t, int32_t> best{0, -1};
        prefixes(s, at, [&](size_t end, int32_t v) { best = {end - at, v}; });
        return best;
    }

private:
    std::vector<int32_t> m_value;
    std::vector<uint32_t> m_begin, m_child;
    std::vector<uint8_t> m_label;
    uint32_t m_root[256] = {};
};

// ---------------------------------------------------------------------------------------------
// Reading: the file's name, the bounds, and helpers that name the JSON path in every message.

struct Reader {
    std::string what;
    TokenizerJsonLimits limits;
    size_t components = 0;

    [[noreturn]] void fail(const std::string& path, const std::string& message) const {
        throw FileError(what + ": " + path + ": " + message);
    }
    [[noreturn]] void expected(const std::string& path, const std::string& what_expected, const json& got) const {
        fail(path, "expected " + what_expected + ", got " + describe_json(got));
    }
    void count_component(const std::string& path) {
        if (++components > limits.max_components)
            fail(path, "more than " + std::to_string(limits.max_components) + " components, more than attnviz reads");
    }
    /// obj[key], or nullptr when absent or null.
    static const json* field(const json& obj, const char* key) {
        const auto it = obj.find(key);
        return it == obj.end() || it->is_null() ? nullptr : &*it;
    }
    const json& need(const json& obj, const std::string& path, const char* key) const {
        const json* v = field(obj, key);
        if (!v) fail(path, std::string("has no \"") + key + "\"");
        return *v;
    }
    std::string string_of(const json& v, const std::string& path) const {
        if (!v.is_string()) expected(path, "a string", v);
        return v.get<std::string>();
    }
    std::string need_string(const json& obj, const std::string& path, const char* key) const {
        return string_of(need(obj, path, key), path + "." + key);
    }
    std::string opt_string(const json& obj, const std::string& path, const char* key, const std::string& dflt) const {
        const json* v = field(obj, key);
        return v ? string_of(*v, path + "." + key) : dflt;
    }
    bool opt_bool(const json& obj, const std::string& path, const char* key, bool dflt) const {
        const json* v = field(obj, key);
        if (!v) return dflt;
        if (!v->is_boolean()) expected(path + "." + key, "true or false", *v);
        return v->get<bool>();
    }
    int64_t int_of(const json& v, const std::string& path, int64_t lo, int64_t hi) const {
        if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
            expected(path, "an integer from " + std::to_string(lo) + " to " + std::to_string(hi), v);
        return v.get<int64_t>();
    }
    int64_t opt_int(const json& obj, const std::string& path, const char* key, int64_t dflt, int64_t lo, int64_t hi) const {
        const json* v = field(obj, key);
        return v ? int_of(*v, path + "." + key, lo, hi) : dflt;
    }
    const json& object_of(const json& v, const std::string& path) const {
        if (!v.is_object()) expected(path, "a JSON object", v);
        return v;
    }
    const json& array_of(const json& v, const std::string& path) const {
        if (!v.is_array()) expected(path, "an array", v);
        return v;
    }
    /// One character (Metaspace's replacement, Strip's content, CharDelimiterSplit's delimiter).
    UChar32 char_of(const json& v, const std::string& path) const {
        const std::string s = string_of(v, path);
        size_t i = 0;
        if (s.empty()) expected(path, "one character", v);
        const UChar32 c = next_cp(s, i);
        if (i != s.size()) expected(path, "one character", v);
        return c;
    }
    void check_token(const std::string& token, const std::string& path) const {
        if (token.size() > limits.max_token_bytes)
            fail(path, "a token of " + std::to_string(token.size()) + " bytes, more than the " +
                           std::to_string(limits.max_token_bytes) + " attnviz reads");
    }
    std::string type_of(const json& v, const std::string& path) const {
        object_of(v, path);
        return need_string(v, path, "type");
    }
    [[noreturn]] void unknown(const std::string& path, const std::string& kind, const std::string& type) const {
        fail(path, "unknown " + kind + " type " + quote(type) + "; attnviz reads " + TokenizerJson::supported(kind));
    }
};

// ---------------------------------------------------------------------------------------------
// Regular expressions: ICU's, on UTF-8 text (a UText's native indexes are byte offsets).

/// How much work one search may do (ICU's time limit, in its units of about a millisecond's
/// matching): a pattern that backtracks without end on a text is an error, not a hang.
constexpr int32_t k_regex_time_limit = 2000;

/// A pattern of Oniguruma's Ruby syntax (the library's regular expressions) in ICU's: Ruby's \h and
/// \H are hex digits and their complement (horizontal space in ICU), Ruby's option m is ICU's s (dot
/// matches a newline; ICU's m is what Ruby's ^ and $ always do, set by the flags).
std::string ruby_to_icu(const std::string& p) {
    std::string out;
    out.reserve(p.size());
    int in_class = 0;
    for (size_t i = 0; i < p.size(); ++i) {
        const char c = p[i];
        if (c == '\\' && i + 1 < p.size()) {
            const char n = p[++i];
            if (n == 'h')
                out += in_class ? "0-9a-fA-F" : "[0-9a-fA-F]";
            else if (n == 'H')
                out += in_class ? "\\x{0}-\\x{2F}\\x{3A}-\\x{40}\\x{47}-\\x{60}\\x{67}-\\x{10FFFF}" : "[^0-9a-fA-F]";
            else
                out += c, out += n;
            continue;
        }
        if (c == '[') {
            ++in_class;
        } else if (c == ']' && in_class) {
            --in_class;
        } else if (!in_class && c == '(' && i + 2 < p.size() && p[i + 1] == '?') {
            size_t k = i + 2;
            std::string flags;
            while (k < p.size() && (p[k] == 'i' || p[k] == 'm' || p[k] == 'x' || p[k] == '-')) flags += p[k++];
            if (!flags.empty() && k < p.size() && (p[k] == ')' || p[k] == ':')) {
                for (char& f : flags)
                    if (f == 'm') f = 's';
                out += "(?" + flags;
                i = k - 1;
                continue;
            }
        }
        out += c;
    }
    return out;
}

class Regex {
public:
    Regex(const std::string& pattern, const Reader& r, const std::string& path) {
        if (pattern.size() > r.limits.max_pattern_bytes)
            r.fail(path, "a pattern of " + std::to_string(pattern.size()) + " bytes, more than the " +
                             std::to_string(r.limits.max_pattern_bytes) + " attnviz reads");
        UErrorCode status = U_ZERO_ERROR;
        UParseError pe{};
        // Ruby's ^ and $ match at every line, its dot is anything but \n: ICU's multiline and Unix lines.
        m_pattern.reset(icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(ruby_to_icu(pattern)),
                                                   UREGEX_MULTILINE | UREGEX_UNIX_LINES, pe, status));
        if (U_FAILURE(status) || !m_pattern)
            r.fail(path, "the regular expression " + quote(pattern) + " is not one ICU reads (" + u_errorName(status) +
                             " at offset " + std::to_string(pe.offset) + ")");
    }
    /// Every match in s, left to right, as byte ranges (an empty match is one too; the search goes on past
    /// it), but an empty match where the last one ended (Oniguruma's iterator in the library skips it).
    void find_all(const std::string& s, std::vector<std::pair<size_t, size_t>>& out) const {
        out.clear();
        UErrorCode status = U_ZERO_ERROR;
        UText ut = UTEXT_INITIALIZER;
        utext_openUTF8(&ut, s.data(), static_cast<int64_t>(s.size()), &status);
        icu_check(status, "utext_openUTF8");
        std::unique_ptr<icu::RegexMatcher> m(m_pattern->matcher(status));
        if (U_FAILURE(status)) {
            utext_close(&ut);
            icu_check(status, "RegexPattern::matcher");
        }
        m->reset(&ut);
        m->setTimeLimit(k_regex_time_limit, status);
        while (U_SUCCESS(status) && m->find(status)) {
            const int64_t b = m->start64(status), e = m->end64(status);
            if (U_FAILURE(status)) break;
            if (b == e && !out.empty() && out.back().second == static_cast<size_t>(b)) continue;
            out.emplace_back(static_cast<size_t>(b), static_cast<size_t>(e));
        }
        utext_close(&ut);
        if (status == U_REGEX_TIME_OUT || status == U_REGEX_STACK_OVERFLOW)
            throw Error("tokenizer.json: a regular expression took too long on this text (" + std::string(u_errorName(status)) + ")");
        icu_check(status, "regular expression search");
    }

private:
    std::unique_ptr<icu::RegexPattern> m_pattern;
};

void gpt2_matches(const std::string& s, std::vector<std::pair<size_t, size_t>>& out);
/// GPT-2's pre-tokenizer pattern (ByteLevel's, and many a Split's).
const char* const k_gpt2_pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/// A Split / Replace pattern: {"String": "..."} (literal) or {"Regex": "..."}.
struct Pattern {
    std::string literal;
    std::unique_ptr<Regex> regex;
    bool gpt2 = false;  ///< the regex is GPT-2's: matched by hand (gpt2_matches), faster than ICU

    static Pattern read(const json& v, const Reader& r, const std::string& path) {
        r.object_of(v, path);
        Pattern p;
        if (const json* s = Reader::field(v, "String")) {
            p.literal = r.string_of(*s, path + ".String");
            if (p.literal.size() > r.limits.max_pattern_bytes)
                r.fail(path + ".String", "a pattern of " + std::to_string(p.literal.size()) + " bytes, more than attnviz reads");
        } else if (const json* x = Reader::field(v, "Regex")) {
            const std::string re = r.string_of(*x, path + ".Regex");
            p.regex = std::make_unique<Regex>(re, r, path + ".Regex");
            p.gpt2 = re == k_gpt2_pattern;
        } else {
            r.expected(path, "{\"String\": ...} or {\"Regex\": ...}", v);
        }
        return p;
    }
    /// Every match, non-overlapping, left to right (a literal's: the regex of the escaped literal's).
    void find_all(const std::string& s, std::vector<std::pair<size_t, size_t>>& out) const {
        out.clear();
        if (s.empty()) return;  // the library's find_matches: none in an empty text, whatever the pattern
        if (gpt2) return gpt2_matches(s, out);
        if (regex) return regex->find_all(s, out);
        if (literal.empty()) {
            // The library escapes a literal into a regular expression: an empty one matches at every
            // character's boundary.
            for (size_t at = 0; at <= s.size(); ++at)
                if (at == s.size() || (static_cast<unsigned char>(s[at]) & 0xC0) != 0x80) out.emplace_back(at, at);
            return;
        }
        for (size_t at = s.find(literal); at != std::string::npos; at = s.find(literal, at + literal.size()))
            out.emplace_back(at, at + literal.size());
    }
};

/// Text with every match of a pattern replaced.
std::string replace_matches(const std::string& s, const Pattern& p, const std::string& content) {
    thread_local std::vector<std::pair<size_t, size_t>> matches;
    p.find_all(s, matches);
    if (matches.empty()) return s;
    std::string out;
    size_t prev = 0;
    for (const auto& [b, e] : matches) {
        out.append(s, prev, b - prev);
        out += content;
        prev = e;
    }
    out.append(s, prev, std::string::npos);
    return out;
}

// ---------------------------------------------------------------------------------------------
// Splitting a piece: the library's find_matches + SplitDelimiterBehavior.

enum class Behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

Behavior read_behavior(const json& obj, const Reader& r, const std::string& path, Behavior dflt) {
    const json* v = Reader::field(obj, "behavior");
    if (!v) return dflt;
    const std::string b = r.string_of(*v, path + ".behavior");
    if (b == "Removed") return Behavior::removed;
    if (b == "Isolated") return Behavior::isolated;
    if (b == "MergedWithPrevious") return Behavior::merged_with_previous;
    if (b == "MergedWithNext") return Behavior::merged_with_next;
    if (b == "Contiguous") return Behavior::contiguous;
    r.expected(path + ".behavior", "Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous", *v);
}

struct Span {
    size_t b, e;
    bool match;
};

/// Pieces of [0, n) from matches (sorted, non-overlapping): the gaps as non-matches.
void spans_of_matches(size_t n, const std::vector<std::pair<size_t, size_t>>& matches, std::vector<Span>& out) {
    out.clear();
    if (n == 0) {
        out.push_back({0, 0, false});
        return;
    }
    size_t prev = 0;
    for (const auto& [b, e] : matches) {
        if (prev != b) out.push_back({prev, b, false});
        out.push_back({b, e, true});
        prev = e;
    }
    if (prev != n) out.push_back({prev, n, false});
}

/// Pieces of s where each character satisfying `pred` is a match of its own.
template <class Pred>
void spans_of_chars(const std::string& s, Pred&& pred, std::vector<Span>& out) {
    out.clear();
    if (s.empty()) {
        out.push_back({0, 0, false});
        return;
    }
    size_t last = 0, i = 0;
    while (i < s.size()) {
        const size_t b = i;
        const UChar32 c = next_cp(s, i);
        if (pred(c)) {
            if (last < b) out.push_back({last, b, false});
            out.push_back({b, i, true});
            last = i;
        }
    }
    if (i > last) out.push_back({last, i, false});
}

/// Pieces of a piece, with where each starts in it (a piece starting at byte 0 of a text that starts
/// at the original text's first byte does too: Metaspace's prepend_scheme "first" asks).
struct Parts {
    std::vector<std::string> text;
    std::vector<size_t> start;
    void add(const std::string& s, size_t b, size_t n, size_t base = 0) {
        text.emplace_back(s, b, n);
        start.push_back(base + b);
    }
    void clear() {
        text.clear();
        start.clear();
    }
};

/// NormalizedString::split: the spans a behavior keeps, appended to `out` (empty ones dropped).
void split_spans(const std::string& s, std::vector<Span>& spans, Behavior behavior, bool invert, Parts& out, size_t base = 0) {
    if (invert)
        for (auto& sp : spans) sp.match = !sp.match;
    std::vector<std::pair<std::pair<size_t, size_t>, bool>> keep;  // (range, remove)
    keep.reserve(spans.size());
    switch (behavior) {
    case Behavior::isolated:
        for (const auto& sp : spans) keep.push_back({{sp.b, sp.e}, false});
        break;
    case Behavior::removed:
        for (const auto& sp : spans) keep.push_back({{sp.b, sp.e}, sp.match});
        break;
    case Behavior::contiguous: {
        bool previous = false;
        for (const auto& sp : spans) {
            if (sp.match == previous && !keep.empty()) keep.back().first.second = sp.e;
            else keep.push_back({{sp.b, sp.e}, false});
            previous = sp.match;
        }
        break;
    }
    case Behavior::merged_with_previous: {
        bool previous = false;
        for (const auto& sp : spans) {
            if (sp.match && !previous && !keep.empty()) keep.back().first.second = sp.e;
            else keep.push_back({{sp.b, sp.e}, false});
            previous = sp.match;
        }
        break;
    }
    case Behavior::merged_with_next: {
        bool previous = false;
        for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
            if (it->match && !previous && !keep.empty()) keep.back().first.first = it->b;
            else keep.push_back({{it->b, it->e}, false});
            previous = it->match;
        }
        std::reverse(keep.begin(), keep.end());
        break;
    }
    }
    for (const auto& [range, remove] : keep)
        if (!remove && range.second > range.first) out.add(s, range.first, range.second - range.first, base);
}

// ---------------------------------------------------------------------------------------------
// Normalizers

struct Normalizer {
    virtual ~Normalizer() = default;
    /// Normalizes s; clears `start` when its first character no longer comes from the text's first
    /// (a leading one removed), as the library's alignments would say.
    virtual void apply(std::string& s, bool& start) const = 0;
    void normalize(std::string& s) const {
        bool start = true;
        apply(s, start);
    }
};
using NormalizerPtr = std::unique_ptr<Normalizer>;

struct SequenceNormalizer : Normalizer {
    std::vector<NormalizerPtr> parts;
    void apply(std::string& s, bool& start) const override {
        for (const auto& p : parts) p->apply(s, start);
    }
};

struct UnicodeNormalizer : Normalizer {
    const icu::Normalizer2* n = nullptr;
    void apply(std::string& s, bool& start) const override {
        if (is_ascii(s)) return;
        UErrorCode status = U_ZERO_ERROR;
        const icu::StringPiece piece(s.data(), static_cast<int32_t>(s.size()));
        if (n->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return;
        status = U_ZERO_ERROR;
        std::string out;
        out.reserve(s.size());
        icu::StringByteSink<std::string> sink(&out);
        n->normalizeUTF8(0, piece, sink, nullptr, status);
        icu_check(status, "Unicode normalization");
        s = std::move(out);
    }
};

/// Lower-casing character by character, as the library's (Rust's char::to_lowercase): full mappings
/// ('İ' -> "i̇"), but no context, so 'Σ' is always 'σ' (ICU on a whole string would make a final one 'ς').
struct LowercaseNormalizer : Normalizer {
    void apply(std::string& s, bool& start) const override {
        if (is_ascii(s)) {
            for (char& c : s)
                if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
            return;
        }
        static const std::string sigma = "\xCE\xA3", small_sigma = "\xCF\x83";
        if (s.find(sigma) == std::string::npos) {
            s = lower_like_python_of_valid(s);
            return;
        }
        std::string out;
        size_t prev = 0;
        for (size_t at = s.find(sigma); at != std::string::npos; at = s.find(sigma, prev)) {
            out += lower_like_python_of_valid(s.substr(prev, at - prev));
            out += small_sigma;
            prev = at + sigma.size();
        }
        out += lower_like_python_of_valid(s.substr(prev));
        s = std::move(out);
    }
};

struct StripNormalizer : Normalizer {
    bool left = true, right = true;
    void apply(std::string& s, bool& start) const override {
        size_t b = 0, e = s.size();
        if (left)
            while (b < e) {
                size_t i = b;
                if (!is_ws(next_cp(s, i))) break;
                b = i;
            }
        if (b > 0) start = false;
        if (right)
            while (e > b) {
                size_t k = e - 1;
                while (k > b && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
                size_t i = k;
                if (!is_ws(next_cp(s, i))) break;
                e = k;
            }
        s = s.substr(b, e - b);
    }
};

struct StripAccentsNormalizer : Normalizer {
    /// true: every combining mark (Mn, Mc, Me), as the StripAccents normalizer; false: non-spacing
    /// marks (Mn) alone, as BertNormalizer's strip_accents (Devanagari's vowel signs stay there).
    bool every_mark = true;
    explicit StripAccentsNormalizer(bool every = true) : every_mark(every) {}
    void apply(std::string& s, bool& start) const override {
        if (is_ascii(s)) return;
        std::string out;
        out.reserve(s.size());
        size_t i = 0;
        while (i < s.size()) {
            const size_t b = i;
            const int8_t t = u_charType(next_cp(s, i));
            const bool mark = t == U_NON_SPACING_MARK || (every_mark && (t == U_COMBINING_SPACING_MARK || t == U_ENCLOSING_MARK));
            if (!mark) out.append(s, b, i - b);
            else if (out.empty()) start = false;
        }
        s = std::move(out);
    }
};

struct PrependNormalizer : Normalizer {
    std::string prepend;
    void apply(std::string& s, bool& start) const override {
        if (!s.empty()) s.insert(0, prepend);
    }
};

struct ReplaceNormalizer : Normalizer {
    Pattern pattern;
    std::string content;
    void apply(std::string& s, bool& start) const override {
        if (content.empty() && !s.empty()) {  // a match at the start removed: the text starts later
            thread_local std::vector<std::pair<size_t, size_t>> first;
            pattern.find_all(s, first);
            if (!first.empty() && first[0].first == 0 && first[0].second > 0) start = false;
        }
        s = replace_matches(s, pattern, content);
    }
};

/// SentencePiece's rule table, as the library's Precompiled applies it: each grapheme cluster of
/// fewer than 6 bytes is replaced whole by the rule of its shortest matching prefix, if any; else
/// each of its characters by its own rule, if any. (A leading character a rule removes leaves the
/// start where it was: the library's alignments do not record that removal.)
struct PrecompiledNormalizer : Normalizer {
    std::string table;  // checked by sentencepiece_charsmap_problem
    std::vector<uint32_t> units;
    std::string normalized;

    static uint32_t offset_of(uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); }

    /// The rule string of the shortest prefix of [b, e) that has one, or nullptr.
    const char* transform(const std::string& s, size_t b, size_t e, size_t& len) const {
        if (units.empty()) return nullptr;
        uint64_t node = offset_of(units[0]);
        for (size_t i = b; i < e; ++i) {
            const auto c = static_cast<uint8_t>(s[i]);
            if (c == 0) return nullptr;
            node ^= c;
            if (node >= units.size()) return nullptr;
            const uint32_t unit = units[static_cast<size_t>(node)];
            if ((unit & 0x800000FFu) != c) return nullptr;
            node ^= offset_of(unit);
            if (node >= units.size()) return nullptr;
            if ((unit >> 8) & 1u) {
                const uint32_t value = units[static_cast<size_t>(node)] & 0x7FFFFFFFu;
                if (value >= normalized.size()) return nullptr;
                const char* p = normalized.data() + value;
                len = std::strlen(p);  // a NUL follows: checked
                return p;
            }
        }
        return nullptr;
    }

    void grapheme(const std::string& s, size_t b, size_t e, std::string& out) const {
        size_t len = 0;
        if (e - b < 6)
            if (const char* p = transform(s, b, e, len)) {
                out.append(p, len);
                return;
            }
        size_t i = b;
        while (i < e) {
            const size_t cb = i;
            next_cp(s, i);
            if (const char* p = transform(s, cb, i, len)) out.append(p, len);
            else out.append(s, cb, i - cb);
        }
    }

    void apply(std::string& s, bool& start) const override {
        if (units.empty()) return;
        std::string out;
        out.reserve(s.size() + 8);
        if (is_ascii(s)) {
            for (size_t i = 0; i < s.size(); ++i) {
                const size_t n = (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ? 2 : 1;
                grapheme(s, i, i + n, out);
                i += n - 1;
            }
        } else {
            size_t at = 0;
            for (const auto& g : grapheme_clusters(s)) {
                grapheme(s, at, at + g.size(), out);
                at += g.size();
            }
        }
        s = std::move(out);
    }
};

/// BERT's: control characters dropped and whitespace made ' ', CJK characters between spaces,
/// accents stripped (NFD, then no Mn), lower-cased.
struct BertNormalizer : Normalizer {
    bool clean_text = true, chinese = true, strip_accents = false, lowercase = true;
    static bool is_chinese(UChar32 c) {
        return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
               (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
               (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
    }
    void apply(std::string& s, bool& start) const override {
        std::string out;
        out.reserve(s.size());
        size_t i = 0;
        while (i < s.size()) {
            const size_t b = i;
            const UChar32 c = next_cp(s, i);
            if (clean_text) {
                const bool tnr = c == '\t' || c == '\n' || c == '\r';
                const int8_t t = u_charType(c);
                // The library's is_control: Cc, Cf and Co (unassigned code points stay, as there).
                const bool control = !tnr && (t == U_CONTROL_CHAR || t == U_FORMAT_CHAR || t == U_SURROGATE ||
                                              t == U_PRIVATE_USE_CHAR);
                const bool ws = tnr || is_ws(c);
                if (c == 0 || c == 0xFFFD || control) {
                    if (out.empty()) start = false;
                    continue;
                }
                if (ws) {
                    out += ' ';
                    continue;
                }
            }
            if (chinese && is_chinese(c)) {
                out += ' ';
                out.append(s, b, i - b);
                out += ' ';
                continue;
            }
            out.append(s, b, i - b);
        }
        if (strip_accents) {
            UnicodeNormalizer nfd;
            UErrorCode status = U_ZERO_ERROR;
            nfd.n = icu::Normalizer2::getNFDInstance(status);
            icu_check(status, "Normalizer2::getNFDInstance");
            nfd.apply(out, start);
            StripAccentsNormalizer{false}.apply(out, start);
        }
        if (lowercase) LowercaseNormalizer{}.apply(out, start);
        s = std::move(out);
    }
};

NormalizerPtr read_normalizer(const json& v, Reader& r, const std::string& path) {
    const std::string type = r.type_of(v, path);
    r.count_component(path);
    if (type == "Sequence") {
        auto n = std::make_unique<SequenceNormalizer>();
        const json& list = r.array_of(r.need(v, path, "normalizers"), path + ".normalizers");
        for (size_t i = 0; i < list.size(); ++i)
            n->parts.push_back(read_normalizer(list[i], r, path + ".normalizers[" + std::to_string(i) + "]"));
        return n;
    }
    if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
        auto n = std::make_unique<UnicodeNormalizer>();
        UErrorCode status = U_ZERO_ERROR;
        n->n = type == "NFC"    ? icu::Normalizer2::getNFCInstance(status)
               : type == "NFD"  ? icu::Normalizer2::getNFDInstance(status)
               : type == "NFKC" ? icu::Normalizer2::getNFKCInstance(status)
                                : icu::Normalizer2::getNFKDInstance(status);
        icu_check(status, "Normalizer2");
        return n;
    }
    if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
    if (type == "StripAccents") return std::make_unique<StripAccentsNormalizer>();
    if (type == "Strip") {
        auto n = std::make_unique<StripNormalizer>();
        n->left = r.opt_bool(v, path, "strip_left", true);
        n->right = r.opt_bool(v, path, "strip_right", true);
        return n;
    }
    if (type == "Prepend") {
        auto n = std::make_unique<PrependNormalizer>();
        n->prepend = r.need_string(v, path, "prepend");
        r.check_token(n->prepend, path + ".prepend");
        return n;
    }
    if (type == "Replace") {
        auto n = std::make_unique<ReplaceNormalizer>();
        n->pattern = Pattern::read(r.need(v, path, "pattern"), r, path + ".pattern");
        n->content = r.need_string(v, path, "content");
        r.check_token(n->content, path + ".content");
        return n;
    }
    if (type == "Precompiled") {
        auto n = std::make_unique<PrecompiledNormalizer>();
        const json* c = Reader::field(v, "precompiled_charsmap");
        const std::string text = c ? r.string_of(*c, path + ".precompiled_charsmap") : std::string();
        if (text.size() > 4 * max_sentencepiece_charsmap_bytes / 3 + 8)
            r.fail(path + ".precompiled_charsmap", "a rule table of " + std::to_string(text.size()) +
                                                       " base64 characters, more than attnviz reads");
        try {
            n->table = base64_decode(text);
        } catch (const Error& e) {
            r.fail(path + ".precompiled_charsmap", std::string("expected base64: ") + e.what());
        }
        if (const std::string problem = sentencepiece_charsmap_problem(n->table); !problem.empty())
            r.fail(path + ".precompiled_charsmap", "its normalizer rule table " + problem);
        if (!n->table.empty()) {
            uint32_t trie_bytes = 0;
            for (int i = 0; i < 4; ++i) trie_bytes |= uint32_t{static_cast<uint8_t>(n->table[static_cast<size_t>(i)])} << (8 * i);
            n->units.resize(trie_bytes / 4);
            for (size_t i = 0; i < n->units.size(); ++i) {
                uint32_t u = 0;
                for (int k = 0; k < 4; ++k) u |= uint32_t{static_cast<uint8_t>(n->table[4 + 4 * i + static_cast<size_t>(k)])} << (8 * k);
                n->units[i] = u;
            }
            n->normalized = n->table.substr(4 + size_t{trie_bytes});
            if (!is_valid_utf8(n->normalized))
                r.fail(path + ".precompiled_charsmap", "its normalized strings are not UTF-8");
        }
        return n;
    }
    if (type == "BertNormalizer") {
        auto n = std::make_unique<BertNormalizer>();
        n->clean_text = r.opt_bool(v, path, "clean_text", true);
        n->chinese = r.opt_bool(v, path, "handle_chinese_chars", true);
        n->lowercase = r.opt_bool(v, path, "lowercase", true);
        n->strip_accents = r.opt_bool(v, path, "strip_accents", n->lowercase);
        return n;
    }
    r.unknown(path, "normalizer", type);
}

// ---------------------------------------------------------------------------------------------
// Pre-tokenizers: each splits every piece into pieces.

struct Piece {
    std::string text;
    bool at_start = false;  ///< starts at the original text's first byte (Metaspace's prepend_scheme "first")
};

struct PreTokenizer {
    virtual ~PreTokenizer() = default;
    virtual void split(std::vector<Piece>& pieces) const = 0;
};
using PreTokenizerPtr = std::unique_ptr<PreTokenizer>;

/// Replaces each piece by its parts from f(piece, parts).
template <class F>
void split_each(std::vector<Piece>& pieces, F&& f) {
    std::vector<Piece> out;
    out.reserve(pieces.size() * 2);
    Parts parts;
    for (auto& p : pieces) {
        parts.clear();
        f(p.text, parts);
        for (size_t i = 0; i < parts.text.size(); ++i) out.push_back({std::move(parts.text[i]), p.at_start && parts.start[i] == 0});
    }
    pieces = std::move(out);
}

struct SequencePreTokenizer : PreTokenizer {
    std::vector<PreTokenizerPtr> parts;
    void split(std::vector<Piece>& pieces) const override {
        for (const auto& p : parts) p->split(pieces);
    }
};

enum class Prepend { always, first, never };

struct MetaspacePreTokenizer : PreTokenizer {
    UChar32 replacement = 0x2581;
    std::string rep = "\xE2\x96\x81";
    Prepend scheme = Prepend::always;
    bool split_pieces = true;
    void split(std::vector<Piece>& pieces) const override {
        std::vector<Piece> out;
        out.reserve(pieces.size() * 4);
        std::vector<Span> spans;
        Parts parts;
        for (auto& p : pieces) {
            std::string s;
            s.reserve(p.text.size() + 8);
            for (const char c : p.text) {
                if (c == ' ') s += rep;
                else s += c;
            }
            const bool starts = s.compare(0, rep.size(), rep) == 0;
            if (!starts && (scheme == Prepend::always || (scheme == Prepend::first && p.at_start))) s.insert(0, rep);
            if (!split_pieces) {
                out.push_back({std::move(s), p.at_start});
                continue;
            }
            spans_of_chars(s, [&](UChar32 c) { return c == replacement; }, spans);
            parts.clear();
            split_spans(s, spans, Behavior::merged_with_next, false, parts);
            for (size_t i = 0; i < parts.text.size(); ++i) out.push_back({std::move(parts.text[i]), p.at_start && parts.start[i] == 0});
        }
        pieces = std::move(out);
    }
};

/// GPT-2's pattern, 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+,
/// by hand (ICU gives the same matches, slower).
void gpt2_matches(const std::string& s, std::vector<std::pair<size_t, size_t>>& out) {
    out.clear();
    enum Cls : uint8_t { L, N, S, O };
    // Character classes and boundaries, once.
    thread_local std::vector<uint32_t> pos;
    thread_local std::vector<uint8_t> cls;
    pos.clear();
    cls.clear();
    size_t i = 0;
    while (i < s.size()) {
        pos.push_back(static_cast<uint32_t>(i));
        const UChar32 c = next_cp(s, i);
        uint8_t k;
        if (c < 0x80) {
            k = ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) ? L : (c >= '0' && c <= '9') ? N : is_ws(c) ? S : O;
        } else {
            const int8_t t = u_charType(c);
            if (t == U_UPPERCASE_LETTER || t == U_LOWERCASE_LETTER || t == U_TITLECASE_LETTER || t == U_MODIFIER_LETTER ||
                t == U_OTHER_LETTER)
                k = L;
            else if (t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER)
                k = N;
            else if (is_ws(c))
                k = S;
            else
                k = O;
        }
        cls.push_back(k);
    }
    const size_t n = cls.size();
    pos.push_back(static_cast<uint32_t>(s.size()));
    size_t c = 0;
    auto run = [&](size_t from, uint8_t k) {
        while (from < n && cls[from] == k) ++from;
        return from;
    };
    while (c < n) {
        const size_t b = c;
        // 's 't 're 've 'm 'll 'd
        if (s[pos[c]] == '\'' && c + 1 < n) {
            const char a = s[pos[c + 1]];
            const char z = c + 2 < n ? s[pos[c + 2]] : '\0';
            size_t len = 0;
            if (a == 's' || a == 't' || a == 'm' || a == 'd') len = 2;
            else if ((a == 'r' && z == 'e') || (a == 'v' && z == 'e') || (a == 'l' && z == 'l')) len = 3;
            if (len) {
                out.emplace_back(pos[c], pos[c + len]);
                c += len;
                continue;
            }
        }
        // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': a run of one class, after an optional ' '.
        const size_t d = s[pos[c]] == ' ' && c + 1 < n && cls[c + 1] != S ? c + 1 : c;
        if (cls[d] != S) {
            const size_t e = run(d, cls[d]);
            out.emplace_back(pos[b], pos[e]);
            c = e;
            continue;
        }
        // \s+(?!\S) | \s+
        if (cls[c] == S) {
            const size_t e = run(c, S);
            // \s+(?!\S): the run, less its last character when a non-space follows (backtracking).
            if (e == n) {
                out.emplace_back(pos[c], pos[e]);
                c = e;
            } else if (e - c >= 2) {
                out.emplace_back(pos[c], pos[e - 1]);
                c = e - 1;
            } else {
                out.emplace_back(pos[c], pos[e]);
                c = e;
            }
            continue;
        }
    }
}

struct ByteLevelPreTokenizer : PreTokenizer {
    bool add_prefix_space = true, use_regex = true;
    void split(std::vector<Piece>& pieces) const override {
        const ByteMap& bm = byte_map();
        std::vector<Piece> out;
        out.reserve(pieces.size() * 4);
        std::vector<std::pair<size_t, size_t>> matches;
        for (auto& p : pieces) {
            std::string s = p.text;
            if (add_prefix_space && (s.empty() || s[0] != ' ')) s.insert(0, " ");
            auto emit = [&](size_t b, size_t e) {
                if (e <= b) return;
                std::string t;
                t.reserve((e - b) * 2);
                for (size_t k = b; k < e; ++k) t += bm.to_char[static_cast<uint8_t>(s[k])];
                out.push_back({std::move(t), p.at_start && b == 0});
            };
            if (!use_regex) {
                emit(0, s.size());
                continue;
            }
            gpt2_matches(s, matches);
            // Isolated: the matches and the gaps between them (the pattern leaves none).
            size_t prev = 0;
            for (const auto& [b, e] : matches) {
                if (prev < b) emit(prev, b);
                emit(b, e);
                prev = e;
            }
            if (prev < s.size()) emit(prev, s.size());
        }
        pieces = std::move(out);
    }
};

struct SplitPreTokenizer : PreTokenizer {
    Pattern pattern;
    Behavior behavior = Behavior::isolated;
    bool invert = false;
    void split(std::vector<Piece>& pieces) const override {
        std::vector<std::pair<size_t, size_t>> matches;
        std::vector<Span> spans;
        split_each(pieces, [&](const std::string& s, Parts& parts) {
            if (!pattern.regex && pattern.literal.empty()) {  // the library: an empty literal matches nothing
                if (!s.empty()) parts.add(s, 0, s.size());
                return;
            }
            pattern.find_all(s, matches);
            spans_of_matches(s.size(), matches, spans);
            split_spans(s, spans, behavior, invert, parts);
        });
    }
};

/// Char-class pre-tokenizers: Whitespace, WhitespaceSplit, Digits, Punctuation, CharDelimiterSplit, BertPreTokenizer.
struct CharPreTokenizer : PreTokenizer {
    enum Kind { whitespace, whitespace_split, digits, punctuation, delimiter, bert } kind = whitespace;
    Behavior behavior = Behavior::isolated;
    bool individual_digits = false;
    UChar32 delimiter_char = ' ';
    void split(std::vector<Piece>& pieces) const override {
        std::vector<Span> spans;
        split_each(pieces, [&](const std::string& s, Parts& parts) {
            switch (kind) {
            case whitespace: {
                // \w+|[^\w\s]+ kept, whitespace dropped.
                size_t i = 0, run_b = 0;
                int run_k = -1;  // 0 word, 1 other
                while (i < s.size()) {
                    const size_t b = i;
                    const UChar32 c = next_cp(s, i);
                    const int k = is_word(c) ? 0 : is_ws(c) ? -1 : 1;
                    if (k != run_k) {
                        if (run_k >= 0) parts.add(s, run_b, b - run_b);
                        run_b = b;
                        run_k = k;
                    }
                }
                if (run_k >= 0) parts.add(s, run_b, s.size() - run_b);
                return;
            }
            case whitespace_split:
                spans_of_chars(s, is_ws, spans);
                return split_spans(s, spans, Behavior::removed, false, parts);
            case digits:
                spans_of_chars(s, is_numeric, spans);
                return split_spans(s, spans, individual_digits ? Behavior::isolated : Behavior::contiguous, false, parts);
            case punctuation:
                spans_of_chars(s, is_punc, spans);
                return split_spans(s, spans, behavior, false, parts);
            case delimiter:
                spans_of_chars(s, [&](UChar32 c) { return c == delimiter_char; }, spans);
                return split_spans(s, spans, Behavior::removed, false, parts);
            case bert: {
                spans_of_chars(s, is_ws, spans);
                Parts words;
                split_spans(s, spans, Behavior::removed, false, words);
                for (size_t k = 0; k < words.text.size(); ++k) {
                    spans_of_chars(words.text[k], is_punc, spans);
                    split_spans(words.text[k], spans, Behavior::isolated, false, parts, words.start[k]);
                }
                return;
            }
            }
        });
    }
};

PreTokenizerPtr read_pre_tokenizer(const json& v, Reader& r, const std::string& path) {
    const std::string type = r.type_of(v, path);
    r.count_component(path);
    if (type == "Sequence") {
        auto p = std::make_unique<SequencePreTokenizer>();
        const json& list = r.array_of(r.need(v, path, "pretokenizers"), path + ".pretokenizers");
        for (size_t i = 0; i < list.size(); ++i)
            p->parts.push_back(read_pre_tokenizer(list[i], r, path + ".pretokenizers[" + std::to_string(i) + "]"));
        return p;
    }
    if (type == "Metaspace") {
        auto p = std::make_unique<MetaspacePreTokenizer>();
        if (const json* rep = Reader::field(v, "replacement")) {
            p->replacement = r.char_of(*rep, path + ".replacement");
            p->rep.clear();
            append_cp(p->rep, p->replacement);
        }
        if (const json* s = Reader::field(v, "prepend_scheme")) {
            const std::string scheme = r.string_of(*s, path + ".prepend_scheme");
            if (scheme == "always") p->scheme = Prepend::always;
            else if (scheme == "first") p->scheme = Prepend::first;
            else if (scheme == "never") p->scheme = Prepend::never;
            else r.expected(path + ".prepend_scheme", "always, first or never", *s);
        } else {
            p->scheme = r.opt_bool(v, path, "add_prefix_space", true) ? Prepend::always : Prepend::never;
        }
        p->split_pieces = r.opt_bool(v, path, "split", true);
        return p;
    }
    if (type == "ByteLevel") {
        auto p = std::make_unique<ByteLevelPreTokenizer>();
        p->add_prefix_space = r.opt_bool(v, path, "add_prefix_space", true);
        p->use_regex = r.opt_bool(v, path, "use_regex", true);
        r.opt_bool(v, path, "trim_offsets", true);  // offsets only
        return p;
    }
    if (type == "Split") {
        auto p = std::make_unique<SplitPreTokenizer>();
        p->pattern = Pattern::read(r.need(v, path, "pattern"), r, path + ".pattern");
        p->behavior = read_behavior(v, r, path, Behavior::isolated);
        p->invert = r.opt_bool(v, path, "invert", false);
        return p;
    }
    auto c = std::make_unique<CharPreTokenizer>();
    if (type == "Whitespace") c->kind = CharPreTokenizer::whitespace;
    else if (type == "WhitespaceSplit") c->kind = CharPreTokenizer::whitespace_split;
    else if (type == "BertPreTokenizer") c->kind = CharPreTokenizer::bert;
    else if (type == "Digits") {
        c->kind = CharPreTokenizer::digits;
        c->individual_digits = r.opt_bool(v, path, "individual_digits", false);
    } else if (type == "Punctuation") {
        c->kind = CharPreTokenizer::punctuation;
        c->behavior = read_behavior(v, r, path, Behavior::isolated);
    } else if (type == "CharDelimiterSplit") {
        c->kind = CharPreTokenizer::delimiter;
        c->delimiter_char = r.char_of(r.need(v, path, "delimiter"), path + ".delimiter");
    } else {
        r.unknown(path, "pre_tokenizer", type);
    }
    return c;
}

// ---------------------------------------------------------------------------------------------
// Models

struct Model {
    virtual ~Model() = default;
    /// Appends the tokens of one piece.
    virtual void tokenize(const std::string& piece, TokenizerJsonEncoding& out) const = 0;
    std::vector<std::string> vocab_r;  ///< id -> token ("" where none)
    std::unordered_map<std::string, int32_t> vocab;
    std::string unk;  ///< the unknown token, or ""
    std::string type;

    int64_t token_to_id(const std::string& t) const {
        const auto it = vocab.find(t);
        return it == vocab.end() ? -1 : it->second;
    }
    void push(TokenizerJsonEncoding& out, int64_t id, std::string token) const {
        out.ids.push_back(id);
        out.tokens.push_back(std::move(token));
    }
    static std::string byte_token(uint8_t b) {
        static const char* hex = "0123456789ABCDEF";
        return std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">";
    }
};
using ModelPtr = std::unique_ptr<Model>;

/// The Unigram model: the Viterbi path over the pieces' log probabilities, an unknown character
/// scored min - 10 and fused with its unknown neighbours; byte fallback for pieces without an id.
struct UnigramModel : Model {
    std::vector<double> scores;
    Trie trie;
    int64_t unk_id = -1;
    bool byte_fallback = false;
    double min_score = 0;

    void tokenize(const std::string& s, TokenizerJsonEncoding& out) const override {
        if (s.empty()) return;
        struct Node {
            int64_t id = -1;
            double score = 0;
            int64_t start = -1;  // -1: not reached
        };
        const double unk_score = min_score - 10.0;
        std::vector<Node> best(s.size() + 1);
        size_t at = 0;
        while (at < s.size()) {
            const double here = best[at].score;
            size_t k = at;
            next_cp(s, k);
            const size_t mblen = k - at;
            bool single = false;
            trie.prefixes(s, at, [&](size_t end, int32_t id) {
                Node& target = best[end];
                const double cand = here + scores[static_cast<size_t>(id)];
                if (target.start < 0 || cand > target.score) {
                    target.score = cand;
                    target.start = static_cast<int64_t>(at);
                    target.id = id;
                }
                if (end - at == mblen) single = true;
            });
            if (!single) {
                Node& target = best[at + mblen];
                const double cand = here + unk_score;
                if (target.start < 0 || cand > target.score) {
                    // Only an unknown piece the path would take needs the unknown token (as the library).
                    if (unk_id < 0)
                        throw Error("tokenizer.json: the Unigram model has no unknown token (unk_id) for " + quote(s.substr(at, mblen)));
                    target.score = cand;
                    target.start = static_cast<int64_t>(at);
                    target.id = unk_id;
                }
            }
            at += mblen;
        }
        // Back from the end; runs of unknown pieces become one.
        std::vector<std::string> pieces;
        size_t end = s.size();
        std::vector<std::string> fused;
        while (end > 0) {
            const Node& node = best[end];
            const auto start = static_cast<size_t>(node.start);
            if (unk_id >= 0 && node.id == unk_id) {
                fused.push_back(s.substr(start, end - start));
            } else {
                if (!fused.empty()) {
                    std::string t;
                    for (auto it = fused.rbegin(); it != fused.rend(); ++it) t += *it;
                    pieces.push_back(std::move(t));
                    fused.clear();
                }
                pieces.push_back(s.substr(start, end - start));
            }
            end = start;
        }
        if (!fused.empty()) {
            std::string t;
            for (auto it = fused.rbegin(); it != fused.rend(); ++it) t += *it;
            pieces.push_back(std::move(t));
        }
        for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) {
            const auto found = vocab.find(*it);
            if (found != vocab.end()) {
                push(out, found->second, std::move(*it));
                continue;
            }
            if (byte_fallback) {
                std::vector<int64_t> ids;
                for (const char c : *it) {
                    const auto b = vocab.find(byte_token(static_cast<uint8_t>(c)));
                    if (b == vocab.end()) break;
                    ids.push_back(b->second);
                }
                if (ids.size() == it->size()) {
                    for (size_t k = 0; k < ids.size(); ++k) push(out, ids[k], byte_token(static_cast<uint8_t>((*it)[k])));
                    continue;
                }
            }
            if (unk_id < 0) throw Error("tokenizer.json: the Unigram model has no unknown token (unk_id)");
            push(out, unk_id, std::move(*it));
        }
    }
};

/// BPE: characters (with the continuing prefix / end-of-word suffix) to ids, unknown ones by byte
/// fallback or the unknown token (fused), then merges by rank, lowest first, leftmost on ties.
struct BpeModel : Model {
    std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> merges;  // (a << 32 | b) -> (rank, new id)
    std::string prefix, suffix;
    bool byte_fallback = false, fuse_unk = false, ignore_merges = false;

    void tokenize(const std::string& s, TokenizerJsonEncoding& out) const override {
        if (s.empty()) return;
        if (ignore_merges)
            if (const auto it = vocab.find(s); it != vocab.end()) return push(out, it->second, s);
        struct Symbol {
            uint32_t id;
            int32_t prev, next;
            uint32_t len;
        };
        std::vector<Symbol> word;
        word.reserve(s.size());
        auto add = [&](uint32_t id, uint32_t len) {
            const auto n = static_cast<int32_t>(word.size());
            if (n > 0) word.back().next = n;
            word.push_back({id, n - 1, -1, len});
        };
        bool have_unk = false;
        uint32_t unk_id = 0, unk_len = 0;
        const int64_t unk_vocab_id = unk.empty() ? -1 : token_to_id(unk);
        std::string key;
        size_t i = 0;
        while (i < s.size()) {
            const size_t b = i;
            next_cp(s, i);
            const bool first = b == 0, last = i == s.size();
            key.assign(s, b, i - b);
            if (!first && !prefix.empty()) key.insert(0, prefix);
            if (last && !suffix.empty()) key += suffix;
            const auto byte_len = static_cast<uint32_t>(i - b);
            if (const auto it = vocab.find(key); it != vocab.end()) {
                if (have_unk) add(unk_id, unk_len), have_unk = false;
                add(static_cast<uint32_t>(it->second), byte_len);
                continue;
            }
            if (byte_fallback) {
                std::vector<uint32_t> ids;
                for (const char c : key) {
                    const auto bt = vocab.find(byte_token(static_cast<uint8_t>(c)));
                    if (bt == vocab.end()) break;
                    ids.push_back(static_cast<uint32_t>(bt->second));
                }
                if (ids.size() == key.size()) {
                    for (const auto id : ids) add(id, 1);  // the library does not add a pending unknown first
                    continue;
                }
            }
            if (!unk.empty()) {
                if (unk_vocab_id < 0) throw Error("tokenizer.json: the BPE model's unknown token " + quote(unk) + " is not in its vocabulary");
                if (have_unk && fuse_unk) {
                    unk_len += byte_len;
                } else {
                    if (have_unk) add(unk_id, unk_len);
                    have_unk = true;
                    unk_id = static_cast<uint32_t>(unk_vocab_id);
                    unk_len = byte_len;
                }
            }
        }
        if (have_unk) add(unk_id, unk_len);

        struct Merge {
            uint32_t pos, rank, new_id;
            bool operator<(const Merge& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
        };
        auto pair_key = [](uint32_t a, uint32_t b) { return uint64_t{a} << 32 | b; };
        std::priority_queue<Merge> queue;
        for (size_t k = 0; k + 1 < word.size(); ++k)
            if (const auto m = merges.find(pair_key(word[k].id, word[k + 1].id)); m != merges.end())
                queue.push({static_cast<uint32_t>(k), m->second.first, m->second.second});
        while (!queue.empty()) {
            const Merge top = queue.top();
            queue.pop();
            Symbol& cur = word[top.pos];
            if (cur.len == 0 || cur.next < 0) continue;
            const auto next_pos = static_cast<size_t>(cur.next);
            const Symbol right = word[next_pos];
            const auto m = merges.find(pair_key(cur.id, right.id));
            if (m == merges.end() || m->second.second != top.new_id) continue;
            cur.id = top.new_id;
            cur.len += right.len;
            cur.next = right.next;
            word[next_pos].len = 0;
            if (right.next >= 0 && static_cast<size_t>(right.next) < word.size()) word[static_cast<size_t>(right.next)].prev = static_cast<int32_t>(top.pos);
            if (cur.prev >= 0)
                if (const auto pm = merges.find(pair_key(word[static_cast<size_t>(cur.prev)].id, cur.id)); pm != merges.end())
                    queue.push({static_cast<uint32_t>(cur.prev), pm->second.first, pm->second.second});
            if (cur.next >= 0 && static_cast<size_t>(cur.next) < word.size())
                if (const auto nm = merges.find(pair_key(cur.id, word[static_cast<size_t>(cur.next)].id)); nm != merges.end())
                    queue.push({top.pos, nm->second.first, nm->second.second});
        }
        for (const auto& sym : word)
            if (sym.len != 0) push(out, sym.id, vocab_r[sym.id]);
    }
};

struct WordLevelModel : Model {
    void tokenize(const std::string& s, TokenizerJsonEncoding& out) const override {
        if (const auto it = vocab.find(s); it != vocab.end()) return push(out, it->second, s);
        const int64_t id = unk.empty() ? -1 : token_to_id(unk);
        if (id < 0) throw Error("tokenizer.json: the WordLevel model has no unknown token for " + quote(s));
        push(out, id, unk);
    }
};

/// A vocabulary object {"token": id}: ids in [0, max_vocab), no id twice.
void read_vocab_object(const json& v, Reader& r, const std::string& path, Model& m) {
    r.object_of(v, path);
    if (v.size() > r.limits.max_vocab)
        r.fail(path, std::to_string(v.size()) + " tokens, more than the " + std::to_string(r.limits.max_vocab) + " attnviz reads");
    m.vocab.reserve(v.size());
    const auto max_id = static_cast<int64_t>(r.limits.max_vocab) - 1;
    for (const auto& [token, id_v] : v.items()) {
        // (The path is made only for a message: a vocabulary has a quarter of a million entries.)
        const int64_t id = id_v.is_number_integer() && id_v.get<int64_t>() >= 0 && id_v.get<int64_t>() <= max_id
                               ? id_v.get<int64_t>()
                               : r.int_of(id_v, path + "[" + quote(token) + "]", 0, max_id);
        if (token.size() > r.limits.max_token_bytes) r.check_token(token, path);
        if (static_cast<size_t>(id) >= m.vocab_r.size()) m.vocab_r.resize(static_cast<size_t>(id) + 1);
        if (!m.vocab_r[static_cast<size_t>(id)].empty())
            r.fail(path, "tokens " + quote(m.vocab_r[static_cast<size_t>(id)]) + " and " + quote(token) + " have the same id " +
                             std::to_string(id));
        m.vocab_r[static_cast<size_t>(id)] = token;
        m.vocab[token] = static_cast<int32_t>(id);
    }
}

ModelPtr read_model(const json& v, Reader& r, const std::string& path) {
    r.object_of(v, path);
    std::string type;
    if (const json* t = Reader::field(v, "type")) type = r.string_of(*t, path + ".type");
    else if (Reader::field(v, "merges")) type = "BPE";  // files older than "type"
    else if (const json* voc = Reader::field(v, "vocab"); voc && voc->is_array()) type = "Unigram";
    else if (Reader::field(v, "vocab")) type = "WordLevel";
    else r.fail(path, "has no \"type\"");
    if (type == "Unigram") {
        auto m = std::make_unique<UnigramModel>();
        const json& vocab = r.array_of(r.need(v, path, "vocab"), path + ".vocab");
        if (vocab.size() > r.limits.max_vocab)
            r.fail(path + ".vocab", std::to_string(vocab.size()) + " pieces, more than the " +
                                        std::to_string(r.limits.max_vocab) + " attnviz reads");
        std::vector<std::pair<std::string, int32_t>> keys;
        keys.reserve(vocab.size());
        m->vocab_r.reserve(vocab.size());
        m->scores.reserve(vocab.size());
        m->min_score = std::numeric_limits<double>::infinity();
        for (size_t i = 0; i < vocab.size(); ++i) {
            auto p = [&] { return path + ".vocab[" + std::to_string(i) + "]"; };
            const json& e = vocab[i];
            if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number())
                r.expected(p(), "[piece, score]", e);
            std::string piece = e[0].get<std::string>();
            const double score = e[1].get<double>();
            if (!std::isfinite(score)) r.expected(p(), "a finite score", e[1]);
            if (piece.size() > r.limits.max_token_bytes) r.check_token(piece, p());
            m->min_score = std::min(m->min_score, score);
            m->scores.push_back(score);
            m->vocab[piece] = static_cast<int32_t>(i);
            keys.emplace_back(piece, static_cast<int32_t>(i));
            m->vocab_r.push_back(std::move(piece));
        }
        if (vocab.empty()) m->min_score = 0;
        // Empty pieces never match (a trie key of no bytes is the root).
        keys.erase(std::remove_if(keys.begin(), keys.end(), [](const auto& k) { return k.first.empty(); }), keys.end());
        m->trie.build(std::move(keys));
        if (const json* u = Reader::field(v, "unk_id")) {
            m->unk_id = r.int_of(*u, path + ".unk_id", 0, static_cast<int64_t>(vocab.size()) - 1);
            m->unk = m->vocab_r[static_cast<size_t>(m->unk_id)];
        }
        m->byte_fallback = r.opt_bool(v, path, "byte_fallback", false);
        m->type = type;
        return m;
    }
    if (type == "BPE") {
        auto m = std::make_unique<BpeModel>();
        read_vocab_object(r.need(v, path, "vocab"), r, path + ".vocab", *m);
        m->unk = r.opt_string(v, path, "unk_token", "");
        m->prefix = r.opt_string(v, path, "continuing_subword_prefix", "");
        m->suffix = r.opt_string(v, path, "end_of_word_suffix", "");
        r.check_token(m->prefix, path + ".continuing_subword_prefix");
        r.check_token(m->suffix, path + ".end_of_word_suffix");
        m->byte_fallback = r.opt_bool(v, path, "byte_fallback", false);
        m->fuse_unk = r.opt_bool(v, path, "fuse_unk", false);
        m->ignore_merges = r.opt_bool(v, path, "ignore_merges", false);
        if (const json* d = Reader::field(v, "dropout"); d && !d->is_number())
            r.expected(path + ".dropout", "a number or null (attnviz encodes without dropout, as inference does)", *d);
        const json* merges = Reader::field(v, "merges");
        if (merges) {
            r.array_of(*merges, path + ".merges");
            if (merges->size() > r.limits.max_merges)
                r.fail(path + ".merges", std::to_string(merges->size()) + " merges, more than the " +
                                             std::to_string(r.limits.max_merges) + " attnviz reads");
            m->merges.reserve(merges->size());
            std::string a, b, merged;
            for (size_t i = 0; i < merges->size(); ++i) {
                auto p = [&] { return path + ".merges[" + std::to_string(i) + "]"; };
                const json& e = (*merges)[i];
                if (e.is_string()) {
                    const std::string& s = e.get_ref<const std::string&>();
                    const size_t sp = s.find(' ');
                    if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
                        r.expected(p(), "\"a b\" (two tokens and one space)", e);
                    a.assign(s, 0, sp);
                    b.assign(s, sp + 1, std::string::npos);
                } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
                    a = e[0].get_ref<const std::string&>();
                    b = e[1].get_ref<const std::string&>();
                } else {
                    r.expected(p(), "\"a b\" or [\"a\", \"b\"]", e);
                }
                const int64_t ia = m->token_to_id(a), ib = m->token_to_id(b);
                if (ia < 0) r.fail(p(), "the merge's token " + quote(a) + " is not in the vocabulary");
                if (ib < 0) r.fail(p(), "the merge's token " + quote(b) + " is not in the vocabulary");
                merged = a;
                if (!m->prefix.empty() && b.compare(0, m->prefix.size(), m->prefix) == 0) merged.append(b, m->prefix.size(), std::string::npos);
                else merged += b;
                const int64_t id = m->token_to_id(merged);
                if (id < 0) r.fail(p(), "the merged token " + quote(merged) + " is not in the vocabulary");
                m->merges[uint64_t(ia) << 32 | uint64_t(ib)] = {static_cast<uint32_t>(i), static_cast<uint32_t>(id)};
            }
        }
        m->type = type;
        return m;
    }
    if (type == "WordLevel") {
        auto m = std::make_unique<WordLevelModel>();
        read_vocab_object(r.need(v, path, "vocab"), r, path + ".vocab", *m);
        m->unk = r.opt_string(v, path, "unk_token", "<unk>");
        m->type = type;
        return m;
    }
    r.unknown(path, "model", type);
}

// ---------------------------------------------------------------------------------------------
// Post-processors: the special tokens around a single sequence.

struct PostProcessor {
    std::vector<std::pair<std::string, int64_t>> before, after;
};

void read_post_processor(const json& v, Reader& r, const std::string& path, PostProcessor& pp) {
    const std::string type = r.type_of(v, path);
    r.count_component(path);
    if (type == "Sequence") {
        const json& list = r.array_of(r.need(v, path, "processors"), path + ".processors");
        for (size_t i = 0; i < list.size(); ++i) read_post_processor(list[i], r, path + ".processors[" + std::to_string(i) + "]", pp);
        return;
    }
    if (type == "ByteLevel") return;  // offsets only
    if (type == "RobertaProcessing" || type == "BertProcessing") {
        auto pair_of = [&](const char* key) {
            const std::string p = path + "." + key;
            const json& e = r.need(v, path, key);
            if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number_integer() || e[1].get<int64_t>() < 0)
                r.expected(p, "[token, id]", e);
            return std::pair<std::string, int64_t>(e[0].get<std::string>(), e[1].get<int64_t>());
        };
        const auto cls = pair_of("cls"), sep = pair_of("sep");
        // As the library, a processor after another wraps what the first made.
        pp.before.insert(pp.before.begin(), cls);
        pp.after.push_back(sep);
        return;
    }
    if (type == "TemplateProcessing") {
        const json& specials = r.object_of(r.need(v, path, "special_tokens"), path + ".special_tokens");
        std::map<std::string, std::vector<std::pair<std::string, int64_t>>> tokens;
        for (const auto& [name, s] : specials.items()) {
            const std::string p = path + ".special_tokens[" + quote(name) + "]";
            r.object_of(s, p);
            const json& ids = r.array_of(r.need(s, p, "ids"), p + ".ids");
            const json& toks = r.array_of(r.need(s, p, "tokens"), p + ".tokens");
            if (ids.size() != toks.size()) r.fail(p, "has " + std::to_string(ids.size()) + " ids but " + std::to_string(toks.size()) + " tokens");
            if (ids.size() > 64) r.fail(p, "more than 64 tokens");
            auto& list = tokens[name];
            for (size_t i = 0; i < ids.size(); ++i)
                list.emplace_back(r.string_of(toks[i], p + ".tokens[" + std::to_string(i) + "]"),
                                  r.int_of(ids[i], p + ".ids[" + std::to_string(i) + "]", 0, INT32_MAX));
        }
        const json& single = r.array_of(r.need(v, path, "single"), path + ".single");
        if (single.size() > 64) r.fail(path + ".single", "more than 64 pieces");
        std::vector<std::pair<std::string, int64_t>> before, after;
        bool seen_sequence = false;
        for (size_t i = 0; i < single.size(); ++i) {
            const std::string p = path + ".single[" + std::to_string(i) + "]";
            const json& e = r.object_of(single[i], p);
            if (const json* st = Reader::field(e, "SpecialToken")) {
                const std::string id = r.need_string(r.object_of(*st, p + ".SpecialToken"), p + ".SpecialToken", "id");
                const auto it = tokens.find(id);
                if (it == tokens.end()) r.fail(p, "the special token " + quote(id) + " is not in special_tokens");
                auto& dst = seen_sequence ? after : before;
                dst.insert(dst.end(), it->second.begin(), it->second.end());
            } else if (const json* sq = Reader::field(e, "Sequence")) {
                const std::string id = r.need_string(r.object_of(*sq, p + ".Sequence"), p + ".Sequence", "id");
                if (id != "A") r.fail(p, "a single sequence's template names sequence " + quote(id) + ", expected \"A\"");
                if (seen_sequence) r.fail(p, "sequence A appears twice");
                seen_sequence = true;
            } else {
                r.expected(p, "{\"SpecialToken\": ...} or {\"Sequence\": ...}", e);
            }
        }
        if (!seen_sequence) r.fail(path + ".single", "has no {\"Sequence\": {\"id\": \"A\"}}");
        pp.before.insert(pp.before.begin(), before.begin(), before.end());
        pp.after.insert(pp.after.end(), after.begin(), after.end());
        return;
    }
    r.unknown(path, "post_processor", type);
}

// ---------------------------------------------------------------------------------------------
// Decoders: tokens to tokens (decode_chain), joined at the end.

struct Decoder {
    virtual ~Decoder() = default;
    virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};
using DecoderPtr = std::unique_ptr<Decoder>;

struct SequenceDecoder : Decoder {
    std::vector<DecoderPtr> parts;
    void decode_chain(std::vector<std::string>& tokens) const override {
        for (const auto& p : parts) p->decode_chain(tokens);
    }
};

/// Replaces a character by another in every token (Metaspace's "▁" by ' ').
struct MetaspaceDecoder : Decoder {
    UChar32 replacement = 0x2581;
    bool prepend = true;
    void decode_chain(std::vector<std::string>& tokens) const override {
        for (size_t t = 0; t < tokens.size(); ++t) {
            std::string out;
            const std::string& s = tokens[t];
            out.reserve(s.size());
            size_t i = 0;
            while (i < s.size()) {
                const size_t b = i;
                const UChar32 c = next_cp(s, i);
                if (c == replacement) {
                    if (!(t == 0 && prepend)) out += ' ';  // the library drops every one in the first token
                } else {
                    out.append(s, b, i - b);
                }
            }
            tokens[t] = std::move(out);
        }
    }
};

struct ByteLevelDecoder : Decoder {
    void decode_chain(std::vector<std::string>& tokens) const override {
        const ByteMap& bm = byte_map();
        std::string bytes;
        for (const auto& t : tokens) {
            std::string mapped;
            size_t i = 0;
            bool ok = true;
            while (i < t.size()) {
                const auto it = bm.to_byte.find(next_cp(t, i));
                if (it == bm.to_byte.end()) {
                    ok = false;
                    break;
                }
                mapped += static_cast<char>(it->second);
            }
            bytes += ok ? mapped : t;
        }
        tokens.assign(1, utf8_lossy(bytes));
    }
};

struct ReplaceDecoder : Decoder {
    Pattern pattern;
    std::string content;
    void decode_chain(std::vector<std::string>& tokens) const override {
        for (auto& t : tokens) t = replace_matches(t, pattern, content);
    }
};

struct FuseDecoder : Decoder {
    void decode_chain(std::vector<std::string>& tokens) const override {
        std::string all;
        for (const auto& t : tokens) all += t;
        tokens.assign(1, all);
    }
};

struct StripDecoder : Decoder {
    UChar32 content = ' ';
    size_t start = 0, stop = 0;
    void decode_chain(std::vector<std::string>& tokens) const override {
        for (auto& t : tokens) {
            std::vector<std::pair<size_t, size_t>> chars;  // byte ranges
            for (size_t i = 0; i < t.size();) {
                const size_t b = i;
                const UChar32 c = next_cp(t, i);
                chars.emplace_back(b, c == content ? i : SIZE_MAX);  // second: end, or MAX when not `content`
            }
            size_t cut_b = 0;
            for (size_t k = 0; k < chars.size() && k < start; ++k) {
                if (chars[k].second == SIZE_MAX) break;
                cut_b = k + 1;
            }
            size_t cut_e = chars.size();
            for (size_t k = 0; k < chars.size() && k < stop; ++k) {
                const size_t idx = chars.size() - 1 - k;
                if (chars[idx].second == SIZE_MAX) break;
                cut_e = idx;
            }
            if (cut_e < cut_b) cut_e = cut_b;
            const size_t bb = cut_b < chars.size() ? chars[cut_b].first : t.size();
            const size_t ee = cut_e < chars.size() ? chars[cut_e].first : t.size();
            t = t.substr(bb, ee - bb);
        }
    }
};

struct ByteFallbackDecoder : Decoder {
    static int byte_of(const std::string& t) {
        if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
        int v = 0;
        for (int k = t[3] == '+' ? 4 : 3; k < 5; ++k) {  // Rust's from_str_radix takes a leading '+' ("<0x+A>")
            const char c = t[static_cast<size_t>(k)];
            const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (d < 0) return -1;
            v = v * 16 + d;
        }
        return v;
    }
    void decode_chain(std::vector<std::string>& tokens) const override {
        std::vector<std::string> out;
        std::string bytes;
        size_t count = 0;
        auto flush = [&] {
            if (count == 0) return;
            if (is_valid_utf8(bytes)) out.push_back(bytes);
            else
                for (size_t k = 0; k < count; ++k) out.emplace_back("\xEF\xBF\xBD");
            bytes.clear();
            count = 0;
        };
        for (auto& t : tokens) {
            const int b = byte_of(t);
            if (b >= 0) {
                bytes += static_cast<char>(b);
                ++count;
                continue;
            }
            flush();
            out.push_back(std::move(t));
        }
        flush();
        tokens = std::move(out);
    }
};

std::string cleanup_spaces(std::string s) {
    static const std::pair<const char*, const char*> rules[] = {
        {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"}, {" 'm", "'m"},
        {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (const auto& [from, to] : rules) {
        const std::string f = from, t = to;
        std::string out;
        size_t prev = 0;
        for (size_t at = s.find(f); at != std::string::npos; at = s.find(f, prev)) {
            out.append(s, prev, at - prev);
            out += t;
            prev = at + f.size();
        }
        out.append(s, prev, std::string::npos);
        s = std::move(out);
    }
    return s;
}

struct WordPieceDecoder : Decoder {
    std::string prefix = "##";
    bool cleanup = true;
    void decode_chain(std::vector<std::string>& tokens) const override {
        for (size_t i = 0; i < tokens.size(); ++i) {
            auto& t = tokens[i];
            if (i != 0) {
                if (t.compare(0, prefix.size(), prefix) == 0) t = t.substr(prefix.size());
                else t.insert(0, " ");
            }
            if (cleanup) t = cleanup_spaces(std::move(t));
        }
    }
};

struct BpeDecoder : Decoder {
    std::string suffix = "</w>";
    void decode_chain(std::vector<std::string>& tokens) const override {
        for (size_t i = 0; i < tokens.size(); ++i) {
            auto& t = tokens[i];
            const std::string to = i + 1 == tokens.size() ? "" : " ";
            std::string out;
            size_t prev = 0;
            if (suffix.empty()) {
                // Rust's replace of an empty pattern: `to` at every character's boundary, both ends too.
                for (size_t at = 0; at < t.size(); ++at) {
                    if ((static_cast<unsigned char>(t[at]) & 0xC0) != 0x80) out += to;
                    out += t[at];
                }
                out += to;
                prev = t.size();
            } else {
                for (size_t at = t.find(suffix); at != std::string::npos; at = t.find(suffix, prev)) {
                    out.append(t, prev, at - prev);
                    out += to;
                    prev = at + suffix.size();
                }
            }
            out.append(t, prev, std::string::npos);
            t = std::move(out);
        }
    }
};

DecoderPtr read_decoder(const json& v, Reader& r, const std::string& path) {
    const std::string type = r.type_of(v, path);
    r.count_component(path);
    if (type == "Sequence") {
        auto d = std::make_unique<SequenceDecoder>();
        const json& list = r.array_of(r.need(v, path, "decoders"), path + ".decoders");
        for (size_t i = 0; i < list.size(); ++i) d->parts.push_back(read_decoder(list[i], r, path + ".decoders[" + std::to_string(i) + "]"));
        return d;
    }
    if (type == "Metaspace") {
        auto d = std::make_unique<MetaspaceDecoder>();
        if (const json* rep = Reader::field(v, "replacement")) d->replacement = r.char_of(*rep, path + ".replacement");
        if (const json* s = Reader::field(v, "prepend_scheme")) {
            const std::string scheme = r.string_of(*s, path + ".prepend_scheme");
            if (scheme != "always" && scheme != "first" && scheme != "never") r.expected(path + ".prepend_scheme", "always, first or never", *s);
            d->prepend = scheme != "never";
        } else {
            d->prepend = r.opt_bool(v, path, "add_prefix_space", true);
        }
        return d;
    }
    if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
    if (type == "Replace") {
        auto d = std::make_unique<ReplaceDecoder>();
        d->pattern = Pattern::read(r.need(v, path, "pattern"), r, path + ".pattern");
        d->content = r.need_string(v, path, "content");
        r.check_token(d->content, path + ".content");
        return d;
    }
    if (type == "Fuse") return std::make_unique<FuseDecoder>();
    if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
    if (type == "Strip") {
        auto d = std::make_unique<StripDecoder>();
        d->content = r.char_of(r.need(v, path, "content"), path + ".content");
        d->start = static_cast<size_t>(r.opt_int(v, path, "start", 0, 0, 1 << 20));
        d->stop = static_cast<size_t>(r.opt_int(v, path, "stop", 0, 0, 1 << 20));
        return d;
    }
    if (type == "WordPiece") {
        auto d = std::make_unique<WordPieceDecoder>();
        d->prefix = r.opt_string(v, path, "prefix", "##");
        d->cleanup = r.opt_bool(v, path, "cleanup", true);
        return d;
    }
    if (type == "BPEDecoder") {
        auto d = std::make_unique<BpeDecoder>();
        d->suffix = r.opt_string(v, path, "suffix", "</w>");
        return d;
    }
    r.unknown(path, "decoder", type);
}

// ---------------------------------------------------------------------------------------------
// Added tokens

struct AddedSet {
    Trie trie;               ///< content (normalized form for normalized tokens) -> index into tokens
    std::vector<size_t> index;  ///< trie value -> added token
};

/// find_matches of added_vocabulary.rs: (added token index or -1, begin, end) pieces of s.
void find_added(const std::string& s, const AddedSet& set, const std::vector<TokenizerJsonAddedToken>& added,
                std::vector<std::tuple<int64_t, size_t, size_t>>& out) {
    out.clear();
    if (set.trie.empty() || s.empty()) {
        out.emplace_back(-1, 0, s.size());
        return;
    }
    size_t start_offset = 0, i = 0;
    while (i < s.size()) {
        const auto [len, v] = set.trie.longest(s, i);
        if (len == 0) {
            ++i;
            continue;
        }
        size_t start = i, stop = i + len;
        i = stop;
        const auto& tok = added[set.index[static_cast<size_t>(v)]];
        if (tok.single_word) {
            bool word_before = false, word_after = false;
            if (start > 0) {
                size_t k = start - 1;
                while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
                size_t j = k;
                word_before = is_word(next_cp(s, j));
            }
            if (stop < s.size()) {
                size_t j = stop;
                word_after = is_word(next_cp(s, j));
            }
            if (word_before || word_after) continue;
        }
        if (tok.lstrip) {
            size_t b = start;
            while (b > 0) {
                size_t k = b - 1;
                while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
                size_t j = k;
                if (!is_ws(next_cp(s, j))) break;
                b = k;
            }
            start = std::max(b, start_offset);
        }
        if (tok.rstrip) {
            size_t e = stop;
            while (e < s.size()) {
                size_t j = e;
                if (!is_ws(next_cp(s, j))) break;
                e = j;
            }
            stop = e;  // the search goes on from the match's own end, as the library's: a token that
                       // starts in the whitespace taken here still matches (the two overlap)
        }
        if (start_offset < start) out.emplace_back(-1, start_offset, start);
        out.emplace_back(static_cast<int64_t>(set.index[static_cast<size_t>(v)]), start, stop);
        start_offset = stop;
    }
    if (start_offset != s.size()) out.emplace_back(-1, start_offset, s.size());
}

}  // namespace tokenizer_json_detail

using namespace tokenizer_json_detail;

struct TokenizerJson::Impl {
    std::string what;
    std::vector<TokenizerJsonAddedToken> added;
    std::unordered_map<std::string, size_t> added_by_content;
    std::unordered_map<int64_t, size_t> added_by_id;
    /// An added token's text for decoding and id_to_token: its content, normalized when "normalized"
    /// is true (as the library's id_to_token gives it; "▁<mask>" under Llama 2's normalizer).
    std::vector<std::string> decode_form;
    std::unordered_set<std::string> special_contents;
    AddedSet raw_set, normalized_set;
    NormalizerPtr normalizer;
    PreTokenizerPtr pre_tokenizer;
    ModelPtr model;
    PostProcessor post;
    bool has_post = false;
    DecoderPtr decoder;
    int64_t size = 0;
};

TokenizerJson::TokenizerJson(std::unique_ptr<Impl> impl) : m(std::move(impl)) {}
TokenizerJson::~TokenizerJson() = default;

std::string TokenizerJson::supported(const std::string& kind) {
    if (kind == "model") return "Unigram, BPE, WordLevel";
    if (kind == "normalizer")
        return "BertNormalizer, Lowercase, NFC, NFD, NFKC, NFKD, Precompiled, Prepend, Replace, Sequence, Strip, StripAccents";
    if (kind == "pre_tokenizer")
        return "BertPreTokenizer, ByteLevel, CharDelimiterSplit, Digits, Metaspace, Punctuation, Sequence, Split, Whitespace, "
               "WhitespaceSplit";
    if (kind == "post_processor") return "BertProcessing, ByteLevel, RobertaProcessing, Sequence, TemplateProcessing";
    if (kind == "decoder") return "BPEDecoder, ByteFallback, ByteLevel, Fuse, Metaspace, Replace, Sequence, Strip, WordPiece";
    return "";
}

std::shared_ptr<const TokenizerJson> TokenizerJson::parse(const std::string& text, const std::string& what,
                                                          const TokenizerJsonLimits& limits) {
    if (text.size() > limits.max_bytes)
        throw FileError(what + ": " + std::to_string(text.size()) + " bytes, more than the " + std::to_string(limits.max_bytes) +
                        " attnviz reads");
    const json j = parse_json_bounded(text, what, limits.max_depth);
    Reader r{what, limits};
    if (!j.is_object()) throw FileError(what + ": expected a JSON object (tokenizer.json), got " + describe_json(j));
    auto impl = std::make_unique<Impl>();
    impl->what = what;
    if (const json* t = Reader::field(j, "truncation"); t && !t->is_object()) r.expected("truncation", "a JSON object or null", *t);
    impl->model = read_model(r.need(j, "(top level)", "model"), r, "model");
    if (const json* n = Reader::field(j, "normalizer")) impl->normalizer = read_normalizer(*n, r, "normalizer");
    if (const json* p = Reader::field(j, "pre_tokenizer")) impl->pre_tokenizer = read_pre_tokenizer(*p, r, "pre_tokenizer");
    if (const json* p = Reader::field(j, "post_processor")) {
        read_post_processor(*p, r, "post_processor", impl->post);
        impl->has_post = true;
    }
    if (const json* d = Reader::field(j, "decoder")) impl->decoder = read_decoder(*d, r, "decoder");

    impl->size = static_cast<int64_t>(impl->model->vocab_r.size());
    // The added tokens as the library reads them (AddedVocabulary::add_tokens, entry by entry in the
    // file's order; the file's ids are checked but not used, as the library's deserializer ignores
    // them): a content the model has takes the model's id; a content given before keeps its id and
    // takes this entry's properties (an identical entry is skipped); a new one takes the largest id
    // given so far + 1, or the model's entry count when that is larger (the count, as the library's
    // get_vocab_size: not one past the largest id where the vocabulary has holes). Files the library
    // writes list their tokens by id from the model's size, where both readings agree.
    struct TrieEntry {
        std::string content;
        bool normalized;
    };
    std::vector<TrieEntry> listed_special, listed_added;  // the library's special_tokens and added_tokens
    std::unordered_map<std::string, int64_t> content_id;
    if (const json* a = Reader::field(j, "added_tokens")) {
        r.array_of(*a, "added_tokens");
        if (a->size() > limits.max_added_tokens)
            r.fail("added_tokens", std::to_string(a->size()) + " tokens, more than the " + std::to_string(limits.max_added_tokens) +
                                       " attnviz reads");
        const int64_t model_count = static_cast<int64_t>(impl->model->vocab.size());
        int64_t largest = -1;
        for (size_t i = 0; i < a->size(); ++i) {
            const std::string p = "added_tokens[" + std::to_string(i) + "]";
            const json& e = r.object_of((*a)[i], p);
            TokenizerJsonAddedToken t;
            r.int_of(r.need(e, p, "id"), p + ".id", 0, static_cast<int64_t>(limits.max_vocab) + static_cast<int64_t>(limits.max_added_tokens));
            t.content = r.need_string(e, p, "content");
            r.check_token(t.content, p + ".content");
            t.single_word = r.opt_bool(e, p, "single_word", false);
            t.lstrip = r.opt_bool(e, p, "lstrip", false);
            t.rstrip = r.opt_bool(e, p, "rstrip", false);
            t.special = r.opt_bool(e, p, "special", false);
            t.normalized = r.opt_bool(e, p, "normalized", !t.special);
            if (t.content.empty()) continue;  // the library skips it
            if (t.special && impl->special_contents.insert(t.content).second) listed_special.push_back({t.content, t.normalized});
            if (const auto it = content_id.find(t.content); it != content_id.end()) {
                const auto& old = impl->added[impl->added_by_id.at(it->second)];
                if (old.content == t.content && old.single_word == t.single_word && old.lstrip == t.lstrip &&
                    old.rstrip == t.rstrip && old.normalized == t.normalized && old.special == t.special)
                    continue;  // given again as it was
                t.id = it->second;
            } else if (const int64_t model_id = impl->model->token_to_id(t.content); model_id >= 0) {
                t.id = model_id;
            } else {
                t.id = largest < 0 ? model_count : (largest >= model_count || model_count == 0 ? largest + 1 : model_count);
            }
            content_id[t.content] = t.id;
            largest = std::max(largest, t.id);
            impl->size = std::max(impl->size, t.id + 1);
            if (!impl->special_contents.count(t.content)) listed_added.push_back({t.content, t.normalized});
            if (const auto it = impl->added_by_id.find(t.id); it != impl->added_by_id.end()) {
                impl->added[it->second] = std::move(t);  // the id's token is this entry
            } else {
                impl->added_by_id[t.id] = impl->added.size();
                impl->added.push_back(std::move(t));
            }
        }
    }
    for (const auto& [content, id] : content_id) impl->added_by_content[content] = impl->added_by_id.at(id);
    for (auto& t : impl->added) {
        t.special = impl->special_contents.count(t.content) != 0;  // once special, always (the library's set)
        std::string form = t.content;
        if (t.normalized && impl->normalizer) impl->normalizer->normalize(form);
        impl->decode_form.push_back(std::move(form));
    }
    // The tries, in the library's order (its special tokens, then the others): raw contents for
    // tokens matched before normalization, normalized forms after; each entry's own "normalized".
    std::vector<std::pair<std::string, int32_t>> raw, normalized;
    for (const auto* list : {&listed_special, &listed_added})
        for (const auto& entry : *list) {
            const size_t index = impl->added_by_content.at(entry.content);
            if (entry.normalized) {
                std::string s = entry.content;
                if (impl->normalizer) impl->normalizer->normalize(s);
                if (s.empty()) continue;
                normalized.emplace_back(s, static_cast<int32_t>(impl->normalized_set.index.size()));
                impl->normalized_set.index.push_back(index);
            } else {
                raw.emplace_back(entry.content, static_cast<int32_t>(impl->raw_set.index.size()));
                impl->raw_set.index.push_back(index);
            }
        }
    // A content given twice matches as the first (the library's patterns: the first added wins).
    auto first_wins = [](std::vector<std::pair<std::string, int32_t>>& keys) {
        std::unordered_set<std::string> seen;
        std::vector<std::pair<std::string, int32_t>> kept;
        for (auto& k : keys)
            if (seen.insert(k.first).second) kept.push_back(std::move(k));
        keys = std::move(kept);
    };
    first_wins(raw);
    first_wins(normalized);
    impl->raw_set.trie.build(std::move(raw));
    impl->normalized_set.trie.build(std::move(normalized));
    for (const auto& [tok, id] : impl->post.before)
        if (id >= impl->size) r.fail("post_processor", "the special token " + quote(tok) + " has id " + std::to_string(id) + ", past the vocabulary");
    for (const auto& [tok, id] : impl->post.after)
        if (id >= impl->size) r.fail("post_processor", "the special token " + quote(tok) + " has id " + std::to_string(id) + ", past the vocabulary");
    return std::shared_ptr<const TokenizerJson>(new TokenizerJson(std::move(impl)));
}

TokenizerJsonEncoding TokenizerJson::encode(const std::string& text, bool add_special_tokens) const {
    if (!is_valid_utf8(text)) throw Error("the sentence is not valid UTF-8: expected UTF-8 text");
    TokenizerJsonEncoding out;
    if (add_special_tokens)
        for (const auto& [tok, id] : m->post.before) out.ids.push_back(id), out.tokens.push_back(tok);
    std::vector<std::tuple<int64_t, size_t, size_t>> raw_parts, norm_parts;
    find_added(text, m->raw_set, m->added, raw_parts);
    std::vector<Piece> pieces;
    for (const auto& [added, b, e] : raw_parts) {
        if (added >= 0) {  // the token is the text it matched (with what lstrip / rstrip took)
            out.ids.push_back(m->added[static_cast<size_t>(added)].id);
            out.tokens.push_back(text.substr(b, e - b));
            continue;
        }
        std::string part = text.substr(b, e - b);
        bool start = b == 0;
        if (m->normalizer) m->normalizer->apply(part, start);
        find_added(part, m->normalized_set, m->added, norm_parts);
        for (const auto& [added2, b2, e2] : norm_parts) {
            if (added2 >= 0) {
                out.ids.push_back(m->added[static_cast<size_t>(added2)].id);
                out.tokens.push_back(part.substr(b2, e2 - b2));
                continue;
            }
            if (e2 == b2) continue;
            pieces.clear();
            pieces.push_back({part.substr(b2, e2 - b2), start && b2 == 0});
            if (m->pre_tokenizer) m->pre_tokenizer->split(pieces);
            for (const auto& p : pieces) m->model->tokenize(p.text, out);
        }
    }
    if (add_special_tokens)
        for (const auto& [tok, id] : m->post.after) out.ids.push_back(id), out.tokens.push_back(tok);
    return out;
}

std::string TokenizerJson::decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const {
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (const int64_t id : ids) {
        if (const auto it = m->added_by_id.find(id); it != m->added_by_id.end()) {
            const std::string& t = m->decode_form[it->second];
            if (skip_special_tokens && m->special_contents.count(t)) continue;
            tokens.push_back(t);
            continue;
        }
        if (id < 0 || id >= static_cast<int64_t>(m->model->vocab_r.size())) continue;
        const std::string& t = m->model->vocab_r[static_cast<size_t>(id)];
        if (t.empty()) continue;
        if (skip_special_tokens && m->special_contents.count(t)) continue;
        tokens.push_back(t);
    }
    if (!m->decoder) {
        std::string out;
        for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
        return out;
    }
    m->decoder->decode_chain(tokens);
    std::string out;
    for (const auto& t : tokens) out += t;
    return out;
}

std::string TokenizerJson::decode_tokens(const std::vector<std::string>& tokens, bool skip_special_tokens) const {
    std::vector<int64_t> ids;
    ids.reserve(tokens.size());
    for (const auto& t : tokens)
        if (const int64_t id = token_to_id(t); id >= 0) ids.push_back(id);
    return decode(ids, skip_special_tokens);
}

int64_t TokenizerJson::token_to_id(const std::string& token) const {
    if (const auto it = m->added_by_content.find(token); it != m->added_by_content.end()) return m->added[it->second].id;
    return m->model->token_to_id(token);
}

std::string TokenizerJson::id_to_token(int64_t id) const {
    if (const auto it = m->added_by_id.find(id); it != m->added_by_id.end()) return m->decode_form[it->second];
    if (id < 0 || id >= static_cast<int64_t>(m->model->vocab_r.size())) return {};
    return m->model->vocab_r[static_cast<size_t>(id)];
}

int64_t TokenizerJson::vocab_size() const { return m->size; }

std::vector<std::string> TokenizerJson::id_tokens() const {
    std::vector<std::string> out = m->model->vocab_r;
    out.resize(static_cast<size_t>(m->size));
    for (size_t i = 0; i < m->added.size(); ++i) out[static_cast<size_t>(m->added[i].id)] = m->decode_form[i];
    return out;
}

const std::vector<TokenizerJsonAddedToken>& TokenizerJson::added_tokens() const { return m->added; }

bool TokenizerJson::is_special(const std::string& token) const {
    const auto it = m->added_by_content.find(token);
    return it != m->added_by_content.end() && m->added[it->second].special;
}

const std::string& TokenizerJson::unk_token() const { return m->model->unk; }
const std::string& TokenizerJson::model_type() const { return m->model->type; }

std::pair<std::vector<std::string>, std::vector<std::string>> TokenizerJson::single_template() const {
    std::pair<std::vector<std::string>, std::vector<std::string>> out;
    for (const auto& [tok, id] : m->post.before) out.first.push_back(tok);
    for (const auto& [tok, id] : m->post.after) out.second.push_back(tok);
    return out;
}

}  // namespace attnviz
