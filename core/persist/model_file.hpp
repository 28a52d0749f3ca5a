#pragma once
// Model files, whatever their format: what the CLI, the GUI and the session open
// and save. A file is told apart by its content (core/persist/checkpoint.hpp's
// detect_model_file): an attnviz checkpoint, or a model in d2l's safetensors
// layout (core/persist/d2l_interop.hpp).
#include <string>

#include "core/decode/translation_model.hpp"
#include "core/persist/checkpoint.hpp"

namespace attnviz {

/// Any model file attnviz reads, judged by its content: a checkpoint, or a d2l file
/// (as a checkpoint without optimiser state). Throws FileError (a foreign file: naming
/// the formats attnviz reads).
Checkpoint open_model_file(const std::string& path);

/// The model of open_model_file(path), without the optimiser's state.
TranslationModelPtr load_model(const std::string& path);

/// Writes the model as a checkpoint without optimiser state, atomically; throws FileError.
void save_model(const TranslationModel& model, const std::string& path);

}  // namespace attnviz
