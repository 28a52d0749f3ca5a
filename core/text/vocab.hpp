#pragma once
// The vocabulary: tokens <-> ids, with the four special tokens first, and its JSON form.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace attnviz {

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
    /// (they will map to <unk>), and so are tokens a vocabulary cannot hold (is_vocab_token). max_tokens > 0 keeps only that many tokens besides the
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
    /// Throws attnviz::FileError when the JSON is not a vocabulary, or a token is one that
    /// no vocabulary holds (is_vocab_token), twice, or a special token out of its place.
    static Vocab from_json(const nlohmann::json& j);
    /// The vocabulary of these tokens in this order, checked as from_json checks them (no JSON copy of a
    /// pretrained model's 256k names on the way).
    static Vocab from_tokens(std::vector<std::string> tokens);
    /// Saves as JSON to a file (atomically) / loads from one.
    void save(const std::string& path) const;
    static Vocab load(const std::string& path);

    bool operator==(const Vocab& other) const { return m_tokens == other.m_tokens; }

private:
    void add(const std::string& token);
    /// add() after from_json's checks of token i (the special tokens in their places, is_vocab_token, no repeat).
    void add_checked(size_t i, const std::string& token);
    void reserve(size_t n);
    std::vector<std::string> m_tokens;
    std::unordered_map<std::string, int64_t> m_index;
};

/// Whether a vocabulary may hold this token: not empty, no "|||" and nothing
/// has_control_characters() finds (core/io/message.hpp: C0 with NUL, tab, CR, LF, VT, FF
/// and escape; DEL; C1 with NEL; U+2028, U+2029; bytes that are not UTF-8). Output is one
/// line per input line, with " ||| " between the fields of a line (n-best lists, forced
/// decoding), often on a terminal: such a token would break the lines, or send the terminal
/// an escape sequence. A vocabulary file with one is refused; a corpus's such tokens map to
/// <unk>; a pretrained model's are renamed as printable() writes them
/// (core/text/pretrained_tokenizer.hpp).
bool is_vocab_token(const std::string& token);

/// The tokens before the first "<eos>" (all of them when there is none): an output as text sees it.
std::vector<std::string> until_eos(const std::vector<std::string>& tokens);

}  // namespace attnviz
