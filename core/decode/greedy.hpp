#pragma once
// Greedy search, batched over sentences, recording each step's attention; with
// given tokens it is forced decoding (TranslationModel::force).
#include <cstdint>
#include <string>
#include <vector>

#include "core/decode/search.hpp"

namespace attnviz {

/// Greedy decoding of token sequences already split (no normalisation). With
/// `forced`, row r's first forced[r].size() tokens are given instead of chosen
/// (their log-probabilities, ranks and attention are recorded as for chosen
/// ones); a row whose given tokens end with <eos> ends there (a reference),
/// otherwise it goes on greedily (a prefix). max_length stretches to fit them.
std::vector<Translation> greedy_decode(const SearchModel& model,
                                       const std::vector<std::vector<std::string>>& sources,
                                       const DecodeOptions& options,
                                       const std::vector<std::vector<int64_t>>* forced = nullptr);
}  // namespace attnviz
