#pragma once
// Model files, whatever their format: what the CLI, the GUI and the session open
// and save. A file is told apart by its content (core/persist/checkpoint.hpp's
// detect_model_file): an attnviz checkpoint, or a model in d2l's safetensors
// layout (core/persist/d2l_interop.hpp).
#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "core/decode/translation_model.hpp"
#include "core/model/inference_precision.hpp"
#include "core/persist/checkpoint.hpp"

namespace attnviz {

/// Any model file attnviz reads, judged by its content: a checkpoint, or a d2l file
/// (as a checkpoint without optimiser state). Throws FileError (a foreign file: naming
/// the formats attnviz reads).
Checkpoint open_model_file(const std::string& path);

/// The model of open_model_file(path), without the optimiser's state.
TranslationModelPtr load_model(const std::string& path);
/// load_model(path), a model folder (or a hub id's snapshot) read with its weights converted to
/// `folder_precision` as they are read (load_model_folder: the float32 model is never resident as a
/// whole). Other model files (checkpoints, d2l files) load in float32 as with load_model(path):
/// convert them with set_inference_precision (core/model/inference_precision.hpp).
TranslationModelPtr load_model(const std::string& path, InferencePrecision folder_precision);

/// What opening `path` reads, so that no output of the same command lands on it: a file's own
/// path; for a model folder (or a hub id's snapshot in the local cache) every file in it, its
/// links followed (a hub snapshot's files are links to blobs), and the folder itself.
struct ModelSources {
    /// Folders (resolved, no trailing '/') whose contents opening the model reads or depends on:
    /// a model folder, or a hub id's cache entry (models--ORG--NAME: its refs choose the snapshot).
    std::vector<std::string> folders;
    /// (device, inode) of every file read, links followed.
    std::vector<std::pair<dev_t, ino_t>> files;
    /// Whether `resolved` (a path with its directories resolved) is one of the files or lies in a folder.
    bool holds(const std::string& resolved) const;
};
/// Never throws: a path that cannot be opened gives what could be found (the command's own
/// open says why later).
ModelSources model_sources(const std::string& path);

/// `path` with its longest existing leading directories resolved (links, ".", ".."), the rest as
/// given: where a file not yet written would land.
std::string resolve_existing_prefix(const std::string& path);

/// Writes the model as a checkpoint without optimiser state, atomically; throws FileError.
void save_model(const TranslationModel& model, const std::string& path);

}  // namespace attnviz
