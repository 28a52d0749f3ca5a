// Messages for people.
#include "core/io/message.hpp"

#include <cstdio>

namespace attnviz {

std::string without_stack_trace(std::string message) {
    if (const auto pos = message.find("\nException raised from"); pos != std::string::npos) message.resize(pos);
    return message;
}

std::string count_of(int64_t n, std::string_view one, std::string_view many) {
    return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

namespace {

/// Length of the well-formed UTF-8 sequence at the start of s (1..4) and its code point,
/// or 0 when it is not one (a stray byte, an overlong form, a surrogate, past U+10FFFF).
size_t utf8_sequence(std::string_view s, uint32_t* cp) {
    const auto b0 = static_cast<uint8_t>(s[0]);
    if (b0 < 0x80) {
        *cp = b0;
        return 1;
    }
    size_t n = 0;
    uint32_t min = 0;
    if (b0 >= 0xC2 && b0 <= 0xDF) n = 2, min = 0x80, *cp = b0 & 0x1Fu;
    else if (b0 >= 0xE0 && b0 <= 0xEF) n = 3, min = 0x800, *cp = b0 & 0x0Fu;
    else if (b0 >= 0xF0 && b0 <= 0xF4) n = 4, min = 0x10000, *cp = b0 & 0x07u;
    else return 0;
    if (s.size() < n) return 0;
    for (size_t i = 1; i < n; ++i) {
        const auto b = static_cast<uint8_t>(s[i]);
        if ((b & 0xC0) != 0x80) return 0;
        *cp = (*cp << 6) | (b & 0x3Fu);
    }
    if (*cp < min || *cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF)) return 0;
    return n;
}

bool reorders_text(uint32_t cp) {
    return cp == 0x061C || cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) ||
           (cp >= 0x2066 && cp <= 0x2069);
}

/// Whether a terminal or a line-based output reads code point cp as more than text.
bool is_control(uint32_t cp) { return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029; }

/// printable() and escape_controls(): the text with what they escape as \xNN or \u{NNNN},
/// at most max bytes of it (then "...").
std::string escaped(std::string_view text, size_t max, bool reordering_too) {
    std::string out;
    char buf[16];
    size_t i = 0;
    while (i < text.size()) {
        uint32_t cp = 0;
        const size_t n = utf8_sequence(text.substr(i), &cp);
        if (i + (n ? n : 1) > max) break;
        if (n == 0) {
            std::snprintf(buf, sizeof buf, "\\x%02X", static_cast<unsigned>(static_cast<uint8_t>(text[i])));
            out += buf;
            ++i;
            continue;
        }
        if (cp < 0x20 || cp == 0x7F) {
            std::snprintf(buf, sizeof buf, "\\x%02X", static_cast<unsigned>(cp));
            out += buf;
        } else if (is_control(cp) || (reordering_too && reorders_text(cp))) {
            std::snprintf(buf, sizeof buf, "\\u{%04X}", static_cast<unsigned>(cp));
            out += buf;
        } else {
            out.append(text.data() + i, n);
        }
        i += n;
    }
    if (i < text.size()) out += "...";
    return out;
}

}  // namespace

std::string quote(std::string_view text, size_t max) { return "'" + printable(text, max) + "'"; }

std::string printable(std::string_view text, size_t max) { return escaped(text, max, true); }

bool has_control_characters(std::string_view text) {
    size_t i = 0;
    while (i < text.size()) {
        uint32_t cp = 0;
        const size_t n = utf8_sequence(text.substr(i), &cp);
        if (n == 0 || is_control(cp)) return true;
        i += n;
    }
    return false;
}

std::string escape_controls(std::string_view text) { return escaped(text, text.size(), false); }

}  // namespace attnviz
