#pragma once
// Checkpoint format version 1 ("ATTNVIZ\x01" + JSON metadata + LibTorch
// archives), kept only to convert old files. LibTorch's archive loader trusts
// the storage sizes and string lengths written in the file (a crafted file
// reads past a buffer or reserves gigabytes), so no check after loading can
// make it safe: load_checkpoint refuses these files, and only an explicit
// upgrade, for a file the user trusts, reads them.
#include <string>

#include "core/checkpoint.hpp"

namespace attnviz {

/// True when `head` (a file's first bytes) starts with the version-1 magic.
bool is_legacy_checkpoint(const std::string& head);

/// The message for a version-1 file: what it is, why it is not opened, the upgrade command.
std::string legacy_checkpoint_message(const std::string& path);

/// Reads a version-1 file for the upgrade. Before LibTorch sees anything: the file is a
/// regular file of bounded size, its checksum matches, the metadata (depth-bounded JSON)
/// holds a valid configuration, vocabularies and history, and the weights archive is
/// about as large as that configuration's weights. After loading: every tensor has
/// dtype float32 and its expected shape, the optimiser state too. Throws FileError.
Checkpoint load_legacy_checkpoint(const std::string& path);

}  // namespace attnviz
