#pragma once
// Which of a translation's attention maps the views show (the translate panel's
// "Map" selector, the model view's panels): a kind, a layer and one head, the
// mean of the layer's heads, or the rollout through every layer (Abnar & Zuidema
// 2020). The RNN records one cross map, so for it every choice is that map.
// mapTranslation() turns a hypothesis into a one-hypothesis Translation whose
// primary map is the chosen one, with rows and columns labelled by the map's
// queries and keys, so that the heatmap, the step inspector and the CSV/JSON
// exports show the chosen map without knowing about kinds, layers and heads.
#include <QString>

#include "core/decode/translation.hpp"

namespace attnviz::ui {

struct HeatmapData;

struct MapChoice {
    static constexpr int kMean = -1;     ///< head: the mean of the layer's heads
    static constexpr int kRollout = -2;  ///< head: rollout through every layer (self-attention only)
    AttentionKind kind = AttentionKind::cross;
    int layer = -1;       ///< -1: the last layer
    int head = kMean;     ///< >= 0: that head; kMean or kRollout
    bool operator==(const MapChoice& o) const { return kind == o.kind && layer == o.layer && head == o.head; }
    bool operator!=(const MapChoice& o) const { return !(*this == o); }
};

/// "cross", "encoder self", "decoder self".
QString kindLabel(AttentionKind kind);
/// "cross · layer 1 · head 2", "encoder self · layer 0 · mean of heads", "decoder self · rollout (2 layers)".
/// The layer is resolved against `layers` (its count) when the choice says "last".
QString describeChoice(const MapChoice& c, int layers = 0);

/// True when the record has more than one map (a Transformer's): the views offer a choice.
bool hasMapChoice(const AttentionRecord& record);

/// The choice made valid for a record: the kind kept when it has maps of it (else cross), the
/// layer and head clamped to what there is (a head past the last: the mean), "last" resolved,
/// rollout only for self-attention (cross: the mean).
MapChoice clampChoice(const MapChoice& c, const AttentionRecord& record);

/// The chosen map's weights and raw scores (the scores only for one recorded head; empty for the
/// mean and rollout unless the record holds them). ConfigError when the record lacks the map.
AttentionMap chosenMap(const AttentionRecord& record, const MapChoice& c);

/// Hypothesis `hypothesis` of t as a Translation of that one hypothesis whose attention's primary
/// map is the chosen one (the other maps follow it, for the JSON export): cross keeps the output
/// rows and source columns; encoder self has the source tokens as rows and columns (no output
/// probabilities, no top-k); decoder self has the output rows and as columns the tokens the
/// decoder read (<bos> and the outputs before the last). A record with at most one map (the
/// RNN's) gives the hypothesis unchanged. ConfigError when the record lacks the chosen map.
Translation mapTranslation(const Translation& t, size_t hypothesis, const MapChoice& c);

/// The heatmap of hypothesis `hypothesis` of t for the chosen map (HeatmapData::fromTranslation of
/// mapTranslation()), titled `title` and the map's name, with the map named for the step inspector.
/// A record with one map (the RNN's) gives fromTranslation's heatmap, titled as before.
HeatmapData mapHeatmapData(const Translation& t, size_t hypothesis, const MapChoice& c, const QString& title);

}  // namespace attnviz::ui
