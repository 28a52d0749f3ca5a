// Depth-bounded JSON parsing: one pass over the text counts [ and { outside
// strings before nlohmann-json builds anything. The scan sees string boundaries
// exactly as a JSON lexer does up to the first syntax error, and the parser
// stops there, so the depth it reaches is never more than the scan's.
#include "core/io/json_bounded.hpp"

#include <cctype>
#include <string>
#include <utility>

#include "core/io/error.hpp"
#include "core/io/message.hpp"

namespace attnviz {

namespace {
// Messages quote at most this much of anything that came from the file.
constexpr size_t k_max_quoted = 160;
}  // namespace

void check_json_depth(const std::string& text, const std::string& what, int max_depth) {
    int depth = 0;
    bool in_string = false, escaped = false;
    size_t line = 1;
    for (const char c : text) {
        if (c == '\n') ++line;
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
            continue;
        }
        switch (c) {
        case '"': in_string = true; break;
        case '[':
        case '{':
            if (++depth > max_depth)
                throw FileError(what + ": JSON nested more than " + std::to_string(max_depth) +
                                " levels deep (line " + std::to_string(line) + "); refused");
            break;
        case ']':
        case '}':
            if (depth > 0) --depth;  // unbalanced: the parser reports it
            break;
        default: break;
        }
    }
}

namespace {

/// Line and column (1-based, columns in bytes) of a byte offset.
std::pair<size_t, size_t> line_and_column(const std::string& text, size_t offset) {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < offset && i < text.size(); ++i) {
        if (text[i] == '\n') line += 1, column = 1;
        else column += 1;
    }
    return {line, column};
}

bool starts_at(const std::string& text, size_t at, const char* word) {
    return at <= text.size() && text.compare(at, std::char_traits<char>::length(word), word) == 0;
}

/// What a parse error means, in plain words, from the text around where the parser stopped
/// (nlohmann's own wording names its lexer's tokens).
std::string parse_problem(const std::string& text, size_t at, const std::string& library_message) {
    if (text.find_first_not_of(" \t\r\n") == std::string::npos)
        return "the file is empty (or only blank), expected a JSON value";
    if (library_message.find("UTF-8") != std::string::npos || library_message.find("utf-8") != std::string::npos)
        return "a string holds bytes that are not UTF-8 text";
    // The token starts at or just before the error's byte.
    size_t start = std::min(at, text.size());
    while (start > 0 && std::isalpha(static_cast<unsigned char>(text[start - 1]))) --start;
    if (start > 0 && text[start - 1] == '-' && starts_at(text, start, "Inf")) --start;
    for (const char* word : {"NaN", "Infinity", "-Infinity", "nan", "inf", "-inf"})
        if (starts_at(text, start, word)) return "NaN and Infinity are not JSON numbers (write a number, or null)";
    size_t slash = at > 0 ? at - 1 : 0;
    while (slash < text.size() && slash <= at && text[slash] != '/') ++slash;
    if (starts_at(text, slash, "//") || starts_at(text, slash, "/*") || starts_at(text, at, "/"))
        return "comments (// or /* */) are not allowed in JSON";
    const size_t here = std::min(at > 0 ? at - 1 : 0, text.size() - 1);
    const char c = text[here];
    if (c == ']' || c == '}') {
        size_t before = here;
        while (before > 0 && std::isspace(static_cast<unsigned char>(text[before - 1]))) --before;
        if (before > 0 && text[before - 1] == ',')
            return std::string("a comma before '") + c + "' (a trailing comma) is not allowed in JSON";
    }
    if (library_message.find("; expected end of input") != std::string::npos) return "more text follows the JSON value";
    if (at > text.size() || library_message.find("end of input") != std::string::npos)
        return "the text ends before the JSON value does (a missing closing bracket or quote?)";
    if (library_message.find("control character") != std::string::npos)
        return "a string holds a raw control character (write it escaped, as \\n or \\u0001)";
    if (c == '\'') return "strings are quoted with \" in JSON, not '";
    return std::string("unexpected ") + quote(std::string(1, c)) + " (the value, or the comma or colon before it, is not JSON)";
}

}  // namespace

nlohmann::json parse_json_bounded(const std::string& text, const std::string& what, int max_depth) {
    check_json_depth(text, what, max_depth);
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        const size_t at = e.byte > 0 ? e.byte - 1 : 0;
        const auto [line, column] = line_and_column(text, at);
        throw FileError(what + ": not valid JSON at line " + std::to_string(line) + ", column " + std::to_string(column) +
                        ": " + parse_problem(text, e.byte, e.what()));
    } catch (const nlohmann::json::exception& e) {
        throw FileError(what + ": not valid JSON: " + json_error_text(e));
    }
}

std::string json_error_text(const nlohmann::json::exception& e) {
    // With JSON_DIAGNOSTICS (core/CMakeLists.txt) the library's message is
    // "[json.exception.type_error.302] (/a/0/b) type must be boolean, but is string".
    std::string m = e.what();
    if (const size_t close = m.find("] "); m.rfind("[json.exception.", 0) == 0 && close != std::string::npos)
        m = m.substr(close + 2);
    std::string key;
    if (!m.empty() && m[0] == '(') {
        const size_t end = m.find(") ");
        if (end != std::string::npos) {
            key = m.substr(1, end - 1);
            m = m.substr(end + 2);
        }
    }
    // JSON pointer -> the key as a user reads it: /added_tokens/5/lstrip -> added_tokens[5].lstrip
    std::string path;
    for (size_t i = 0; i < key.size();) {
        const size_t next = key.find('/', i + 1);
        std::string part = key.substr(i + 1, next == std::string::npos ? std::string::npos : next - i - 1);
        const bool index = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
        path += index ? "[" + part + "]" : (path.empty() ? "" : ".") + part;
        if (next == std::string::npos) break;
        i = next;
    }
    auto plain_type = [](const std::string& t) -> std::string {
        if (t == "boolean") return "true or false";
        if (t == "number") return "a number";
        if (t == "string") return "a string";
        if (t == "object") return "an object";
        if (t == "array") return "a list";
        if (t == "null") return "null";
        return t;
    };
    auto article = [](const std::string& t) -> std::string {
        if (t == "null") return "null";
        if (t == "array") return "a list";
        if (t == "object") return "an object";
        return "a " + t;
    };
    const std::string shown = path.empty() ? std::string("a value") : "\"" + printable(path, k_max_quoted) + "\"";
    if (const size_t must = m.find("type must be "); must != std::string::npos) {
        const size_t but = m.find(", but is ", must);
        if (but != std::string::npos) {
            const std::string expected = m.substr(must + 13, but - must - 13), got = m.substr(but + 9);
            return shown + " is " + article(got) + ", expected " + plain_type(expected);
        }
    }
    if (m.rfind("key '", 0) == 0 && m.find("' not found") != std::string::npos) {
        const std::string missing = m.substr(5, m.find("' not found") - 5);
        return (path.empty() ? std::string() : "in " + shown + ", ") + "the key \"" + printable(missing, k_max_quoted) +
               "\" is missing";
    }
    if (m.find("out of range") != std::string::npos) return shown + " has no such entry (" + printable(m, k_max_quoted) + ")";
    return (path.empty() ? std::string() : shown + ": ") + printable(m, k_max_quoted);
}

void throw_json_field_error(const std::string& what, const nlohmann::json::exception& e) {
    throw FileError(what + ": " + json_error_text(e));
}

std::string describe_json(const nlohmann::json& v) {
    switch (v.type()) {
    case nlohmann::json::value_t::object: return "an object with " + std::to_string(v.size()) + " keys";
    case nlohmann::json::value_t::array: return "an array of " + std::to_string(v.size()) + " values";
    case nlohmann::json::value_t::string: return quote(v.get_ref<const std::string&>(), k_max_quoted);
    default: return v.dump();  // a scalar: a number, a boolean or null (dump() does not recurse)
    }
}

}  // namespace attnviz
