// The model's attention against true alignments (per-epoch metrics, eval --alignments,
// the per-head table).
#include "core/analysis/alignment_eval.hpp"

#include "core/io/error.hpp"
#include "core/io/message.hpp"

namespace attnviz {

namespace {

/// The pairs with a gold alignment, their references forced (teacher-forced: row t is the
/// step that produced reference token t, and the attention columns are the source tokens
/// in their original order, reverse_source too).
struct ForcedGold {
    std::vector<const SentencePair*> gold;
    std::vector<Translation> forced;
};

ForcedGold force_gold(const TranslationModel& model, const std::vector<SentencePair>& pairs,
                      const DecodeOptions& options, AttentionKind kind = AttentionKind::cross) {
    ForcedGold f;
    if (!model.has_attention()) return f;
    std::vector<std::vector<std::string>> sources, targets;
    for (const auto& p : pairs)
        if (p.alignment && !p.src.empty()) {
            f.gold.push_back(&p);
            sources.push_back(p.src);
            targets.push_back(p.tgt);
        }
    // Alignments from cross maps read those alone: the others are not kept.
    DecodeOptions cross = options;
    if (cross.maps == MapsKept::all && kind == AttentionKind::cross) cross.maps = MapsKept::cross;
    if (!f.gold.empty()) f.forced = model.force_tokens(sources, targets, ForceMode::reference, cross);
    return f;
}

AlignmentScore score(const ForcedGold& f, const HeadSelection& heads, float threshold) {
    AlignmentScore total;
    for (size_t i = 0; i < f.gold.size(); ++i) {
        const auto attention = f.forced[i].best().attention.select(heads);
        total += score_alignment(hard_alignment(attention, f.gold[i]->src.size(), f.gold[i]->tgt.size(), threshold),
                                 *f.gold[i]->alignment);
    }
    return total;
}

}  // namespace

HeadSelection cross_heads(const ModelConfig& model, int layer, const std::string& heads) {
    HeadSelection s = HeadSelection::parse(layer, heads);
    const int64_t layers = model.is_transformer() ? model.num_layers : 1;
    const int64_t per_layer = model.is_transformer() ? model.num_heads : 1;
    if (s.layer >= layers)
        throw ConfigError("alignment layer " + std::to_string(s.layer) + ": the model's cross-attention has " +
                          count_of(layers, "layer", "layers") + ", 0.." + std::to_string(layers - 1) + " (-1: the last)");
    for (int h : s.heads)
        if (h >= per_layer)
            throw ConfigError("alignment heads " + quote(heads) + ": the model has " +
                              count_of(per_layer, "head", "heads") + " per layer, 0.." + std::to_string(per_layer - 1));
    return s;
}

AlignmentScore evaluate_alignment(const TranslationModel& model, const std::vector<SentencePair>& pairs,
                                  const DecodeOptions& options, float threshold, const HeadSelection& heads) {
    return score(force_gold(model, pairs, options, heads.kind), heads, threshold);
}

std::vector<HeadAlignmentScore> evaluate_alignment_per_head(const TranslationModel& model,
                                                            const std::vector<SentencePair>& pairs,
                                                            const DecodeOptions& options, float threshold) {
    std::vector<HeadAlignmentScore> table;
    const ForcedGold f = force_gold(model, pairs, options);
    if (f.gold.empty()) return table;
    const AttentionRecord& first = f.forced.front().best().attention;
    const int layers = first.layer_count(AttentionKind::cross), heads = first.head_count(AttentionKind::cross);
    for (int l = 0; l < layers; ++l) {
        for (int h = 0; h < heads; ++h) {
            const HeadSelection one{AttentionKind::cross, l, {h}};
            table.push_back({one, score(f, one, threshold)});
        }
        if (heads > 1) {
            const HeadSelection mean{AttentionKind::cross, l, {}};
            table.push_back({mean, score(f, mean, threshold)});
        }
    }
    return table;
}

}  // namespace attnviz
