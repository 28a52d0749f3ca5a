// Hard alignments read off attention, their scores against gold links, and
// attention statistics.
#include "core/analysis/alignment.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/io/error.hpp"
#include "core/text/vocab.hpp"

namespace attnviz {

// --- hard alignments -----------------------------------------------------------------

AlignmentLinks hard_alignment(const std::vector<std::vector<float>>& attention, size_t src_len, size_t tgt_len,
                              float threshold) {
    AlignmentLinks out;
    for (size_t t = 0; t < std::min(attention.size(), tgt_len); ++t) {
        const auto& row = attention[t];
        if (row.empty()) continue;
        if (threshold > 0) {
            for (size_t s = 0; s < std::min(row.size(), src_len); ++s)
                if (row[s] >= threshold) out.add(static_cast<int>(s), static_cast<int>(t));
            continue;
        }
        const size_t best = static_cast<size_t>(std::max_element(row.begin(), row.end()) - row.begin());
        if (best < src_len) out.add(static_cast<int>(best), static_cast<int>(t));
    }
    return out;
}

AlignmentLinks hard_alignment(const Translation& t, size_t hypothesis, const HardAlignmentOptions& options) {
    if (hypothesis >= t.hypotheses.size())
        throw Error("no hypothesis " + std::to_string(hypothesis) + " to align: the translation has " +
                    std::to_string(t.hypotheses.size()));
    const Hypothesis& h = t.hypotheses[hypothesis];
    const AttentionMatrix weights = t.attention_available && !h.attention.empty() ? h.attention.select(options.heads)
                                                                                   : AttentionMatrix{};
    if (!t.attention_available || weights.size() != h.tokens.size())
        throw Error("no attention to align: the hypothesis has " + std::to_string(h.tokens.size()) + " tokens but " +
                    std::to_string(weights.size()) + " attention rows");
    auto real = [&](const std::vector<std::string>& tokens) {
        if (options.include_eos) return tokens.size();
        return static_cast<size_t>(std::find(tokens.begin(), tokens.end(), Vocab::eos_token) - tokens.begin());
    };
    return hard_alignment(weights, real(t.src_tokens), real(h.tokens), options.threshold);
}

// --- scores ----------------------------------------------------------------------------

namespace {
double ratio(size_t num, size_t den) {
    return den > 0 ? static_cast<double>(num) / static_cast<double>(den) : std::numeric_limits<double>::quiet_NaN();
}
}  // namespace

double AlignmentScore::aer() const {
    const size_t den = predicted + sure;
    return den > 0 ? 1.0 - ratio(predicted_sure + predicted_possible, den) : std::numeric_limits<double>::quiet_NaN();
}
double AlignmentScore::precision() const { return ratio(predicted_possible, predicted); }
double AlignmentScore::recall() const { return ratio(predicted_sure, sure); }
double AlignmentScore::accuracy() const { return ratio(correct_tokens, gold_tokens); }

AlignmentScore& AlignmentScore::operator+=(const AlignmentScore& o) {
    sentences += o.sentences;
    predicted += o.predicted;
    sure += o.sure;
    predicted_sure += o.predicted_sure;
    predicted_possible += o.predicted_possible;
    gold_tokens += o.gold_tokens;
    correct_tokens += o.correct_tokens;
    return *this;
}

AlignmentScore score_alignment(const AlignmentLinks& predicted, const AlignmentLinks& gold) {
    AlignmentScore s;
    s.sentences = 1;
    s.predicted = predicted.size();
    s.sure = gold.sure_count();
    // Per target token: does it have gold links, predicted ones, a predicted one outside P?
    struct Token {
        bool gold = false, predicted = false, wrong = false;
    };
    std::vector<Token> tokens;
    auto at = [&](int t) -> Token& {
        if (static_cast<size_t>(t) >= tokens.size()) tokens.resize(static_cast<size_t>(t) + 1);
        return tokens[static_cast<size_t>(t)];
    };
    for (const auto& l : gold.links()) at(l.tgt).gold = true;
    for (const auto& l : predicted.links()) {
        const bool in_p = gold.contains(l.src, l.tgt);
        s.predicted_possible += in_p ? 1 : 0;
        s.predicted_sure += gold.contains_sure(l.src, l.tgt) ? 1 : 0;
        Token& tok = at(l.tgt);
        tok.predicted = true;
        tok.wrong = tok.wrong || !in_p;
    }
    for (const auto& tok : tokens)
        if (tok.gold) {
            ++s.gold_tokens;
            s.correct_tokens += tok.predicted && !tok.wrong ? 1 : 0;
        }
    return s;
}

AlignmentScore score_alignments(const std::vector<AlignmentLinks>& predicted, const std::vector<AlignmentLinks>& gold) {
    if (predicted.size() != gold.size())
        throw Error("alignment scores: " + std::to_string(predicted.size()) + " predicted alignments but " +
                    std::to_string(gold.size()) + " gold ones");
    AlignmentScore total;
    for (size_t i = 0; i < gold.size(); ++i) total += score_alignment(predicted[i], gold[i]);
    return total;
}

// --- attention statistics -------------------------------------------------------------------

AttentionStats attention_stats(const std::vector<std::vector<float>>& attention) {
    AttentionStats st;
    std::vector<double> coverage;
    for (const auto& row : attention) {
        double entropy = 0.0;
        float top = row.empty() ? std::numeric_limits<float>::quiet_NaN() : row.front();
        if (coverage.size() < row.size()) coverage.resize(row.size(), 0.0);
        for (size_t s = 0; s < row.size(); ++s) {
            const double w = row[s];
            if (w > 0) entropy -= w * std::log(w);
            top = std::max(top, row[s]);
            coverage[s] += w;
        }
        st.entropy.push_back(static_cast<float>(entropy));
        st.max_weight.push_back(top);
    }
    st.coverage.assign(coverage.begin(), coverage.end());
    return st;
}

}  // namespace attnviz
