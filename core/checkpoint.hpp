#pragma once
// Checkpoints: one file with a TranslationModel (configuration, vocabularies,
// weights, training settings and history) and the optimiser's state. Written
// atomically; loading checks format, version and a checksum, so a truncated,
// corrupt or foreign file is a clear error rather than a crash or silently
// wrong weights.
#include <string>

#include "core/translation_model.hpp"

namespace attnviz {

/// Everything a checkpoint holds: the model and what continuing to train it needs.
struct Checkpoint {
    TranslationModelPtr model;       ///< on the CPU, evaluation mode
    std::string optimizer_state;     ///< serialised optimiser state (empty when not saved)
};

/// Current file format version.
constexpr int checkpoint_version = 1;

/// Writes a checkpoint atomically (temporary file, fsync, rename): an
/// interrupted save never destroys an existing file at path. Throws FileError.
void save_checkpoint(const Checkpoint& c, const std::string& path);

/// Reads a checkpoint; throws attnviz::FileError naming the file and the problem.
Checkpoint load_checkpoint(const std::string& path);

}  // namespace attnviz
