// One file from the hub into a blob: resumed, retried, hashed while it arrives
// (core/hub/hub_download_internal.hpp).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/hub/hub_download_internal.hpp"
#include "core/io/error.hpp"
#include "core/io/message.hpp"

namespace attnviz::hub::detail {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

/// SHA-256 through OpenSSL (SHA-NI / AVX2 where the CPU has them: ~2 GB/s, faster than a download).
class Sha256 {
public:
    Sha256() : m_ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free) { reset(); }
    void reset() {
        if (!m_ctx || EVP_DigestInit_ex(m_ctx.get(), EVP_sha256(), nullptr) != 1)
            throw Error("cannot start SHA-256 (OpenSSL)");
    }
    void update(const char* data, size_t n) { EVP_DigestUpdate(m_ctx.get(), data, n); }
    std::string hex() {
        unsigned char digest[EVP_MAX_MD_SIZE];
        unsigned int len = 0;
        EVP_DigestFinal_ex(m_ctx.get(), digest, &len);
        static const char* digits = "0123456789abcdef";
        std::string out;
        for (unsigned int i = 0; i < len; ++i) out += digits[digest[i] >> 4], out += digits[digest[i] & 15];
        return out;
    }

private:
    std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> m_ctx;
};

/// SHA-256 on a thread of its own, behind the download: the receiving thread writes the file
/// and says how far it got; this thread hashes what is written straight from the page cache
/// (mmap, no copy), so hashing overlaps the network instead of following it (a 300 MB file:
/// ~0.17 s of hashing that a single thread adds to the transfer).
class HashThread {
public:
    explicit HashThread(int fd) : m_fd(fd), m_thread([this] { loop(); }) {}
    ~HashThread() {
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            m_stop = true;
        }
        m_wake.notify_all();
        m_thread.join();
    }
    HashThread(const HashThread&) = delete;
    HashThread& operator=(const HashThread&) = delete;
    /// The file is written up to `end`.
    void written(int64_t end) {
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            m_written = end;
        }
        m_wake.notify_one();
    }
    /// Waits for what is written to be hashed, then starts again from byte 0 (the file was truncated).
    void reset() {
        drain();
        std::lock_guard<std::mutex> lock(m_mutex);
        m_sha.reset();
        m_hashed = m_written = 0;
    }
    /// The digest of the file's first written() bytes; FileError when it could not be read back.
    std::string hex() {
        drain();
        if (!m_error.empty()) throw FileError(m_error);
        return m_sha.hex();
    }

private:
    static constexpr int64_t k_window = int64_t(8) << 20;
    void drain() {
        std::unique_lock<std::mutex> lock(m_mutex);
        m_idle.wait(lock, [&] { return m_hashed >= m_written || !m_error.empty(); });
    }
    void loop() {
        const int64_t page = ::sysconf(_SC_PAGESIZE);
        std::unique_lock<std::mutex> lock(m_mutex);
        while (true) {
            m_wake.wait(lock, [&] { return m_stop || (m_hashed < m_written && m_error.empty()); });
            if (m_stop) return;
            const int64_t from = m_hashed, to = std::min(m_written, m_hashed + k_window);
            lock.unlock();
            const int64_t base = from / page * page;
            void* map = ::mmap(nullptr, size_t(to - base), PROT_READ, MAP_SHARED, m_fd, base);
            std::string error;
            if (map == MAP_FAILED) {
                error = std::string("cannot read back the downloaded file to hash it: ") + std::strerror(errno);
            } else {
                ::madvise(map, size_t(to - base), MADV_SEQUENTIAL);
                m_sha.update(static_cast<const char*>(map) + (from - base), size_t(to - from));
                ::munmap(map, size_t(to - base));
            }
            lock.lock();
            if (!error.empty()) m_error = error;
            else m_hashed = to;
            m_idle.notify_all();
        }
    }
    int m_fd;
    Sha256 m_sha;
    std::mutex m_mutex;
    std::condition_variable m_wake, m_idle;
    int64_t m_written = 0, m_hashed = 0;
    std::string m_error;
    bool m_stop = false;
    std::thread m_thread;
};

bool is_sha256(const std::string& s) {
    if (s.size() != 64) return false;
    for (char c : s)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
}

/// An open .incomplete file: closed on every path out.
struct Fd {
    int fd = -1;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

void write_all(int fd, const char* data, size_t n, const std::string& path) {
    while (n > 0) {
        const ssize_t w = ::write(fd, data, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0)
            throw FileError("cannot write " + quote(path, quote_path_max) + ": " + std::strerror(errno) +
                            (errno == ENOSPC || errno == EFBIG ? " (free some space, or raise the file-size limit, and "
                                                                 "run the download again: it resumes)"
                                                               : ""));
        data += w;
        n -= size_t(w);
    }
}

/// Start offset of a 206's "Content-Range: bytes START-END/TOTAL" (-1 when unreadable).
int64_t range_start(const std::string& content_range) {
    const size_t p = content_range.find("bytes ");
    if (p == std::string::npos) return -1;
    try {
        return std::stoll(content_range.substr(p + 6));
    } catch (const std::exception&) {
        return -1;
    }
}

}  // namespace

void fetch_blob(Session& s, const DownloadPlan& plan, const PlannedFile& file, const std::string& blob_path) {
    const std::string incomplete = blob_path + ".incomplete";
    Fd f;
    f.fd = ::open(incomplete.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (f.fd < 0) throw FileError("cannot create " + quote(incomplete, quote_path_max) + ": " + std::strerror(errno));
    struct stat st {};
    ::fstat(f.fd, &st);
    int64_t offset = int64_t(st.st_size);
    const bool check = file.lfs && is_sha256(file.etag);
    std::unique_ptr<HashThread> hasher = check ? std::make_unique<HashThread>(f.fd) : nullptr;
    const auto restart = [&] {
        if (::ftruncate(f.fd, 0) != 0 || ::lseek(f.fd, 0, SEEK_SET) != 0)
            throw FileError("cannot truncate " + quote(incomplete, quote_path_max) + ": " + std::strerror(errno));
        offset = 0;
        if (hasher) hasher->reset();
    };
    if (file.size >= 0 && offset > file.size) restart();
    if (hasher) hasher->written(offset);  // what an earlier try wrote counts in the hash
    ::lseek(f.fd, offset, SEEK_SET);
    s.progress.file_done = offset;
    s.report(true);

    Retries retries(s);
    while (true) {
        if (file.size >= 0 && offset == file.size && offset > 0) break;  // an earlier try got it all
        HttpRequest req = s.request(file.url);
        req.range_from = offset;
        const int64_t before = offset;
        req.on_start = [&](long status, const std::map<std::string, std::string>& headers) {
            if (offset > 0 && status == 200) restart();  // the server sends it all again
            if (status == 206) {
                const auto it = headers.find("content-range");
                if (it == headers.end() || range_start(it->second) != offset) restart();
            }
            return true;
        };
        bool first_chunk = true;  // told at once: a caller sees every file move, however fast it comes
        req.on_body = [&](const char* data, size_t n) {
            write_all(f.fd, data, n, incomplete);
            offset += int64_t(n);
            if (hasher) hasher->written(offset);
            s.progress.file_done = offset;
            s.add_bytes(int64_t(n));
            const bool now = first_chunk;
            first_chunk = false;
            return s.report(now);
        };
        HttpResponse r = s.http.request(req);
        if (r.aborted || s.cancelled) throw Cancelled("download of " + quote(plan.repo_id) + " cancelled");
        if (offset > before) retries.progressed();
        if (r.status == 416 && file.size >= 0 && offset == file.size) break;
        if (r.status == 416) {
            restart();
            if (retries.again("the server refused to resume " + quote(file.name))) continue;
            throw FileError("cannot download " + quote(file.name) + " of " + quote(plan.repo_id) +
                            ": the server refuses to resume it (416)");
        }
        const bool transient = (r.error.empty() && (r.status >= 500 || r.status == 429)) || (!r.error.empty() && r.dropped);
        if (transient) {
            const std::string why = r.error.empty() ? "the hub answered " + std::to_string(r.status) : r.error;
            if (retries.again(why + " while fetching " + quote(file.name))) continue;
            throw FileError("cannot download " + quote(file.name) + " of " + quote(plan.repo_id) + " from " +
                            quote(s.endpoint) + ": " + why + ", " + std::to_string(retries.failures()) +
                            " tries; run the same command again to resume from byte " + std::to_string(offset));
        }
        if (!r.error.empty())
            throw FileError("cannot download " + quote(file.name) + " of " + quote(plan.repo_id) + ": " + r.error);
        if (r.status != 200 && r.status != 206) throw_http_error(s, r, plan.repo_id, plan.commit, file.name);
        if (file.size >= 0 && offset < file.size) {  // closed early without an error
            if (retries.again("the connection ended at byte " + std::to_string(offset) + " of " + quote(file.name)))
                continue;
            throw FileError("cannot download " + quote(file.name) + " of " + quote(plan.repo_id) +
                            ": the connection keeps ending early; run the same command again to resume");
        }
        break;
    }
    if (file.size >= 0 && offset != file.size) {
        ::unlink(incomplete.c_str());
        throw FileError(quote(file.name) + " of " + quote(plan.repo_id) + " is " + std::to_string(offset) +
                        " bytes, the hub said " + std::to_string(file.size) + ": not kept; run the download again");
    }
    if (check) {
        const std::string got = hasher->hex();
        if (got != file.etag) {
            ::unlink(incomplete.c_str());
            throw FileError(quote(file.name) + " of " + quote(plan.repo_id) + " arrived with sha256 " + got +
                            ", the hub says " + file.etag +
                            ": the file is corrupt (or changed on the hub while it downloaded); it was removed and "
                            "nothing was kept. Run the download again");
        }
    }
    // No fsync (huggingface_hub has none either): it would cost a download its speed on a disk
    // slower than the network, several times over. A blob a power cut left short is found by
    // its size and fetched again (plan_download, download).
    if (::close(f.fd) != 0) {
        f.fd = -1;
        throw FileError("cannot write " + quote(incomplete, quote_path_max) + ": " + std::strerror(errno));
    }
    f.fd = -1;
    if (::rename(incomplete.c_str(), blob_path.c_str()) != 0)
        throw FileError("cannot rename " + quote(incomplete, quote_path_max) + " to its blob: " + std::strerror(errno));
    s.report(true);
}

bool Retries::again(const std::string& why) {
    ++m_failures;
    const auto& o = m_session.options;
    if (m_failures >= o.max_attempts || seconds_since(m_first) >= o.retry_time_s) return false;
    double wait = o.first_backoff_s;
    for (int i = 1; i < m_failures && wait < 30; ++i) wait *= 2;
    if (wait > 30) wait = 30;
    ++m_session.progress.retries;
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", wait);
    m_session.progress.note = "retrying in " + std::string(buf) + " s: " + why;
    while (std::chrono::steady_clock::now() < until) {
        if (!m_session.report(true)) throw Cancelled("download cancelled");
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min<long>(100, long(wait * 1000) + 1)));
    }
    m_session.progress.note.clear();
    return true;
}

HttpResponse fetch_small(Session& s, HttpRequest req, const std::string& what) {
    Retries retries(s);
    while (true) {
        HttpResponse r = s.http.request(req);
        if (r.aborted || s.cancelled) throw Cancelled("cancelled while asking the hub for " + what);
        const bool transient = (r.error.empty() && (r.status >= 500 || r.status == 429)) || (!r.error.empty() && r.dropped);
        if (!transient && !r.error.empty()) throw FileError("cannot ask " + quote(s.endpoint) + " for " + what + ": " + r.error);
        if (!transient) return r;
        const std::string why = r.error.empty() ? "the hub answered " + std::to_string(r.status) : r.error;
        if (!retries.again(why)) {
            const bool offline_hint = !r.error.empty();
            throw FileError("cannot ask " + quote(s.endpoint) + " for " + what + ": " + why + " (" +
                            std::to_string(retries.failures()) + " tries)" +
                            (offline_hint ? "; check the network, or set HF_HUB_OFFLINE=1 to use the cache only" : ""));
        }
    }
}

void throw_http_error(const Session& s, const HttpResponse& r, const std::string& id, const std::string& revision,
                      const std::string& file) {
    const std::string page = s.endpoint + "/" + id;
    const std::string what = file.empty() ? "model " + quote(id) : quote(file) + " of " + quote(id);
    const std::string code = r.header("x-error-code");
    const std::string token_hint = s.token.empty() ? "set HF_TOKEN to an access token (" + s.endpoint + "/settings/tokens)"
                                                   : "check that HF_TOKEN (or the token file) holds a valid access token "
                                                     "of an account that accepted it";
    switch (r.status) {
    case 401:
        throw FileError("the hub refused " + what + " (401 Unauthorized): it is private or gated. If it is gated, "
                        "accept its licence at " + page + ", then " + token_hint);
    case 403:
        throw FileError("the hub refused " + what + " (403 Forbidden): access is restricted (a gated model). Accept "
                        "its licence at " + page + " (the access may need approval), then " + token_hint);
    case 404:
        if (code == "RevisionNotFound")
            throw FileError("model " + quote(id) + " has no revision " + quote(revision) + " on " + quote(s.endpoint));
        if (code == "EntryNotFound" || !file.empty())
            throw FileError(quote(file) + " is not in " + quote(id) + " at " + quote(revision) + " on " + quote(s.endpoint));
        throw FileError("model " + quote(id) + " is not on " + quote(s.endpoint) +
                        " (check the name; a private model needs HF_TOKEN)");
    default:
        throw FileError("the hub answered " + std::to_string(r.status) + " for " + what + " (" +
                        printable(r.body.substr(0, 200)) + ")");
    }
}

}  // namespace attnviz::hub::detail
