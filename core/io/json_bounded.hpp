#pragma once
// JSON from files attnviz did not write itself (checkpoint metadata, safetensors
// headers, vocabularies, exports read back): parsed with its nesting depth
// bounded before nlohmann-json's recursive parser sees it, so a file nested
// 80,000 levels deep is a clear error instead of a stack overflow. Messages never
// dump() untrusted values (dump() recurses too): describe_json says what a value is.
#include <string>

#include <nlohmann/json.hpp>

namespace attnviz {

/// Parses `text`; throws FileError when it is not JSON ("WHAT: not valid JSON at line L, column C:"
/// and the problem in plain words: an empty file, NaN or Infinity, a comment, a trailing comma,
/// bytes that are not UTF-8, ...) or nests deeper than max_depth.
nlohmann::json parse_json_bounded(const std::string& text, const std::string& what, int max_depth = 32);

/// A JSON library error (a value of the wrong type, a missing key) in plain words naming the key
/// as a path from the file's top ("added_tokens[5].lstrip" is a string, expected true or false),
/// without the library's codes. The path comes from JSON_DIAGNOSTICS, which attnviz_base defines.
std::string json_error_text(const nlohmann::json::exception& e);

/// Throws the FileError of read_json_fields.
[[noreturn]] void throw_json_field_error(const std::string& what, const nlohmann::json::exception& e);

/// Runs `read`, which takes values out of the JSON of file `what`; a JSON library error it throws
/// (a value of the wrong type, a missing key) becomes FileError "WHAT: <json_error_text>".
/// The one way every reader of a JSON file checks what it takes.
template <class Read>
auto read_json_fields(const std::string& what, Read&& read) -> decltype(read()) {
    try {
        return read();
    } catch (const nlohmann::json::exception& e) {
        throw_json_field_error(what, e);
    }
}

/// Throws FileError "WHAT: JSON nested more than N levels deep" when the brackets of
/// `text` (outside strings) nest deeper than max_depth. Linear, allocates nothing.
void check_json_depth(const std::string& text, const std::string& what, int max_depth = 32);

/// A short description of a value for an error message, safe on untrusted input:
/// `an array of 3 values`, `an object with 2 keys`, a string or number clipped to
/// 160 characters. Never recurses.
std::string describe_json(const nlohmann::json& v);

}  // namespace attnviz
