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

/// A hypothesis' attention: every map the model recorded, by name. The first map
/// is the one a single-map view shows when nothing else is chosen (alignments,
/// the heatmap, the exports' "weights"): the RNN's only map.
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
};

}  // namespace attnviz
