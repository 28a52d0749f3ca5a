// Text processing: d2l's preprocess, tokenisers, UTF-8 checks and the vocabulary.
#include "core/text.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/file_read.hpp"
#include "core/json_bounded.hpp"
#include "core/export.hpp"

namespace attnviz {

namespace {

// Decodes one code point at bytes[i]; returns its length in bytes, 0 when invalid.
// Strict: no overlong forms, no surrogates, nothing above U+10FFFF.
size_t decode_utf8(const std::string& bytes, size_t i, char32_t& cp) {
    const auto b = [&](size_t k) { return static_cast<unsigned char>(bytes[i + k]); };
    const size_t left = bytes.size() - i;
    const unsigned char c0 = b(0);
    if (c0 < 0x80) {
        cp = c0;
        return 1;
    }
    size_t len = 0;
    char32_t min = 0;
    if (c0 >= 0xC2 && c0 <= 0xDF) {
        len = 2, cp = c0 & 0x1F, min = 0x80;
    } else if (c0 >= 0xE0 && c0 <= 0xEF) {
        len = 3, cp = c0 & 0x0F, min = 0x800;
    } else if (c0 >= 0xF0 && c0 <= 0xF4) {
        len = 4, cp = c0 & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (left < len) return 0;
    for (size_t k = 1; k < len; ++k) {
        if ((b(k) & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (b(k) & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

// Python's str.lower() for ASCII, Latin-1 Supplement and Latin Extended-A
// (U+0130 İ, which Python lowers to two code points, is left to the caller).
char32_t to_lower(char32_t c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;  // À..Þ except ×
    if (c >= 0x100 && c <= 0x137 && c != 0x130) return (c % 2 == 0) ? c + 1 : c;  // Ā..ķ
    if (c >= 0x139 && c <= 0x148) return (c % 2 == 1) ? c + 1 : c;               // Ĺ..ň
    if (c >= 0x14A && c <= 0x177) return (c % 2 == 0) ? c + 1 : c;               // Ŋ..ŷ
    if (c == 0x178) return 0xFF;                                                  // Ÿ → ÿ
    if (c >= 0x179 && c <= 0x17E) return (c % 2 == 1) ? c + 1 : c;               // Ź..ž
    return c;
}

bool is_space_byte(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

}  // namespace

bool is_valid_utf8(const std::string& bytes) {
    char32_t cp = 0;
    for (size_t i = 0; i < bytes.size();) {
        const size_t n = decode_utf8(bytes, i, cp);
        if (n == 0) return false;
        i += n;
    }
    return true;
}

std::string normalize(const std::string& text) {
    // Work on code points, as Python does; invalid bytes pass through unchanged.
    std::string out;
    out.reserve(text.size() + text.size() / 8);
    char32_t prev = 0;
    bool first = true;
    for (size_t i = 0; i < text.size();) {
        char32_t cp = 0;
        size_t n = decode_utf8(text, i, cp);
        if (n == 0) {
            out += text[i];
            prev = 0xFFFD, first = false, ++i;
            continue;
        }
        i += n;
        if (cp == 0x202F || cp == 0xA0) cp = ' ';
        if (!first && (cp == ',' || cp == '.' || cp == '!' || cp == '?') && prev != ' ') out += ' ';
        if (cp == 0x130) {
            append_utf8(out, 'i');
            append_utf8(out, 0x307);  // Python: 'İ'.lower() == 'i̇'
        } else {
            append_utf8(out, to_lower(cp));
        }
        prev = cp, first = false;
    }
    return out;
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

std::vector<std::string> tokenize_chars(const std::string& text) {
    std::vector<std::string> tokens;
    tokens.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        char32_t cp = 0;
        const size_t n = decode_utf8(text, i, cp);
        if (n == 0) {
            std::ostringstream msg;
            msg << "invalid UTF-8 at byte " << i << " (0x" << std::hex
                << static_cast<int>(static_cast<unsigned char>(text[i]))
                << "): expected UTF-8 text; re-save the file as UTF-8";
            throw Error(msg.str());
        }
        tokens.emplace_back(text, i, n);
        i += n;
    }
    return tokens;
}

std::vector<std::string> tokenize(const std::string& text, TokenLevel level) {
    if (level == TokenLevel::word) return tokenize_words(normalize(text));
    return tokenize_chars(text);
}

std::string detokenize(const std::vector<std::string>& tokens, TokenLevel level) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
        if (i > 0 && level == TokenLevel::word) out += ' ';
        out += tokens[i];
    }
    return out;
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

Vocab Vocab::build(const std::vector<std::vector<std::string>>& sentences, int min_freq) {
    std::unordered_map<std::string, int64_t> counts;
    for (const auto& sentence : sentences)
        for (const auto& token : sentence) ++counts[token];
    std::vector<std::pair<std::string, int64_t>> sorted(counts.begin(), counts.end());
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    Vocab vocab;
    for (const auto& [token, count] : sorted)
        if (count >= min_freq) vocab.add(token);
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
