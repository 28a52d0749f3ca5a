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
/// Uses options.batch_size; greedy.
AlignmentScore evaluate_alignment(const TranslationModel& model, const std::vector<SentencePair>& pairs,
                                  const DecodeOptions& options, float threshold = 0.0f);

}  // namespace attnviz
