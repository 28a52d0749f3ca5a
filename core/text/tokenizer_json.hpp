#pragma once
// Hugging Face tokenizer.json (the `tokenizers` library's format), read and run as that library
// runs it: the ids of a text and the text of ids equal the library's (tests/base/test_tokenizer_json.cpp
// compares them on fixtures tools/make_tokenizer_json_fixtures.py makes with tokenizers itself).
//
// The pipeline of Tokenizer::encode, for one sequence:
//   1. the text is split at the added tokens whose "normalized" is false (leftmost, longest;
//      "lstrip"/"rstrip" eat the whitespace beside a match, "single_word" keeps only matches
//      with no word character beside them);
//   2. every other part is normalized (the normalizer), then split at the added tokens whose
//      "normalized" is true (matched against their normalized form);
//   3. every remaining part is cut by the pre-tokenizer, and each of its pieces by the model
//      (Unigram, BPE, WordLevel) into tokens;
//   4. with add_special_tokens, the post-processor adds its special tokens (a template, BERT's
//      or RoBERTa's [CLS] A [SEP]).
// decode(ids) maps ids to tokens (an added token's content first, else the model's), drops the
// special added tokens when asked, runs the decoder and joins what it gives.
//
// Components read (anything else is a FileError naming the file, the JSON path, the type and
// the types attnviz reads):
//   models         Unigram, BPE, WordLevel
//   normalizers    Precompiled, NFC, NFD, NFKC, NFKD, Replace, Prepend, Strip, StripAccents,
//                  Lowercase, BertNormalizer, Sequence
//   pre-tokenizers Metaspace, ByteLevel, Split, Whitespace, WhitespaceSplit, Digits, Punctuation,
//                  CharDelimiterSplit, BertPreTokenizer, Sequence
//   post-processors TemplateProcessing, ByteLevel, RobertaProcessing, BertProcessing, Sequence
//   decoders       Metaspace, ByteLevel, Replace, Fuse, Strip, ByteFallback, WordPiece, BPEDecoder,
//                  Sequence
// Regular expressions (Split, Replace) are ICU's (libicui18n), with a bound on each match's work.
// Torch-free and Qt-free (attnviz_base); an instance is immutable and thread-safe.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace attnviz {

/// Bounds on what a tokenizer.json may hold: a file past one is refused with a FileError.
struct TokenizerJsonLimits {
    uint64_t max_bytes = uint64_t{64} << 20;  ///< the file's size (NLLB's tokenizer.json is ~17 MB)
    size_t max_vocab = size_t{1} << 21;       ///< tokens of the model's vocabulary (NLLB: 256,204)
    size_t max_merges = size_t{1} << 21;      ///< BPE merges
    size_t max_added_tokens = size_t{1} << 16;  ///< entries of "added_tokens"
    size_t max_token_bytes = 1024;            ///< one token's (a piece's, an added token's) length
    size_t max_pattern_bytes = 4096;          ///< one regular expression or Replace pattern
    size_t max_components = 256;              ///< normalizers, pre-tokenizers, ... in all, sequences included
    int max_depth = 32;                       ///< JSON nesting (sequences in sequences are bounded by it)
};

/// One entry of tokenizer.json's "added_tokens".
struct TokenizerJsonAddedToken {
    int64_t id = -1;          ///< its id (may lie past the model's vocabulary)
    std::string content;      ///< the text it matches and stands for
    bool single_word = false;  ///< matched only with no word character (\w) on either side
    bool lstrip = false;      ///< a match takes the whitespace before it
    bool rstrip = false;      ///< a match takes the whitespace after it
    bool normalized = false;  ///< matched in the normalized text (against its normalized form), else in the raw text
    bool special = false;     ///< dropped by decode(skip_special_tokens = true)
};

/// What encode() gives: ids and their tokens, one for one.
struct TokenizerJsonEncoding {
    std::vector<int64_t> ids;
    /// The tokens as the library's Encoding.tokens: the model's pieces ("▁Hello", "Ġworld", "<0xE4>"),
    /// added tokens' contents; a Unigram piece with no id (unknown) is its own text, BPE's and
    /// WordLevel's unknown pieces the unknown token.
    std::vector<std::string> tokens;
};

class TokenizerJson {
public:
    /// Parses tokenizer.json's text; `what` names it in messages ("model folder 'x': tokenizer.json").
    /// FileError naming the key and what was expected for anything malformed, a component attnviz
    /// does not read, or a bound exceeded.
    static std::shared_ptr<const TokenizerJson> parse(const std::string& text, const std::string& what,
                                                      const TokenizerJsonLimits& limits = {});

    ~TokenizerJson();
    TokenizerJson(const TokenizerJson&) = delete;
    TokenizerJson& operator=(const TokenizerJson&) = delete;

    /// Tokenizer.encode(text, add_special_tokens). Error on text that is not UTF-8, and on a piece
    /// the model cannot encode (no unknown token), as the library's.
    TokenizerJsonEncoding encode(const std::string& text, bool add_special_tokens = true) const;
    /// The tokens of a text without the post-processor's: encode(text, false).tokens.
    std::vector<std::string> tokenize(const std::string& text) const { return encode(text, false).tokens; }
    /// Tokenizer.decode(ids, skip_special_tokens); ids with no token are left out, as the library does.
    std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens = true) const;
    /// decode() of tokens (the ids of tokens that have one; others are left out).
    std::string decode_tokens(const std::vector<std::string>& tokens, bool skip_special_tokens = true) const;

    /// A token's id: an added token's, else the model's; -1 when it has none.
    int64_t token_to_id(const std::string& token) const;
    /// An id's token: an added token's content, else the model's; "" when no token has the id.
    std::string id_to_token(int64_t id) const;
    /// One more than the largest id of the model's vocabulary and of the added tokens.
    int64_t vocab_size() const;
    /// Every id's token (id_to_token for 0 .. vocab_size() - 1).
    std::vector<std::string> id_tokens() const;
    const std::vector<TokenizerJsonAddedToken>& added_tokens() const;
    /// Whether a token is an added token marked special.
    bool is_special(const std::string& token) const;
    /// The model's unknown token ("<unk>"), or "" when it has none.
    const std::string& unk_token() const;
    /// "Unigram", "BPE" or "WordLevel".
    const std::string& model_type() const;
    /// The special tokens the post-processor puts before and after a single sequence (its
    /// template's, or [CLS]/[SEP]), as (tokens, ids); empty without a post-processor.
    std::pair<std::vector<std::string>, std::vector<std::string>> single_template() const;

    /// The component types attnviz reads, per kind ("model", "normalizer", "pre_tokenizer",
    /// "post_processor", "decoder"), comma-separated.
    static std::string supported(const std::string& kind);

    struct Impl;

private:
    explicit TokenizerJson(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m;
};

}  // namespace attnviz
