#pragma once
// Text processing: d2l-compatible normalisation, tokenisers and the vocabulary.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/unicode.hpp"  // is_valid_utf8, to_nfc, lower_like_python, grapheme_clusters

namespace attnviz {

/// How a sentence is split into tokens.
enum class TokenLevel {
    word,       ///< split on spaces after normalisation (d2l's MTFraEng)
    character,  ///< one token per extended grapheme cluster (NFC), a space being a token " " of its own
    subword     ///< SentencePiece pieces of the normalised text (core/tokenizer.hpp: needs a model)
};
std::string to_string(TokenLevel level);                ///< "word", "char", "subword"
TokenLevel token_level_from_string(const std::string& s);  ///< inverse of to_string; throws ConfigError
/// For messages: "words", "characters", "subwords".
std::string level_noun(TokenLevel level);

/// d2l's preprocessing (MTFraEng._preprocess) with Unicode done by ICU (core/unicode.hpp):
///   1. NFC. d2l does not normalise; attnviz does, so that a sentence typed in NFD
///      (macOS file names, some keyboards: "e" + U+0301) meets the same tokens as an
///      NFC corpus. Tatoeba and most corpora are NFC, and on NFC text the result is
///      byte for byte d2l's (tests/data/text_fixtures.json); on other text it is
///      d2l's preprocess of its NFC form. NFC comes first so that the steps below see
///      the same characters whichever form the input came in.
///   2. U+00A0 and U+202F (no-break spaces) become ' '.
///   3. Python's str.lower() on the whole sentence (lower_like_python: every script,
///      'İ' -> "i̇", 'Σ' -> 'ς' at the end of a word, 'ẞ' -> 'ß').
///   4. A space before , . ! ? at index i > 0 of the lowered text when the character at
///      index i - 1 *before* lower-casing is not a space: d2l's indexing, kept so that
///      after an 'İ' (which lowers to two characters) the output is still d2l's.
/// The order is d2l's: lower-case, then insert spaces ("ΟΔΟΣ.Α" -> "οδοσ .α": the '.'
/// is case-ignorable, so the sigma is not final). Ill-formed UTF-8 bytes are passed
/// through unchanged (each valid run around them is normalised on its own).
std::string normalize(const std::string& text);

/// Splits normalised text on spaces (tabs, CR and LF count as spaces too); empty pieces are dropped.
std::vector<std::string> tokenize_words(const std::string& text);

/// Splits UTF-8 text, in NFC, into extended grapheme clusters (each one a token, spaces
/// included): "e" + U+0301 is one token "é", an emoji ZWJ sequence is one token. Case is kept.
/// Throws attnviz::Error naming the byte offset on invalid UTF-8.
std::vector<std::string> tokenize_chars(const std::string& text);

/// Tokenises with the given level (normalising first for word level, NFC only for characters).
/// Subword level has no model here: it gives the normalised words, which a subword
/// Tokenizer (core/tokenizer.hpp) cuts into pieces once its model is trained on them.
std::vector<std::string> tokenize(const std::string& text, TokenLevel level);

/// Joins tokens back into text: with spaces at word level, directly at character level;
/// subword pieces are joined and each "▁" (U+2581, SentencePiece's word boundary)
/// becomes a space, the leading one dropped (SentencePiece's DecodePieces).
std::string detokenize(const std::vector<std::string>& tokens, TokenLevel level);

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
