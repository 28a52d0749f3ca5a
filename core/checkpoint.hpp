#pragma once
// Checkpoints: one file with the model config, both vocabularies, weights,
// optimiser state and training history. Written atomically; loading checks
// format, version and a checksum, so a truncated, corrupt or foreign file is a
// clear error rather than a crash or silently wrong weights.
#include <memory>
#include <string>

#include "core/train.hpp"

namespace attnviz {

/// Everything a checkpoint holds.
struct Checkpoint {
    ModelConfig model_config;
    TrainConfig train_config;
    TokenLevel level = TokenLevel::word;
    Vocab src_vocab, tgt_vocab;
    TrainHistory history;
    std::string corpus_name;           ///< what it was trained on, for display
    Seq2Seq model{nullptr};            ///< on CPU, eval mode
    std::string optimizer_state;       ///< serialised optimiser state (empty when not saved)
};

/// Current file format version.
constexpr int checkpoint_version = 1;

/// Writes a trainer's state to path atomically (temporary file, fsync, rename):
/// an interrupted save never destroys an existing file at path.
void save_checkpoint(Trainer& trainer, const std::string& path);

/// Writes a Checkpoint (model weights taken from c.model) atomically.
void save_checkpoint(const Checkpoint& c, const std::string& path);

/// Reads a checkpoint; throws attnviz::FileError naming the file and the problem.
Checkpoint load_checkpoint(const std::string& path);

/// A Trainer that continues from a checkpoint on new data (same vocabularies)
/// or on the data it is given; optimiser state and history are restored.
std::unique_ptr<Trainer> resume_trainer(const Checkpoint& c, TrainingData data, TrainConfig config);

}  // namespace attnviz
