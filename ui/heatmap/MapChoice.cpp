#include "ui/heatmap/MapChoice.hpp"

#include <QObject>
#include <algorithm>
#include <cmath>

#include "ui/common/Format.hpp"
#include "ui/heatmap/HeatmapWidget.hpp"

namespace attnviz::ui {
namespace {
/// What one step of a map does, for the step inspector (%1: what the row's query belongs to).
QString mapExplanation(const MapChoice& c) {
    if (c.head == MapChoice::kRollout)
        return QObject::tr("the rollout through every layer: how much this position draws on each input position, "
                           "each layer's mean of heads mixed with the residual (A + I) / 2 and multiplied through. "
                           "It has no raw scores of its own.");
    const QString keys = c.kind == AttentionKind::cross          ? QObject::tr("every source token (the encoder's output)")
                         : c.kind == AttentionKind::encoder_self ? QObject::tr("every source token")
                                                                 : QObject::tr("the decoder's inputs up to this step");
    if (c.head == MapChoice::kMean)
        return QObject::tr("the mean of the layer's heads: each head's query scored %1 and took its own softmax; "
                           "these are their weights averaged (a mean has no raw scores of its own).").arg(keys);
    return QObject::tr("this head's query (W_q x) scores %1 by its key (W_k x): 1 · q·k/√d (−∞ where masked); the "
                       "softmax turns the scores into weights (2); the head's output is the weighted sum of the "
                       "values Σⱼ αⱼ vⱼ (v = W_v x), which W_o mixes with the other heads' (3).").arg(keys);
}
}  // namespace


QString kindLabel(AttentionKind kind) {
    switch (kind) {
    case AttentionKind::cross: return QObject::tr("cross");
    case AttentionKind::encoder_self: return QObject::tr("encoder self");
    case AttentionKind::decoder_self: return QObject::tr("decoder self");
    }
    return {};
}

QString describeChoice(const MapChoice& c, int layers) {
    const QString kind = kindLabel(c.kind);
    if (c.head == MapChoice::kRollout) return QObject::tr("%1 · rollout (%2 layers)").arg(kind).arg(layers);
    const QString layer = c.layer < 0 && layers <= 0 ? QObject::tr("last layer")
                                                     : QObject::tr("layer %1").arg(c.layer < 0 ? layers - 1 : c.layer);
    const QString head = c.head == MapChoice::kMean ? QObject::tr("mean of heads") : QObject::tr("head %1").arg(c.head);
    return QStringLiteral("%1 · %2 · %3").arg(kind, layer, head);
}

bool hasMapChoice(const AttentionRecord& record) { return record.maps.size() > 1; }

MapChoice clampChoice(const MapChoice& c, const AttentionRecord& record) {
    MapChoice out = c;
    if (record.layer_count(out.kind) == 0) out.kind = AttentionKind::cross;
    const int layers = record.layer_count(out.kind), heads = record.head_count(out.kind);
    out.layer = std::clamp(out.layer < 0 ? layers - 1 : out.layer, 0, std::max(0, layers - 1));
    if (out.head >= heads || out.head < MapChoice::kRollout) out.head = MapChoice::kMean;
    if (out.head == MapChoice::kRollout && out.kind == AttentionKind::cross) out.head = MapChoice::kMean;
    return out;
}

AttentionMap chosenMap(const AttentionRecord& record, const MapChoice& c) {
    AttentionMap m;
    m.id = {c.kind, c.layer, c.head};
    if (c.head == MapChoice::kRollout) {
        m.id.layer = record.layer_count(c.kind) - 1;  // the top layer's positions, drawing on the input's
        m.weights = record.rollout(c.kind);
        return m;
    }
    if (const AttentionMap* recorded = record.find(m.id)) return *recorded;  // a head, or a recorded mean
    HeadSelection s;
    s.kind = c.kind;
    s.layer = c.layer;
    if (c.head >= 0) s.heads = {c.head};
    m.weights = record.select(s);  // the mean of the heads; throws naming what there is
    return m;
}

Translation mapTranslation(const Translation& t, size_t hypothesis, const MapChoice& choice) {
    Translation out;
    out.input = t.input;
    out.src_tokens = t.src_tokens;
    out.unknown = t.unknown;
    out.attention_available = t.attention_available;
    out.merged = t.merged;
    if (hypothesis >= t.hypotheses.size()) return out;
    out.hypotheses.push_back(t.hypotheses[hypothesis]);
    Hypothesis& h = out.hypotheses.front();
    if (!t.attention_available || !hasMapChoice(h.attention)) return out;
    const MapChoice c = clampChoice(choice, h.attention);
    AttentionMap chosen = chosenMap(h.attention, c);
    const size_t outputs = h.tokens.size(), sources = t.src_tokens.size();
    switch (c.kind) {
    case AttentionKind::cross:
        break;
    case AttentionKind::encoder_self:
        // Queries and keys are the source tokens: no output token, its probability or candidates.
        h.tokens = t.src_tokens;
        h.ids.clear();
        h.step_log_prob.clear();
        h.rank.clear();
        h.top_k.clear();
        h.forced_steps = 0;
        h.first_divergence = -1;
        chosen.weights.resize(std::min(chosen.weights.size(), sources));
        if (chosen.scores.size() > sources) chosen.scores.resize(sources);
        break;
    case AttentionKind::decoder_self:
        // Step t reads the decoder's inputs 0..t: <bos>, then the outputs before it. Causal rows
        // are shorter: the steps not yet taken have no weight (and no score).
        out.src_tokens = {"<bos>"};
        for (size_t i = 0; i + 1 < outputs; ++i) out.src_tokens.push_back(h.tokens[i]);
        out.unknown.clear();
        for (auto& row : chosen.weights) row.resize(outputs, 0.0f);
        for (auto& row : chosen.scores) row.resize(outputs, -INFINITY);
        break;
    }
    // The recorded "context" is the last layer's cross-attention read through W_o (all heads), not
    // the RNN's Σ α h the step inspector names: a head's own weighted sum is not recorded.
    h.context_norm.clear();
    h.attention.maps = {std::move(chosen)};
    return out;
}

HeatmapData mapHeatmapData(const Translation& t, size_t hypothesis, const MapChoice& choice, const QString& title) {
    HeatmapData d;
    if (hypothesis >= t.hypotheses.size() || !hasMapChoice(t.hypotheses[hypothesis].attention)) {
        d = HeatmapData::fromTranslation(t, hypothesis);  // the RNN's one map, as always
        d.title = title;
        return d;
    }
    const AttentionRecord& record = t.hypotheses[hypothesis].attention;
    const MapChoice c = clampChoice(choice, record);
    try {
        d = HeatmapData::fromTranslation(mapTranslation(t, hypothesis, c), 0);
    } catch (const std::exception& e) {  // a map the record lacks: the primary one, and why
        d = HeatmapData::fromTranslation(t, hypothesis);
        d.title = title + QStringLiteral("   ·   ") + qs(e.what());
        return d;
    }
    d.mapName = describeChoice(c, record.layer_count(c.kind));
    d.mapExplanation = mapExplanation(c);
    d.title = title + QStringLiteral("   ·   ") + d.mapName;
    return d;
}

}  // namespace attnviz::ui
