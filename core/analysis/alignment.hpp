#pragma once
// Word alignments read off attention, and how good they are: hard alignments
// (argmax or threshold per target step), the alignment error rate of Och & Ney
// (2003) with sure and possible links, alignment accuracy, and per-step
// attention statistics (entropy, maximum weight, coverage). The links and
// Pharaoh files: core/data/alignment_links.hpp; a model's alignments scored on
// a corpus: core/analysis/alignment_eval.hpp.
//
// Positions are 0-based and refer to real tokens: source position s is the
// s-th source token, target position t the t-th output token; the <eos> of
// either side is not a token here unless asked for (HardAlignmentOptions).
// Attention matrices are attention[t][s] (Hypothesis::attention), always in
// the source's original order (reverse_source models included).
#include <cstddef>
#include <string>
#include <vector>

#include "core/data/alignment_links.hpp"
#include "core/decode/translation.hpp"

namespace attnviz {

// --- hard alignments from attention -------------------------------------------------

/// Links from an attention matrix attention[t][s]. src_len and tgt_len count the real
/// tokens: rows t >= tgt_len and columns s >= src_len (the <eos>) get no links.
/// threshold 0: the argmax of each row, taken over the whole row (first on ties) -- a
/// step whose largest weight is on an excluded column (the source <eos>) gets no link,
/// where fairseq's --print-alignment would take the best real token instead.
/// threshold > 0: every weight >= threshold among the real columns (a row may get none).
AlignmentLinks hard_alignment(const std::vector<std::vector<float>>& attention, size_t src_len, size_t tgt_len,
                              float threshold = 0.0f);

/// Options for reading an alignment off a translation.
struct HardAlignmentOptions {
    float threshold = 0.0f;    ///< 0: argmax per target step; > 0: every weight >= threshold
    /// Which cross-attention map aligns (AttentionRecord::select): by default the mean of the
    /// last layer's heads, which is the primary map (the RNN's only one).
    HeadSelection heads;
    bool include_eos = false;  ///< also link the target <eos> row and the source <eos> column
                               ///< (Pharaoh output leaves them out: they are not words)
};

/// The alignment of a translation's hypothesis (hard_alignment over its attention; the
/// real tokens are those before "<eos>" on each side). Throws attnviz::Error when the
/// hypothesis does not exist or has no attention.
AlignmentLinks hard_alignment(const Translation& t, size_t hypothesis = 0, const HardAlignmentOptions& options = {});

// --- scores ---------------------------------------------------------------------------------

/// Alignment counts, summed over sentences (corpus level, as Och & Ney score).
/// A = predicted links, S = gold sure links, P = all gold links.
struct AlignmentScore {
    size_t sentences = 0;           ///< sentence pairs scored
    size_t predicted = 0;           ///< |A|
    size_t sure = 0;                ///< |S|
    size_t predicted_sure = 0;      ///< |A and S|
    size_t predicted_possible = 0;  ///< |A and P|
    size_t gold_tokens = 0;         ///< target tokens with at least one gold link
    size_t correct_tokens = 0;      ///< of those, the ones with predicted links, all of them gold
                                    ///< (sure or possible); for argmax: "the argmax is a gold link"
    /// AER = 1 - (|A and S| + |A and P|) / (|A| + |S|); NaN when |A| + |S| = 0.
    double aer() const;
    double precision() const;  ///< |A and P| / |A| (NaN when nothing was predicted)
    double recall() const;     ///< |A and S| / |S| (NaN when there are no sure links)
    double accuracy() const;   ///< correct_tokens / gold_tokens (NaN when no token has a gold link)
    AlignmentScore& operator+=(const AlignmentScore& o);
};

/// Scores one sentence's predicted links against its gold links.
AlignmentScore score_alignment(const AlignmentLinks& predicted, const AlignmentLinks& gold);
/// Scores sentence by sentence and sums; throws attnviz::Error when the counts differ.
AlignmentScore score_alignments(const std::vector<AlignmentLinks>& predicted, const std::vector<AlignmentLinks>& gold);

// --- attention statistics ---------------------------------------------------------------

/// Per-step and per-source-token summaries of an attention matrix, for the thin strips
/// beside the heatmap and for export.
struct AttentionStats {
    std::vector<float> entropy;     ///< per step t: -sum_s w ln w in nats (0 one-hot, ln n uniform over n)
    std::vector<float> max_weight;  ///< per step t: the largest weight
    std::vector<float> coverage;    ///< per source position s: sum_t w[t][s], over all steps
                                    ///< (as many as the widest row; <eos> column included)
};

/// Statistics of attention[t][s] (rows as given: not renormalised; 0 ln 0 = 0).
AttentionStats attention_stats(const std::vector<std::vector<float>>& attention);

}  // namespace attnviz
