// Planning and running a download from the hub (core/hub/hub_download.hpp).
#include "core/hub/hub_download.hpp"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "core/hub/hub_cache.hpp"
#include "core/hub/hub_download_internal.hpp"
#include "core/io/atomic_file.hpp"
#include "core/io/error.hpp"
#include "core/io/file_read.hpp"
#include "core/io/json_bounded.hpp"
#include "core/io/message.hpp"

namespace attnviz::hub {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? std::string(v) : std::string();
}

std::string trimmed(std::string s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    size_t i = 0;
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    return s.substr(i);
}

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string normalize_etag(std::string e) {
    if (e.rfind("W/", 0) == 0) e = e.substr(2);
    if (e.size() >= 2 && e.front() == '"' && e.back() == '"') e = e.substr(1, e.size() - 2);
    return e;
}

/// A size header's bytes: -1 when it is not a number; more digits than 18 (10^18 bytes and up,
/// more than any disk) read as INT64_MAX, so that the free-space check refuses the file in one
/// line rather than the size going unknown and the download running until the disk is full.
int64_t to_int(const std::string& s) {
    if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) return -1;
    const size_t first = std::min(s.find_first_not_of('0'), s.size());
    if (s.size() - first > 18) return std::numeric_limits<int64_t>::max();
    return std::stoll(s);
}

/// a + b for sizes, INT64_MAX where the sum would pass it.
int64_t size_plus(int64_t a, int64_t b) {
    return a > std::numeric_limits<int64_t>::max() - b ? std::numeric_limits<int64_t>::max() : a + b;
}

/// Whether the path `p` exists, following links (a snapshot's link to its blob).
bool exists_followed(const fs::path& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/// Whether the blob is there and whole (its size the hub's, when the hub said one): a blob that
/// a power cut left short is fetched again.
bool blob_complete(const fs::path& blob, int64_t size) {
    struct stat st {};
    return ::stat(blob.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (size < 0 || int64_t(st.st_size) == size);
}

/// The shards an index names (its weight_map's values): top-level names ending in `ext` only.
std::vector<std::string> index_shards(const std::string& text, const std::string& what, const std::string& ext) {
    const json j = parse_json_bounded(text, what);
    std::set<std::string> names;
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
        throw FileError(what + ": no \"weight_map\" object");
    for (const auto& [tensor, file] : j["weight_map"].items()) {
        if (!file.is_string()) throw FileError(what + ": weight_map[" + quote(tensor) + "] is not a file name");
        const std::string name = file.get<std::string>();
        if (!is_commit_name(name) || !ends_with(name, ext))
            throw FileError(what + ": weight_map names " + quote(name) + ", not a " + ext + " file beside the index");
        names.insert(name);
    }
    return {names.begin(), names.end()};
}

/// "scheme://host:port" of an address (the scheme's port when none is given), lower case.
std::string origin(const std::string& url) {
    const size_t colon = url.find("://");
    if (colon == std::string::npos) return {};
    std::string scheme = url.substr(0, colon), rest = url.substr(colon + 3);
    std::string host = rest.substr(0, rest.find_first_of("/?#"));
    if (const size_t at = host.rfind('@'); at != std::string::npos) host = host.substr(at + 1);
    if (host.find(':') == std::string::npos || host.back() == ']') host += scheme == "https" ? ":443" : ":80";
    std::string o = scheme + "://" + host;
    for (char& c : o) c = char(std::tolower(static_cast<unsigned char>(c)));
    return o;
}

/// A Location header made absolute against the address that answered.
std::string join_url(const std::string& base, const std::string& location) {
    if (location.find("://") != std::string::npos) return location;
    const size_t colon = base.find("://");
    const size_t host_end = base.find('/', colon + 3);
    const std::string root = base.substr(0, host_end);
    if (location.rfind("//", 0) == 0) return base.substr(0, colon + 1) + location;
    if (!location.empty() && location.front() == '/') return root + location;
    const std::string path = host_end == std::string::npos ? "/" : base.substr(host_end, base.find_first_of("?#", host_end) - host_end);
    return root + path.substr(0, path.rfind('/') + 1) + location;
}

/// A relative symlink at `pointer` to `target`, made beside it and renamed in place.
void link_atomic(const fs::path& target, const fs::path& pointer) {
    std::error_code ec;
    fs::create_directories(pointer.parent_path(), ec);
    std::random_device rd;
    const fs::path tmp = pointer.string() + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
    if (::symlink(target.c_str(), tmp.c_str()) != 0)
        throw FileError("cannot create the link " + quote(tmp.string(), quote_path_max) + ": " + std::strerror(errno));
    if (::rename(tmp.c_str(), pointer.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        throw FileError("cannot create the link " + quote(pointer.string(), quote_path_max) + ": " + std::strerror(err));
    }
}

std::string human_bytes(int64_t n) {
    char buf[32];
    if (n >= int64_t(1000000000000)) std::snprintf(buf, sizeof buf, "%.1f TB", double(n) / 1e12);
    else if (n >= (int64_t(1) << 30)) std::snprintf(buf, sizeof buf, "%.1f GB", double(n) / 1e9);
    else if (n >= 1000000) std::snprintf(buf, sizeof buf, "%.1f MB", double(n) / 1e6);
    else std::snprintf(buf, sizeof buf, "%lld bytes", static_cast<long long>(n));
    return buf;
}

/// Room for what the plan still fetches, and a file-size limit that allows its largest file.
void check_room(const DownloadPlan& plan, const fs::path& blobs) {
    int64_t need = 0, largest = 0;
    std::string largest_name;
    for (const auto& f : plan.files) {
        if (f.cached || f.size < 0) continue;
        struct stat st {};
        const int64_t have = ::stat((blobs / (f.etag + ".incomplete")).c_str(), &st) == 0 ? int64_t(st.st_size) : 0;
        need = size_plus(need, std::max<int64_t>(0, f.size - have));
        if (f.size > largest) largest = f.size, largest_name = f.name;
    }
    struct statvfs vfs {};
    if (::statvfs(blobs.c_str(), &vfs) == 0) {
        const int64_t free_bytes = int64_t(vfs.f_bavail) * int64_t(vfs.f_frsize);
        if (need > free_bytes)
            throw FileError("not enough space for " + quote(plan.repo_id) + " in " + quote(plan.cache_dir, quote_path_max) +
                            ": it needs " + human_bytes(need) + ", the file system has " + human_bytes(free_bytes) +
                            " free; free some space, or set HF_HUB_CACHE to a folder on another disk");
    }
    struct rlimit lim {};
    if (::getrlimit(RLIMIT_FSIZE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY && int64_t(lim.rlim_cur) < largest)
        throw FileError("the file-size limit of this process (ulimit -f) is " + human_bytes(int64_t(lim.rlim_cur)) + ", less than " +
                        quote(largest_name) + " of " + quote(plan.repo_id) + " (" + human_bytes(largest) +
                        "); raise it and download again");
}

}  // namespace

namespace detail {

Session::Session(const DownloadOptions& o, const DownloadCallback& cb, std::string e, std::string t)
    : options(o), callback(cb), endpoint(std::move(e)), token(std::move(t)) {}

bool Session::report(bool now) {
    if (cancelled) return false;
    const auto t = std::chrono::steady_clock::now();
    if (!now && t - m_last_report < std::chrono::milliseconds(100)) return true;
    m_last_report = t;
    if (callback && !callback(progress)) cancelled = true;
    return !cancelled;
}

void Session::add_bytes(int64_t n) {
    progress.done += n;
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
    if (m_samples.empty() || t - m_samples.back().first >= 0.05) m_samples.emplace_back(t, progress.done);
    while (m_samples.size() > 2 && t - m_samples.front().first > 3) m_samples.pop_front();
    const double dt = t - m_samples.front().first;
    if (dt > 0.05) {
        progress.bytes_per_second = double(progress.done - m_samples.front().second) / dt;
        progress.eta_s = progress.bytes_per_second > 0 ? double(progress.total - progress.done) / progress.bytes_per_second : -1;
    }
}

HttpRequest Session::request(const std::string& url) const {
    HttpRequest r;
    r.url = url;
    // The token goes to the hub only: never to the storage an LFS file redirects to (another
    // origin), as huggingface_hub; libcurl keeps it from redirects to another host or port too.
    if (origin(url) == origin(endpoint)) r.token = token;
    r.connect_timeout_s = options.connect_timeout_s;
    r.stall_timeout_s = options.stall_timeout_s;
    Session* self = const_cast<Session*>(this);
    r.keep_going = [self] { return self->report(false); };
    return r;
}

std::string percent_encode(const std::string& s, bool keep_slash) {
    static const char* hex = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : s) {
        if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/')) {
            out += char(c);
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

std::string resolve_url(const std::string& endpoint, const std::string& id, const std::string& revision,
                        const std::string& file) {
    return endpoint + "/" + id + "/resolve/" + percent_encode(revision, false) + "/" + percent_encode(file, true);
}

}  // namespace detail

std::vector<std::string> model_files(const std::vector<std::string>& repo_files, const std::vector<std::string>& shards,
                                     std::vector<std::string>* skipped) {
    const std::set<std::string> have(repo_files.begin(), repo_files.end());
    std::vector<std::string> out;
    const auto take = [&](const std::string& name) {
        if (have.count(name) && std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
    };
    const auto take_shards = [&](const std::string& ext) {
        for (const auto& s : shards)
            if (ends_with(s, ext) && is_commit_name(s)) take(s);
    };
    if (have.count("model.safetensors.index.json")) {
        take("model.safetensors.index.json");
        take_shards(".safetensors");
    } else if (have.count("model.safetensors")) {
        take("model.safetensors");
    } else if (have.count("pytorch_model.bin.index.json")) {
        take("pytorch_model.bin.index.json");
        take_shards(".bin");
    } else {
        take("pytorch_model.bin");
    }
    for (const char* name : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                             "merges.txt", "sentencepiece.bpe.model", "spiece.model", "added_tokens.json",
                             "target_vocab.json"})
        take(name);
    for (const auto& f : have)  // std::set: sorted (source.spm, target.spm)
        if (ends_with(f, ".spm") && is_commit_name(f)) take(f);  // one plain name: never a path
    take("generation_config.json");
    take("config.json");  // last: a snapshot with a config.json is complete
    if (skipped)
        for (const auto& f : repo_files)
            if (std::find(out.begin(), out.end(), f) == out.end()) skipped->push_back(f);
    return out;
}

std::string hub_endpoint(const DownloadOptions& options) {
    std::string e = !options.endpoint.empty() ? options.endpoint : env("HF_ENDPOINT");
    if (e.empty()) e = "https://huggingface.co";
    while (!e.empty() && e.back() == '/') e.pop_back();
    if (e.rfind("http://", 0) != 0 && e.rfind("https://", 0) != 0)
        throw ConfigError("the hub address " + quote(e) + " (HF_ENDPOINT) is not an http:// or https:// address");
    return e;
}

std::string hub_token(const DownloadOptions& options) {
    if (options.token == "-") return {};
    if (!options.token.empty()) return options.token;
    for (const char* var : {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"})
        if (std::string t = trimmed(env(var)); !t.empty()) return t;
    std::string path = env("HF_TOKEN_PATH");
    if (path.empty()) {
        std::string home = env("HF_HOME");
        if (home.empty() && !env("XDG_CACHE_HOME").empty()) home = env("XDG_CACHE_HOME") + "/huggingface";
        if (home.empty() && !env("HOME").empty()) home = env("HOME") + "/.cache/huggingface";
        if (!home.empty()) path = home + "/token";
    }
    struct stat st {};
    if (path.empty() || ::stat(path.c_str(), &st) != 0) return {};
    try {
        return trimmed(read_regular_file(path, 4096, "token file"));
    } catch (const FileError&) {
        return {};
    }
}

bool offline_from_environment() {
    std::string v = env("HF_HUB_OFFLINE");
    for (char& c : v) c = char(std::tolower(static_cast<unsigned char>(c)));
    return v == "1" || v == "true" || v == "yes" || v == "on";
}

DownloadPlan plan_download(const DownloadOptions& options, const DownloadCallback& progress) {
    const std::string& id = options.repo_id;
    if (!is_repo_id(id)) throw ConfigError(quote(id) + " is not a hub id (ORGANISATION/NAME, e.g. Helsinki-NLP/opus-mt-en-de)");
    if (!is_revision_name(options.revision))
        throw ConfigError(quote(options.revision) + " is not a revision (a branch, a tag or a commit hash)");
    DownloadPlan plan;
    plan.repo_id = id;
    plan.revision = options.revision;
    plan.cache_dir = options.cache_dir.empty() ? default_cache_dir() : options.cache_dir;
    plan.endpoint = hub_endpoint(options);
    const fs::path repo = fs::path(plan.cache_dir) / repo_folder_name(id);

    if (options.offline || offline_from_environment()) {
        plan.from_cache = true;
        std::string commit = read_ref(repo.string(), options.revision);
        if (commit.empty() && is_commit_name(options.revision)) commit = options.revision;
        const fs::path snapshot = repo / "snapshots" / commit;
        if (commit.empty() || !exists_followed(snapshot / "config.json"))
            throw FileError("offline (HF_HUB_OFFLINE=1): " + quote(id) + " at " + quote(options.revision) +
                            " is not in the cache " + quote(plan.cache_dir, quote_path_max) +
                            "; download it with the network on first (attnviz-cli download " + id + ")");
        plan.commit = commit;
        std::error_code ec;
        for (fs::recursive_directory_iterator it(snapshot, ec), end; !ec && it != end; it.increment(ec)) {
            struct stat st {};
            if (::stat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
            PlannedFile f;
            f.name = it->path().lexically_relative(snapshot).string();
            f.size = int64_t(st.st_size);
            f.cached = true;
            plan.total_bytes += f.size;
            plan.files.push_back(f);
        }
        return plan;
    }

    detail::Session s(options, progress, plan.endpoint, hub_token(options));
    HttpRequest req = s.request(plan.endpoint + "/api/models/" + id + "/revision/" +
                                detail::percent_encode(options.revision, false));
    const HttpResponse info = detail::fetch_small(s, req, "the files of " + quote(id));
    if (info.status != 200) detail::throw_http_error(s, info, id, options.revision, "");
    const json j = parse_json_bounded(info.body, "the hub's answer about " + quote(id));
    if (!j.is_object() || !j.contains("sha") || !j["sha"].is_string() || !is_commit_name(j["sha"].get<std::string>()))
        throw FileError("the hub's answer about " + quote(id) + " names no commit (\"sha\")");
    plan.commit = j["sha"].get<std::string>();
    std::vector<std::string> repo_files;
    if (j.contains("siblings") && j["siblings"].is_array())
        for (const auto& sib : j["siblings"])
            if (sib.is_object() && sib.contains("rfilename") && sib["rfilename"].is_string())
                repo_files.push_back(sib["rfilename"].get<std::string>());
    if (std::find(repo_files.begin(), repo_files.end(), "config.json") == repo_files.end())
        throw FileError(quote(id) + " at " + quote(options.revision) + " has no config.json: not a transformers model");

    std::vector<std::string> shards;
    for (const auto& [index, ext] : {std::pair<std::string, std::string>{"model.safetensors.index.json", ".safetensors"},
                                     {"pytorch_model.bin.index.json", ".bin"}}) {
        if (std::find(repo_files.begin(), repo_files.end(), index) == repo_files.end()) continue;
        const HttpResponse r = detail::fetch_small(s, s.request(detail::resolve_url(plan.endpoint, id, plan.commit, index)),
                                                   quote(index) + " of " + quote(id));
        if (r.status != 200) detail::throw_http_error(s, r, id, plan.commit, index);
        for (const auto& shard : index_shards(r.body, quote(index) + " of " + quote(id), ext)) shards.push_back(shard);
        if (ext == ".safetensors") break;  // safetensors shards: the .bin ones are not needed
    }
    for (const auto& shard : shards)
        if (std::find(repo_files.begin(), repo_files.end(), shard) == repo_files.end())
            throw FileError("the weights index of " + quote(id) + " names " + quote(shard) +
                            ", which the repository does not hold");
    const auto names = model_files(repo_files, shards, &plan.skipped);

    const fs::path snapshot = repo / "snapshots" / plan.commit;
    for (const auto& name : names) {
        PlannedFile f;
        f.name = name;
        std::string url = detail::resolve_url(plan.endpoint, id, plan.commit, name);
        HttpResponse h;
        for (int hop = 0;; ++hop) {
            HttpRequest head = s.request(url);
            head.head = true;
            head.follow_redirects = false;
            h = detail::fetch_small(s, head, quote(name) + " of " + quote(id));
            const std::string location = h.header("location");
            if (h.status >= 300 && h.status < 400 && !location.empty()) {
                const std::string target = join_url(url, location);
                if (origin(target) == origin(url) && hop < 5) {  // the hub itself (a renamed repository): follow
                    url = target;
                    continue;
                }
                f.url = target;  // another origin (the file's CDN): its headers are in this answer
                break;
            }
            if (h.status != 200) detail::throw_http_error(s, h, id, plan.commit, name);
            f.url = url;
            break;
        }
        const std::string linked = h.header("x-linked-etag");
        f.etag = normalize_etag(!linked.empty() ? linked : h.header("etag"));
        f.lfs = !linked.empty();
        if (!is_commit_name(f.etag))
            throw FileError("the hub gave " + (f.etag.empty() ? std::string("no ETag") : "the ETag " + quote(f.etag)) +
                            " for " + quote(name) + " of " + quote(id) + ": it cannot name a blob of the cache");
        f.size = to_int(h.header("x-linked-size"));
        if (f.size < 0 && h.status == 200) f.size = to_int(h.header("content-length"));
        f.cached = blob_complete(repo / "blobs" / f.etag, f.size);
        if (f.size > 0) plan.total_bytes = size_plus(plan.total_bytes, f.size);
        if (!f.cached && f.size > 0) plan.missing_bytes = size_plus(plan.missing_bytes, f.size);
        plan.files.push_back(f);
    }
    return plan;
}

std::string download(const DownloadOptions& options, const DownloadPlan& plan, const DownloadCallback& progress) {
    const fs::path repo = fs::path(plan.cache_dir) / repo_folder_name(plan.repo_id);
    const fs::path snapshot = repo / "snapshots" / plan.commit;
    if (plan.from_cache) return snapshot.string();
    const fs::path blobs = repo / "blobs", locks = fs::path(plan.cache_dir) / ".locks" / repo_folder_name(plan.repo_id);
    const auto make = [](const fs::path& d) {
        std::error_code ec;
        fs::create_directories(d, ec);
        if (ec) throw FileError("cannot create " + quote(d.string(), quote_path_max) + ": " + ec.message());
    };
    make(blobs);
    make(locks);
    if (options.check_space) check_room(plan, blobs);  // before the snapshot folder: no empty revision left
    make(snapshot);
    detail::Session s(options, progress, plan.endpoint, hub_token(options));
    s.progress.file_count = int(plan.files.size());
    s.progress.total = plan.missing_bytes;
    for (size_t i = 0; i < plan.files.size(); ++i) {
        const PlannedFile& f = plan.files[i];
        s.progress.file = f.name;
        s.progress.file_index = int(i);
        s.progress.file_size = f.size;
        s.progress.file_done = 0;
        const fs::path pointer = snapshot / f.name;
        if (!s.report(true)) throw Cancelled("download of " + quote(plan.repo_id) + " cancelled");
        const fs::path blob = blobs / f.etag;
        if (!blob_complete(blob, f.size)) {
            BlobLock lock((locks / (f.etag + ".lock")).string(), [&s] { return s.report(false); });
            if (!blob_complete(blob, f.size)) {
                ::unlink(blob.c_str());  // short: fetched again
                detail::fetch_blob(s, plan, f, blob.string());
            }
        }
        std::error_code ec;
        if (exists_followed(pointer) && fs::read_symlink(pointer, ec).filename() == f.etag) continue;
        // ../../blobs/ETAG, one more ../ per folder of the file's name
        std::string up = "../../";
        for (char c : f.name)
            if (c == '/') up += "../";
        link_atomic(up + "blobs/" + f.etag, pointer);
    }
    if (plan.revision != plan.commit) {
        const fs::path ref = repo / "refs" / plan.revision;
        std::error_code ec;
        fs::create_directories(ref.parent_path(), ec);
        write_file_atomic(ref.string(), plan.commit);
    }
    s.progress.note = "done";
    s.report(true);
    return snapshot.string();
}

std::string download_model(const DownloadOptions& options, const DownloadCallback& progress) {
    return download(options, plan_download(options, progress), progress);
}

}  // namespace attnviz::hub
