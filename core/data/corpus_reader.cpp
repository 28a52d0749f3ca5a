// Corpus files: TSV layouts (detected or chosen) and two-file parallel text,
// read line by line through detail::LineReader.
#include "core/data/corpus_reader.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <string_view>

#include "core/io/line_reader.hpp"
#include "core/io/message.hpp"

namespace attnviz {

using detail::LineReader;

std::string to_string(CorpusLayout layout) {
    switch (layout) {
        case CorpusLayout::generated: return "generated";
        case CorpusLayout::pairs: return "pairs";
        case CorpusLayout::challenge: return "challenge";
        case CorpusLayout::columns: return "columns";
        case CorpusLayout::parallel: return "parallel";
    }
    return "?";
}

bool is_language_code(const std::string& s) {
    // ISO 639 code (2-3 lower-case letters), then up to two _Script / _REGION parts.
    size_t i = 0;
    while (i < s.size() && std::islower(static_cast<unsigned char>(s[i]))) ++i;
    if (i < 2 || i > 3) return false;
    for (int parts = 0; i < s.size(); ++parts) {
        if (parts == 2 || s[i] != '_') return false;
        const size_t start = ++i;
        while (i < s.size() && std::isalnum(static_cast<unsigned char>(s[i]))) ++i;
        if (i - start < 2 || i - start > 8) return false;
    }
    return true;
}

ColumnChoice parse_column_choice(const std::string& text) {
    const std::string expected = "expected SRC,TGT: two different column numbers counted from 1 (e.g. 3,4), or "
                                 "two language codes of a Tatoeba-Challenge file (e.g. fra,eng)";
    const size_t comma = text.find(',');
    if (comma == std::string::npos || text.find(',', comma + 1) != std::string::npos)
        throw ConfigError("columns " + quote(text) + ": " + expected);
    const std::string a = text.substr(0, comma), b = text.substr(comma + 1);
    auto number = [](const std::string& s) -> size_t {
        if (s.empty() || s.size() > 4 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
            return 0;
        return static_cast<size_t>(std::stoul(s));
    };
    ColumnChoice c;
    if (number(a) > 0 && number(b) > 0 && a != b) {
        c.src = number(a);
        c.tgt = number(b);
    } else if (is_language_code(a) && is_language_code(b) && a != b) {
        c.src_lang = a;
        c.tgt_lang = b;
    } else {
        throw ConfigError("columns " + quote(text) + ": " + expected);
    }
    if (c.src == c.tgt && !c.by_language()) throw ConfigError("columns " + quote(text) + ": " + expected);
    return c;
}

namespace {

constexpr const char* pairs_form = "source<TAB>target[<TAB>attribution]";
constexpr const char* challenge_form = "lang<TAB>lang<TAB>source<TAB>target";

std::string trim(std::string_view s) {
    const char* ws = " \t\r\n";
    const size_t b = s.find_first_not_of(ws);
    if (b == std::string_view::npos) return {};
    return std::string(s.substr(b, s.find_last_not_of(ws) - b + 1));
}

bool blank(std::string_view s) { return s.find_first_not_of(' ') == std::string_view::npos; }

/// A column or a line of the file, as a message quotes it: short, control characters escaped.
std::string shorten(std::string_view s) { return quote(s, 40); }

void split_tabs(std::string_view line, std::vector<std::string_view>& fields) {
    fields.clear();
    size_t start = 0;
    for (;;) {
        const size_t tab = line.find('\t', start);
        fields.push_back(line.substr(start, tab == std::string_view::npos ? std::string_view::npos : tab - start));
        if (tab == std::string_view::npos) return;
        start = tab + 1;
    }
}

/// The reason a line is skipped before its columns are looked at, or "".
std::string bad_bytes(const LineReader& in, std::string_view line, size_t limit) {
    if (in.too_long())
        return "line too long (" + std::to_string(in.length()) + " bytes, limit " +
               std::to_string(limit == 0 ? hard_line_limit : std::min(limit, hard_line_limit)) + ")";
    if (line.find('\0') != std::string_view::npos) return "NUL byte";
    if (!is_valid_utf8(std::string(line))) return "invalid UTF-8";
    return {};
}

/// Calls options.progress after each chunk (and at the end); throws ReadCancelled when it says stop.
struct Progress {
    const TsvOptions& options;
    std::vector<const LineReader*> inputs;
    const Corpus& corpus;
    void report() const {
        if (!options.progress) return;
        ReadProgress p;
        for (const auto* in : inputs) {
            p.bytes_read += in->bytes_read();
            p.total_bytes += in->total_bytes();
        }
        p.lines = inputs.front()->line_number();
        p.pairs = corpus.pairs.size();
        if (!options.progress(p)) throw ReadCancelled("reading " + quote(inputs.front()->name(), quote_path_max) + " was cancelled");
    }
};

/// "'f.tsv' line 7 has 5 columns: ..." (what follows the line number, with its own ": " where needed).
[[noreturn]] void layout_error(const std::string& where, size_t line, const std::string& what) {
    throw FileError(quote(where, quote_path_max) + " line " + std::to_string(line) + (what.front() == ':' ? "" : " ") + what);
}

/// Picks the two sentence columns of each line under the layout found on the first line with a tab.
class ColumnPicker {
public:
    ColumnPicker(const std::string& where, const std::string& columns) : m_where(where) {
        if (!columns.empty()) m_choice = parse_column_choice(columns);
        m_explicit = !columns.empty();
    }

    /// The source and target column indices (0-based) of this line; throws FileError when the
    /// line does not fit the layout.
    std::pair<size_t, size_t> pick(const std::vector<std::string_view>& f, size_t line, Corpus& corpus) {
        if (m_first == 0) detect(f, line, corpus);
        const size_t n = f.size();
        const std::string count = "has " + std::to_string(n) + " columns";
        switch (corpus.layout) {
            case CorpusLayout::pairs:
                if (n > 3)
                    layout_error(m_where, line, count + ", but the file's layout (from line " + std::to_string(m_first) +
                                                    ") is " + pairs_form + ": is there a tab inside a sentence? "
                                                    "Choose the sentence columns: --columns SRC,TGT (in the app: Columns), e.g. 1,2");
                return {0, 1};
            case CorpusLayout::challenge: {
                if (n != 4)
                    layout_error(m_where, line, count + ", but the file's layout (from line " + std::to_string(m_first) +
                                                    ") is Tatoeba-Challenge, 4 columns: " + challenge_form);
                const std::string a = trim(f[0]), b = trim(f[1]);
                if (!is_language_code(a) || !is_language_code(b))
                    layout_error(m_where, line, ": columns 1 and 2 (" + shorten(a) + ", " + shorten(b) +
                                                    ") are not language codes, but the file's layout (from line " +
                                                    std::to_string(m_first) + ") is Tatoeba-Challenge: " +
                                                    challenge_form);
                if (!m_choice.by_language()) return {2, 3};
                if (matches(a, m_choice.src_lang) && matches(b, m_choice.tgt_lang)) return {2, 3};
                if (matches(b, m_choice.src_lang) && matches(a, m_choice.tgt_lang)) return {3, 2};
                layout_error(m_where, line, ": the languages are " + quote(a) + " and " + quote(b) + ", but the columns asked for are " +
                                                m_choice.src_lang + "," + m_choice.tgt_lang);
            }
            default:  // columns
                if (n != m_columns)
                    layout_error(m_where, line, count + ", but line " + std::to_string(m_first) + " has " +
                                                    std::to_string(m_columns) +
                                                    ": every line must have the same columns (is there a tab inside "
                                                    "a sentence?)");
                return {m_choice.src - 1, m_choice.tgt - 1};
        }
    }

private:
    static bool matches(const std::string& code, const std::string& lang) {
        return code == lang || (code.size() > lang.size() && code.compare(0, lang.size(), lang) == 0 &&
                                code[lang.size()] == '_');
    }

    void detect(const std::vector<std::string_view>& f, size_t line, Corpus& corpus) {
        m_first = line;
        const size_t n = f.size();
        const std::string a = trim(f[0]), b = n > 1 ? trim(f[1]) : std::string();
        const bool codes = n == 4 && is_language_code(a) && is_language_code(b);
        const std::string count = "has " + std::to_string(n) + " columns";
        if (m_explicit && !m_choice.by_language()) {
            const size_t need = std::max(m_choice.src, m_choice.tgt);
            if (n < need)
                layout_error(m_where, line, count + ", but the columns chosen (" + std::to_string(m_choice.src) + "," +
                                                std::to_string(m_choice.tgt) + ") need at least " + std::to_string(need));
            corpus.layout = CorpusLayout::columns;
            m_columns = n;
            corpus.detected = "columns " + std::to_string(m_choice.src) + " (source) and " +
                              std::to_string(m_choice.tgt) + " (target) of " + std::to_string(n) + " (chosen)";
            return;
        }
        if (m_explicit && !codes)
            layout_error(m_where, line, count + (n == 4 ? " without language codes in columns 1 and 2" : "") +
                                            ", but the columns chosen (" + m_choice.src_lang + "," +
                                            m_choice.tgt_lang + ") are languages of a Tatoeba-Challenge file: " +
                                            challenge_form);
        if (codes) {
            corpus.layout = CorpusLayout::challenge;
            const bool swap = m_choice.by_language() && matches(b, m_choice.src_lang);
            corpus.detected = std::string("Tatoeba-Challenge file (") + challenge_form + "): source = column " +
                              (swap ? "4 (" + b : "3 (" + a) + "), target = column " + (swap ? "3 (" + a : "4 (" + b) +
                              ")" + (m_explicit ? " (chosen)" : "");
            return;
        }
        if (n == 4)
            layout_error(m_where, line, count + " but columns 1 and 2 (" + shorten(a) + ", " + shorten(b) +
                                            ") are not language codes: expected Tatoeba-Challenge lines " +
                                            challenge_form + " or Tatoeba lines " + pairs_form +
                                            "; or choose the sentence columns: --columns SRC,TGT (in the app: Columns), e.g. 3,4");
        if (n > 4)
            layout_error(m_where, line, count + ": expected Tatoeba lines " + std::string(pairs_form) +
                                            " or Tatoeba-Challenge lines " + challenge_form +
                                            "; or choose the sentence columns: --columns SRC,TGT (in the app: Columns), e.g. 3,4");
        corpus.layout = CorpusLayout::pairs;
        corpus.detected = std::string("Tatoeba/manythings pairs (") + pairs_form + ")";
    }

    std::string m_where;
    ColumnChoice m_choice;
    bool m_explicit = false;
    size_t m_first = 0;    ///< the line the layout was found on (0: not yet)
    size_t m_columns = 0;  ///< CorpusLayout::columns: the column count of every line
};

/// Adds the pair, or records why not. True when max_pairs is reached.
bool add_pair(Corpus& corpus, size_t line, std::string src, std::string tgt, const TsvOptions& options) {
    if (options.reverse) std::swap(src, tgt);
    SentencePair pair = options.encode ? SentencePair{options.encode(src, false), options.encode(tgt, true)}
                                       : SentencePair{tokenize(src, options.level), tokenize(tgt, options.level)};
    pair.line = line;
    if (pair.src.empty()) corpus.skipped.push_back({line, "empty source"});
    else if (pair.tgt.empty()) corpus.skipped.push_back({line, "empty target"});
    else corpus.pairs.push_back(std::move(pair));
    return options.max_pairs > 0 && corpus.pairs.size() >= options.max_pairs;
}

/// The error for a corpus without a usable pair.
[[noreturn]] void no_pairs(const Corpus& corpus, const std::string& where, bool any_line, const std::string& expected) {
    if (!any_line) throw FileError(quote(where, quote_path_max) + " has no sentence pairs: it is empty or has only blank lines; " + expected);
    std::map<std::string, size_t> reasons;
    for (const auto& s : corpus.skipped) ++reasons[s.reason.substr(0, s.reason.find(" ("))];
    std::string summary;
    for (const auto& [reason, count] : reasons)
        summary += (summary.empty() ? "" : ", ") + std::to_string(count) + " " + reason;
    const auto& first = corpus.skipped.front();
    throw FileError(quote(where, quote_path_max) + " has no usable sentence pair: all " + std::to_string(corpus.skipped.size()) +
                    " non-blank lines were skipped (" + summary + "); first at line " + std::to_string(first.line) +
                    ": " + first.reason + "; " + expected);
}

Corpus read_lines(LineReader& in, const TsvOptions& options) {
    Corpus corpus;
    corpus.level = options.encode ? TokenLevel::subword : options.level;
    corpus.model_pieces = static_cast<bool>(options.encode);
    corpus.layout = CorpusLayout::pairs;
    ColumnPicker picker(in.name(), options.columns);
    const Progress progress{options, {&in}, corpus};
    in.on_chunk([&progress] { progress.report(); });
    std::vector<std::string_view> fields;
    bool any_line = false;
    std::string_view line;
    while (in.next(line, options.max_line_bytes)) {
        if (!in.too_long() && blank(line)) continue;
        any_line = true;
        const size_t no = in.line_number();
        std::string bad = bad_bytes(in, line, options.max_line_bytes);
        if (!bad.empty()) {
            corpus.skipped.push_back({no, std::move(bad)});
            continue;
        }
        split_tabs(line, fields);
        if (fields.size() == 1) {
            corpus.skipped.push_back({no, "no tab"});
            continue;
        }
        const auto [s, t] = picker.pick(fields, no, corpus);
        if (add_pair(corpus, no, trim(fields[s]), trim(fields[t]), options)) {
            corpus.stopped_early = true;
            break;
        }
    }
    corpus.lines_read = in.line_number();
    corpus.bytes_read = in.bytes_read();
    in.on_chunk(nullptr);
    progress.report();
    if (corpus.pairs.empty())
        no_pairs(corpus, in.name(), any_line,
                 std::string("expected lines '") + pairs_form + "' (an optional third column is ignored) or '" +
                     challenge_form + "'");
    return corpus;
}

std::string base_name(const std::string& path) {
    const size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// Lines left in a reader, and the first non-blank one (for the line-count message).
std::pair<size_t, std::string> rest_of(LineReader& in, std::string_view current) {
    std::string first = blank(current) ? std::string() : shorten(current);
    size_t first_no = first.empty() ? 0 : in.line_number();
    std::string_view line;
    while (in.next(line, 0))
        if (first.empty() && (in.too_long() || !blank(line))) {
            first = shorten(line);
            first_no = in.line_number();
        }
    return {first_no, first};
}

Corpus read_two(LineReader& a, LineReader& b, const TsvOptions& options) {
    if (!options.columns.empty())
        throw ConfigError("columns " + quote(options.columns) + " apply to a TSV file, not to parallel text (one sentence per line)");
    Corpus corpus;
    corpus.level = options.encode ? TokenLevel::subword : options.level;
    corpus.model_pieces = static_cast<bool>(options.encode);
    corpus.layout = CorpusLayout::parallel;
    corpus.detected = "parallel text, one sentence per line: source " + quote(base_name(a.name()), quote_path_max) +
                      ", target " + quote(base_name(b.name()), quote_path_max);
    const Progress progress{options, {&a, &b}, corpus};
    a.on_chunk([&progress] { progress.report(); });
    b.on_chunk([&progress] { progress.report(); });
    bool any_line = false;
    for (;;) {
        std::string_view ls, lt;
        const bool hs = a.next(ls, options.max_line_bytes), ht = b.next(lt, options.max_line_bytes);
        if (!hs && !ht) break;
        if (hs != ht) {  // one file ended: the other must have only blank lines left
            LineReader& longer = hs ? a : b;
            LineReader& shorter = hs ? b : a;
            const size_t ended = shorter.line_number();
            const auto [first_no, first] = rest_of(longer, hs ? ls : lt);
            if (first_no == 0) break;  // only blank lines left: nothing without a partner
            throw FileError(quote(a.name(), quote_path_max) + " and " + quote(b.name(), quote_path_max) + " have different line counts (" +
                            std::to_string(a.line_number()) + " and " + std::to_string(b.line_number()) +
                            "): parallel text needs one line in each file per pair; line " + std::to_string(first_no) +
                            " of " + quote(longer.name(), quote_path_max) + " (" + first + ") has no partner in " + quote(shorter.name(), quote_path_max) +
                            ", which ends at line " + std::to_string(ended));
        }
        const size_t no = a.line_number();
        if (!a.too_long() && !b.too_long() && blank(ls) && blank(lt)) continue;
        any_line = true;
        std::string bad = bad_bytes(a, ls, options.max_line_bytes);
        if (bad.empty()) bad = bad_bytes(b, lt, options.max_line_bytes);
        if (!bad.empty()) {
            corpus.skipped.push_back({no, std::move(bad)});
            continue;
        }
        for (const LineReader* in : {&a, &b})
            if ((in == &a ? ls : lt).find('\t') != std::string_view::npos)
                layout_error(in->name(), no, "has a tab, but parallel text has one sentence per line and no columns "
                                             "(a TSV file is read on its own, without a target file)");
        if (add_pair(corpus, no, trim(ls), trim(lt), options)) {
            corpus.stopped_early = true;
            break;
        }
    }
    corpus.lines_read = a.line_number();
    corpus.bytes_read = a.bytes_read() + b.bytes_read();
    a.on_chunk(nullptr);
    b.on_chunk(nullptr);
    progress.report();
    if (corpus.pairs.empty())
        no_pairs(corpus, a.name() + "' + '" + b.name(), any_line,
                 "expected one sentence per line in each file, line N of one translating line N of the other");
    return corpus;
}

uint64_t size_bound(const TsvOptions& options) { return options.max_pairs > 0 ? 0 : options.max_file_bytes; }

}  // namespace

Corpus parse_tsv(const std::string& text, const std::string& name, const TsvOptions& options) {
    LineReader in = LineReader::from_memory(text, name);
    Corpus corpus = read_lines(in, options);
    corpus.name = name;
    return corpus;
}

Corpus read_tsv(const std::string& path, const TsvOptions& options) {
    LineReader in = LineReader::open_file(path, size_bound(options));
    Corpus corpus = read_lines(in, options);
    corpus.name = base_name(path);
    return corpus;
}

Corpus parse_parallel(const std::string& src_text, const std::string& tgt_text, const std::string& src_name,
                      const std::string& tgt_name, const TsvOptions& options) {
    LineReader a = LineReader::from_memory(src_text, src_name);
    LineReader b = LineReader::from_memory(tgt_text, tgt_name);
    Corpus corpus = read_two(a, b, options);
    corpus.name = src_name + " + " + tgt_name;
    return corpus;
}

Corpus read_parallel(const std::string& src_path, const std::string& tgt_path, const TsvOptions& options) {
    // The bound applies to the two files together: that is what ends up in memory.
    const uint64_t bound = size_bound(options);
    LineReader a = LineReader::open_file(src_path, bound);
    LineReader b = LineReader::open_file(tgt_path, bound == 0 ? 0 : bound - std::min(bound - 1, a.total_bytes()));
    Corpus corpus = read_two(a, b, options);
    corpus.name = base_name(src_path) + " + " + base_name(tgt_path);
    return corpus;
}

}  // namespace attnviz
