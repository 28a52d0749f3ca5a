#pragma once
// Checkpoints: one file with a TranslationModel (configuration, vocabularies,
// weights, training settings and history) and the optimiser's state.
//
// Format version 2 is a safetensors file (core/io/safetensors.hpp) read by
// attnviz's own parser: "__metadata__" holds "format": "attnviz-checkpoint",
// "version": "2", "attnviz" (a JSON object as a string: model and training
// configuration, level, history, corpus, optimiser kind and step counts; other
// keys may be added), "src_vocab" and "tgt_vocab" (JSON arrays of tokens in id
// order), "config" (the model's shape under d2l-style keys: embed, hidden,
// layers, ...) and "checksum" (FNV-1a 64 of the tensors' names and data in name
// order and of the other metadata: damage is caught, a rewrite by another tool
// that keeps the contents keeps it valid).
// The weights are float32 tensors under d2l's PyTorch names
// (core/persist/parameter_names.hpp); the optimiser state is tensors
// "optimizer.<weight name>.<slot>". Loading checks the configuration, derives
// every expected tensor, its dtype and shape from it, and compares them with
// the file before a model is built, so a file that does not match is refused
// naming the tensor, in milliseconds, without reserving memory for it.
//
// Version 1 files (magic "ATTNVIZ\x01", weights as a LibTorch archive) are not
// opened: LibTorch's archive loader trusts sizes stored in the file. They are
// converted once, by a user who trusts them, with upgrade_checkpoint
// (`attnviz-cli upgrade-checkpoint OLD NEW --trust`).
#include <string>

#include "core/optim/optimizer_state.hpp"
#include "core/io/safetensors.hpp"
#include "core/decode/translation_model.hpp"

namespace attnviz {

/// Everything a checkpoint holds: the model and what continuing to train it needs.
struct Checkpoint {
    TranslationModelPtr model;       ///< on the CPU, evaluation mode
    OptimizerState optimizer_state;  ///< the optimiser's per-parameter state (empty when not saved)
};

/// Current file format version.
constexpr int checkpoint_version = 2;

/// Writes a checkpoint atomically (temporary file, fsync, rename): an
/// interrupted save never destroys an existing file at path. Throws FileError, also
/// before anything is written when a weight or the optimiser state holds NaN or an
/// infinity (a diverged run: such a file would replace a good one at path).
void save_checkpoint(const Checkpoint& c, const std::string& path);

/// Reads a checkpoint of the current format; throws attnviz::FileError naming the
/// file and the problem (for a version-1 file: how to upgrade it; for a foreign
/// file: the formats attnviz reads).
Checkpoint load_checkpoint(const std::string& path);

/// load_checkpoint on bytes already in memory (`name` for messages): the same checks
/// and errors. The checkpoint fuzz harness (tests/fuzz) feeds it.
Checkpoint parse_checkpoint(std::string bytes, const std::string& name);

/// A checkpoint file's bytes from its tensors and metadata, with the checksum added
/// (save_checkpoint's last step; tests craft files with it).
std::string serialize_checkpoint(const std::vector<safetensors::TensorToWrite>& tensors,
                                 std::map<std::string, std::string> metadata);

/// What a file is, judged from its first bytes.
enum class ModelFileKind {
    checkpoint,         ///< a safetensors file whose metadata says attnviz-checkpoint
    legacy_checkpoint,  ///< version 1 ("ATTNVIZ\x01"): needs upgrade_checkpoint
    safetensors,        ///< another safetensors file (e.g. a d2l model)
    unknown             ///< anything else (a .pt pickle or zip, text, random bytes, empty)
};
/// Throws FileError when the file cannot be opened or is not a regular file.
ModelFileKind detect_model_file(const std::string& path);

/// The formats attnviz reads, for messages about foreign files.
std::string readable_model_formats();

/// The first bytes of a version-1 checkpoint: such files are recognised, and
/// converted only on request (core/persist/checkpoint_legacy.hpp).
constexpr char legacy_checkpoint_magic[8] = {'A', 'T', 'T', 'N', 'V', 'I', 'Z', '\x01'};

/// True when `head` (a file's first bytes) starts with the version-1 magic.
bool is_legacy_checkpoint(const std::string& head);

/// The message for a version-1 file: what it is, why it is not opened, the upgrade command.
std::string legacy_checkpoint_message(const std::string& path);

}  // namespace attnviz
