// The model's attention against true alignments (per-epoch metrics, eval --alignments).
#include "core/analysis/alignment_eval.hpp"

namespace attnviz {

AlignmentScore evaluate_alignment(const TranslationModel& model, const std::vector<SentencePair>& pairs,
                                  const DecodeOptions& options, float threshold) {
    AlignmentScore total;
    if (!model.has_attention()) return total;
    std::vector<const SentencePair*> gold;
    std::vector<std::vector<std::string>> sources, targets;
    for (const auto& p : pairs)
        if (p.alignment && !p.src.empty()) {
            gold.push_back(&p);
            sources.push_back(p.src);
            targets.push_back(p.tgt);
        }
    if (gold.empty()) return total;
    // The references forced: row t is the step that produced reference token t, and the
    // attention columns are the source tokens in their original order (reverse_source too).
    const auto forced = model.force_tokens(sources, targets, ForceMode::reference, options);
    for (size_t i = 0; i < gold.size(); ++i) {
        const auto& attention = forced[i].best().attention.weights();
        total += score_alignment(hard_alignment(attention, gold[i]->src.size(), gold[i]->tgt.size(), threshold),
                                 *gold[i]->alignment);
    }
    return total;
}

}  // namespace attnviz
