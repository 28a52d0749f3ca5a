#pragma once
// Text processing: d2l-compatible normalisation and tokenisers (the vocabulary:
// core/text/vocab.hpp).
#include <cstdint>
#include <string>
#include <vector>

#include "core/text/unicode.hpp"  // is_valid_utf8, to_nfc, lower_like_python, grapheme_clusters

namespace attnviz {

/// How a sentence is split into tokens.
enum class TokenLevel {
    word,       ///< split on spaces after normalisation (d2l's MTFraEng)
    character,  ///< one token per extended grapheme cluster (NFC), a space being a token " " of its own
    subword     ///< SentencePiece pieces of the normalised text (core/text/tokenizer.hpp: needs a model)
};
std::string to_string(TokenLevel level);                ///< "word", "char", "subword"
TokenLevel token_level_from_string(const std::string& s);  ///< inverse of to_string; throws ConfigError
/// For messages: "words", "characters", "subwords".
std::string level_noun(TokenLevel level);

/// d2l's preprocessing (MTFraEng._preprocess) with Unicode done by ICU (core/text/unicode.hpp):
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
/// Tokenizer (core/text/tokenizer.hpp) cuts into pieces once its model is trained on them.
std::vector<std::string> tokenize(const std::string& text, TokenLevel level);

/// Joins tokens back into text: with spaces at word level, directly at character level;
/// subword pieces are joined and each "▁" (U+2581, SentencePiece's word boundary)
/// becomes a space, the leading one dropped (SentencePiece's DecodePieces).
std::string detokenize(const std::vector<std::string>& tokens, TokenLevel level);

/// A sentence as a word- or character-level model reads it: word level normalize()s it
/// (when `normalize`) and splits on spaces; any other level splits the grapheme clusters
/// of lowercase_ascii(sentence) (when `normalize`). Subword models read through their
/// Tokenizer (core/text/tokenizer.hpp), which calls this for the other two levels.
std::vector<std::string> prepare_source(const std::string& sentence, TokenLevel level, bool normalize = true);

/// ASCII upper case lowered and runs of spaces squeezed, leading and trailing ones dropped:
/// the built-in character-level tasks' spelling. Other bytes stay as they are.
std::string lowercase_ascii(const std::string& sentence);

}  // namespace attnviz
