#pragma once
// Unicode primitives, all done by ICU (libicuuc): UTF-8 validation, NFC,
// Python-compatible lower-casing and extended grapheme clusters.
//
// Every function is thread-safe: the ICU service objects are created once and
// only used through const pointers (UCaseMap, Normalizer2), and the grapheme
// break iterator is one per thread.
#include <string>
#include <vector>

namespace attnviz {

/// True when the bytes are well-formed UTF-8 (no overlong forms, no surrogates,
/// nothing above U+10FFFF), decoded with ICU's U8_NEXT.
bool is_valid_utf8(const std::string& bytes);

/// Unicode Normalization Form C of valid UTF-8 (ASCII and text already in NFC are
/// returned as they are, after a quick check). Throws attnviz::Error on invalid UTF-8.
std::string to_nfc(const std::string& text);

/// Python's str.lower() on valid UTF-8: full, locale-independent lower-case mapping
/// (ICU's root locale) on every script, with SpecialCasing's unconditional
/// mappings ('İ' U+0130 -> "i̇", two code points) and Final_Sigma ('Σ' becomes
/// 'ς' after a cased letter and not before one, case-ignorable characters such as
/// '.' and "'" skipped, as Python does). The string is one context: call it on a
/// whole sentence, not on pieces. Throws attnviz::Error on invalid UTF-8.
/// Python 3.11 has Unicode 14.0 data; ICU 72 has 15.0: they agree on every
/// character Unicode 14.0 assigns (tests/data/text_fixtures.json checks all of them).
std::string lower_like_python(const std::string& text);

/// to_nfc and lower_like_python for text the caller has already checked with
/// is_valid_utf8 (normalize()'s hot path: no second check). Ill-formed input does not
/// crash ICU but its result is unspecified.
std::string to_nfc_of_valid(const std::string& valid);
std::string lower_like_python_of_valid(const std::string& valid);

/// Splits valid UTF-8 into extended grapheme clusters (UAX #29, ICU's character
/// break iterator, root locale): a letter and its combining marks, an emoji ZWJ
/// sequence, a flag, CR LF are each one piece. Throws attnviz::Error naming the byte
/// offset on invalid UTF-8.
std::vector<std::string> grapheme_clusters(const std::string& text);

/// True when `token` is one or more punctuation characters (Unicode general category P*:
/// "." "," "!" "«" "¿" ...), a leading SentencePiece word mark "▁" (U+2581) aside; false for
/// anything else, ill-formed UTF-8 included.
bool is_punctuation(const std::string& token);

}  // namespace attnviz
