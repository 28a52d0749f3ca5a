#pragma once
// JSON from files attnviz did not write itself (checkpoint metadata, safetensors
// headers, vocabularies, exports read back): parsed with its nesting depth
// bounded before nlohmann-json's recursive parser sees it, so a file nested
// 80,000 levels deep is a clear error instead of a stack overflow. Messages never
// dump() untrusted values (dump() recurses too).
#include <string>

#include <nlohmann/json.hpp>

namespace attnviz {

/// Parses `text`; throws FileError "WHAT: ..." when it is not JSON or nests deeper than max_depth.
nlohmann::json parse_json_bounded(const std::string& text, const std::string& what, int max_depth = 32);

}  // namespace attnviz
