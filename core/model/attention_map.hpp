#pragma once
// Attention as a model records it: named maps. Every map has a kind (where the
// queries and keys come from), a layer and a head, and holds the weights
// [queries × keys] and, where the family keeps them, the raw scores before the
// softmax. The RNN of core/model/rnn_model.hpp records one cross map (layer 0,
// head 0); a Transformer records a map per kind, layer and head. Plain data,
// no LibTorch: decoding fills it (core/decode/translation.hpp's Hypothesis),
// and exports, alignments and views read it in the torch-free base library.
#include <cstddef>
#include <string>
#include <vector>

namespace attnviz {

/// Where a map's queries and keys come from.
enum class AttentionKind {
    cross,         ///< output steps (queries) over source tokens (keys): the encoder-decoder attention
    encoder_self,  ///< source tokens over source tokens
    decoder_self   ///< output steps over output steps so far (causal: nothing above the diagonal)
};
std::string to_string(AttentionKind kind);                     ///< "cross", "encoder_self", "decoder_self"
AttentionKind attention_kind_from_string(const std::string& s);  ///< throws ConfigError naming the valid kinds

/// Which map: kind, layer and head. head = -1 stands for the mean over a layer's heads.
struct AttentionMapId {
    AttentionKind kind = AttentionKind::cross;
    int layer = 0;
    int head = 0;
    bool operator==(const AttentionMapId& o) const { return kind == o.kind && layer == o.layer && head == o.head; }
    bool operator!=(const AttentionMapId& o) const { return !(*this == o); }
};
/// "cross, layer 0, head 0" (head -1: "mean of heads"), for titles and messages.
std::string describe(const AttentionMapId& id);

/// Rows of weights: matrix[query][key].
using AttentionMatrix = std::vector<std::vector<float>>;

/// One map: what each query looked at.
struct AttentionMap {
    AttentionMapId id;
    /// weights[q][k]: the weight of key k for query q. Each row sums to 1 over its keys (a
    /// causal row has only the keys up to its own step); no weight on padding.
    AttentionMatrix weights;
    /// scores[q][k]: the same positions before the softmax (empty when the family keeps none).
    AttentionMatrix scores;
};

/// Which heads of which layer one matrix is read from, for alignments and views
/// (fairseq's alignment_layer and alignment_heads): one head, or the mean of several.
struct HeadSelection {
    AttentionKind kind = AttentionKind::cross;
    int layer = -1;          ///< -1: the last layer the record has
    std::vector<int> heads;  ///< the heads averaged; empty: all of the layer's heads
    /// From a layer and a heads text: "mean" (or "") for all heads, else a comma-separated
    /// list of head indices ("2", "0,3"). Throws ConfigError naming the forms.
    static HeadSelection parse(int layer, const std::string& heads, AttentionKind kind = AttentionKind::cross);
    /// "cross, layer 1, mean of heads" / "cross, last layer, heads 0,3".
    std::string describe() const;
};

/// A hypothesis' attention: every map the model recorded, by name. The first map
/// is the one a single-map view shows when nothing else is chosen (alignments,
/// the heatmap, the exports' "weights"): the RNN's only map; a Transformer's mean
/// of its last layer's cross-attention heads.
struct AttentionRecord {
    std::vector<AttentionMap> maps;

    bool empty() const { return maps.empty(); }
    /// The first map (std::out_of_range when there is none).
    const AttentionMap& primary() const { return maps.at(0); }
    /// The primary map's weights and raw scores; empty without maps.
    const AttentionMatrix& weights() const;
    const AttentionMatrix& scores() const;
    /// The map with this id, or null.
    const AttentionMap* find(const AttentionMapId& id) const;
    AttentionMap* find(const AttentionMapId& id);
    /// The map with this id, added (empty) when there is none yet.
    AttentionMap& at(const AttentionMapId& id);

    /// How many layers have maps of this kind (1 + the largest layer; 0: none).
    int layer_count(AttentionKind kind) const;
    /// How many heads a layer of this kind has (1 + the largest head index; 0: none).
    int head_count(AttentionKind kind) const;
    /// The weights a selection reads: the recorded map when it names one head (or all heads
    /// of a layer whose mean map (head -1) is recorded), else the mean of the selected heads'
    /// weights (rows of different lengths, as causal rows are, padded with 0). Throws
    /// ConfigError naming the layers and heads there are when a selected one is missing.
    AttentionMatrix select(const HeadSelection& selection) const;
    /// Attention rollout (Abnar & Zuidema 2020) of a self-attention kind through every layer:
    /// R = A'_L ... A'_1 with A'_l = (A_l + I) / 2 and A_l the mean of layer l's heads (the
    /// residual connection counted as attention to oneself); R[q][k] says how much position q of
    /// the top layer draws on input position k. Empty when there are no maps of the kind;
    /// ConfigError for cross-attention (its queries and keys are not the same positions).
    AttentionMatrix rollout(AttentionKind kind) const;
};

}  // namespace attnviz
