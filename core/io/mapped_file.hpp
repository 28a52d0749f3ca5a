#pragma once
// A whole regular file seen through mmap instead of read into memory: a 300 MB
// model opens without a 300 MB copy, and only the pages that are used become
// resident (and, being file-backed, can be dropped again by the kernel).
//
// The mapping is private and writable (MAP_PRIVATE, PROT_READ | PROT_WRITE):
// tensors built on its bytes may be changed later (training a loaded model),
// which copies the touched pages for this process (copy on write); the file
// itself never changes. Shared ownership (std::shared_ptr) lets every tensor that
// views the bytes keep the mapping alive.
//
// One caveat of every mapped file: if another program truncates the file while it
// is mapped, touching a page past the new end kills the process with SIGBUS.
// attnviz's own writer (core/io/atomic_file.hpp) replaces files by renaming a new
// one over them, which leaves a mapping of the old file intact.
//
// Qt-free and LibTorch-free (part of attnviz_base).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace attnviz {

class MappedFile {
public:
    /// Maps the whole file at `path`. Same checks and messages as read_regular_file
    /// (core/io/file_read.hpp): only regular files ("WHAT 'path' is a directory, not a
    /// regular file; refused"), and the size is checked against max_bytes before
    /// anything is mapped ("WHAT 'path' is N bytes, more than the M this reads;
    /// refused"). An empty file is fine (nothing is mapped). On a file system that cannot
    /// map files the file is read into memory instead (same interface). Throws FileError.
    static std::shared_ptr<const MappedFile> open(const std::string& path, uint64_t max_bytes,
                                                  const std::string& what = "file");

    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    /// The file's bytes. Writable: writes go to this process's private copy of the
    /// page (and are seen by everything that views the same mapping), never to the file.
    /// Never null, also for an empty file.
    char* data() const { return m_data; }
    size_t size() const { return m_size; }
    bool mapped() const { return m_mapped; }  ///< false for an empty file or one read into memory
    std::string_view view() const { return {m_data, m_size}; }
    const std::string& path() const { return m_path; }

    /// Drops this process's copies of the mapped pages that lie wholly inside [p, p + n) (madvise
    /// MADV_DONTNEED): they stop counting as its resident memory, and a later read maps them from
    /// the file again. A page written since it was mapped loses the write (it reads as the file
    /// again): call it only on bytes that were never written, once nothing reads them any more
    /// (a weight converted as it was read). Nothing happens for bytes outside every live mapping
    /// (a file read into memory, a copy): the call is safe on any pointer.
    static void release_pages(const void* p, size_t n);
    /// release_pages for every page [p, p + n) touches (rounded outwards, not inwards), but only pages
    /// lying wholly inside [owner, owner + owner_n): bytes of one never-written tensor (owner) whose
    /// pages it shares with no other may go whole, however small a part of them was read.
    static void release_pages_within(const void* p, size_t n, const void* owner, size_t owner_n);
    /// Whether [p, p + n) lies inside one live mapping (a view of a mapped file, not a copy).
    static bool is_mapped(const void* p, size_t n);

private:
    MappedFile() = default;
    char* m_data = nullptr;
    size_t m_size = 0;
    bool m_mapped = false;
    std::unique_ptr<char[]> m_heap;  // the bytes, where the file system could not map the file
    std::string m_path;
};

using MappedFilePtr = std::shared_ptr<const MappedFile>;

}  // namespace attnviz
