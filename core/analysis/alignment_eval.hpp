#pragma once
// A model's attention scored against the gold alignments of a corpus' pairs.
#include "core/analysis/alignment.hpp"
#include "core/data/data.hpp"
#include "core/decode/translation_model.hpp"

namespace attnviz {

/// The model's attention scored against the gold alignments of pairs
/// (SentencePair::alignment; pairs without one are skipped, sentences = 0 when none has
/// one or the model has no attention). Each pair's reference is forced (teacher-forced:
/// step t produces reference token t, so rows line up with the gold's target
/// positions) and aligned with hard_alignment(attention, src size, tgt size, threshold).
/// Uses options.batch_size; greedy. `heads` chooses the cross-attention map that aligns
/// (default: the primary map).
AlignmentScore evaluate_alignment(const TranslationModel& model, const std::vector<SentencePair>& pairs,
                                  const DecodeOptions& options, float threshold = 0.0f,
                                  const HeadSelection& heads = {});

/// The cross-attention heads of a model of this configuration that a layer and a heads text
/// (HeadSelection::parse: "mean", "2", "0,3"; layer -1: the last) select: the CLI's
/// --alignment-layer and --alignment-heads, TrainConfig's alignment_layer and alignment_heads.
/// ConfigError when the model has no such layer or head (the RNN has layer 0 with head 0).
HeadSelection cross_heads(const ModelConfig& model, int layer, const std::string& heads);

/// One row of a per-head alignment table.
struct HeadAlignmentScore {
    HeadSelection heads;  ///< one head of one layer, or a layer's mean (heads empty)
    AlignmentScore score;
};
/// evaluate_alignment for every cross-attention head of every layer and every layer's mean
/// of heads, from one forced pass: which heads align (layer by layer, each layer's heads then
/// its mean). Empty when no pair has a gold alignment or the model has no attention.
std::vector<HeadAlignmentScore> evaluate_alignment_per_head(const TranslationModel& model,
                                                            const std::vector<SentencePair>& pairs,
                                                            const DecodeOptions& options, float threshold = 0.0f);

}  // namespace attnviz
