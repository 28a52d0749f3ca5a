#pragma once
// Decisions, not weights: erasure flip curves (Serrano & Smith 2019, "Is Attention
// Interpretable?"). For an output step t of a translation, teacher-forced on the model's
// own output, source positions are erased -- their weight 0 in every cross map (every head
// of every layer; the RNN's one map) and the rest renormalised -- one more at a time in an
// order, until the model's argmax at step t changes. The orders: attention weight (the
// primary map's row), |gradient x input|, |integrated gradients| (core/analysis/attribution.hpp)
// and random. An order that explains the decision flips it after few removals.
//
// Everything goes through the family seam: a decoder step with an AttentionIntervention
// whose cross_erased names the erased positions (core/model/encoder_decoder.hpp), the k-th
// removal of every order one row of a batch, in passes within the memory bound. What it finds
// (SentenceErasure, plain data) is core/analysis/erasure_result.hpp's.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/analysis/attribution_result.hpp"
#include "core/analysis/erasure_result.hpp"
#include "core/decode/translation_model.hpp"

namespace attnviz {

/// What an erasure run does.
struct ErasureOptions {
    /// The orders compared (results list them in all_erasure_orders() order); default all four.
    std::vector<ErasureOrder> orders = all_erasure_orders();
    /// Integrated gradients' points (fixed, AttributionOptions::ig_steps; 1..1024): 32 by default,
    /// enough to rank positions, far cheaper than the automatic tolerance.
    int64_t ig_steps = 32;
    /// The random order's seed: step t of sentence i draws its permutation from (seed, i, t), so a
    /// run is reproducible and a sentence's orders do not depend on the sentences before it.
    uint64_t seed = 1;
    /// The memory the erasure passes may take at once (core/model/memory_cost.hpp; 0: memory_bound()):
    /// the rows of a step run in passes that fit.
    int64_t memory_bound = 0;
    /// The work one sentence's erasure may take, in operations (core/model/work_cost.hpp; 0:
    /// work_bound()): a sentence whose steps x orders x source positions of decoder steps would
    /// pass it is refused (ConfigError) before any work; the gradient orders' attribution is held
    /// to it on its own (AttributionOptions::work_bound).
    int64_t work_bound = 0;
    /// Throws ConfigError naming the first field out of range.
    void validate() const;
};

/// The operations erasing a sentence of S source and T output positions by `orders` orders
/// takes: the encoding, then per step a decoder step per order and removal count.
int64_t erasure_work(const EncoderDecoder& network, int64_t S, int64_t T, size_t orders);

/// Throws ConfigError naming the first sentence ("erasure of sentence N: ...") whose erasure
/// would pass the work bound: what corpus runs check before erasing any.
void check_erasure_fits(const TranslationModel& model, const std::vector<Translation>& translations,
                        const ErasureOptions& options);

/// Erases at every output step of `translation`'s best hypothesis (made by `model`, with its
/// primary attention map kept when the attention order is asked for). `index`: the sentence's
/// position in a corpus (the random order's seed and error messages: "sentence N: ..."). Run it
/// outside torch::InferenceMode (the gradient orders turn autograd on); weights are only read.
/// ConfigError when the model has no attention or a step cannot fit the memory bound.
/// `computed`: an attribution of the same hypothesis already made (corpus agreement's): the
/// gradient orders read the methods it has instead of attributing again.
SentenceErasure erase_sentence(const TranslationModel& model, const Translation& translation,
                               const ErasureOptions& options = {}, size_t index = 0,
                               const SentenceAttribution* computed = nullptr);

/// The source positions 0..n-1 by score, highest first (ties: the earlier position first).
std::vector<int64_t> erasure_order_by(const std::vector<float>& scores, int64_t n, bool absolute);
/// The random order of step `step` of sentence `index`: a permutation of 0..n-1 (Fisher-Yates
/// on std::mt19937_64, the same on every platform).
std::vector<int64_t> random_erasure_order(int64_t n, uint64_t seed, size_t index, int64_t step);

/// Over a corpus: every step of every sentence.
struct ErasureSummary {
    std::vector<ErasureOrder> orders;
    size_t steps = 0;                          ///< steps erased
    std::map<ErasureOrder, size_t> flipped;    ///< steps the order flipped
    std::map<ErasureOrder, double> mean, median;  ///< removals over the flipped steps (NaN: none)
    /// Per gradient order g (and random): how often attention's order flipped sooner than g (fewer
    /// removals, or g never flipped), as soon, later (or attention never flipped); steps neither
    /// flipped count in none.
    struct Race { size_t sooner = 0, same = 0, later = 0, neither = 0; };
    std::map<ErasureOrder, Race> attention_vs;
    void add(const SentenceErasure& sentence);
    /// {"steps", "orders", "flipped": {o: n}, "mean_removals": {o: x|null}, "median_removals": {o: x|null},
    ///  "attention_vs": {o: {"sooner", "same", "later", "neither", "sooner_share"}}}.
    nlohmann::json to_json() const;
    /// A readable table: per order the steps flipped, mean and median removals; then attention
    /// against each other order.
    std::string to_text() const;

private:
    std::map<ErasureOrder, std::vector<int64_t>> m_counts;
};

}  // namespace attnviz
