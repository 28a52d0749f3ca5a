// HeatmapData from a decoded hypothesis: weights, raw scores, the strips and
// what forced decoding and top-k recorded.
#include <QObject>
#include <algorithm>
#include <cmath>

#include "core/analysis/alignment.hpp"
#include "core/decode/translation.hpp"
#include "ui/common/Format.hpp"
#include "ui/heatmap/HeatmapWidget.hpp"

namespace attnviz::ui {

HeatmapData HeatmapData::fromTranslation(const Translation& t, size_t hypothesis) {
    HeatmapData d;
    if (hypothesis >= t.hypotheses.size() || !t.attention_available) return d;
    const Hypothesis& h = t.hypotheses[hypothesis];
    const AttentionMatrix& weights = h.attention.weights();  // the primary map (the RNN's only one)
    const AttentionMatrix& scores = h.attention.scores();
    const size_t rows = std::min(h.tokens.size(), weights.size());
    d.source = toQStringList(t.src_tokens);
    for (size_t r = 0; r < rows; ++r) {
        d.output << qs(h.tokens[r]);
        std::vector<float> w = weights[r];
        w.resize(t.src_tokens.size(), 0.0f);
        d.weights.push_back(std::move(w));
        if (r < scores.size()) {
            std::vector<float> s = scores[r];
            s.resize(t.src_tokens.size(), -INFINITY);
            d.rawScores.push_back(std::move(s));
        }
    }
    if (d.rawScores.size() != d.weights.size()) d.rawScores.clear();
    d.contextNorm.assign(h.context_norm.begin(), h.context_norm.begin() + std::min(rows, h.context_norm.size()));
    if (d.contextNorm.size() != rows) d.contextNorm.clear();
    // Name the unknown words behind the <unk> columns when they line up one to one.
    const int unkCount = int(std::count(t.src_tokens.begin(), t.src_tokens.end(), std::string("<unk>")));
    if (unkCount > 0 && unkCount == int(t.unknown.size())) {
        int next = 0;
        for (const auto& tok : t.src_tokens)
            d.sourceNotes << (tok == "<unk>" ? QObject::tr("unknown word “%1”").arg(qs(t.unknown[next++])) : QString());
    }

    // What the decoding recorded per step.
    if (h.step_log_prob.size() >= rows) {
        d.stepLogProb.assign(h.step_log_prob.begin(), h.step_log_prob.begin() + long(rows));
        HeatmapStrip p{QStringLiteral("P"), QObject::tr("probability the model gave this output token"), {}, 1.0f, 3};
        for (float lp : d.stepLogProb) p.values.push_back(std::exp(lp));
        d.rowStrips.push_back(std::move(p));
    }
    if (h.rank.size() >= rows) d.rank.assign(h.rank.begin(), h.rank.begin() + long(rows));
    if (h.top_k.size() >= rows)
        for (size_t r = 0; r < rows; ++r) {
            std::vector<Candidate> c;
            for (const TokenProb& tp : h.top_k[r]) c.push_back({qs(tp.token), tp.prob});
            d.topK.push_back(std::move(c));
        }
    d.forcedRows = int(std::min<int64_t>(h.forced_steps, int64_t(rows)));
    if (h.first_divergence >= 0 && h.first_divergence < int64_t(rows)) {
        d.highlightRow = int(h.first_divergence);
        QString preferred;
        if (size_t(d.highlightRow) < d.topK.size() && !d.topK[size_t(d.highlightRow)].empty())
            preferred = QObject::tr(" (it preferred “%1”)").arg(displayToken(d.topK[size_t(d.highlightRow)].front().token));
        d.highlightNote = QObject::tr("first step where the given token is not the model's own choice%1").arg(preferred);
    }

    // Attention statistics: entropy and largest weight per step, coverage per source token.
    const AttentionStats s = attention_stats(d.weights);
    const float maxEntropy = d.columns() > 1 ? float(std::log(double(d.columns()))) : 1.0f;
    d.rowStrips.push_back({QStringLiteral("H"),
                           QObject::tr("entropy of the step's attention (nats; %1 = spread evenly over all %2 "
                                       "source tokens, 0 = all on one)").arg(maxEntropy, 0, 'f', 2).arg(d.columns()),
                           s.entropy, maxEntropy, 3});
    d.rowStrips.push_back({QStringLiteral("max"), QObject::tr("largest attention weight of the step"),
                           s.max_weight, 1.0f, 3});
    const float maxCoverage = s.coverage.empty() ? 1.0f : std::max(1.0f, *std::max_element(s.coverage.begin(), s.coverage.end()));
    d.columnStrips.push_back({QStringLiteral("cov"),
                              QObject::tr("coverage: the sum of this source token's weights over all steps "
                                          "(1 = attended once in all)"),
                              s.coverage, maxCoverage, 2});
    return d;
}

QString HeatmapData::stripToolTip(const HeatmapStrip& strip, int index, bool row) const {
    if (index < 0 || index >= int(strip.values.size())) return {};
    const QString& token = row ? output.value(index) : source.value(index);
    QString text = QStringLiteral("<b>%1</b> %2 = <b>%3</b><br>%4")
                       .arg(strip.name.toHtmlEscaped(), displayToken(token).toHtmlEscaped())
                       .arg(double(strip.values[size_t(index)]), 0, 'f', strip.decimals)
                       .arg(strip.description.toHtmlEscaped());
    if (row && strip.name == QLatin1String("P") && index < int(rank.size()))
        text += QObject::tr("<br>rank %1 among all tokens%2")
                    .arg(rank[size_t(index)] + 1)
                    .arg(index < forcedRows ? QObject::tr(" (given, not chosen)") : QString());
    if (row && index == highlightRow && !highlightNote.isEmpty())
        text += QStringLiteral("<br><span style='color:#b00020'>%1</span>").arg(highlightNote.toHtmlEscaped());
    return text;
}

}  // namespace attnviz::ui
