#pragma once
// Attention sinks: source tokens that soak up attention without being what a
// step translates -- the source <eos> and punctuation (a common complaint:
// alignments that point at <eos>). Per step, the share of the attention row on
// them, flagged above a threshold; and the rows with them left out and the rest
// renormalised, for views, exports and alignments. Plain data, no LibTorch.
#include <string>
#include <vector>

#include "core/decode/translation.hpp"

namespace attnviz {

/// Whether a source token is a sink: "<eos>" or punctuation (core/text/unicode.hpp).
bool is_sink_token(const std::string& token);

/// Per row of weights[t][s] over `source`'s tokens, the share of the row on sink tokens.
std::vector<float> sink_share(const AttentionMatrix& weights, const std::vector<std::string>& source);

/// The share at or above which a step counts as sunk (its attention mostly on sinks).
constexpr float sink_flag_share = 0.5f;

/// Per row: sink_share >= threshold.
std::vector<bool> sink_flags(const AttentionMatrix& weights, const std::vector<std::string>& source,
                             float threshold = sink_flag_share);

/// The rows with the sink columns set to 0 and the rest renormalised to sum 1; a row with
/// no weight off the sinks stays as it is (softmax weights never do that).
AttentionMatrix without_sinks(const AttentionMatrix& weights, const std::vector<std::string>& source);

/// The note a translation with sinks left out carries (Translation::merged).
extern const char* const sinks_excluded_note;  ///< "sinks excluded (<eos>, punctuation), rows renormalised"

/// The translation with every hypothesis' cross maps' weights without_sinks (raw scores
/// as they were), its `merged` note saying so: what views, exports and alignments read.
Translation exclude_sinks(const Translation& t);

}  // namespace attnviz
