// The local Hugging Face cache: where it is, what it holds, deleting a revision, blob locks
// (core/hub/hub_cache.hpp).
#include "core/hub/hub_cache.hpp"

#include <fcntl.h>
#include <ftw.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "core/io/error.hpp"
#include "core/io/file_read.hpp"
#include "core/io/message.hpp"

namespace attnviz::hub {

namespace fs = std::filesystem;

namespace {

std::string env_path(const char* name) {
    const char* v = std::getenv(name);
    if (!v || !*v) return {};
    std::string s(v);
    // huggingface_hub expands a leading ~ (os.path.expanduser)
    if ((s == "~" || s.rfind("~/", 0) == 0) && std::getenv("HOME")) s = std::string(std::getenv("HOME")) + s.substr(1);
    return s;
}

bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
}

/// A real directory (lstat: a symlink planted as a snapshot or a cache folder is not followed).
bool is_real_dir(const fs::path& p) {
    struct stat st {};
    return ::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool has_config(const fs::path& snapshot) {
    struct stat st {};
    return is_real_dir(snapshot) && ::stat((snapshot / "config.json").c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/// Removes a folder and everything in it, never following a link (nftw, FTW_PHYS); false with
/// errno set on the first failure. Not std::filesystem::remove_all: a process that loads LibTorch
/// resolves that symbol to the copy libtorch.so exports, built against another libstdc++, which crashes.
bool remove_tree(const fs::path& dir) {
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0) return errno == ENOENT;
    if (!S_ISDIR(st.st_mode)) return ::unlink(dir.c_str()) == 0;
    return ::nftw(
               dir.c_str(),
               [](const char* path, const struct stat*, int type, struct FTW*) {
                   return (type == FTW_DP ? ::rmdir(path) : ::unlink(path)) == 0 ? 0 : -1;
               },
               16, FTW_DEPTH | FTW_PHYS) == 0;
}

double seconds_of(const struct timespec& t) { return double(t.tv_sec) + double(t.tv_nsec) * 1e-9; }

std::string trim_space(std::string s) {
    const auto not_space = [](unsigned char c) { return !std::isspace(c); };
    s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
    s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
    return s;
}

/// The blob a snapshot's symlink names, "" when it names something else than a file of blobs/.
std::string linked_blob(const fs::path& link, const fs::path& blobs) {
    std::error_code ec;
    const fs::path target = fs::read_symlink(link, ec);
    if (ec) return {};
    const fs::path resolved = (target.is_absolute() ? target : link.parent_path() / target).lexically_normal();
    if (resolved.parent_path() != blobs.lexically_normal()) return {};
    return resolved.filename().string();
}

/// Every file of a snapshot (relative names) and the blobs they link to (name -> size; a
/// regular file in the snapshot counts under its own path).
void walk_snapshot(const fs::path& snapshot, const fs::path& blobs, std::vector<std::string>& files,
                   std::map<std::string, int64_t>& linked) {
    std::error_code ec;
    for (fs::recursive_directory_iterator it(snapshot, ec), end; !ec && it != end; it.increment(ec)) {
        struct stat st {};
        if (::lstat(it->path().c_str(), &st) != 0 || S_ISDIR(st.st_mode)) continue;
        files.push_back(it->path().lexically_relative(snapshot).string());
        if (S_ISLNK(st.st_mode)) {
            const std::string blob = linked_blob(it->path(), blobs);
            struct stat bs {};
            if (!blob.empty() && ::stat((blobs / blob).c_str(), &bs) == 0) linked[blob] = int64_t(bs.st_size);
        } else if (S_ISREG(st.st_mode)) {
            linked[it->path().string()] = int64_t(st.st_size);
        }
    }
    std::sort(files.begin(), files.end());
}

/// Every ref of a model folder: name -> commit (refs holding no commit name are left out).
std::map<std::string, std::string> read_refs(const fs::path& repo) {
    std::map<std::string, std::string> refs;
    const fs::path dir = repo / "refs";
    std::error_code ec;
    if (!is_real_dir(dir)) return refs;
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().lexically_relative(dir).string();
        if (!is_revision_name(name) || !it->is_regular_file(ec)) continue;
        try {
            const std::string commit = read_ref(repo.string(), name);
            if (!commit.empty()) refs[name] = commit;
        } catch (const FileError&) {
            // a ref that names no commit names nothing
        }
    }
    return refs;
}

}  // namespace

std::string default_cache_dir() {
    for (const char* var : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"})
        if (std::string v = env_path(var); !v.empty()) return v;
    if (std::string h = env_path("HF_HOME"); !h.empty()) return (fs::path(h) / "hub").string();
    if (std::string x = env_path("XDG_CACHE_HOME"); !x.empty()) return (fs::path(x) / "huggingface" / "hub").string();
    if (std::string home = env_path("HOME"); !home.empty())
        return (fs::path(home) / ".cache" / "huggingface" / "hub").string();
    throw FileError("no Hugging Face cache: none of HF_HUB_CACHE, HF_HOME and HOME is set");
}

std::vector<std::string> cache_dirs() {
    std::vector<std::string> dirs;
    const auto add = [&](const std::string& d) {
        if (!d.empty() && std::find(dirs.begin(), dirs.end(), d) == dirs.end()) dirs.push_back(d);
    };
    try {
        add(default_cache_dir());
    } catch (const FileError&) {
    }
    if (std::string h = env_path("HF_HOME"); !h.empty()) add((fs::path(h) / "hub").string());
    if (std::string x = env_path("XDG_CACHE_HOME"); !x.empty()) add((fs::path(x) / "huggingface" / "hub").string());
    if (std::string home = env_path("HOME"); !home.empty()) add((fs::path(home) / ".cache" / "huggingface" / "hub").string());
    return dirs;
}

bool is_repo_id(const std::string& id) {
    const size_t slash = id.find('/');
    if (slash == std::string::npos || id.find('/', slash + 1) != std::string::npos) return false;
    const std::string org = id.substr(0, slash), name = id.substr(slash + 1);
    for (const std::string& part : {org, name}) {
        if (part.empty() || part.size() > 96 || part.front() == '.' || part.front() == '-') return false;
        if (!std::all_of(part.begin(), part.end(), is_name_char)) return false;
    }
    return id.find("..") == std::string::npos && id.find("--") == std::string::npos;
}

std::string repo_folder_name(const std::string& id) {
    const size_t slash = id.find('/');
    return "models--" + id.substr(0, slash) + "--" + id.substr(slash + 1);
}

bool is_commit_name(const std::string& name) {
    return !name.empty() && name.size() <= 255 && name != "." && name != ".." &&
           std::all_of(name.begin(), name.end(), is_name_char);
}

bool is_revision_name(const std::string& rev) {
    if (rev.empty() || rev.size() > 255) return false;
    size_t start = 0;
    while (true) {
        const size_t slash = rev.find('/', start);
        if (!is_commit_name(rev.substr(start, slash == std::string::npos ? std::string::npos : slash - start)))
            return false;
        if (slash == std::string::npos) return true;
        start = slash + 1;
    }
}

std::string read_ref(const std::string& repo_dir, const std::string& revision) {
    if (!is_revision_name(revision))
        throw FileError(quote(revision) + " is not a revision (a branch, a tag or a commit hash)");
    const fs::path ref = fs::path(repo_dir) / "refs" / revision;
    struct stat st {};
    if (::lstat(ref.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) return {};
    const std::string commit = trim_space(read_regular_file(ref.string(), 4096, "hub cache ref"));
    if (!is_commit_name(commit))
        throw FileError("hub cache ref " + quote(ref.string(), quote_path_max) + " holds " + quote(commit) +
                        ", not a commit hash: it is ignored (a revision never leaves snapshots/); download the "
                        "model again, or delete the file");
    return commit;
}

std::string find_snapshot(const std::string& id, const std::string& revision, std::vector<std::string>* looked) {
    if (!is_repo_id(id) || !is_revision_name(revision)) return {};
    for (const auto& cache : cache_dirs()) {
        const fs::path repo = fs::path(cache) / repo_folder_name(id);
        const fs::path snapshots = repo / "snapshots";
        if (looked) looked->push_back(repo.string());
        if (!is_real_dir(snapshots)) continue;
        // The commit refs/<revision> names, as huggingface_hub resolves it.
        std::string commit;
        try {
            commit = read_ref(repo.string(), revision);
        } catch (const FileError&) {
            commit.clear();  // a ref that is no commit is never followed
        }
        if (!commit.empty() && has_config(snapshots / commit)) return (snapshots / commit).string();
        if (is_commit_name(revision) && has_config(snapshots / revision)) return (snapshots / revision).string();
        if (revision != "main") continue;
        // Else the most recently written snapshot that holds a model.
        fs::path best;
        double best_time = 0;
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(snapshots, ec)) {
            struct stat st {};
            if (!is_commit_name(e.path().filename().string()) || !has_config(e.path()) ||
                ::lstat(e.path().c_str(), &st) != 0)
                continue;
            if (best.empty() || seconds_of(st.st_mtim) > best_time) best = e.path(), best_time = seconds_of(st.st_mtim);
        }
        if (!best.empty()) return best.string();
    }
    return {};
}

std::vector<CachedModel> scan_cache(const std::string& cache_dir) {
    std::vector<CachedModel> models;
    std::error_code ec;
    if (!is_real_dir(cache_dir)) return models;
    for (const auto& entry : fs::directory_iterator(cache_dir, ec)) {
        const std::string folder = entry.path().filename().string();
        if (folder.rfind("models--", 0) != 0 || !is_real_dir(entry.path())) continue;
        std::string id = folder.substr(8);
        const size_t sep = id.find("--");
        if (sep == std::string::npos) continue;
        id.replace(sep, 2, "/");
        CachedModel m;
        m.id = id;
        m.path = entry.path().string();
        const fs::path blobs = entry.path() / "blobs";
        std::error_code bec;
        if (is_real_dir(blobs))
            for (const auto& b : fs::directory_iterator(blobs, bec)) {
                struct stat st {};
                if (::lstat(b.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
                m.size_on_disk += int64_t(st.st_size);
                const std::string name = b.path().filename().string();
                if (name.size() > 11 && name.compare(name.size() - 11, 11, ".incomplete") == 0)
                    m.incomplete_bytes += int64_t(st.st_size);
                m.last_used = std::max({m.last_used, seconds_of(st.st_atim), seconds_of(st.st_mtim)});
                m.last_modified = std::max(m.last_modified, seconds_of(st.st_mtim));
            }
        const auto refs = read_refs(entry.path());
        const fs::path snapshots = entry.path() / "snapshots";
        std::error_code sec;
        if (is_real_dir(snapshots))
            for (const auto& s : fs::directory_iterator(snapshots, sec)) {
                struct stat st {};
                if (::lstat(s.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
                CachedRevision r;
                r.commit = s.path().filename().string();
                std::map<std::string, int64_t> linked;
                walk_snapshot(s.path(), blobs, r.files, linked);
                for (const auto& [blob, size] : linked) r.size += size;
                for (const auto& [name, commit] : refs)
                    if (commit == r.commit) r.refs.push_back(name);
                r.last_modified = seconds_of(st.st_mtim);
                m.last_modified = std::max(m.last_modified, r.last_modified);
                m.last_used = std::max(m.last_used, r.last_modified);
                m.revisions.push_back(std::move(r));
            }
        std::sort(m.revisions.begin(), m.revisions.end(),
                  [](const CachedRevision& a, const CachedRevision& b) { return a.last_modified > b.last_modified; });
        models.push_back(std::move(m));
    }
    std::sort(models.begin(), models.end(), [](const CachedModel& a, const CachedModel& b) { return a.id < b.id; });
    return models;
}

DeleteResult delete_revision(const std::string& cache_dir, const std::string& id, const std::string& revision) {
    if (!is_repo_id(id)) throw FileError(quote(id) + " is not a hub id (ORGANISATION/NAME)");
    const fs::path repo = fs::path(cache_dir) / repo_folder_name(id);
    const fs::path snapshots = repo / "snapshots", blobs = repo / "blobs";
    if (!is_real_dir(repo))
        throw FileError("model " + quote(id) + " is not in the cache " + quote(cache_dir, quote_path_max));
    const auto refs = read_refs(repo);
    std::vector<std::string> all;
    std::error_code ec;
    if (is_real_dir(snapshots))
        for (const auto& s : fs::directory_iterator(snapshots, ec))
            if (is_real_dir(s.path())) all.push_back(s.path().filename().string());
    DeleteResult result;
    if (revision.empty()) {
        result.commits = all;
    } else if (const auto it = refs.find(revision); it != refs.end()) {
        result.commits = {it->second};
    } else if (is_commit_name(revision) && std::find(all.begin(), all.end(), revision) != all.end()) {
        result.commits = {revision};
    } else {
        std::string known;
        for (const auto& [name, commit] : refs) known += (known.empty() ? "" : ", ") + quote(name) + " (" + commit + ")";
        for (const auto& c : all) known += (known.empty() ? "" : ", ") + quote(c);
        throw FileError("model " + quote(id) + " has no revision " + quote(revision) + " in the cache " +
                        quote(cache_dir, quote_path_max) + (known.empty() ? "" : "; it has " + known));
    }
    // Blobs in use before, so that only those this deletion frees count.
    for (const auto& commit : result.commits) {
        if (!remove_tree(snapshots / commit))  // its links are removed, never followed
            throw FileError("cannot remove " + quote((snapshots / commit).string(), quote_path_max) + ": " +
                            std::strerror(errno));
        for (const auto& [name, c] : refs)
            if (c == commit) ::unlink((repo / "refs" / name).c_str());
    }
    std::set<std::string> kept;
    std::vector<std::string> left;
    if (is_real_dir(snapshots))
        for (const auto& s : fs::directory_iterator(snapshots, ec)) {
            if (!is_real_dir(s.path())) continue;
            left.push_back(s.path().string());
            std::vector<std::string> files;
            std::map<std::string, int64_t> linked;
            walk_snapshot(s.path(), blobs, files, linked);
            for (const auto& [blob, size] : linked) kept.insert(blob);
        }
    if (left.empty()) {
        // Nothing left: the model's folder (its .incomplete files too) and its locks go.
        if (is_real_dir(blobs))
            for (const auto& b : fs::directory_iterator(blobs, ec)) {
                struct stat st {};
                if (::lstat(b.path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) result.freed += int64_t(st.st_size);
            }
        if (!remove_tree(repo))
            throw FileError("cannot remove " + quote(repo.string(), quote_path_max) + ": " + std::strerror(errno));
        remove_tree(fs::path(cache_dir) / ".locks" / repo_folder_name(id));
        result.removed_model = true;
        return result;
    }
    if (is_real_dir(blobs))
        for (const auto& b : fs::directory_iterator(blobs, ec)) {
            const std::string name = b.path().filename().string();
            struct stat st {};
            if (kept.count(name) || name.find(".incomplete") != std::string::npos ||
                ::lstat(b.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode))
                continue;
            if (::unlink(b.path().c_str()) == 0) result.freed += int64_t(st.st_size);
        }
    return result;
}

BlobLock::BlobLock(const std::string& path, const std::function<bool()>& keep_waiting, int poll_ms) {
    while (true) {
        const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0664);
        if (fd < 0)
            throw FileError("cannot open the lock file " + quote(path, quote_path_max) + ": " + std::strerror(errno));
        while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
            if (errno != EWOULDBLOCK && errno != EINTR && errno != EACCES) {
                const int err = errno;
                ::close(fd);
                throw FileError("cannot lock " + quote(path, quote_path_max) + ": " + std::strerror(err));
            }
            if (keep_waiting && !keep_waiting()) {
                ::close(fd);
                throw Cancelled("cancelled while waiting for " + quote(path, quote_path_max) +
                                " (another download of the same file)");
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
        }
        // A peer may have removed the lock file before we locked it: that lock locks nothing.
        struct stat held {}, now {};
        if (::fstat(fd, &held) == 0 && held.st_nlink > 0 && ::lstat(path.c_str(), &now) == 0 &&
            now.st_ino == held.st_ino && now.st_dev == held.st_dev) {
            m_fd = fd;
            return;
        }
        ::close(fd);
    }
}

BlobLock::~BlobLock() {
    if (m_fd >= 0) {
        ::flock(m_fd, LOCK_UN);
        ::close(m_fd);
    }
}

bool BlobLock::is_free(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return true;
    const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (free) ::flock(fd, LOCK_UN);
    ::close(fd);
    return free;
}

}  // namespace attnviz::hub
