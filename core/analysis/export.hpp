#pragma once
// Attention export: CSV (one row per output token, one column per source token)
// and JSON (tokens, weights, raw scores, model and decode settings). Files are
// written with write_file_atomic (core/io/atomic_file.hpp).
#include <functional>
#include <string>

#include <nlohmann/json.hpp>  // complete type: the default arguments below need it

#include "core/io/atomic_file.hpp"  // write_file_atomic, which writes every export
#include "core/decode/translation.hpp"

namespace attnviz {

/// CSV: header row = "" then source tokens, then "entropy","max_weight"; then one row
/// per output token: the token, its weights (shortest text that reads back as the same
/// float), the step's entropy and maximum weight; last, a row "coverage" with each source
/// token's coverage and two empty cells (core/analysis/alignment.hpp's attention_stats). So a
/// spreadsheet shows the statistics as a column and a row beside the matrix. For a
/// merged translation (Translation::merged) the top-left cell says how:
/// "merged: words (columns summed, rows averaged)".
/// Fields with commas, quotes, line breaks or leading/trailing spaces are quoted
/// (RFC 4180); lines end with LF. Throws attnviz::Error when the hypothesis does
/// not exist or has no attention (attention_available false).
std::string attention_csv(const Translation& t, size_t hypothesis = 0);

/// JSON: {"format": "attnviz-attention", "version": 1, "source": [...], "output": [...],
/// "weights": [[...]], "raw_scores": [[...]], "context_norm": [...], "log_prob", "score",
/// "text", "input", "unknown", "hypothesis", "attention_available", "model": {...}, "decode": {...}},
/// and where the decoding recorded them: "step_log_prob", "rank", "top_k" ([[{"token","id","prob"}]]
/// per step, best first), "forced_steps" and "first_divergence" (forced decoding; null: none).
/// With attention: the statistics of core/analysis/alignment.hpp's attention_stats, "entropy" and
/// "max_weight" (per output step) and "coverage" (per source token, <eos> included), and
/// "alignment": the argmax hard alignment as [[source, target], ...] 0-based pairs over
/// real tokens (no <eos>), the links translate --alignment-out writes in Pharaoh form.
/// A merged translation (subword pieces merged into words) has "merged": its note.
/// model/decode are copied as given (null becomes {}); pass DecodeOptions::to_json() as decode.
nlohmann::json attention_json(const Translation& t, size_t hypothesis = 0,
                              const nlohmann::json& model_settings = {},
                              const nlohmann::json& decode_settings = {});

/// attention_json(t, hypothesis, model_settings, decode_settings) with extra's keys added, written
/// as text through `out` piece by piece rather than built whole: the maps go one row at a time,
/// so writing a summarization's maps (hundreds of MB as numbers) needs no copy of them. The same
/// JSON value as attention_json's (keys in another order); one line, no indentation.
void write_attention_json(const Translation& t, size_t hypothesis, const nlohmann::json& model_settings,
                          const nlohmann::json& decode_settings, const nlohmann::json& extra,
                          const std::function<void(const std::string&)>& out);

/// Parses attention_csv's output back: (source tokens, output tokens, weights) and the
/// statistics when present (a table without the entropy/max_weight columns and the
/// coverage row, as attnviz wrote before it had them, reads with them empty). The top-left
/// cell is empty or "merged: ..." (AttentionTable::merged). Accepts
/// CRLF, a leading BOM and blank lines. Throws FileError naming the line and what was expected.
struct AttentionTable {
    std::vector<std::string> source, output;
    std::vector<std::vector<float>> weights;
    std::vector<float> entropy, max_weight;  ///< per output token (empty: the CSV had no statistics)
    std::vector<float> coverage;             ///< per source token (empty: no statistics)
    std::string merged;                      ///< how tokens were merged (a "merged: ..." top-left cell), else empty
};
AttentionTable parse_attention_csv(const std::string& csv);

}  // namespace attnviz
