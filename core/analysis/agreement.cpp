// Rank agreement: Kendall's tau-b, top-1, and their distributions over a corpus.
#include "core/analysis/agreement.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace attnviz {

double kendall_tau_b(const std::vector<float>& x, const std::vector<float>& y) {
    if (x.size() != y.size()) throw std::invalid_argument("kendall_tau_b: the rankings differ in length");
    const size_t n = x.size();
    // O(n^2): a step has as many entries as its sentence has tokens.
    long long concordant = 0, discordant = 0, only_x = 0, only_y = 0;
    for (size_t i = 0; i < n; ++i)
        for (size_t j = i + 1; j < n; ++j) {
            const int dx = (x[i] > x[j]) - (x[i] < x[j]);
            const int dy = (y[i] > y[j]) - (y[i] < y[j]);
            if (dx == 0 && dy == 0) continue;  // tied in both: in neither count
            if (dx == 0) ++only_x;
            else if (dy == 0) ++only_y;
            else if (dx == dy) ++concordant;
            else ++discordant;
        }
    const double untied_x = static_cast<double>(concordant + discordant + only_y);  // pairs not tied in x
    const double untied_y = static_cast<double>(concordant + discordant + only_x);  // pairs not tied in y
    if (untied_x == 0 || untied_y == 0) return std::numeric_limits<double>::quiet_NaN();
    return static_cast<double>(concordant - discordant) / std::sqrt(untied_x * untied_y);
}

namespace {
size_t argmax(const std::vector<float>& v) {
    return static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin());
}
}  // namespace

bool same_top(const std::vector<float>& x, const std::vector<float>& y) {
    if (x.empty() || y.empty()) return false;
    return argmax(x) == argmax(y);
}

RankAgreement rank_agreement(const std::vector<float>& x, const std::vector<float>& y) {
    return {kendall_tau_b(x, y), same_top(x, y)};
}

void Distribution::add(double v) {
    if (!std::isnan(v)) values.push_back(v);
}

double Distribution::mean() const {
    if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
    double s = 0;
    for (double v : values) s += v;
    return s / static_cast<double>(values.size());
}

double Distribution::std_dev() const {
    if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
    const double m = mean();
    double s = 0;
    for (double v : values) s += (v - m) * (v - m);
    return std::sqrt(s / static_cast<double>(values.size()));
}

double Distribution::quantile(double q) const {
    if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
    std::vector<double> sorted = values;
    std::sort(sorted.begin(), sorted.end());
    const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(sorted.size() - 1);
    const auto lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

std::vector<size_t> Distribution::histogram(size_t bins, double lo, double hi) const {
    std::vector<size_t> counts(std::max<size_t>(bins, 1), 0);
    for (double v : values) {
        const double f = (v - lo) / (hi - lo) * static_cast<double>(counts.size());
        const auto b = static_cast<long long>(std::floor(f));
        counts[static_cast<size_t>(std::clamp<long long>(b, 0, static_cast<long long>(counts.size()) - 1))]++;
    }
    return counts;
}

void AgreementTable::add_sentence(const std::string& pair, const std::vector<RankAgreement>& steps) {
    auto it = m_rows.find(pair);
    if (it == m_rows.end()) {
        m_order.push_back(pair);
        it = m_rows.emplace(pair, AgreementRow{}).first;
    }
    AgreementRow& row = it->second;
    Distribution sentence;
    for (const auto& s : steps) {
        ++row.steps;
        row.top1 += s.top1 ? 1 : 0;
        row.step_tau.add(s.kendall_tau);
        sentence.add(s.kendall_tau);
    }
    row.sentence_tau.add(sentence.mean());
}

namespace {
nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

nlohmann::json summary(const Distribution& d) {
    return {{"count", d.count()},
            {"mean", number(d.mean())},
            {"std", number(d.std_dev())},
            {"median", number(d.quantile(0.5))},
            {"q25", number(d.quantile(0.25))},
            {"q75", number(d.quantile(0.75))},
            {"histogram", {{"lo", -1.0}, {"hi", 1.0}, {"counts", d.histogram()}}}};
}
}  // namespace

nlohmann::json AgreementTable::to_json() const {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& name : m_order) {
        const AgreementRow& r = m_rows.at(name);
        rows.push_back({{"pair", name},
                        {"steps", r.steps},
                        {"top1", r.top1_rate()},
                        {"kendall_tau", summary(r.step_tau)},
                        {"sentence_kendall_tau", summary(r.sentence_tau)}});
    }
    return {{"pairs", rows}};
}

std::string AgreementTable::to_text() const {
    std::string out;
    char line[256];
    std::snprintf(line, sizeof line, "%-44s %16s %8s %7s %8s\n", "pair", "kendall tau-b", "median", "top-1",
                  "steps");
    out += line;
    for (const auto& name : m_order) {
        const AgreementRow& r = m_rows.at(name);
        std::snprintf(line, sizeof line, "%-44s %7.3f +- %5.3f %8.3f %7.3f %8zu\n", name.c_str(), r.step_tau.mean(),
                      r.step_tau.std_dev(), r.step_tau.quantile(0.5), r.top1_rate(), r.steps);
        out += line;
    }
    return out;
}

}  // namespace attnviz
