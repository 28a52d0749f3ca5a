#pragma once
// Attention export: CSV (one row per output token, one column per source token)
// and JSON (tokens, weights, raw scores, model and decode settings).
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "core/decode.hpp"

namespace attnviz {

/// CSV: header row = "" then source tokens; then one row per output token:
/// the token, then its weights. Fields with commas or quotes are quoted (RFC 4180).
std::string attention_csv(const Translation& t, size_t hypothesis = 0);

/// JSON: {"source": [...], "output": [...], "weights": [[...]], "raw_scores": [[...]],
/// "context_norm": [...], "log_prob", "score", "text", "input", "unknown", "model": {...}, "decode": {...}}
nlohmann::json attention_json(const Translation& t, size_t hypothesis = 0,
                              const nlohmann::json& model_settings = {},
                              const nlohmann::json& decode_settings = {});

/// Parses attention_csv's output back: (source tokens, output tokens, weights). Throws FileError.
struct AttentionTable {
    std::vector<std::string> source, output;
    std::vector<std::vector<float>> weights;
};
AttentionTable parse_attention_csv(const std::string& csv);

/// Writes text to a file atomically (temporary file + rename); throws FileError.
void write_file_atomic(const std::string& path, const std::string& contents);

}  // namespace attnviz
