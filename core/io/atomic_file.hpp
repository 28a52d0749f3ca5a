#pragma once
// Atomic file writes: the one way attnviz writes a file (checkpoints, exports,
// vocabularies), so that a crash, a kill, a full disk or a planted symlink never
// leaves a half-written file in place of a good one.
//
//   1. the contents go to a temporary file next to the target, named
//      TARGET.tmp-<pid>-<12 random characters> and created with
//      O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC (a name planted in advance, or a
//      symlink, is never written through: another random name is tried);
//   2. the file is fsync'ed and closed, renamed over the target, and the
//      directory is fsync'ed so that the rename itself survives a power cut;
//   3. on any failure the temporary file is removed and FileError says why.
//
// Stale temporaries: a process killed by SIGKILL (or a power cut) in the middle
// of a write leaves its temporary file behind. They are never read (loaders open
// only the target) and the next write to the same target removes the ones whose
// process no longer runs (the pid is in the name; temporaries of the old form
// TARGET.tmp.<pid> are recognised too). A process that dies of SIGINT/SIGTERM in
// attnviz-cli removes its own first (remove_temporaries_in_progress).
//
// Torch-free and Qt-free.
#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace attnviz {

/// Writes contents to path atomically (see above). Throws FileError naming the
/// path and the reason ("No space left on device", "File too large", ...); the
/// previous file at path, if any, is then unchanged and no temporary file is left.
/// path must be absent or a regular file (or a symbolic link to one): a device
/// (/dev/null, /dev/full), a FIFO, a socket or a directory there is refused before
/// anything is written, as the rename would replace it with a regular file.
void write_file_atomic(const std::string& path, const std::string& contents);

/// Appends `size` bytes to the file write_file_atomic_streamed is writing (FileError on failure).
using AtomicWrite = std::function<void(const char* data, size_t size)>;

/// write_file_atomic for contents too large to hold as one string (an attention file of
/// summarization lengths): `produce` hands the contents over piece by piece through the
/// AtomicWrite it is given, in order. Same guarantees: when produce or a write throws, the
/// temporary file is removed, the previous file at path is unchanged, and the exception goes on.
void write_file_atomic_streamed(const std::string& path, const std::function<void(const AtomicWrite&)>& produce);

/// Writes a set of files as the folder `dir`, all or nothing (a model folder: config.json beside
/// the weights it describes must never come from another write than they do):
///   1. the files go to a new folder beside dir, DIR.tmp-<pid>-<random>, each fsync'ed; what dir
///      holds besides them and `replaces(name)` does not claim (a README, a .git folder) is
///      hard-linked in (folders: moved in after step 2);
///   2. the new folder takes dir's place in one rename (renameat2's RENAME_EXCHANGE when dir
///      exists; where the file system lacks it, dir is first renamed aside), and the old
///      folder is removed.
/// Any failure before step 2 ("No space left on device", "File too large") leaves dir exactly as
/// it was and nothing beside it; FileError names dir, the file and the reason. dir absent: it is
/// created (its parent must exist); dir a file: FileError. A link to a folder: the folder it
/// names is replaced. `replaces` may be empty: then only the names in `files` are replaced.
void write_folder_atomic(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& files,
                         const std::function<bool(const std::string& name)>& replaces = {});

/// Throws FileError when write_file_atomic(path, ...) could not succeed as far as
/// can be told without writing it: path is a directory, a device, a FIFO or a socket,
/// its directory is missing,
/// or a file cannot be created there (checked by creating and removing a
/// temporary file, so read-only file systems and permissions are both seen).
/// For output flags, checked before hours of work rather than after.
void check_writable_path(const std::string& path);

/// Whether `name` (a file name without directory) is a temporary file of an atomic
/// write to target_name: "T.tmp-<pid>-<random>" or the old "T.tmp.<pid>".
/// Sets *pid to the writer's process id when given.
bool is_temporary_name(const std::string& name, const std::string& target_name, long* pid = nullptr);

/// Removes the stale temporary files next to path: those of writes to path whose
/// process no longer runs (and this process's own that no write is using). Returns
/// how many were removed; errors are ignored (a stale file is harmless).
size_t remove_stale_temporaries(const std::string& path);

/// Removes the temporary files of the writes this process has in progress.
/// Async-signal-safe: for a signal handler that is about to end the process.
void remove_temporaries_in_progress() noexcept;

}  // namespace attnviz
