#pragma once
// What attribution finds, as plain data (no LibTorch): per output step, how much
// each source token and each target-prefix token mattered to the step's token by
// each method, beside the step's attention row -- the same rows and columns as the
// heatmap. core/analysis/attribution.hpp computes it; exports (the `attribute`
// JSON file, the web page of core/analysis/web_page.hpp) and views read it.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/analysis/agreement.hpp"
#include "core/decode/translation.hpp"

namespace attnviz {

/// An attribution method (Inseq's and Captum's names in spirit).
enum class AttributionMethod {
    saliency,              ///< L2 norm over the embedding of d value / d embedding (Simonyan et al.)
    grad_input,            ///< sum over the embedding of gradient x embedding
    integrated_gradients,  ///< Sundararajan et al.: from the zero embedding to the input, summed per token
    occlusion              ///< leave one out: value - value with the token replaced by <unk>
};
/// Every method, in the order files and views list them.
const std::vector<AttributionMethod>& all_attribution_methods();
/// JSON keys: "saliency", "grad_input", "integrated_gradients", "occlusion".
std::string to_string(AttributionMethod method);
/// The command line's names: "saliency", "grad-input", "integrated-gradients", "occlusion".
std::string cli_name(AttributionMethod method);
/// Either name; throws ConfigError listing the methods.
AttributionMethod attribution_method_from_string(const std::string& name);

/// One method's scores at one output step.
struct AttributionScores {
    std::vector<float> source;  ///< per source token (the heatmap's columns: reading order, <eos> included)
    std::vector<float> target;  ///< per target-prefix token: <bos>, then the outputs before this step
};

/// One output step.
struct StepAttribution {
    std::string token;        ///< the output token of this step
    int64_t id = 0;           ///< its id
    double log_prob = 0;      ///< the value attributed: log p(token | prefix, source), or with a contrast
                              ///< token B, log p(token) - log p(B)
    std::string contrast;     ///< contrastive: the token B ("" when none)
    std::vector<float> attention;  ///< the attention row compared with (empty without attention)
    std::map<AttributionMethod, AttributionScores> scores;  ///< per method computed
    double baseline_log_prob = 0;   ///< integrated gradients: the value at the zero-embedding baseline
    double completeness_error = 0;  ///< integrated gradients: sum of its attributions (source and target)
                                    ///< - (log_prob - baseline_log_prob); 0 when not computed
    int64_t ig_steps = 0;           ///< integrated gradients: the points this step took (0: not computed)
    /// The method's scores, or null when it was not computed.
    const AttributionScores* find(AttributionMethod method) const;
};

/// One sentence: its translation's best hypothesis, attributed step by step.
struct SentenceAttribution {
    std::string input;                     ///< the sentence as given
    std::vector<std::string> source;       ///< source tokens as the model read them, <eos> included
    std::vector<std::string> output;       ///< output tokens, <eos> included when produced
    std::string text;                      ///< the output text
    std::string attention_map;             ///< which map the attention rows are ("cross, layer 0, head 0")
    std::vector<AttributionMethod> methods;  ///< the methods computed, in all_attribution_methods() order
    int64_t ig_steps = 0;                  ///< integrated gradients' interpolation points: the most any
                                           ///< step took (0: not run)
    bool ig_auto = false;                  ///< integrated gradients chose its points per step
                                           ///< (AttributionOptions::ig_steps 0)
    double ig_tolerance = 0;               ///< automatic: the relative completeness error asked for
    /// integrated gradients: the largest relative completeness error of any step
    /// (relative_completeness_error in core/analysis/attribution.hpp); 0 when not run
    double ig_relative_error = 0;
    /// automatic integrated gradients: every step within the tolerance (false: some step reached
    /// the most points allowed above it)
    bool ig_converged = true;
    /// automatic integrated gradients stopped short of the tolerance because more points would
    /// pass the work bound (AttributionOptions::work_bound), not at the most points allowed
    bool ig_work_capped = false;
    std::vector<StepAttribution> steps;    ///< one per output token
    std::vector<std::vector<TokenProb>> top_k;  ///< per step, the most probable tokens (empty: not asked)
};

/// How far attention and each method agree at one step: Kendall's tau-b between the
/// attention row and |scores| over the source tokens, and whether their largest entries
/// fall on the same token. Keyed by method (to_string).
std::map<AttributionMethod, RankAgreement> attention_agreement(const StepAttribution& step);

/// The same between two methods (|a| against |b| over the source tokens).
RankAgreement method_agreement(const StepAttribution& step, AttributionMethod a, AttributionMethod b);

/// Adds a sentence's steps to a corpus table: "attention vs METHOD" for every method, and
/// "A vs B" for every pair of methods (core/analysis/agreement.hpp).
void add_to_table(AgreementTable& table, const SentenceAttribution& sentence);

/// The `attnviz-cli attribute` file's entry for a sentence: {"input", "source", "output",
/// "text", "attention_map", "methods", "ig_steps", "ig" (integrated gradients run: {"auto", "tolerance"
/// (automatic only), "relative_error", "converged", "work_capped" (automatic only)}), "steps": [{"token", "log_prob", "attention",
/// "attributions": {method: [per source token]}, "target_attributions": {method: [per
/// prefix token]}, "baseline_log_prob", "completeness_error", "ig_steps", "sink_share", "agreement":
/// {method: {"kendall_tau", "top1"}}, "contrast" (when set), "top_k" (when recorded)}]}.
/// Numbers that are not finite (tau of a constant row) are null.
nlohmann::json to_json(const SentenceAttribution& sentence);

}  // namespace attnviz
