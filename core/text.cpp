// Text processing: d2l's preprocess (on ICU, core/unicode.cpp), tokenisers and the vocabulary.
#include "core/text.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <unicode/utf8.h>

#include "core/error.hpp"
#include "core/file_read.hpp"
#include "core/json_bounded.hpp"
#include "core/export.hpp"
#include "core/unicode.hpp"

namespace attnviz {

namespace {

bool is_space_byte(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// Reads the unit at bytes[i] and moves i past it: a code point (>= 0), or a
// maximal ill-formed sequence (-1), which normalize() passes through unchanged.
UChar32 next_unit(const std::string& bytes, int32_t& i) {
    UChar32 c = 0;
    U8_NEXT(reinterpret_cast<const uint8_t*>(bytes.data()), i, static_cast<int32_t>(bytes.size()), c);
    return c;
}

bool is_ascii(const std::string& s) {
    for (const char c : s)
        if (static_cast<unsigned char>(c) >= 0x80) return false;
    return true;
}

bool is_d2l_punctuation(UChar32 c) { return c == ',' || c == '.' || c == '!' || c == '?'; }

// NFC, then d2l's replacement of U+00A0 and U+202F by spaces (NFC leaves both as they
// are). Byte search is exact on valid UTF-8: C2 and E2 are always lead bytes.
std::string prepare(const std::string& valid) {
    std::string s = to_nfc_of_valid(valid);
    for (const char* nbsp : {"\xC2\xA0", "\xE2\x80\xAF"}) {
        const size_t len = std::strlen(nbsp);
        for (size_t at = s.find(nbsp); at != std::string::npos; at = s.find(nbsp, at + 1)) s.replace(at, len, " ");
    }
    return s;
}

// d2l's spacing when lower() kept every character at its index (no 'İ' in the text):
// the character before index i is then a space in the text exactly when it is one in
// the lowered text, and , . ! ? and ' ' are single bytes that never occur inside a
// multi-byte UTF-8 sequence, so bytes can be checked directly.
std::string space_punctuation(const std::string& lowered) {
    std::string out;
    out.reserve(lowered.size() + lowered.size() / 8 + 1);
    for (size_t i = 0; i < lowered.size(); ++i) {
        const char c = lowered[i];
        if (i > 0 && is_d2l_punctuation(c) && lowered[i - 1] != ' ') out += ' ';
        out += c;
    }
    return out;
}

// d2l's spacing in general: ' ' + ch for ch in ",.!?" at index i > 0 of text.lower()
// when text[i - 1] != ' '. d2l reads the previous character from the string *before*
// lower(), at the same index: after an 'İ' (one code point that lowers to two) that
// index points one character further on, so d2l then spaces every , . ! ? even when a
// space precedes it (a double space, the same words). Reproduced for identical output.
// With two or more 'İ', d2l raises IndexError near the end of its text; there the
// previous lowered character is used.
std::string space_punctuation(const std::string& source, const std::string& lowered) {
    std::string out;
    out.reserve(lowered.size() + lowered.size() / 8 + 1);
    const int32_t ns = static_cast<int32_t>(source.size()), nl = static_cast<int32_t>(lowered.size());
    int32_t si = 0;  // source cursor: the unit at index (lowered index - 1)
    UChar32 prev_lowered = 0;
    for (int32_t li = 0, index = 0; li < nl; ++index) {
        const int32_t start = li;
        const UChar32 c = next_unit(lowered, li);
        if (index > 0 && is_d2l_punctuation(c)) {
            UChar32 prev = prev_lowered;
            if (si < ns) {
                int32_t k = si;
                prev = next_unit(source, k);
            }
            if (prev != ' ') out += ' ';
        }
        if (index > 0 && si < ns) next_unit(source, si);
        out.append(lowered, static_cast<size_t>(start), static_cast<size_t>(li - start));
        prev_lowered = c;
    }
    return out;
}

}  // namespace

std::string normalize(const std::string& text) {
    if (text.size() > static_cast<size_t>(INT32_MAX)) throw Error("text too long to normalise (over 2 GiB)");
    if (is_ascii(text)) {  // most English text: lower-case and space in one pass
        std::string out;
        out.reserve(text.size() + text.size() / 8 + 1);
        for (size_t i = 0; i < text.size(); ++i) {
            const char c = text[i];
            if (i > 0 && is_d2l_punctuation(c) && text[i - 1] != ' ') out += ' ';
            out += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
        }
        return out;
    }
    // `source` is d2l's `text` after its replace(); `lowered` is text.lower(). Each valid
    // run is prepared and lower-cased as one context; ill-formed bytes are copied to both.
    std::string source, lowered;
    if (is_valid_utf8(text)) {
        source = prepare(text);
        lowered = lower_like_python_of_valid(source);
    } else {
        const int32_t n = static_cast<int32_t>(text.size());
        int32_t run = 0;
        for (int32_t i = 0; i < n;) {
            const int32_t start = i;
            if (next_unit(text, i) >= 0) continue;
            const std::string valid = prepare(text.substr(static_cast<size_t>(run), static_cast<size_t>(start - run)));
            source += valid;
            lowered += lower_like_python_of_valid(valid);
            source.append(text, static_cast<size_t>(start), static_cast<size_t>(i - start));
            lowered.append(text, static_cast<size_t>(start), static_cast<size_t>(i - start));
            run = i;
        }
        const std::string valid = prepare(text.substr(static_cast<size_t>(run)));
        source += valid;
        lowered += lower_like_python_of_valid(valid);
    }
    // Only 'İ' (U+0130, bytes C4 B0) lowers to more than one code point.
    if (source.find("\xC4\xB0") == std::string::npos) return space_punctuation(lowered);
    return space_punctuation(source, lowered);
}

std::vector<std::string> tokenize_words(const std::string& text) {
    std::vector<std::string> tokens;
    size_t i = 0;
    while (i < text.size()) {
        while (i < text.size() && is_space_byte(text[i])) ++i;
        size_t j = i;
        while (j < text.size() && !is_space_byte(text[j])) ++j;
        if (j > i) tokens.emplace_back(text, i, j - i);
        i = j;
    }
    return tokens;
}

std::vector<std::string> tokenize_chars(const std::string& text) { return grapheme_clusters(to_nfc(text)); }

std::vector<std::string> tokenize(const std::string& text, TokenLevel level) {
    if (level == TokenLevel::character) return tokenize_chars(text);
    return tokenize_words(normalize(text));  // subword: the words its model is trained on and applied to
}

std::string detokenize(const std::vector<std::string>& tokens, TokenLevel level) {
    std::string out;
    if (level == TokenLevel::subword) {
        static const std::string boundary = "\xE2\x96\x81";  // U+2581
        for (const auto& t : tokens) out += t;
        for (size_t at = out.find(boundary); at != std::string::npos; at = out.find(boundary, at + 1))
            out.replace(at, boundary.size(), " ");
        return out.compare(0, 1, " ") == 0 ? out.substr(1) : out;
    }
    for (size_t i = 0; i < tokens.size(); ++i) {
        if (i > 0 && level == TokenLevel::word) out += ' ';
        out += tokens[i];
    }
    return out;
}

std::string to_string(TokenLevel level) {
    switch (level) {
        case TokenLevel::word: return "word";
        case TokenLevel::character: return "char";
        case TokenLevel::subword: return "subword";
    }
    return "word";
}

TokenLevel token_level_from_string(const std::string& s) {
    for (const TokenLevel l : {TokenLevel::word, TokenLevel::character, TokenLevel::subword})
        if (to_string(l) == s) return l;
    throw ConfigError("unknown token level '" + s + "' (expected one of: word, char, subword)");
}

std::string level_noun(TokenLevel level) {
    switch (level) {
        case TokenLevel::word: return "words";
        case TokenLevel::character: return "characters";
        case TokenLevel::subword: return "subwords";
    }
    return "words";
}

// ---------------------------------------------------------------------------
// Vocab

const char* const Vocab::pad_token = "<pad>";
const char* const Vocab::bos_token = "<bos>";
const char* const Vocab::eos_token = "<eos>";
const char* const Vocab::unk_token = "<unk>";

Vocab::Vocab() {
    add(pad_token);
    add(bos_token);
    add(eos_token);
    add(unk_token);
}

void Vocab::add(const std::string& token) {
    if (m_index.count(token)) return;
    m_index.emplace(token, static_cast<int64_t>(m_tokens.size()));
    m_tokens.push_back(token);
}

Vocab Vocab::build(const std::vector<std::vector<std::string>>& sentences, int min_freq, size_t max_tokens) {
    std::unordered_map<std::string, int64_t> counts;
    for (const auto& sentence : sentences)
        for (const auto& token : sentence) ++counts[token];
    std::vector<std::pair<std::string, int64_t>> sorted(counts.begin(), counts.end());
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    Vocab vocab;
    for (const auto& [token, count] : sorted) {
        if (count < min_freq) break;  // sorted by count: the rest are rarer still
        if (max_tokens > 0 && vocab.size() - 4 >= max_tokens) break;
        vocab.add(token);
    }
    return vocab;
}

int64_t Vocab::id(const std::string& token) const {
    const auto it = m_index.find(token);
    return it == m_index.end() ? unk_id : it->second;
}

bool Vocab::contains(const std::string& token) const { return m_index.count(token) > 0; }

const std::string& Vocab::token(int64_t id) const {
    if (id < 0 || id >= static_cast<int64_t>(m_tokens.size()))
        throw std::out_of_range("token id " + std::to_string(id) + " is outside the vocabulary (size " +
                                std::to_string(m_tokens.size()) + ")");
    return m_tokens[static_cast<size_t>(id)];
}

std::vector<int64_t> Vocab::encode(const std::vector<std::string>& tokens) const {
    std::vector<int64_t> ids;
    ids.reserve(tokens.size());
    for (const auto& t : tokens) ids.push_back(id(t));
    return ids;
}

std::vector<std::string> Vocab::decode(const std::vector<int64_t>& ids, bool stop_at_eos) const {
    std::vector<std::string> tokens;
    for (const int64_t i : ids) {
        if (i == eos_id && stop_at_eos) break;
        if (i == pad_id) continue;
        tokens.push_back(token(i));
    }
    return tokens;
}

nlohmann::json Vocab::to_json() const {
    return nlohmann::json{{"format", "attnviz-vocab"}, {"version", 1}, {"tokens", m_tokens}};
}

Vocab Vocab::from_json(const nlohmann::json& j) {
    const char* expected = "expected a JSON object {\"format\": \"attnviz-vocab\", \"tokens\": [\"<pad>\", "
                           "\"<bos>\", \"<eos>\", \"<unk>\", ...]}";
    if (!j.is_object() || !j.contains("tokens") || !j["tokens"].is_array())
        throw FileError(std::string("not a vocabulary: ") + expected);
    if (j.contains("format") && j["format"] != "attnviz-vocab")
        throw FileError("not a vocabulary: \"format\" is " + describe_json(j["format"]) + ", expected \"attnviz-vocab\"");
    const auto& tokens = j["tokens"];
    const char* specials[] = {pad_token, bos_token, eos_token, unk_token};
    if (tokens.size() < 4)
        throw FileError("vocabulary has " + std::to_string(tokens.size()) +
                        " tokens, expected at least the 4 special tokens <pad> <bos> <eos> <unk>");
    Vocab vocab;
    for (size_t i = 0; i < tokens.size(); ++i) {
        if (!tokens[i].is_string())
            throw FileError("vocabulary token " + std::to_string(i) + " is " + describe_json(tokens[i]) +
                            ", expected a string");
        const auto& token = tokens[i].get_ref<const std::string&>();
        if (i < 4) {
            if (token != specials[i])
                throw FileError("vocabulary token " + std::to_string(i) + " is \"" + token + "\", expected \"" +
                                specials[i] + "\"");
            continue;
        }
        if (vocab.contains(token))
            throw FileError("vocabulary token " + std::to_string(i) + " \"" + token + "\" appears twice");
        vocab.add(token);
    }
    return vocab;
}

void Vocab::save(const std::string& path) const { write_file_atomic(path, to_json().dump(1) + "\n"); }

Vocab Vocab::load(const std::string& path) {
    // A vocabulary file is a list of tokens: 256 MiB is far more than any real one.
    const std::string text = read_regular_file(path, uint64_t(256) << 20, "vocabulary");
    const nlohmann::json j = parse_json_bounded(text, "vocabulary '" + path + "'");
    try {
        return from_json(j);
    } catch (const FileError& e) {
        throw FileError("vocabulary '" + path + "': " + e.what());
    }
}

}  // namespace attnviz
