// Text processing: d2l's preprocess (on ICU, core/text/unicode.cpp) and tokenisers.
#include "core/text/text.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <unicode/utf8.h>

#include "core/io/error.hpp"
#include "core/io/file_read.hpp"
#include "core/io/json_bounded.hpp"
#include "core/io/message.hpp"
#include "core/text/unicode.hpp"

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
    throw ConfigError("unknown token level " + quote(s) + " (expected one of: word, char, subword)");
}

std::string level_noun(TokenLevel level) {
    switch (level) {
        case TokenLevel::word: return "words";
        case TokenLevel::character: return "characters";
        case TokenLevel::subword: return "subwords";
    }
    return "words";
}

std::vector<std::string> prepare_source(const std::string& sentence, TokenLevel level, bool normalize_text) {
    if (level == TokenLevel::word) return tokenize_words(normalize_text ? normalize(sentence) : sentence);
    return tokenize_chars(normalize_text ? lowercase_ascii(sentence) : sentence);
}

std::string lowercase_ascii(const std::string& sentence) {
    // Character-level tasks are lower-case with single spaces; punctuation stays where it is.
    std::string out;
    for (char ch : sentence) {
        const char c = (ch >= 'A' && ch <= 'Z') ? static_cast<char>(ch - 'A' + 'a') : ch;
        if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
        out += c;
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
}

}  // namespace attnviz
