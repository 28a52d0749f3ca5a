#pragma once
// Which heads matter (issue 39): for every head of every kind, what it does and how much the
// loss depends on it, over sentence pairs teacher-forced on their references.
//
//  - confidence (Voita et al. 2019): the mean over queries of the head's largest weight, the
//    <eos> key left out of the maximum; entropy: the mean over queries of -sum w log w (nats).
//  - positional (self-attention kinds): the relative offset (key - query) its argmax takes most
//    often, and its share of the queries for which that offset exists (offset -1 leaves out the
//    first query, which has no previous position); a head is positional at share >= 0.9.
//  - rare_share (kinds whose keys are the source): how often its argmax falls on the sentence's
//    rarest source token by training frequency (ties: any of the rarest); sink_share: the mean
//    share of its rows on sink tokens (core/analysis/sinks.hpp).
//  - importance (Michel et al. 2019): I_h = E_x |dL(x)/dxi_h|, xi_h a gate on the head's output
//    (core/model/head_gates.hpp), one backward pass per batch for every head: the absolute
//    derivative of the batch's summed token loss, added over batches and divided by the tokens
//    (so one batch gives |d mean-loss / d xi_h|, what eval's loss differentiates to). Normalised
//    as Michel's code does it: per layer and kind, divided by the L2 norm of that layer's raw
//    importances (a layer's heads then have squared importances summing to 1).
//  - aer: of cross heads where pairs have gold alignments (core/analysis/alignment_eval.hpp's
//    argmax alignment of the forced reference, <eos> left out).
//
// Both passes go through the memory bound: importance's batches are cut as a training step's
// (training_cost: forward and backward), the forced pass is decoding's (DecodeOptions).
#include <cmath>
#include <functional>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/analysis/alignment.hpp"
#include "core/data/data.hpp"
#include "core/decode/translation_model.hpp"
#include "core/model/head_gates.hpp"

namespace attnviz {

/// How head_stats() runs.
struct HeadStatsOptions {
    int64_t batch_size = 64;     ///< pairs per batch: one backward pass each (importance), forced together
    int64_t fixed_steps = 0;     ///< training's padding/truncation (TrainConfig::fixed_steps), as eval's loss
    bool importance = true;      ///< measure importance (a forward and backward pass per batch); false: 0
    bool maps = true;            ///< confidence, entropy, positional, rare, sink and AER (a forced pass, maps kept)
    /// Source tokens' counts in the training data, for rare_share (the rarest token of a sentence is the
    /// one counted least). Empty: the source vocabulary's order (built by descending frequency: a higher
    /// id is rarer; a token outside it is the rarest).
    std::unordered_map<std::string, int64_t> source_counts;
    int64_t memory_bound = 0;  ///< the bound both passes ask (0: memory_bound())
    /// A multilingual pretrained model's (M2M100, NLLB, mBART-50) languages, as DecodeOptions'
    /// ("": the tokenizer's src_lang / tgt_lang): both passes put their codes (add_language_codes).
    std::string source_lang, target_lang;
    /// Called after each batch of each pass with the batches done and the total (importance's, then
    /// the forced pass's); an answer of false stops the work: Cancelled is thrown. Empty: none.
    std::function<bool(size_t done, size_t total)> progress;
};

/// The relative offset a self-attention head's argmax takes most often.
struct PositionalRole {
    int offset = 0;      ///< key position - query position
    double share = 0;    ///< of the queries for which that offset exists
    bool positional() const { return share >= 0.9; }
};

/// What one head does.
struct HeadStats {
    AttentionMapId id;
    double confidence = NAN;                   ///< mean max weight, <eos> keys excluded
    double entropy = NAN;                      ///< mean row entropy (nats)
    std::optional<PositionalRole> positional;  ///< self-attention kinds
    double rare_share = NAN;                   ///< source-key kinds (cross, encoder_self); NaN otherwise
    double sink_share = NAN;                   ///< source-key kinds; NaN otherwise
    double importance = 0;                     ///< normalised per layer and kind (L2)
    double importance_raw = 0;                 ///< E_x |dL/dxi_h| (nats per token)
    std::optional<double> aer;                 ///< cross heads, where pairs have gold alignments
};

/// A head's roles in words, for tooltips and tables: "positional -1 (94%)" (PositionalRole::positional),
/// "rare words (62%)" (rare_share >= 0.5: Voita's rare-word head points at the rarest token most of
/// the time), "sink (71%)" (sink_share >= 0.5); empty when it has none.
std::vector<std::string> head_roles(const HeadStats& s);

/// Every head's statistics.
struct HeadReport {
    std::vector<HeadStats> heads;  ///< kind by kind (the network's head_groups()), layer, head
    int64_t sentences = 0;         ///< pairs measured
    int64_t tokens = 0;            ///< their real target tokens (<eos> included)
    double loss = NAN;             ///< teacher-forced mean token loss (nats), as eval's; NaN without importance
    const HeadStats* find(const AttentionMapId& id) const;
};

/// One forced pair's maps as head_map_stats() reads them.
struct HeadSample {
    const AttentionRecord* attention = nullptr;  ///< every map of the forced reference (rows: its tokens and <eos>)
    std::vector<std::string> source;             ///< the source tokens as the model saw them, "<eos>" last
    std::vector<size_t> rarest;                  ///< positions of its rarest source token(s)
    const AlignmentLinks* gold = nullptr;        ///< its gold alignment, if any
    size_t source_size = 0;                      ///< the pair's source tokens (without <eos>), for the alignment
    size_t target_size = 0;                      ///< reference tokens (without <eos>), for the alignment
};

/// The map statistics (confidence, entropy, positional, rare, sink, aer) of every head of some
/// groups, added up sample by sample (a corpus' records need not be held at once); importance
/// left at 0. Plain data: the forced pass's records.
class HeadMapStats {
public:
    explicit HeadMapStats(std::vector<HeadGroup> groups);
    ~HeadMapStats();
    HeadMapStats(HeadMapStats&&) noexcept;
    HeadMapStats& operator=(HeadMapStats&&) noexcept;
    void add(const HeadSample& sample);
    /// Every head of the groups, kind by kind, layer, head.
    std::vector<HeadStats> result() const;

private:
    struct Sums;
    std::vector<HeadGroup> m_groups;
    std::vector<Sums> m_sums;  ///< per head, in result()'s order
};
std::vector<HeadStats> head_map_stats(const std::vector<HeadGroup>& groups, const std::vector<HeadSample>& samples);

/// Michel's importance: raw E_x |dL/dxi| per kind [layers, heads] (HeadGates' layout, CPU, no grad),
/// and the teacher-forced loss. Sets the network's gates for the time it runs (ones, or `base`'s
/// values: a head masked there stays masked) and puts back the ones it had: not with other work
/// on the same network at once.
struct HeadImportance {
    HeadGates raw;
    double loss_sum = 0;  ///< summed token losses
    int64_t tokens = 0;
};
HeadImportance head_importance(EncoderDecoder& network, const std::vector<SentencePair>& pairs,
                               const Vocab& src_vocab, const Vocab& tgt_vocab, const HeadStatsOptions& options,
                               const torch::Device& device, const HeadGates& base = {});

/// Divides each layer's row by its L2 norm (rows of zeros stay 0).
torch::Tensor normalise_per_layer(const torch::Tensor& raw);

/// Everything above for a model over pairs (tokenised as the model reads them). The model's network
/// is used with gates of its own while it runs (see head_importance); gates already set on it (the
/// CLI's --mask-heads) stay in force.
HeadReport head_stats(const TranslationModel& model, const std::vector<SentencePair>& pairs,
                      const HeadStatsOptions& options = {});

/// One head as `attnviz-cli heads --json` and the app's export write it: {kind, layer, head,
/// confidence, entropy, positional: {offset, share, positional} | null, rare_share, sink_share,
/// importance, importance_raw, aer (cross heads with gold alignments only)}; NaN as null.
nlohmann::json head_to_json(const HeadStats& head);
/// Every head, in order, as a JSON array of head_to_json().
nlohmann::json heads_to_json(const std::vector<HeadStats>& heads);

}  // namespace attnviz
