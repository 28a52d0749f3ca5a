// Depth-bounded JSON parsing: one pass over the text counts [ and { outside
// strings before nlohmann-json builds anything. The scan sees string boundaries
// exactly as a JSON lexer does up to the first syntax error, and the parser
// stops there, so the depth it reaches is never more than the scan's.
#include "core/io/json_bounded.hpp"

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

nlohmann::json parse_json_bounded(const std::string& text, const std::string& what, int max_depth) {
    check_json_depth(text, what, max_depth);
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        // nlohmann's message quotes the last token read, which may be long: clip it.
        throw FileError(what + ": not valid JSON (" + printable(e.what(), k_max_quoted) + ")");
    }
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
