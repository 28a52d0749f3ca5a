#pragma once
// Text processing: d2l-compatible normalisation, tokenisers and the vocabulary.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace attnviz {

/// How a sentence is split into tokens.
enum class TokenLevel {
    word,  ///< split on spaces after normalisation (d2l's MTFraEng)
    character  ///< one token per Unicode code point, a space being a token " " of its own
};

/// d2l's preprocessing: non-breaking spaces (U+00A0, U+202F) become spaces,
/// text is lower-cased (ASCII and Latin-1/Latin Extended-A letters, as Python's
/// str.lower()), and a space is inserted before , . ! ? when not already preceded
/// by one (nor at the very start). Invalid UTF-8 bytes pass through unchanged.
std::string normalize(const std::string& text);

/// Splits normalised text on spaces (tabs, CR and LF count as spaces too); empty pieces are dropped.
std::vector<std::string> tokenize_words(const std::string& text);

/// Splits UTF-8 text into code points (each one a token, spaces included).
/// Throws attnviz::Error on invalid UTF-8.
std::vector<std::string> tokenize_chars(const std::string& text);

/// Tokenises with the given level (normalising first for word level).
std::vector<std::string> tokenize(const std::string& text, TokenLevel level);

/// Joins tokens back into text: with spaces at word level, directly at character level.
std::string detokenize(const std::vector<std::string>& tokens, TokenLevel level);

/// True when the bytes are valid UTF-8.
bool is_valid_utf8(const std::string& bytes);

/// Maps tokens to ids and back. Ids 0..3 are always <pad>, <bos>, <eos>, <unk>;
/// the other tokens follow by descending frequency, ties broken alphabetically.
class Vocab {
public:
    static constexpr int64_t pad_id = 0;
    static constexpr int64_t bos_id = 1;
    static constexpr int64_t eos_id = 2;
    static constexpr int64_t unk_id = 3;
    static const char* const pad_token;  ///< "<pad>"
    static const char* const bos_token;  ///< "<bos>"
    static const char* const eos_token;  ///< "<eos>"
    static const char* const unk_token;  ///< "<unk>"

    /// A vocabulary with only the four special tokens.
    Vocab();

    /// Builds from tokenised sentences; tokens seen fewer than min_freq times are left out
    /// (they will map to <unk>). max_tokens > 0 keeps only that many tokens besides the
    /// four special ones: the first of the usual order (most frequent first, ties
    /// alphabetically); 0 = no cap.
    static Vocab build(const std::vector<std::vector<std::string>>& sentences, int min_freq = 1,
                       size_t max_tokens = 0);

    size_t size() const { return m_tokens.size(); }
    /// Id of a token, unk_id when unknown.
    int64_t id(const std::string& token) const;
    /// True when the token has its own id.
    bool contains(const std::string& token) const;
    /// Token of an id; throws std::out_of_range for an unknown id.
    const std::string& token(int64_t id) const;
    std::vector<int64_t> encode(const std::vector<std::string>& tokens) const;
    /// Tokens of ids; stops before the first <eos> when stop_at_eos, always skips <pad>.
    std::vector<std::string> decode(const std::vector<int64_t>& ids, bool stop_at_eos = true) const;
    const std::vector<std::string>& tokens() const { return m_tokens; }

    nlohmann::json to_json() const;
    /// Throws attnviz::FileError when the JSON is not a vocabulary.
    static Vocab from_json(const nlohmann::json& j);
    /// Saves as JSON to a file (atomically) / loads from one.
    void save(const std::string& path) const;
    static Vocab load(const std::string& path);

    bool operator==(const Vocab& other) const { return m_tokens == other.m_tokens; }

private:
    void add(const std::string& token);
    std::vector<std::string> m_tokens;
    std::unordered_map<std::string, int64_t> m_index;
};

}  // namespace attnviz
