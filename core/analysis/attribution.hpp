#pragma once
// Attribution per output step: which source tokens (and target-prefix tokens)
// mattered to each output token, by gradient saliency, gradient x input,
// integrated gradients and occlusion, computed against the very steps whose
// attention the heatmap shows, so that a row of attribution lines up with a
// row of attention (Inseq's per-step attribution for encoder-decoders, in
// spirit). Everything goes through the family seam (core/model/encoder_decoder.hpp):
// embed_source/embed_target and the teacher-forced forward_embedded for the
// gradients, forward() for occlusion. The results are plain data
// (core/analysis/attribution_result.hpp).
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/analysis/attribution_result.hpp"
#include "core/decode/translation_model.hpp"

namespace attnviz {

/// What to attribute, and how.
struct AttributionOptions {
    /// The methods to compute (results list them in all_attribution_methods() order); default all four.
    std::vector<AttributionMethod> methods = all_attribution_methods();
    /// Integrated gradients: interpolation points between the zero-embedding baseline and the
    /// input (Gauss-Legendre nodes on [0, 1], so 32 points integrate the path far better than a
    /// 32-point Riemann sum), 1..1024, run as rows of batched passes. 0 (the default): automatic:
    /// every step starts with ig_start_steps points, and a step whose completeness error is
    /// above ig_tolerance is computed again with twice the points, up to ig_max_steps.
    int64_t ig_steps = 0;
    /// Automatic integrated gradients: the points every step starts with (1..ig_max_steps).
    int64_t ig_start_steps = 16;
    /// Automatic integrated gradients: the most points a step may take (ig_start_steps..1024);
    /// a step still above the tolerance there is reported as not converged.
    int64_t ig_max_steps = 1024;
    /// Automatic integrated gradients: a step has converged when its completeness error (the sum
    /// of its attributions against log p(input) - log p(baseline)) is at most this share of
    /// |log p(input) - log p(baseline)| (of 0.01 nat where that difference is smaller); 0..1.
    double ig_tolerance = 0.01;
    /// Also attribute to the target prefix (<bos> and the output tokens before each step): the
    /// gradient methods and integrated gradients from the target embeddings, occlusion by
    /// replacing a prefix token with <unk>.
    bool target = true;
    /// Contrastive attribution: at output step t (0-based), attribute log p(output token) -
    /// log p(this token) ("why voiture rather than souris?"); a token of the target vocabulary.
    std::map<int64_t, std::string> contrast;
    /// The attention compared with: this map of the hypothesis (default: its primary map, for
    /// the RNN its one cross map; head -1: the mean of that layer's heads).
    std::optional<AttentionMapId> attention_map;
    /// At most this many rows in one forward/backward pass (integrated gradients has steps x
    /// ig_steps rows); more run in chunks. Fewer chunks run faster.
    int64_t max_rows = 1024;
    /// The memory attribution may take at once (core/model/memory_cost.hpp; 0: memory_bound()):
    /// rows run in passes within it (fewer than max_rows where they would not fit), and a
    /// sentence whose one row cannot fit is refused (ConfigError) before any work.
    int64_t memory_bound = 0;
    /// The work one sentence's attribution may take, in operations (core/model/work_cost.hpp;
    /// 0: work_bound()): the methods' passes are counted before any runs and a sentence whose
    /// work would pass it is refused (ConfigError naming each method's share); automatic
    /// integrated gradients starts with fewer points and stops doubling where the next round
    /// would pass it (SentenceAttribution::ig_work_capped).
    int64_t work_bound = 0;
    /// Called as each method's work starts (the gradient methods once for saliency and
    /// grad-input): a command's progress on stderr. May be empty.
    std::function<void(AttributionMethod)> on_method;
    /// Called after each pass of a method's rows (core/analysis/attribution.cpp runs a method's
    /// rows in passes within the memory bound): the method, integrated gradients' points per step
    /// in this round (0 for the others; automatic rounds double them) and the share of the
    /// method's rows (of this round) done, in (0, 1]. A command's progress within a method,
    /// which can take most of the work bound. May be empty.
    std::function<void(AttributionMethod, int64_t points, double done)> on_pass;
    /// Throws ConfigError naming the first field out of range.
    void validate() const;
};

/// Attributes every output step of `translation`'s hypothesis `hypothesis` (made by `model`:
/// its source tokens and output ids). Run it outside torch::InferenceMode (it turns autograd
/// on for itself); the model's weights are only read. Throws ConfigError for a bad option or a
/// contrast token the target vocabulary does not have, std::out_of_range for a missing hypothesis.
SentenceAttribution attribute(const TranslationModel& model, const Translation& translation,
                              const AttributionOptions& options = {}, size_t hypothesis = 0);

/// attribute(), its ConfigError naming the sentence ("sentence N: ...", `index` 0-based).
SentenceAttribution attribute_sentence(const TranslationModel& model, const Translation& translation,
                                       const AttributionOptions& options, size_t index);

/// Throws ConfigError naming the first sentence ("sentence N: ...") whose best hypothesis
/// cannot be attributed within the memory bound (one row of it alone would not fit) or the
/// work bound (the methods asked for would take more): what callers check before attributing
/// any of them.
void check_attribution_fits(const TranslationModel& model, const std::vector<Translation>& translations,
                            const AttributionOptions& options);

/// What a command's attribution takes in operations (core/model/work_cost.hpp), counted before
/// any sentence is attributed: the work bound holds a command's attribution as a whole, not one
/// sentence's (issue 46: a page of 16 sentences of 400 words ran for minutes, each sentence
/// within the bound). Per method as attribute() runs it; automatic integrated gradients at one
/// point, its least (what is left of the bound is what it may spend on more points).
struct AttributionWork {
    /// Per translation: the operations its attribution commits (0: nothing to attribute).
    std::vector<int64_t> sentences;
    /// One method's share, over every sentence.
    struct Method {
        AttributionMethod method;
        std::string name;        ///< as messages name it: "the gradient methods", "integrated gradients at 1 point"
        int64_t operations = 0;  ///< once over every sentence
    };
    /// Per method asked for (results order); saliency and grad-input share one gradient pass,
    /// counted once, under the first of them asked for.
    std::vector<Method> methods;
    int64_t values = 0;   ///< the forward passes every attribution makes beside its methods
    int64_t total = 0;    ///< values and every method's, times `repeats`
    int64_t repeats = 1;  ///< how many times the command attributes the sentences (bench-attribute's rounds)
    int64_t bound = 0;    ///< the work bound it is held to (AttributionOptions::work_bound, else work_bound())
    bool fits() const { return total <= bound; }
    /// "about 1.2 x 10^12 operations (the gradient methods 2.0 x 10^10 operations, ...)".
    std::string text() const;
    /// The bound sentence i's attribute() call gets: what it commits and its share of what the
    /// command leaves (automatic integrated gradients spends it on more points). Over every
    /// sentence these add up to at most `bound` / `repeats`.
    int64_t sentence_bound(size_t i) const;
    /// What it takes at least once automatic integrated gradients has made its first round
    /// (ig_start_steps points; up to the bound): what progress is shown by.
    int64_t most = 0;
    /// Whether the command is long enough to show progress: the most it may take passes a tenth
    /// of the bound (about 2-4 s at the default bound; docs/robustness.md).
    bool shows_progress() const { return most > bound / 10; }
};

/// Counts the attribution of each translation's best hypothesis by `options`, `repeats` times
/// (the sentences without output count 0).
AttributionWork count_attribution_work(const TranslationModel& model, const std::vector<Translation>& translations,
                                       const AttributionOptions& options, int64_t repeats = 1);

/// Throws ConfigError when `work` passes its bound: `what` ("3 sentences' attribution") would
/// take about N operations (each method's share), more than the bound; `advice` ends the message.
void check_attribution_work(const AttributionWork& work, const std::string& what, const std::string& advice);

/// The methods of `options` whose work over the translations fits the work bound together:
/// integrated gradients and occlusion are left out, the costliest first, until the rest fit
/// (their names go to `left_out`). Throws ConfigError with the numbers when the gradient methods
/// alone (or the methods asked for, without them) still pass the bound.
AttributionOptions fit_attribution_work(const TranslationModel& model, const std::vector<Translation>& translations,
                                        const AttributionOptions& options, std::vector<AttributionMethod>& left_out);

/// The maps a translation made only to be attributed keeps (DecodeOptions::maps): the one
/// attribution compares with (options.attention_map; by default the primary map).
MapsKept maps_for_attribution(const AttributionOptions& options);

/// Translates the sentences (decode's options, keeping the maps attribution reads; top-k kept
/// when asked) and attributes each best hypothesis. An empty sentence gives an entry without
/// steps. A sentence too long to decode or attribute within the bound is refused, naming it, and
/// so is work past the work bound over all the sentences (count_attribution_work), before any
/// is attributed. `on_sentence(i, n)` (optional) is called as sentence i (0-based) of n starts
/// when the work is long enough to show progress (AttributionWork::shows_progress).
/// `translations` (optional): receives the translations attributed, for work that reads them
/// too (erasure, core/analysis/erasure.hpp).
std::vector<SentenceAttribution> attribute_sentences(const TranslationModel& model,
                                                     const std::vector<std::string>& sentences,
                                                     const AttributionOptions& options = {},
                                                     const DecodeOptions& decode = {},
                                                     std::vector<Translation>* translations = nullptr,
                                                     const std::function<void(size_t, size_t)>& on_sentence = {});

/// Integrated gradients' completeness error relative to the change it explains:
/// |error| / max(|log p(input) - log p(baseline)|, 0.01 nat), what ig_tolerance bounds.
double relative_completeness_error(double error, double log_prob, double baseline_log_prob);

/// The operations attributing a sentence of S source and T output positions by `options`'
/// methods takes at least (automatic integrated gradients at one point), and the bound they are
/// held to; throws ConfigError ("attribution: ...") when they pass it, naming each method's share.
int64_t attribution_work(const EncoderDecoder& network, int64_t S, int64_t T, const AttributionOptions& options);

/// Gauss-Legendre quadrature on [0, 1] with n points: nodes ascending and weights summing to 1.
std::pair<std::vector<double>, std::vector<double>> gauss_legendre_01(int64_t n);

}  // namespace attnviz
