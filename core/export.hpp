#pragma once
// Attention export: CSV (one row per output token, one column per source token)
// and JSON (tokens, weights, raw scores, model and decode settings).
#include <string>

#include <nlohmann/json.hpp>  // complete type: the default arguments below need it

#include "core/decode.hpp"

namespace attnviz {

/// CSV: header row = "" then source tokens; then one row per output token:
/// the token, then its weights (shortest text that reads back as the same float).
/// Fields with commas, quotes, line breaks or leading/trailing spaces are quoted
/// (RFC 4180); lines end with LF. Throws attnviz::Error when the hypothesis does
/// not exist or has no attention (attention_available false).
std::string attention_csv(const Translation& t, size_t hypothesis = 0);

/// JSON: {"format": "attnviz-attention", "version": 1, "source": [...], "output": [...],
/// "weights": [[...]], "raw_scores": [[...]], "context_norm": [...], "log_prob", "score",
/// "text", "input", "unknown", "hypothesis", "attention_available", "model": {...}, "decode": {...}},
/// and where the decoding recorded them: "step_log_prob", "rank", "top_k" ([[{"token","id","prob"}]]
/// per step, best first), "forced_steps" and "first_divergence" (forced decoding; null: none).
/// model/decode are copied as given (null becomes {}); pass DecodeOptions::to_json() as decode.
nlohmann::json attention_json(const Translation& t, size_t hypothesis = 0,
                              const nlohmann::json& model_settings = {},
                              const nlohmann::json& decode_settings = {});

/// Parses attention_csv's output back: (source tokens, output tokens, weights). Accepts
/// CRLF, a leading BOM and blank lines. Throws FileError naming the line and what was expected.
struct AttentionTable {
    std::vector<std::string> source, output;
    std::vector<std::vector<float>> weights;
};
AttentionTable parse_attention_csv(const std::string& csv);

/// Writes text to a file atomically: to path + ".tmp.<pid>", fsync, then rename over path.
/// On failure the temporary file is removed and FileError names the path and the reason.
void write_file_atomic(const std::string& path, const std::string& contents);

}  // namespace attnviz
