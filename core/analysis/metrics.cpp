// Evaluation measures: corpus BLEU (as sacreBLEU), d2l's bleu, accuracies.
#include "core/analysis/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "core/io/error.hpp"

namespace attnviz {

namespace {

void check_sizes(size_t hyps, size_t refs, const char* what) {
    if (hyps != refs)
        throw Error(std::string(what) + ": " + std::to_string(hyps) + " hypotheses but " + std::to_string(refs) +
                    " references; expected one reference per hypothesis");
}

// N-grams of one order, keyed by their tokens joined with a unit separator.
std::unordered_map<std::string, int64_t> ngrams(const std::vector<std::string>& tokens, size_t n) {
    std::unordered_map<std::string, int64_t> counts;
    for (size_t i = 0; i + n <= tokens.size(); ++i) {
        std::string key = tokens[i];
        for (size_t k = 1; k < n; ++k) key += '\x1f' + tokens[i + k];
        ++counts[key];
    }
    return counts;
}

// Python's str.split(' '): empty pieces are kept, so "".split(' ') == [''].
std::vector<std::string> split_on_space(const std::string& s) {
    std::vector<std::string> out;
    size_t start = 0;
    while (true) {
        const size_t sp = s.find(' ', start);
        out.push_back(s.substr(start, sp == std::string::npos ? std::string::npos : sp - start));
        if (sp == std::string::npos) break;
        start = sp + 1;
    }
    return out;
}

}  // namespace

BleuResult corpus_bleu(const std::vector<std::vector<std::string>>& hypotheses,
                       const std::vector<std::vector<std::string>>& references, int max_order) {
    check_sizes(hypotheses.size(), references.size(), "BLEU");
    if (max_order < 1) throw Error("BLEU: max_order " + std::to_string(max_order) + " must be at least 1");
    const auto orders = static_cast<size_t>(max_order);
    std::vector<int64_t> correct(orders, 0), total(orders, 0);
    BleuResult r;
    for (size_t s = 0; s < hypotheses.size(); ++s) {
        const auto& hyp = hypotheses[s];
        const auto& ref = references[s];
        r.hyp_len += hyp.size();
        r.ref_len += ref.size();
        for (size_t n = 1; n <= orders; ++n) {
            if (hyp.size() < n) break;
            total[n - 1] += static_cast<int64_t>(hyp.size() - n + 1);
            const auto ref_counts = ngrams(ref, n);
            for (const auto& [gram, count] : ngrams(hyp, n)) {
                const auto it = ref_counts.find(gram);
                if (it != ref_counts.end()) correct[n - 1] += std::min(count, it->second);  // clipped
            }
        }
    }
    if (r.hyp_len < r.ref_len)
        r.brevity_penalty =
            r.hyp_len > 0 ? std::exp(1.0 - static_cast<double>(r.ref_len) / static_cast<double>(r.hyp_len)) : 0.0;
    r.precisions.assign(orders, 0.0);
    if (std::all_of(correct.begin(), correct.end(), [](int64_t c) { return c == 0; })) return r;
    // sacreBLEU's compute_bleu with smooth_method='exp' (mteval-v13a's smoothing).
    double smooth = 1.0;
    for (size_t n = 1; n <= orders; ++n) {
        if (total[n - 1] == 0) break;  // precision stays 0: score 0
        if (correct[n - 1] == 0) {
            smooth *= 2.0;
            r.precisions[n - 1] = 100.0 / (smooth * static_cast<double>(total[n - 1]));
        } else {
            r.precisions[n - 1] = 100.0 * static_cast<double>(correct[n - 1]) / static_cast<double>(total[n - 1]);
        }
    }
    double log_sum = 0.0;
    for (const double p : r.precisions) {
        if (p == 0.0) return r;  // sacreBLEU's my_log(0) = -9999999999 makes the score 0
        log_sum += std::log(p);
    }
    r.score = r.brevity_penalty * std::exp(log_sum / static_cast<double>(orders));
    return r;
}

double d2l_bleu(const std::string& pred, const std::string& label, int k) {
    const auto pred_tokens = split_on_space(pred), label_tokens = split_on_space(label);
    const auto len_pred = static_cast<int64_t>(pred_tokens.size());
    const auto len_label = static_cast<int64_t>(label_tokens.size());
    double score = std::exp(std::min(0.0, 1.0 - static_cast<double>(len_label) / static_cast<double>(len_pred)));
    for (int64_t n = 1; n <= std::min<int64_t>(k, len_pred); ++n) {
        auto label_subs = ngrams(label_tokens, static_cast<size_t>(n));
        int64_t matches = 0;
        for (int64_t i = 0; i + n <= len_pred; ++i) {
            std::string key = pred_tokens[static_cast<size_t>(i)];
            for (int64_t j = 1; j < n; ++j) key += '\x1f' + pred_tokens[static_cast<size_t>(i + j)];
            const auto it = label_subs.find(key);
            if (it != label_subs.end() && it->second > 0) {
                ++matches;
                --it->second;
            }
        }
        score *= std::pow(static_cast<double>(matches) / static_cast<double>(len_pred - n + 1),
                          std::pow(0.5, static_cast<double>(n)));
    }
    return score;
}

double exact_match(const std::vector<std::vector<std::string>>& hypotheses,
                   const std::vector<std::vector<std::string>>& references) {
    check_sizes(hypotheses.size(), references.size(), "exact match");
    if (hypotheses.empty()) return 0.0;
    size_t same = 0;
    for (size_t i = 0; i < hypotheses.size(); ++i) same += hypotheses[i] == references[i] ? 1 : 0;
    return static_cast<double>(same) / static_cast<double>(hypotheses.size());
}

double token_accuracy(const std::vector<std::vector<std::string>>& hypotheses,
                      const std::vector<std::vector<std::string>>& references) {
    check_sizes(hypotheses.size(), references.size(), "token accuracy");
    size_t right = 0, positions = 0;
    for (size_t i = 0; i < hypotheses.size(); ++i) {
        const auto& h = hypotheses[i];
        const auto& r = references[i];
        positions += r.size();
        for (size_t t = 0; t < r.size() && t < h.size(); ++t) right += h[t] == r[t] ? 1 : 0;
    }
    return positions == 0 ? 0.0 : static_cast<double>(right) / static_cast<double>(positions);
}

}  // namespace attnviz
