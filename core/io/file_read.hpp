#pragma once
// Reading untrusted files whole, safely: only regular files (a FIFO with no
// writer, /dev/zero or a directory is refused at once instead of blocking or
// eating memory), and the size is checked before a byte is read or reserved.
// Qt-free and LibTorch-free (part of attnviz_io, which fuzzers link).
#include <sys/types.h>

#include <cstdint>
#include <string>

namespace attnviz {

/// What a file of this st_mode is, for messages: "a directory", "a FIFO (named pipe)",
/// "a character device", "a block device", "a socket", else "not a regular file".
std::string describe_file_type(mode_t mode);

/// Opens path for reading (O_CLOEXEC) and checks that it is a regular file; returns the
/// descriptor (the caller closes it) and its size in *size. Throws FileError
/// "cannot open WHAT 'path': ..." or "WHAT 'path' is a FIFO (named pipe), not a regular
/// file; refused". Never blocks on a FIFO.
int open_regular_file(const std::string& path, const std::string& what, uint64_t* size);

/// Reads the whole file at path. Throws FileError "cannot open WHAT 'path': ..."
/// when it cannot be opened, "... is not a regular file" for a FIFO, device,
/// socket or directory, and "... is N bytes, more than the M this reads" when it
/// is larger than max_bytes.
std::string read_regular_file(const std::string& path, uint64_t max_bytes, const std::string& what);

/// The first n bytes of a regular file (all of it when shorter); same checks, same errors.
/// file_size (optional) receives the file's size.
std::string read_file_head(const std::string& path, size_t n, const std::string& what, uint64_t* file_size = nullptr);

}  // namespace attnviz
