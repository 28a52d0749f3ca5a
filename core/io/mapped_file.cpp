// The descriptor is opened and checked by open_regular_file (core/io/file_read.cpp)
// and closed once the mapping exists: a mapping keeps its file alive by itself.
// Where the file system cannot map files, the file is read into memory instead.
#include "core/io/mapped_file.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/io/file_read.hpp"

namespace attnviz {

namespace {
// What data() points at for an empty file: never null, never written (size 0).
char k_empty[1] = {0};

/// The live mappings' byte ranges, for release_pages: a range is taken out before it is unmapped.
struct LiveMappings {
    std::mutex mutex;
    std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
};

LiveMappings& live_mappings() {
    static LiveMappings* m = new LiveMappings();  // never destroyed: mappings may outlive static destruction
    return *m;
}
}  // namespace

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path, uint64_t max_bytes,
                                                   const std::string& what) {
    uint64_t size = 0;
    const int fd = open_regular_file(path, what, &size);
    if (size > max_bytes || size > std::numeric_limits<size_t>::max()) {
        ::close(fd);
        throw FileError(what + " " + quote(path, quote_path_max) + " is " + std::to_string(size) + " bytes, more than the " +
                        std::to_string(max_bytes) + " this reads; refused");
    }
    std::shared_ptr<MappedFile> f(new MappedFile());
    f->m_path = path;
    f->m_size = static_cast<size_t>(size);
    f->m_data = k_empty;
    if (size == 0) {
        ::close(fd);
        return f;
    }
    void* p = ::mmap(nullptr, f->m_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) {
        ::close(fd);
        f->m_data = static_cast<char*>(p);
        f->m_mapped = true;
        auto& live = live_mappings();
        std::lock_guard<std::mutex> lock(live.mutex);
        live.ranges.emplace_back(reinterpret_cast<uintptr_t>(p), reinterpret_cast<uintptr_t>(p) + f->m_size);
        return f;
    }
    // A file system that cannot map files (some FUSE ones): read it instead.
    const int map_error = errno;
    f->m_heap.reset(new (std::nothrow) char[f->m_size]);
    size_t got = 0;
    while (f->m_heap && got < f->m_size) {
        const ssize_t r = ::pread(fd, f->m_heap.get() + got, f->m_size - got, static_cast<off_t>(got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += static_cast<size_t>(r);
    }
    ::close(fd);
    if (!f->m_heap || got != f->m_size)
        throw FileError("cannot map " + what + " " + quote(path, quote_path_max) + " (" + std::to_string(size) +
                        " bytes) into memory (" + std::strerror(map_error) + "), nor read it");
    f->m_data = f->m_heap.get();
    return f;
}

MappedFile::~MappedFile() {
    if (!m_mapped) return;
    auto& live = live_mappings();
    std::lock_guard<std::mutex> lock(live.mutex);
    for (auto it = live.ranges.begin(); it != live.ranges.end(); ++it)
        if (it->first == reinterpret_cast<uintptr_t>(m_data)) {
            live.ranges.erase(it);
            break;
        }
    ::munmap(m_data, m_size);
}

namespace {
uintptr_t page_size() {
    static const uintptr_t page = [] {
        const long s = ::sysconf(_SC_PAGESIZE);
        return static_cast<uintptr_t>(s > 0 ? s : 4096);
    }();
    return page;
}
}  // namespace

void MappedFile::release_pages_within(const void* p, size_t n, const void* owner, size_t owner_n) {
    const uintptr_t begin = reinterpret_cast<uintptr_t>(p), lo = reinterpret_cast<uintptr_t>(owner);
    if (p == nullptr || owner == nullptr || n == 0 || begin > std::numeric_limits<uintptr_t>::max() - n ||
        lo > std::numeric_limits<uintptr_t>::max() - owner_n)
        return;
    const uintptr_t page = page_size();
    const uintptr_t first = std::max(begin / page * page, lo), last = std::min((begin + n + page - 1) / page * page, lo + owner_n);
    if (last > first) release_pages(reinterpret_cast<const void*>(first), last - first);  // rounds inwards to owner's pages
}

void MappedFile::release_pages(const void* p, size_t n) {
    if (p == nullptr || n == 0) return;
    const uintptr_t begin = reinterpret_cast<uintptr_t>(p);
    if (begin > std::numeric_limits<uintptr_t>::max() - n) return;
    const uintptr_t end = begin + n;
    const uintptr_t page = page_size();
    const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
    if (last <= first) return;
    auto& live = live_mappings();
    // Under the lock: the mapping cannot be unmapped (and its addresses reused) meanwhile.
    std::lock_guard<std::mutex> lock(live.mutex);
    for (const auto& [b, e] : live.ranges)
        if (begin >= b && end <= e) {
            ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
            return;
        }
}

bool MappedFile::is_mapped(const void* p, size_t n) {
    if (p == nullptr || n == 0) return false;
    const uintptr_t begin = reinterpret_cast<uintptr_t>(p);
    if (begin > std::numeric_limits<uintptr_t>::max() - n) return false;
    auto& live = live_mappings();
    std::lock_guard<std::mutex> lock(live.mutex);
    for (const auto& [b, e] : live.ranges)
        if (begin >= b && begin + n <= e) return true;
    return false;
}

}  // namespace attnviz
