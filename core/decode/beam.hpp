#pragma once
// Beam search, batched over sentences (how it scores and prunes: core/decode/beam.cpp);
// it can record the whole search as a BeamTree (core/decode/beam_tree.hpp).
#include <cstdint>
#include <string>
#include <vector>

#include "core/decode/search.hpp"

namespace attnviz {

/// Beam search over token sequences already split. With
/// `forced` (prefix decoding), row r's first forced[r].size() tokens are given,
/// then the search goes on from that one prefix; max_length stretches to hold
/// the prefix and one more token, as for greedy_decode.
std::vector<Translation> beam_decode(const SearchModel& model,
                                     const std::vector<std::vector<std::string>>& sources,
                                     const DecodeOptions& options,
                                     const std::vector<std::vector<int64_t>>* forced = nullptr);

}  // namespace attnviz
