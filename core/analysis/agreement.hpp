#pragma once
// How far two importance rankings of the same tokens agree: Kendall's tau-b
// (ties handled as SciPy's scipy.stats.kendalltau does) and whether they pick the
// same top token, and the distributions of both over steps, sentences and a
// corpus -- Jain & Wallace's (2019) table of attention against gradients and
// leave-one-out, and of the methods against each other. Plain data, no LibTorch;
// a sentence's attribution feeds it through core/analysis/attribution_result.hpp.
#include <cstddef>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace attnviz {

/// Kendall's tau-b of x and y (same length): (P - Q) / sqrt((P + Q + X) (P + Q + Y)) with P
/// concordant and Q discordant pairs, X pairs tied only in x and Y only in y (SciPy's
/// kendalltau, variant 'b'). NaN when n < 2 or either is constant. Throws std::invalid_argument
/// when the lengths differ.
double kendall_tau_b(const std::vector<float>& x, const std::vector<float>& y);

/// Whether the largest entries of x and y are at the same position (the first one on ties);
/// false when empty.
bool same_top(const std::vector<float>& x, const std::vector<float>& y);

/// Two rankings of one step's tokens compared.
struct RankAgreement {
    double kendall_tau = std::numeric_limits<double>::quiet_NaN();  ///< tau-b; NaN when undefined
    bool top1 = false;  ///< the same top token
};
/// kendall_tau_b and same_top of x and y.
RankAgreement rank_agreement(const std::vector<float>& x, const std::vector<float>& y);

/// A sample of values (NaN left out) and its summary.
struct Distribution {
    std::vector<double> values;
    void add(double v);  ///< ignores NaN
    size_t count() const { return values.size(); }
    double mean() const;      ///< NaN when empty
    double std_dev() const;   ///< population standard deviation (NumPy's default); NaN when empty
    /// The q-quantile (0..1), linear between order statistics (NumPy's default); NaN when empty.
    double quantile(double q) const;
    /// Counts in `bins` equal bins over [lo, hi] (values outside clamped to the end bins).
    std::vector<size_t> histogram(size_t bins = 20, double lo = -1.0, double hi = 1.0) const;
};

/// One row of the agreement table: a pair of rankings ("attention vs saliency") over a corpus.
struct AgreementRow {
    Distribution step_tau;      ///< tau-b per step (steps where it is defined)
    Distribution sentence_tau;  ///< per sentence, the mean of its steps' tau-b
    size_t steps = 0;           ///< steps compared
    size_t top1 = 0;            ///< of those, steps where both pick the same top token
    double top1_rate() const { return steps ? static_cast<double>(top1) / static_cast<double>(steps) : 0.0; }
};

/// Jain & Wallace's table: for each pair of rankings, the distributions of tau-b and the
/// top-1 agreement over a corpus, sentence by sentence.
class AgreementTable {
public:
    /// Adds one sentence's steps for a pair (rows appear in the order first added).
    void add_sentence(const std::string& pair, const std::vector<RankAgreement>& steps);
    const std::vector<std::string>& pairs() const { return m_order; }
    const AgreementRow& row(const std::string& pair) const { return m_rows.at(pair); }
    /// {"pairs": [{"pair", "steps", "top1", "kendall_tau": {"mean", "std", "median", "q25",
    /// "q75", "histogram": {"lo", "hi", "counts"}}, "sentence_kendall_tau": {the same}}]}.
    nlohmann::json to_json() const;
    /// A text table: pair, mean tau +- std, median, top-1 agreement, steps.
    std::string to_text() const;

private:
    std::vector<std::string> m_order;
    std::map<std::string, AgreementRow> m_rows;
};

}  // namespace attnviz
