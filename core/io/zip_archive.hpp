#pragma once
// The table of contents of a zip archive whose entries are stored (not
// compressed), as torch.save writes them (core/io/torch_bin.hpp): read from the
// central directory (ZIP64 where sizes or offsets need it), every entry checked
// against its local header and the archive's bounds, so that an entry's bytes can
// be used in place. Nothing is decompressed, so nothing can expand.
//
// Refused with a FileError "'NAME' ...": compressed or encrypted entries, several
// disks, entries that reach past the end or into the central directory, entries
// that overlap (the trick of zip bombs), duplicate or empty names, a local header
// that disagrees with the central directory, counts beyond the limits.
//
// Qt-free and LibTorch-free (part of attnviz_base).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace attnviz::zip {

/// One stored entry.
struct Entry {
    std::string name;         ///< as in the archive ("dir/file"), unique, never empty
    uint64_t data_offset = 0; ///< first byte of its data in the archive
    uint64_t size = 0;        ///< bytes of data (stored: compressed size == size)
    uint32_t crc32 = 0;       ///< as the central directory says (0 where the writer computed none)
};

struct Limits {
    size_t max_entries = 200000;  ///< entries in the central directory
};

/// The entries of the archive `bytes`, in central-directory order. `name` is the file's
/// name for messages. Throws FileError naming it and the problem.
std::vector<Entry> read_stored_entries(std::string_view bytes, const std::string& name, const Limits& limits = {});

/// True when `head` starts like a zip archive (a local file header).
bool looks_like_zip(std::string_view head);

/// The CRC-32 (zip's, IEEE 802.3) of `data`.
uint32_t crc32(std::string_view data);

}  // namespace attnviz::zip
