#pragma once
// "What if it had looked elsewhere?": one output step's attention changed
// (core/decode/intervention.hpp) and the sentence decoded again from that step
// on -- the tokens before it given, the step changed, then greedy -- with the
// original output beside the new one and how the step's original token fared.
#include <cstdint>
#include <string>
#include <vector>

#include "core/decode/translation.hpp"
#include "core/decode/translation_model.hpp"

namespace attnviz {

/// One step changed, and what followed.
struct WhatIf {
    Intervention intervention;  ///< as applied (its step set)
    std::vector<std::string> source;  ///< the source tokens as the model read them, <eos> included
    std::vector<std::string> original_output;  ///< the original output tokens, as given
    Hypothesis original;        ///< the original output, forced: its tokens, log-probabilities and attention
                                ///< (an output cut without <eos> gains one greedy token at its end)
    Hypothesis changed;         ///< the tokens before the step forced, the step changed, then greedy
    std::string original_token; ///< the original output's token at the step
    double original_log_prob = 0;  ///< its log-probability as the model gave it
    double changed_log_prob = 0;   ///< its log-probability at the changed step (same tokens before it)
    double delta_log_prob() const { return changed_log_prob - original_log_prob; }
    /// Whether the new output differs from the original.
    bool output_changed() const { return changed.tokens != original_output; }
};

/// Changes step `intervention.step` of decoding `source` (tokens as the model reads them,
/// no <eos>) into `output` (the original output tokens, e.g. a greedy translation's, with
/// its <eos> when it had one) and decodes on greedily (up to options.max_length tokens;
/// options' other fields as greedy search reads them). Throws ConfigError when the step
/// is not one of the output's (0 .. size-1) or the intervention does not fit the source
/// (core/decode/intervene.hpp).
WhatIf what_if(const TranslationModel& model, const std::vector<std::string>& source,
               const std::vector<std::string>& output, Intervention intervention, DecodeOptions options = {});
/// The same for a translation's best hypothesis (its source tokens, <eos> dropped).
WhatIf what_if(const TranslationModel& model, const Translation& translation, Intervention intervention,
               DecodeOptions options = {});

}  // namespace attnviz
