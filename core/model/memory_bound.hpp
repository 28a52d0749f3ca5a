#pragma once
// A bound on the memory of one step. Attention costs memory in proportion to
// target tokens × source positions: a pair the corpus reader accepts (thousands
// of words, ten thousand characters) made one training step ask for tens of GB
// at once, and the failed allocation aborted the process with nothing saved.
// So training and teacher-forced evaluation cut a batch into chunks that fit
// the bound (their gradients and sums add up to the whole batch's), decoding
// cuts its sentences into chunks the same way, and a pair or a sentence that
// cannot fit alone is refused before any work, with a message naming it.
#include <cstdint>
#include <string>
#include <vector>

#include "core/data/data.hpp"
#include "core/model/encoder_decoder.hpp"

namespace attnviz {

/// The most memory one step's attention and output layer may take (2 GiB): a chunk of a
/// batch, or of the sentences decoded together, stays below it.
constexpr int64_t step_memory_bound = int64_t{2} << 30;

/// What a step of a network costs, by the shape of what it runs on.
struct StepCost {
    int64_t per_cell = 0;   ///< bytes per (row step, source position): attention
    int64_t per_step = 0;   ///< bytes per row step: the output layer over the target vocabulary
    /// rows × steps × (width × per_cell + per_step), saturating instead of overflowing.
    int64_t bytes(int64_t rows, int64_t steps, int64_t width) const;
};

/// A training step's (or a teacher-forced evaluation's) cost: rows are target sentences and
/// steps their tokens.
StepCost training_cost(const EncoderDecoder& network);
/// A decoding step's cost over `steps` steps: rows are hypotheses (sentences × beam), each
/// keeping every step's attention row (weights and scores) for the views and exports.
StepCost decoding_cost(const EncoderDecoder& network, int64_t steps);

/// The batch in chunks each within `bound` by `cost`, or the batch itself when it fits. A chunk
/// is a run of rows in order of source length (longest first), cut to its own longest source and
/// target: the rows and tokens are the batch's, split. A row that cannot fit alone is a chunk of
/// its own (check_pairs_fit refuses such pairs before training). `source_steps` > 0: the network
/// reads every source that wide (ModelConfig::source_steps).
std::vector<Batch> split_batch(const Batch& batch, const StepCost& cost, int64_t source_steps,
                               int64_t bound = step_memory_bound);

/// Throws ConfigError naming the first pair that cannot fit `bound` alone in a training step (by
/// its line in `corpus` when known, else its position in `what`, e.g. "training pairs"), with its
/// lengths, the memory it needs and how to leave such pairs out. fixed_steps / source_steps as
/// in TrainConfig / ModelConfig.
void check_pairs_fit(const std::vector<SentencePair>& pairs, const StepCost& cost, int64_t fixed_steps,
                     int64_t source_steps, const std::string& corpus, const std::string& what,
                     int64_t bound = step_memory_bound);

/// "2.3 GB": a byte count for messages.
std::string memory_text(int64_t bytes);

}  // namespace attnviz
