#pragma once
// Checkpoint format version 1 ("ATTNVIZ\x01" + JSON metadata + LibTorch
// archives), kept only to convert old files. LibTorch's archive loader trusts
// the storage sizes and string lengths written in the file (a crafted file
// reads past a buffer or reserves gigabytes), so no check after loading can
// make it safe: load_checkpoint refuses these files, and only an explicit
// upgrade, for a file the user trusts, reads them.
#include <string>

#include "core/persist/checkpoint.hpp"

namespace attnviz {

/// The checks of load_legacy_checkpoint that come before LibTorch reads anything
/// (structure, checksum, metadata, archive sizes): throws FileError for a file that
/// could not be upgraded anyway, so that nobody is asked to trust a damaged one.
void check_legacy_checkpoint(const std::string& path);

/// Reads a version-1 file for the upgrade. Before LibTorch sees anything: the file is a
/// regular file of bounded size, its checksum matches, the metadata (depth-bounded JSON)
/// holds a valid configuration, vocabularies and history, and the weights archive is
/// about as large as that configuration's weights. After loading: every tensor has
/// dtype float32 and its expected shape, the optimiser state too. Throws FileError.
Checkpoint load_legacy_checkpoint(const std::string& path);

/// Converts a version-1 checkpoint to the current format. Reads it with
/// LibTorch's archive loader after every check it can make first (checksum,
/// bounded metadata, configuration, the size of the weights for it) and checks
/// every tensor's dtype and shape after loading -- but that loader trusts sizes
/// stored in the file, so call it only for a file the user trusts. Throws FileError.
void upgrade_checkpoint(const std::string& from, const std::string& to);

}  // namespace attnviz
