#pragma once
// Two models' attention on one sentence, and their difference: a teacher
// shows additive vs dot-product vs no attention this way. The difference is
// taken on the same rows: model B is forced on model A's output (its
// attention while reading exactly what A wrote), so the two matrices line up
// even when the models translate differently.
#include <string>

#include <nlohmann/json_fwd.hpp>
#include <vector>

#include "core/decode/translation.hpp"
#include "core/decode/translation_model.hpp"

namespace attnviz {

/// What compare_attention returns.
struct AttentionComparison {
    Translation a;       ///< model A's own translation (greedy, options.top_k recorded)
    Translation b;       ///< model B's own translation
    Translation b_on_a;  ///< model B forced on A's output (reference mode): B's attention on A's rows
    /// difference[t][s] = A's weight - B's weight (B read A's output), rows of A's output, source
    /// positions including <eos>; empty when not comparable.
    std::vector<std::vector<float>> difference;
    double mean_abs_difference = 0.0;  ///< mean |difference| over all cells (0 when not comparable)
    double max_abs_difference = 0.0;   ///< the largest |difference|
    bool same_output = false;          ///< A and B wrote the same tokens
    bool comparable = false;           ///< both have attention over the same source positions
    std::string note;                  ///< why not comparable (empty when comparable)
};

/// Translates `sentence` with both models and lines their attention up. Throws what
/// translate/force throw (e.g. ConfigError for bad options); an empty sentence gives
/// empty translations and comparable = false.
AttentionComparison compare_attention(const TranslationModel& a, const TranslationModel& b, const std::string& sentence,
                                      const DecodeOptions& options = {});

/// {"format": "attnviz-attention-comparison", "version": 1, "input", "source", "comparable", "note",
///  "same_output", "mean_abs_difference", "max_abs_difference", "a": {"output", "text", "log_prob",
///  "weights"}, "b": {...its own translation}, "b_on_a": {...B forced on A's output}, "difference": [[...]]}.
nlohmann::json comparison_json(const AttentionComparison& c);

}  // namespace attnviz
