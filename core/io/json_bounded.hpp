#pragma once
// JSON from files attnviz did not write itself (checkpoint metadata, safetensors
// headers, vocabularies, exports read back): parsed with its nesting depth
// bounded before nlohmann-json's recursive parser sees it, so a file nested
// 80,000 levels deep is a clear error instead of a stack overflow. Messages never
// dump() untrusted values (dump() recurses too): describe_json says what a value is.
#include <string>

#include <nlohmann/json.hpp>

namespace attnviz {

/// Parses `text`; throws FileError "WHAT: ..." when it is not JSON or nests deeper than max_depth.
nlohmann::json parse_json_bounded(const std::string& text, const std::string& what, int max_depth = 32);

/// Throws FileError "WHAT: JSON nested more than N levels deep" when the brackets of
/// `text` (outside strings) nest deeper than max_depth. Linear, allocates nothing.
void check_json_depth(const std::string& text, const std::string& what, int max_depth = 32);

/// A short description of a value for an error message, safe on untrusted input:
/// `an array of 3 values`, `an object with 2 keys`, a string or number clipped to
/// 160 characters. Never recurses.
std::string describe_json(const nlohmann::json& v);

}  // namespace attnviz
