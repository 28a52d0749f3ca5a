#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include <ATen/Parallel.h>
#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define ATTNVIZ_BEAM_CANDIDATES_X86 1
#endif

#include "core/decode/beam_candidates.hpp"

namespace attnviz {

namespace {

constexpr float k_no_total = -std::numeric_limits<float>::infinity();
/// Log-probabilities looked at together: one vector pass finds their largest.
constexpr int64_t k_candidate_block = 64;

/// The largest of a block's values (-inf when there are none) and whether one is NaN.
struct BlockPeak {
    float max = k_no_total;
    bool nan = false;
};

BlockPeak block_peak_scalar(const float* x, int64_t n) {
    BlockPeak p;
    for (int64_t i = 0; i < n; ++i) {
        p.nan = p.nan || std::isnan(x[i]);
        p.max = x[i] > p.max ? x[i] : p.max;
    }
    return p;
}

#ifdef ATTNVIZ_BEAM_CANDIDATES_X86
bool candidates_have_avx2() {
    static const bool yes = __builtin_cpu_supports("avx2");
    return yes;
}

__attribute__((target("avx2"))) BlockPeak block_peak_avx2(const float* x, int64_t n) {
    if (n < 8) return block_peak_scalar(x, n);
    __m256 peak = _mm256_set1_ps(k_no_total), unordered = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        peak = _mm256_max_ps(peak, v);
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, peak);
    BlockPeak p = block_peak_scalar(x + i, n - i);
    p.nan = p.nan || _mm256_movemask_ps(unordered) != 0;
    for (float l : lanes) p.max = l > p.max ? l : p.max;
    return p;
}
#endif

BlockPeak block_peak(const float* x, int64_t n) {
#ifdef ATTNVIZ_BEAM_CANDIDATES_X86
    if (candidates_have_avx2()) return block_peak_avx2(x, n);
#endif
    return block_peak_scalar(x, n);
}

/// One extension: its total and where it is (beam_in_sentence * V + token).
struct ExtensionSlot {
    float total = k_no_total;
    int64_t index = 0;
};

enum class SentencePick { found, no_live_beam, undecided };

/// The `keep` best totals of one sentence's K rows into best (sorted, best first), or why not.
SentencePick pick_sentence(const float* logp, const float* prev, int64_t K, int64_t V, size_t keep,
                           std::vector<ExtensionSlot>& best) {
    best.clear();
    bool live = false;
    for (int64_t k = 0; k < K; ++k) {
        const float p = prev[k];
        if (std::isnan(p)) return SentencePick::undecided;
        if (!(p > k_no_total)) continue;  // a beam not (or no longer) live: its totals are all -inf
        live = true;
        const float* row = logp + k * V;
        for (int64_t v0 = 0; v0 < V; v0 += k_candidate_block) {
            const int64_t n = std::min(k_candidate_block, V - v0);
            const BlockPeak peak = block_peak(row + v0, n);
            if (peak.nan) return SentencePick::undecided;
            if (!(peak.max > k_no_total)) continue;
            // Float addition is monotone: no total of the block exceeds its largest plus p.
            if (best.size() == keep && !(peak.max + p > best.back().total)) continue;
            for (int64_t i = 0; i < n; ++i) {
                const float t = row[v0 + i] + p;  // the float sum torch's add makes
                if (!(t > k_no_total)) continue;
                // A total equal to the last kept one is passed over: it could only tie at the
                // (C+1)-th place, which does not decide the candidates.
                if (best.size() == keep) {
                    if (!(t > best.back().total)) continue;
                    best.pop_back();
                }
                auto at = std::upper_bound(best.begin(), best.end(), t,
                                           [](float x, const ExtensionSlot& e) { return x > e.total; });
                best.insert(at, ExtensionSlot{t, k * V + v0 + i});
            }
        }
    }
    if (!live) return SentencePick::no_live_beam;
    if (best.size() < keep) return SentencePick::undecided;
    for (size_t i = 1; i < best.size(); ++i)
        if (!(best[i - 1].total > best[i].total)) return SentencePick::undecided;
    return SentencePick::found;
}

}  // namespace

std::optional<BestExtensions> best_extensions(const torch::Tensor& logp, const std::vector<float>& beam_logp,
                                              int64_t beam_size) {
    if (!logp.defined() || logp.device().type() != torch::kCPU || logp.scalar_type() != torch::kFloat ||
        logp.dim() != 2 || !logp.is_contiguous() || beam_size < 1 || logp.size(0) % beam_size != 0 ||
        static_cast<int64_t>(beam_logp.size()) != logp.size(0))
        return std::nullopt;
    const int64_t K = beam_size, V = logp.size(1), B = logp.size(0) / K;
    const int64_t C = std::min<int64_t>(2 * K, K * V);
    if (C + 1 > K * V) return std::nullopt;  // every total is a candidate: topk's order among -inf decides
    BestExtensions out;
    out.total = torch::empty({B, C}, torch::kFloat);
    out.index = torch::empty({B, C}, torch::kLong);
    out.step_lp = torch::empty({B, C}, torch::kFloat);
    const float* lp = logp.data_ptr<float>();
    float* total = out.total.data_ptr<float>();
    int64_t* index = out.index.data_ptr<int64_t>();
    float* step_lp = out.step_lp.data_ptr<float>();
    std::atomic<bool> decided{true};
    at::parallel_for(0, B, 1, [&](int64_t begin, int64_t end) {
        std::vector<ExtensionSlot> best;
        best.reserve(static_cast<size_t>(C + 1));
        for (int64_t b = begin; b < end && decided.load(std::memory_order_relaxed); ++b) {
            const float* rows = lp + b * K * V;
            const SentencePick pick = pick_sentence(rows, beam_logp.data() + b * K, K, V, static_cast<size_t>(C + 1), best);
            if (pick == SentencePick::undecided) {
                decided = false;
                return;
            }
            for (int64_t j = 0; j < C; ++j) {
                const int64_t at = b * C + j;
                if (pick == SentencePick::no_live_beam) {  // not looked at: a done sentence
                    total[at] = k_no_total, index[at] = j, step_lp[at] = rows[j];
                    continue;
                }
                const ExtensionSlot& e = best[static_cast<size_t>(j)];
                total[at] = e.total, index[at] = e.index, step_lp[at] = rows[e.index];
            }
        }
    });
    if (!decided) return std::nullopt;
    return out;
}

int64_t count_greater(const float* row, int64_t n, float value) {
    int64_t count = 0;
    for (int64_t i = 0; i < n; ++i) count += row[i] > value;
    return count;
}

}  // namespace attnviz
