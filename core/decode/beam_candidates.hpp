#pragma once
// The best extensions of a beam search step, read straight from its log-probabilities.
//
// Why: at batch 32 and beam 4 an opus-mt-sized step has 128 rows of 59,514 log-probabilities
// (30 MB). Taken as transformers writes it, (logp + beam log P).view(B, K*V).topk(2K), the step
// wrote a second 30 MB tensor (fresh pages from the kernel each time) and ran topk over it:
// 15% of an int8 search's time (perf, 1 thread). Here each sentence's K rows are read once: a
// block of 64 log-probabilities whose largest, plus the beam's log P, cannot enter the sentence's
// best so far is passed over after one vector pass, and only the few others are summed and placed.
//
// The totals are the same float sums (logp + beam log P) and the same candidates in the same
// order as torch's topk gives them whenever the order is decided by the values alone: the best
// 2K totals of a sentence all differ and are above everything else. Where two of them tie (or a
// value is NaN, or a sentence has too few finite totals to fill its candidates) topk's order
// among equals is its own, so the caller takes torch's way for that step.
#include <cstdint>
#include <optional>
#include <vector>

#include <torch/torch.h>

namespace attnviz {

/// A step's candidates, per sentence the C best extensions of its K beams, best first.
struct BestExtensions {
    torch::Tensor total;    ///< [B, C] float: cumulative log P, logp + the beam's log P in float
    torch::Tensor index;    ///< [B, C] long: beam_in_sentence * V + token
    torch::Tensor step_lp;  ///< [B, C] float: the token's log-probability
};

/// The C = min(2K, K*V) best totals logp[b*K + k][v] + beam_logp[b*K + k] of each sentence b,
/// best first, as `(logp + prev).view({B, K*V}).topk(C)` gives them; nullopt when that order is
/// not decided by the values alone (two of the best C + 1 tie, a NaN, fewer than C + 1 finite
/// totals in a sentence with a live beam) or when logp is not a contiguous float CPU tensor
/// [B*K, V]. A sentence without a live beam (every beam_logp -inf) gets -inf totals (its
/// candidates are not looked at). Runs on the threads ATen's parallel_for has now.
std::optional<BestExtensions> best_extensions(const torch::Tensor& logp, const std::vector<float>& beam_logp,
                                              int64_t beam_size);

/// How many of the n values in row are greater than value (a token's rank in its row).
int64_t count_greater(const float* row, int64_t n, float value);

}  // namespace attnviz
