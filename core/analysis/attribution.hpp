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

/// The maps a translation made only to be attributed keeps (DecodeOptions::maps): the one
/// attribution compares with (options.attention_map; by default the primary map).
MapsKept maps_for_attribution(const AttributionOptions& options);

/// Translates the sentences (decode's options, keeping the maps attribution reads; top-k kept
/// when asked) and attributes each best hypothesis. An empty sentence gives an entry without
/// steps. A sentence too long to decode or attribute within the bound is refused, naming it.
/// `translations` (optional): receives the translations attributed, for work that reads them
/// too (erasure, core/analysis/erasure.hpp).
std::vector<SentenceAttribution> attribute_sentences(const TranslationModel& model,
                                                     const std::vector<std::string>& sentences,
                                                     const AttributionOptions& options = {},
                                                     const DecodeOptions& decode = {},
                                                     std::vector<Translation>* translations = nullptr);

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
