// Unicode primitives on ICU: validation (U8_NEXT), NFC (Normalizer2), lower-casing
// (UCaseMap, root locale) and grapheme clusters (BreakIterator).
#include "core/text/unicode.hpp"

#include <algorithm>
#include <memory>
#include <sstream>

#include <unicode/brkiter.h>
#include <unicode/uchar.h>
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/ucasemap.h>
#include <unicode/utext.h>
#include <unicode/utf8.h>

#include "core/io/error.hpp"

namespace attnviz {

namespace {

bool is_ascii(const std::string& s) {
    for (const char c : s)
        if (static_cast<unsigned char>(c) >= 0x80) return false;
    return true;
}

// Offset of the first byte of an ill-formed sequence, or npos.
size_t first_invalid_byte(const std::string& bytes) {
    const auto* s = reinterpret_cast<const uint8_t*>(bytes.data());
    const int32_t n = static_cast<int32_t>(bytes.size());
    int32_t i = 0;
    while (i < n) {
        const int32_t start = i;
        UChar32 c = 0;
        U8_NEXT(s, i, n, c);
        if (c < 0) return static_cast<size_t>(start);
    }
    return std::string::npos;
}

void require_utf8(const std::string& text) {
    if (text.size() > static_cast<size_t>(INT32_MAX)) throw Error("text too long for ICU (over 2 GiB)");
    const size_t bad = first_invalid_byte(text);
    if (bad == std::string::npos) return;
    std::ostringstream msg;
    msg << "invalid UTF-8 at byte " << bad << " (0x" << std::hex
        << static_cast<int>(static_cast<unsigned char>(text[bad]))
        << "): expected UTF-8 text; re-save the file as UTF-8";
    throw Error(msg.str());
}

void check(UErrorCode status, const char* what) {
    if (U_FAILURE(status)) throw Error(std::string("ICU ") + what + " failed: " + u_errorName(status));
}

// Created once (thread-safe static initialisation), used through const pointers only:
// ICU documents const UCaseMap / Normalizer2 use as thread-safe.
const UCaseMap* root_case_map() {
    static const UCaseMap* map = [] {
        UErrorCode status = U_ZERO_ERROR;
        UCaseMap* m = ucasemap_open("", U_FOLD_CASE_DEFAULT, &status);  // "" = root: no Turkish/Lithuanian rules
        check(status, "ucasemap_open");
        return m;
    }();
    return map;
}

const icu::Normalizer2* nfc_normalizer() {
    static const icu::Normalizer2* nfc = [] {
        UErrorCode status = U_ZERO_ERROR;
        const icu::Normalizer2* n = icu::Normalizer2::getNFCInstance(status);
        check(status, "Normalizer2::getNFCInstance");
        return n;
    }();
    return nfc;
}

// A break iterator is stateful: one per thread, cloned from nothing but the root rules.
icu::BreakIterator& character_breaks() {
    thread_local std::unique_ptr<icu::BreakIterator> it = [] {
        UErrorCode status = U_ZERO_ERROR;
        std::unique_ptr<icu::BreakIterator> b(icu::BreakIterator::createCharacterInstance(icu::Locale::getRoot(), status));
        check(status, "BreakIterator::createCharacterInstance");
        return b;
    }();
    return *it;
}

}  // namespace

bool is_valid_utf8(const std::string& bytes) { return first_invalid_byte(bytes) == std::string::npos; }

std::string to_nfc(const std::string& text) {
    if (is_ascii(text)) return text;
    require_utf8(text);
    return to_nfc_of_valid(text);
}

std::string to_nfc_of_valid(const std::string& text) {
    const icu::Normalizer2* nfc = nfc_normalizer();
    UErrorCode status = U_ZERO_ERROR;
    const icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
    if (nfc->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return text;
    status = U_ZERO_ERROR;
    std::string out;
    out.reserve(text.size());
    icu::StringByteSink<std::string> sink(&out);
    nfc->normalizeUTF8(0, piece, sink, nullptr, status);
    check(status, "NFC normalisation");
    return out;
}

std::string lower_like_python(const std::string& text) {
    if (is_ascii(text)) {
        std::string out = text;
        for (char& c : out)
            if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        return out;
    }
    require_utf8(text);
    return lower_like_python_of_valid(text);
}

std::string lower_like_python_of_valid(const std::string& text) {
    // Lower-casing grows UTF-8 by at most half (e.g. U+023A, 2 bytes -> U+2C65, 3 bytes).
    std::string out(text.size() + text.size() / 2 + 4, '\0');
    for (int attempt = 0; attempt < 2; ++attempt) {
        UErrorCode status = U_ZERO_ERROR;
        const int32_t n = ucasemap_utf8ToLower(root_case_map(), out.data(), static_cast<int32_t>(out.size()),
                                               text.data(), static_cast<int32_t>(text.size()), &status);
        if (status == U_BUFFER_OVERFLOW_ERROR) {
            out.assign(static_cast<size_t>(n) + 1, '\0');
            continue;
        }
        check(status, "lower-casing");
        out.resize(static_cast<size_t>(n));
        return out;
    }
    throw Error("ICU lower-casing: output buffer kept overflowing");
}

std::vector<std::string> grapheme_clusters(const std::string& text) {
    std::vector<std::string> pieces;
    if (is_ascii(text)) {
        // One byte, one cluster, except CR LF (GB3).
        pieces.reserve(text.size());
        for (size_t i = 0; i < text.size(); ++i) {
            const size_t n = (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ? 2 : 1;
            pieces.emplace_back(text, i, n);
            i += n - 1;
        }
        return pieces;
    }
    require_utf8(text);
    UErrorCode status = U_ZERO_ERROR;
    UText ut = UTEXT_INITIALIZER;
    utext_openUTF8(&ut, text.data(), static_cast<int64_t>(text.size()), &status);
    check(status, "utext_openUTF8");
    icu::BreakIterator& breaks = character_breaks();
    breaks.setText(&ut, status);
    if (U_FAILURE(status)) {
        utext_close(&ut);
        check(status, "BreakIterator::setText");
    }
    // With UTF-8 UText, break positions are byte offsets.
    int32_t start = breaks.first();
    for (int32_t end = breaks.next(); end != icu::BreakIterator::DONE; start = end, end = breaks.next())
        pieces.emplace_back(text, static_cast<size_t>(start), static_cast<size_t>(end - start));
    utext_close(&ut);
    return pieces;
}

bool is_punctuation(const std::string& token) {
    const auto* s = reinterpret_cast<const uint8_t*>(token.data());
    const auto n = static_cast<int32_t>(std::min<size_t>(token.size(), INT32_MAX));
    int32_t i = 0;
    bool any = false;
    while (i < n) {
        UChar32 c = 0;
        U8_NEXT(s, i, n, c);
        if (c < 0) return false;
        if (c == 0x2581 && !any && i < n) continue;  // SentencePiece's word mark before the first character
        if (!u_ispunct(c)) return false;
        any = true;
    }
    return any;
}

}  // namespace attnviz
