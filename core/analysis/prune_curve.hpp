#pragma once
// Pruning curves (Michel et al. 2019, Fig. 3-4): mask more and more heads -- in increasing order
// of importance, of confidence, or at random -- and re-measure the validation loss (teacher
// forced, as eval's) and BLEU (greedy) at each point. All kinds together, and each kind alone.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/analysis/heads.hpp"

namespace attnviz {

/// How prune_curve() runs.
struct PruneCurveOptions {
    int64_t batch_size = 64;  ///< pairs per batch (loss) and sentences decoded together (BLEU)
    int64_t fixed_steps = 0;  ///< training's padding/truncation (TrainConfig::fixed_steps), as eval's loss
    /// The fractions of the heads masked, in order (Michel: 0, 10, ..., 90%).
    std::vector<double> fractions = {0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9};
    int random_orders = 3;          ///< random orders, seeds 1..random_orders
    bool by_importance = true;      ///< the order of increasing importance
    bool by_confidence = true;      ///< the order of increasing confidence
    bool each_kind = true;          ///< each kind alone besides all kinds together (a model of one kind: once)
    bool bleu = true;               ///< decode for BLEU at each point (false: NaN)
    int64_t max_length = 0;         ///< decoding's output limit (0: as evaluation: twice the longest
                                    ///< reference + 2, within a Marian model's positions)
    int64_t memory_bound = 0;       ///< 0: memory_bound()
    /// A multilingual pretrained model's languages, as HeadStatsOptions' ("": the tokenizer's own).
    std::string source_lang, target_lang;
    /// Called after each point with the points done and the total; an answer of false stops the
    /// curve there (prune_curve returns the points measured so far). Empty: none.
    std::function<bool(size_t done, size_t total)> progress;
};

/// One point of a curve.
struct PrunePoint {
    std::string order;         ///< "importance", "confidence", "random:SEED"
    std::string kinds;         ///< "all", or one kind ("cross", "encoder_self", "decoder_self")
    double fraction = 0;       ///< of the kinds' heads
    int64_t heads_masked = 0;  ///< round(fraction x heads)
    double loss = 0;           ///< teacher-forced mean token loss (nats)
    double bleu = 0;           ///< corpus BLEU of greedy decoding, 0..100
};

/// The curves of `model` over pairs, orders from `report` (head_stats()). Heads already masked on
/// the network (the CLI's --mask-heads) stay masked at every point. Sets the network's gates while
/// it runs and puts back those it had: not with other work on the same model at once. A point whose
/// masked set was measured already (every 0% point) is not measured again.
std::vector<PrunePoint> prune_curve(const TranslationModel& model, const std::vector<SentencePair>& pairs,
                                    const HeadReport& report, const PruneCurveOptions& options = {});

/// "order,kinds,fraction,heads_masked,loss,bleu" and a line per point.
std::string prune_curve_csv(const std::vector<PrunePoint>& points);

/// [{order, kinds, fraction, heads_masked, loss, bleu}] (NaN as null), as `heads --json` writes "prune_curve".
nlohmann::json prune_curve_json(const std::vector<PrunePoint>& points);

}  // namespace attnviz
