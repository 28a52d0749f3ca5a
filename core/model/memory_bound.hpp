#pragma once
// The memory bound: work that fits in parts runs in parts, work that cannot fit alone is
// refused before it starts. Every family states what its work costs by the shape of the
// work (EncoderDecoder::memory_cost(), core/model/memory_cost.hpp) and every caller asks
// this one bound before it allocates: training and validation cut a batch into chunks
// that fit (their gradients and sums add up to the whole batch's) and refuse a pair that
// cannot fit alone, naming its line; decoding (core/decode/search.hpp) cuts its sentences
// into chunks and refuses a sentence, or a request whose kept maps, that cannot fit;
// attribution (core/analysis/attribution.hpp) runs its rows in passes that fit; a model
// whose sizes (from its file) cannot decode one word within the bound is refused when it
// loads (check_network_fits).
#include <cstdint>
#include <string>
#include <vector>

#include "core/data/data.hpp"
#include "core/model/encoder_decoder.hpp"
#include "core/model/memory_cost.hpp"

namespace attnviz {

/// A training step's cost per target sentence: S and T its padded source and target widths.
ShapeCost training_cost(const EncoderDecoder& network);
/// Teacher-forced evaluation (validation, eval's loss) without gradients, per sentence.
ShapeCost evaluation_cost(const EncoderDecoder& network);

/// The batch in chunks each within `bound` by `cost`, or the batch itself when it fits. A chunk
/// is a run of rows in order of source length (longest first), cut to its own longest source and
/// target: the rows and tokens are the batch's, split. A row that cannot fit alone is a chunk of
/// its own (check_pairs_fit refuses such pairs before training). `source_steps` > 0: the network
/// reads every source that wide (ModelConfig::source_steps).
std::vector<Batch> split_batch(const Batch& batch, const ShapeCost& cost, int64_t source_steps,
                               int64_t bound = memory_bound());

/// Throws ConfigError naming the first pair that cannot fit `bound` alone in a training step (by
/// its line in `corpus` when known, else its position in `what`, e.g. "training pairs"), with its
/// lengths, the memory it needs and how to leave such pairs out. fixed_steps / source_steps as
/// in TrainConfig / ModelConfig.
void check_pairs_fit(const std::vector<SentencePair>& pairs, const ShapeCost& cost, int64_t fixed_steps,
                     int64_t source_steps, const std::string& corpus, const std::string& what,
                     int64_t bound = memory_bound());

/// The least decoding a network can do: one word (ModelConfig::source_steps wide when set)
/// for `steps` steps, greedy, every map kept. Its bytes (fixed tables included).
int64_t one_word_bytes(const EncoderDecoder& network, int64_t steps);
/// Throws ConfigError naming `what` (the model file) and the sizes that come from it (blocks,
/// heads, width, padded source steps, position table) when decoding one word for `steps` steps
/// would not fit `bound`: checked when a model loads, before any sentence.
void check_network_fits(const EncoderDecoder& network, const std::string& what, int64_t steps,
                        int64_t bound = memory_bound());

/// "2.3 GB": a byte count for messages.
std::string memory_text(int64_t bytes);

}  // namespace attnviz
