// Atomic file writes, unpredictable temporary names, stale temporaries.
#include "core/io/atomic_file.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <cstdio>
#include <memory>
#include <set>

#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/io/file_read.hpp"

namespace attnviz {

namespace {

// --- writes in progress, for signal handlers -----------------------------------
// A fixed table (no allocation, lock-free atomics) that a signal handler can walk.
// A write that finds no free slot goes on unregistered: its temporary file is then
// only cleaned by a later write's stale-file sweep.
struct Slot {
    std::atomic<int> state{0};  // 0 free, 1 being filled, 2 holds a path
    char path[PATH_MAX];
};
static_assert(std::atomic<int>::is_always_lock_free, "signal handlers need lock-free atomics");
Slot g_slots[16];

class InProgress {
public:
    explicit InProgress(const std::string& tmp) {
        if (tmp.size() >= sizeof(Slot::path)) return;
        for (auto& s : g_slots) {
            int expected = 0;
            if (!s.state.compare_exchange_strong(expected, 1)) continue;
            std::memcpy(s.path, tmp.c_str(), tmp.size() + 1);
            s.state.store(2);
            m_slot = &s;
            return;
        }
    }
    ~InProgress() {
        if (m_slot) m_slot->state.store(0);
    }
    InProgress(const InProgress&) = delete;
    InProgress& operator=(const InProgress&) = delete;

private:
    Slot* m_slot = nullptr;
};

bool in_progress(const std::string& tmp) {
    for (auto& s : g_slots)
        if (s.state.load() == 2 && tmp == s.path) return true;
    return false;
}

// --- names -------------------------------------------------------------------------
constexpr char k_alphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
constexpr size_t k_random_chars = 12;

std::string random_suffix() {
    unsigned char bytes[k_random_chars];
    ssize_t got = ::getrandom(bytes, sizeof bytes, GRND_NONBLOCK);
    if (got != static_cast<ssize_t>(sizeof bytes)) {
        // No entropy yet (early boot): the name need not be secret, O_EXCL keeps it safe.
        static std::atomic<uint64_t> counter{0};
        uint64_t x = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                     (counter.fetch_add(1) * 0x9E3779B97F4A7C15ull);
        for (auto& b : bytes) b = static_cast<unsigned char>(x >>= 5);
    }
    std::string s;
    for (unsigned char b : bytes) s += k_alphabet[b % 32];
    return s;
}

struct Split {
    std::string dir, base;
};

Split split_path(const std::string& path) {
    const auto slash = path.find_last_of('/');
    if (slash == std::string::npos) return {".", path};
    return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

std::string join(const std::string& dir, const std::string& name) {
    return dir == "/" ? "/" + name : dir + "/" + name;
}

std::string temporary_name(const std::string& path) {
    return path + ".tmp-" + std::to_string(::getpid()) + "-" + random_suffix();
}

/// Creates a fresh temporary file for path; returns its fd and sets tmp, or -1 with errno set.
int create_temporary(const std::string& path, std::string& tmp, std::unique_ptr<InProgress>& registered) {
    for (int attempt = 0; attempt < 32; ++attempt) {
        tmp = temporary_name(path);
        registered = std::make_unique<InProgress>(tmp);
        const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0) return fd;
        const int err = errno;
        registered.reset();
        if (err != EEXIST && err != ELOOP) {
            errno = err;
            return -1;
        }
    }
    errno = EEXIST;
    return -1;
}

bool all_digits(const std::string& s, size_t from, size_t to) {
    if (from >= to) return false;
    for (size_t i = from; i < to; ++i)
        if (s[i] < '0' || s[i] > '9') return false;
    return true;
}

/// Refuses a path that names something other than a regular file: a rename would put a
/// regular file in place of a device (/dev/null, /dev/full, run as root), a FIFO or a
/// socket. A symbolic link is followed: its target must be a regular file or absent.
void refuse_non_regular_target(const std::string& path) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return;
    if (S_ISDIR(st.st_mode)) throw FileError("cannot write " + quote(path, quote_path_max) + ": it is a directory (give a file name)");
    throw FileError("cannot write " + quote(path, quote_path_max) + ": it is " + describe_file_type(st.st_mode) +
                    ", not a regular file (give the name of a new or a regular file)");
}

}  // namespace

bool is_temporary_name(const std::string& name, const std::string& target_name, long* pid) {
    if (target_name.empty() || name.size() <= target_name.size() + 5 || name.compare(0, target_name.size(), target_name) != 0)
        return false;
    const size_t at = target_name.size();
    size_t pid_end = 0;
    if (name.compare(at, 5, ".tmp-") == 0) {  // T.tmp-<pid>-<random>
        pid_end = name.find('-', at + 5);
        if (pid_end == std::string::npos || !all_digits(name, at + 5, pid_end) ||
            name.size() - pid_end - 1 != k_random_chars)
            return false;
        for (size_t i = pid_end + 1; i < name.size(); ++i)
            if (!std::strchr(k_alphabet, name[i]) || name[i] == '\0') return false;
    } else if (name.compare(at, 5, ".tmp.") == 0) {  // the old form, T.tmp.<pid>
        pid_end = name.size();
        if (!all_digits(name, at + 5, pid_end)) return false;
    } else {
        return false;
    }
    if (pid_end - (at + 5) > 9) return false;  // no pid has more digits
    if (pid) *pid = std::stol(name.substr(at + 5, pid_end - (at + 5)));
    return true;
}

size_t remove_stale_temporaries(const std::string& path) {
    const Split p = split_path(path);
    DIR* d = ::opendir(p.dir.c_str());
    if (!d) return 0;
    size_t removed = 0;
    const long self = static_cast<long>(::getpid());
    while (const dirent* e = ::readdir(d)) {
        long pid = 0;
        const std::string name = e->d_name;
        if (!is_temporary_name(name, p.base, &pid)) continue;
        const std::string full = join(p.dir, name);
        struct stat st;
        if (::lstat(full.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) continue;  // only files we could have made
        bool stale;
        if (pid == self) stale = !in_progress(full);
        else stale = pid <= 0 || pid > INT_MAX || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH);
        if (stale && ::unlink(full.c_str()) == 0) ++removed;
    }
    ::closedir(d);
    return removed;
}

namespace {

/// Removes a folder and everything in it, links not followed; errors ignored.
void remove_tree(const std::string& path) {
    ::nftw(
        path.c_str(),
        [](const char* p, const struct stat*, int type, FTW*) {
            if (type == FTW_DP || type == FTW_D) ::rmdir(p);
            else ::unlink(p);
            return 0;
        },
        16, FTW_DEPTH | FTW_PHYS);
}

void sync_directory(const std::string& dir) {
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return;
    ::fsync(dfd);
    ::close(dfd);
}

/// Writes one new file (never an existing one, never through a link) and syncs it.
void write_new_file(const std::string& path, const std::string& contents, const std::string& what) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) throw FileError(what + ": " + std::strerror(errno));
    size_t done = 0;
    while (done < contents.size()) {
        const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            const int err = errno;
            ::close(fd);
            throw FileError(what + ": " + std::strerror(err));
        }
        done += static_cast<size_t>(n);
    }
    if (::fsync(fd) != 0) {
        const int err = errno;
        ::close(fd);
        throw FileError(what + ": " + std::strerror(err));
    }
    if (::close(fd) != 0) throw FileError(what + ": " + std::strerror(errno));
}

/// Whether a folder holds a folder (a kept one that a write killed half-way did not move back).
bool has_subfolder(const std::string& dir) {
    DIR* d = ::opendir(dir.c_str());
    if (!d) return true;
    bool found = false;
    while (const dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        struct stat st;
        if (name != "." && name != ".." && ::lstat(join(dir, name).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) found = true;
    }
    ::closedir(d);
    return found;
}

/// Removes the staging folders of folder writes to `dir` whose process no longer runs. Without
/// folders inside they hold only new files and hard links to files that are also in `dir`:
/// nothing is lost with them (one with a folder inside is left for the user to look at).
void remove_stale_staging(const std::string& dir) {
    const Split p = split_path(dir);
    DIR* d = ::opendir(p.dir.c_str());
    if (!d) return;
    std::vector<std::string> stale;
    while (const dirent* e = ::readdir(d)) {
        long pid = 0;
        if (!is_temporary_name(e->d_name, p.base, &pid) || pid == static_cast<long>(::getpid())) continue;
        struct stat st;
        const std::string full = join(p.dir, e->d_name);
        if (::lstat(full.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        if ((pid <= 0 || pid > INT_MAX || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)) && !has_subfolder(full))
            stale.push_back(full);
    }
    ::closedir(d);
    for (const auto& s : stale) remove_tree(s);
}

}  // namespace

void write_folder_atomic(const std::string& dir_in, const std::vector<std::pair<std::string, std::string>>& files,
                         const std::function<bool(const std::string& name)>& replaces) {
    const std::string shown = quote(dir_in, quote_path_max);
    std::string dir = dir_in;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    if (dir.empty()) throw FileError("no folder name given");
    struct stat st;
    bool exists = false;
    if (::lstat(dir.c_str(), &st) == 0) {
        if (::stat(dir.c_str(), &st) != 0)
            throw FileError("cannot write the folder " + shown + ": it is a link to nothing");
        if (!S_ISDIR(st.st_mode)) throw FileError("cannot write the folder " + shown + ": it is a file");
        char buf[PATH_MAX];
        if (::realpath(dir.c_str(), buf) == nullptr)
            throw FileError("cannot write the folder " + shown + ": " + std::strerror(errno));
        dir = buf;
        exists = true;
    }
    std::set<std::string> names;
    for (const auto& [name, _] : files) {
        if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos || !names.insert(name).second)
            throw FileError("cannot write the folder " + shown + ": " + quote(name) + " is not a file name of its own");
    }
    const Split p = split_path(dir);
    if (p.base.empty() || p.base == "." || p.base == "..")
        throw FileError("cannot write the folder " + shown + ": give the folder's own name");
    if (::stat(p.dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        throw FileError("cannot write the folder " + shown + ": its parent folder " + quote(p.dir, quote_path_max) +
                        " does not exist");
    remove_stale_staging(dir);

    // 1. The new folder beside the old one.
    std::string staging;
    for (int attempt = 0;; ++attempt) {
        staging = dir + ".tmp-" + std::to_string(::getpid()) + "-" + random_suffix();
        if (::mkdir(staging.c_str(), 0755) == 0) break;
        if (errno != EEXIST || attempt == 31)
            throw FileError("cannot write the folder " + shown + ": " + std::strerror(errno) + " (folder " +
                            quote(p.dir, quote_path_max) + ")");
    }
    std::vector<std::string> kept_folders;
    try {
        for (const auto& [name, contents] : files)
            write_new_file(join(staging, name), contents, "cannot write " + quote(join(dir_in, name), quote_path_max));
        if (exists) {
            DIR* d = ::opendir(dir.c_str());
            if (!d) throw FileError("cannot read the folder " + shown + ": " + std::strerror(errno));
            std::vector<std::string> others;
            while (const dirent* e = ::readdir(d)) {
                const std::string name = e->d_name;
                if (name == "." || name == ".." || names.count(name) || (replaces && replaces(name))) continue;
                others.push_back(name);
            }
            ::closedir(d);
            for (const auto& name : others) {
                const std::string from = join(dir, name);
                if (::lstat(from.c_str(), &st) != 0) continue;
                if (S_ISDIR(st.st_mode)) {
                    kept_folders.push_back(name);
                } else if (::linkat(AT_FDCWD, from.c_str(), AT_FDCWD, join(staging, name).c_str(), 0) != 0) {
                    throw FileError("cannot write the folder " + shown + ": keeping its file " + quote(name) +
                                    " failed: " + std::strerror(errno));
                }
            }
        }
        sync_directory(staging);
    } catch (...) {
        remove_tree(staging);
        throw;
    }

    // 2. One rename puts the new folder in place.
    if (!exists) {
        if (::rename(staging.c_str(), dir.c_str()) != 0) {
            const int err = errno;
            remove_tree(staging);
            throw FileError("cannot write the folder " + shown + ": " + std::strerror(err));
        }
        sync_directory(p.dir);
        return;
    }
    std::string old = staging;  // after the exchange the staging name holds the old folder
    if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) != 0) {
        const int err = errno;
        if (err != EINVAL && err != ENOSYS && err != ENOTSUP) {
            remove_tree(staging);
            throw FileError("cannot replace the folder " + shown + ": " + std::strerror(err));
        }
        // No atomic exchange on this file system: the old folder aside, then the new one in.
        old = dir + ".old-" + std::to_string(::getpid()) + "-" + random_suffix();
        if (::rename(dir.c_str(), old.c_str()) != 0) {
            const int e2 = errno;
            remove_tree(staging);
            throw FileError("cannot replace the folder " + shown + ": " + std::strerror(e2));
        }
        if (::rename(staging.c_str(), dir.c_str()) != 0) {
            const int e2 = errno;
            ::rename(old.c_str(), dir.c_str());
            remove_tree(staging);
            throw FileError("cannot replace the folder " + shown + ": " + std::strerror(e2));
        }
    }
    sync_directory(p.dir);
    std::string left;
    for (const auto& name : kept_folders)
        if (::rename(join(old, name).c_str(), join(dir, name).c_str()) != 0) left += (left.empty() ? "" : ", ") + quote(name);
    if (!left.empty())
        throw FileError("the folder " + shown + " was written, but its folders " + left + " could not be moved back: " +
                        "they are in " + quote(old, quote_path_max));
    remove_tree(old);
}

void remove_temporaries_in_progress() noexcept {
    for (auto& s : g_slots)
        if (s.state.load() == 2) ::unlink(s.path);
}

void check_writable_path(const std::string& path) {
    if (path.empty()) throw FileError("no file name given");
    const Split p = split_path(path);
    refuse_non_regular_target(path);
    struct stat st;
    if (p.base.empty() || p.base == "." || p.base == "..")
        throw FileError("cannot write " + quote(path, quote_path_max) + ": it names a directory (give a file name)");
    if (::stat(p.dir.c_str(), &st) != 0)
        throw FileError("cannot write " + quote(path, quote_path_max) + ": directory " + quote(p.dir, quote_path_max) + " " +
                        (errno == ENOENT ? std::string("does not exist") : std::strerror(errno)));
    if (!S_ISDIR(st.st_mode)) throw FileError("cannot write " + quote(path, quote_path_max) + ": " + quote(p.dir, quote_path_max) + " is not a directory");
    std::string tmp;
    std::unique_ptr<InProgress> registered;
    const int fd = create_temporary(path, tmp, registered);
    if (fd < 0)
        throw FileError("cannot write " + quote(path, quote_path_max) + ": " + std::strerror(errno) + " (directory " + quote(p.dir, quote_path_max) + ")");
    ::close(fd);
    ::unlink(tmp.c_str());
}

void write_file_atomic(const std::string& path, const std::string& contents) {
    write_file_atomic_streamed(path, [&](const AtomicWrite& write) { write(contents.data(), contents.size()); });
}

void write_file_atomic_streamed(const std::string& path, const std::function<void(const AtomicWrite&)>& produce) {
    refuse_non_regular_target(path);
    remove_stale_temporaries(path);
    std::string tmp;
    std::unique_ptr<InProgress> registered;
    const int fd = create_temporary(path, tmp, registered);
    if (fd < 0) throw FileError("cannot write " + quote(path, quote_path_max) + ": " + std::strerror(errno));
    bool failed = false;  // fail() has closed and removed the temporary file
    auto fail = [&](int err, bool close_fd) {
        failed = true;
        if (close_fd) ::close(fd);
        ::unlink(tmp.c_str());
        throw FileError("cannot write " + quote(path, quote_path_max) + ": " + std::strerror(err));
    };
    const AtomicWrite write = [&](const char* data, size_t size) {
        size_t done = 0;
        while (done < size) {
            const ssize_t n = ::write(fd, data + done, size - done);
            if (n < 0) {
                if (errno == EINTR) continue;
                fail(errno, true);
            }
            done += static_cast<size_t>(n);
        }
    };
    try {
        produce(write);
    } catch (...) {
        if (!failed) {  // the producer's own error: nothing half-written is left
            ::close(fd);
            ::unlink(tmp.c_str());
        }
        throw;
    }
    if (::fsync(fd) != 0) fail(errno, true);
    if (::close(fd) != 0) fail(errno, false);
    try {
        refuse_non_regular_target(path);  // again: a device may have been put there meanwhile
    } catch (const FileError&) {
        ::unlink(tmp.c_str());
        throw;
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) fail(errno, false);
    registered.reset();
    // The rename is only durable once the directory is: sync it too. File systems
    // that cannot sync a directory (EINVAL) are fine; an I/O error is reported.
    const Split p = split_path(path);
    const int dfd = ::open(p.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        const int rc = ::fsync(dfd);
        const int err = errno;
        ::close(dfd);
        if (rc != 0 && err == EIO)
            throw FileError(quote(path, quote_path_max) + " was written, but syncing its directory failed: " + std::strerror(err));
    }
}

}  // namespace attnviz
