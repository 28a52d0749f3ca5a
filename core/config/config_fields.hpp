#pragma once
// Reading a Hugging Face config.json field by field (core/config/pretrained_config.cpp, and each
// family's own reader: core/config/t5_config.cpp): every field checked, with messages naming
// the file and the key. Torch-free.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config/registry.hpp"
#include "core/io/error.hpp"
#include "core/io/json_bounded.hpp"

namespace attnviz::config_fields {

using json = nlohmann::json;

/// Sizes a real model never exceeds (NLLB-3.3B: d 2048, 24 layers, 16 heads, ffn 8192,
/// vocabulary 256,206); a file beyond them is refused before anything is allocated for it.
/// The width is the registry's (core/config/registry.hpp: "hidden_size"), the one range every
/// model attnviz builds is checked against: a file's d_model is refused here, naming the file and
/// its key, never later under a flag the user did not give.
inline int64_t max_width() {
    static const int64_t w = static_cast<int64_t>(find_parameter("hidden_size").max.value_or(4096));
    return w;
}
constexpr int64_t k_max_layers = 128;
constexpr int64_t k_max_heads = 256;
constexpr int64_t k_max_ffn = 65536;
constexpr int64_t k_max_vocab = 1 << 20;
constexpr int64_t k_max_positions = 1 << 16;

/// Reads the fields of one JSON object with messages naming the file and the key.
class Fields {
public:
    Fields(const json& j, const std::string& what) : m_j(j), m_what(what) {
        if (!j.is_object()) throw FileError(what + ": expected a JSON object, got " + describe_json(j));
    }
    bool has(const char* key) const { return m_j.contains(key) && !m_j.at(key).is_null(); }
    int64_t integer(const char* key, int64_t lo, int64_t hi) const {
        if (!has(key)) throw FileError(m_what + ": the field \"" + key + "\" is missing");
        return integer_at(m_j.at(key), key, lo, hi);
    }
    int64_t integer_or(const char* key, int64_t fallback, int64_t lo, int64_t hi) const {
        return has(key) ? integer(key, lo, hi) : fallback;
    }
    double real_or(const char* key, double fallback, double lo, double hi) const {
        if (!has(key)) return fallback;
        const json& v = m_j.at(key);
        if (!v.is_number()) throw bad(key, "a number", v);
        const double d = v.get<double>();
        if (!std::isfinite(d) || d < lo || d > hi)
            throw FileError(m_what + ": \"" + key + "\" is " + describe_json(v) + ", expected a number in [" +
                            number(lo) + ", " + number(hi) + "]");
        return d;
    }
    bool boolean_or(const char* key, bool fallback) const {
        if (!has(key)) return fallback;
        const json& v = m_j.at(key);
        if (!v.is_boolean()) throw bad(key, "true or false", v);
        return v.get<bool>();
    }
    std::string text_or(const char* key, const std::string& fallback) const {
        if (!has(key)) return fallback;
        const json& v = m_j.at(key);
        if (!v.is_string()) throw bad(key, "a string", v);
        return v.get<std::string>();
    }
    /// A generation field that may be one token id or a flat list of them (eos_token_id,
    /// forced_eos_token_id, suppress_tokens, begin_suppress_tokens): each id in 0..vocab-1. An
    /// empty list (transformers refuses one for the end-of-sentence fields) only where `allow_empty`;
    /// a list inside the list, a negative id or one past the vocabulary: one line naming the
    /// file, the key and the entry.
    std::vector<int64_t> ids_or(const char* key, std::vector<int64_t> fallback, int64_t vocab,
                                bool allow_empty = false) const {
        if (!has(key)) return fallback;
        const json& v = m_j.at(key);
        if (!v.is_array()) return {integer_at(v, key, 0, vocab - 1)};
        if (v.empty() && !allow_empty)
            throw FileError(m_what + ": \"" + key + "\" is an empty list, expected a token id or a list of token ids");
        return flat_ids(v, key, vocab);
    }
    /// The ids of a JSON list (`name` as the file calls it, for messages), each in 0..vocab-1.
    std::vector<int64_t> flat_ids(const json& v, const std::string& name, int64_t vocab) const {
        if (v.size() > 65536) throw bad(name.c_str(), "at most 65536 token ids", v);
        std::vector<int64_t> out;
        for (size_t i = 0; i < v.size(); ++i) {
            const std::string entry = name + "[" + std::to_string(i) + "]";
            if (v[i].is_array() || v[i].is_object())
                throw FileError(m_what + ": \"" + entry + "\" is " + describe_json(v[i]) +
                                ", expected a token id (\"" + name + "\" is one id or a flat list of ids)");
            out.push_back(integer_at(v[i], entry.c_str(), 0, vocab - 1));
        }
        return out;
    }
    FileError bad(const char* key, const char* expected, const json& v) const {
        return FileError(m_what + ": \"" + key + "\" is " + describe_json(v) + ", expected " + expected);
    }
    const std::string& what() const { return m_what; }

private:
    int64_t integer_at(const json& v, const char* key, int64_t lo, int64_t hi) const {
        if (!v.is_number_integer()) throw bad(key, "a whole number", v);
        const bool negative = v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0;
        if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
            throw FileError(m_what + ": \"" + key + "\" is " + describe_json(v) + ", expected " + std::to_string(lo) +
                            ".." + std::to_string(hi));
        const int64_t n = negative ? v.get<int64_t>() : static_cast<int64_t>(v.get<uint64_t>());
        if (n < lo || n > hi)
            throw FileError(m_what + ": \"" + key + "\" is " + std::to_string(n) + ", expected " + std::to_string(lo) +
                            ".." + std::to_string(hi));
        return n;
    }
    static std::string number(double d) {
        std::string s = std::to_string(d);
        while (s.size() > 1 && s.back() == '0') s.pop_back();
        if (!s.empty() && s.back() == '.') s.pop_back();
        return s;
    }
    const json& m_j;
    std::string m_what;
};

}  // namespace attnviz::config_fields
