#pragma once
// Downloading a model from the Hugging Face Hub into the shared cache (core/hub/hub_cache.hpp
// says how it is laid out), speaking the hub's protocol as huggingface_hub does:
//
//   GET  {endpoint}/api/models/{id}/revision/{rev}    the commit and the file list
//   HEAD {endpoint}/{id}/resolve/{commit}/{file}       X-Repo-Commit, X-Linked-Etag (else ETag),
//                                                      X-Linked-Size (else Content-Length); a
//                                                      relative redirect (a renamed repo) is followed
//   GET  the same address, following redirects        the bytes (an LFS file: from its CDN)
//
// Only the files a model needs (model_files()). Each file goes to blobs/<etag>.incomplete
// under the blob's lock, resumed with a Range request after a dropped connection, its sha256
// computed while it arrives when the etag is one (an LFS file): a file whose size or hash
// differs never becomes a blob. Then blobs/<etag>, the snapshot's relative symlink, and, once
// every file is in place, refs/<revision>. config.json is linked last, so a snapshot with a
// config.json is complete: an interrupted download never looks like a model.
//
// Environment, as huggingface_hub reads it: HF_ENDPOINT, HF_TOKEN (else the token file
// $HF_TOKEN_PATH or $HF_HOME/token), HF_HUB_OFFLINE=1, the cache variables. Torch-free, Qt-free.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace attnviz::hub {

/// What to download and how. Empty strings take the environment's value.
struct DownloadOptions {
    std::string repo_id;             ///< ORG/NAME
    std::string revision = "main";   ///< a branch, a tag or a commit hash
    std::string cache_dir;           ///< "": default_cache_dir()
    std::string endpoint;            ///< "": $HF_ENDPOINT, else https://huggingface.co
    std::string token;               ///< "": $HF_TOKEN, else the token file; "-": none
    bool offline = false;            ///< no network (also when HF_HUB_OFFLINE is 1/true/yes/on)
    int max_attempts = 6;            ///< tries per request (5xx answers, dropped connections)
    double retry_time_s = 300;       ///< no new try this long after a file's first failure
    double first_backoff_s = 1;      ///< the wait before the 2nd try; doubled each time, at most 30 s
    long connect_timeout_s = 10;     ///< giving up on connecting after this long
    long stall_timeout_s = 30;       ///< a transfer that moves no byte this long counts as dropped
    /// Check before downloading that the cache's file system has the room (and that the process's
    /// file-size limit, ulimit -f, allows the largest file). Off only for tests of a full disk.
    bool check_space = true;
};

/// One file of a plan.
struct PlannedFile {
    std::string name;     ///< its path in the repository
    int64_t size = -1;    ///< bytes (-1 unknown)
    std::string etag;     ///< its blob's name (sha256 of an LFS file, else the git oid)
    bool lfs = false;     ///< stored with LFS: the etag is its sha256, checked
    bool cached = false;  ///< already in the cache (nothing to fetch)
    std::string url;      ///< where its bytes come from (the resolve address, or where it redirects)
};

/// What a download will do: the commit and the files, with their sizes, before any byte of
/// them is fetched.
struct DownloadPlan {
    std::string repo_id, revision, commit;
    std::string cache_dir;               ///< the cache it goes to
    std::string endpoint;                ///< the hub asked
    std::vector<PlannedFile> files;      ///< in download order (config.json last)
    std::vector<std::string> skipped;    ///< files of the repository a model does not need
    int64_t total_bytes = 0;             ///< of every file (unknown sizes count 0)
    int64_t missing_bytes = 0;           ///< of the files not cached yet
    bool from_cache = false;             ///< offline: the plan is the cached snapshot
};

/// Progress, given to the callback at each file's start and end, and at most ~10 times a second.
struct DownloadProgress {
    std::string file;              ///< the file being fetched
    int file_index = 0;            ///< 0-based, among the files of the plan
    int file_count = 0;
    int64_t file_done = 0, file_size = -1;
    int64_t done = 0;              ///< bytes of this download so far (cached files excluded)
    int64_t total = 0;             ///< bytes this download fetches (the plan's missing_bytes)
    double bytes_per_second = 0;   ///< over the last few seconds
    double eta_s = -1;             ///< seconds left at that speed (-1 unknown)
    int retries = 0;               ///< tries repeated so far (5xx, dropped connections)
    std::string note;              ///< "" or why it waits ("retrying in 2 s: ...")
};

/// Returns false to cancel: the download then throws Cancelled, leaving what it fetched of
/// the current file in blobs/<etag>.incomplete for a later resume.
using DownloadCallback = std::function<bool(const DownloadProgress&)>;

/// The files of a repository a model needs, in download order: the weights (the safetensors
/// index before its shards, which `shards` lists; pytorch_model.bin and its index only without
/// safetensors), the tokenizer's files, generation_config.json, and config.json last. Never
/// .h5, .msgpack, .onnx, .tflite or files in sub-folders. `skipped` receives the others.
std::vector<std::string> model_files(const std::vector<std::string>& repo_files, const std::vector<std::string>& shards,
                                     std::vector<std::string>* skipped = nullptr);

/// The hub address: options.endpoint, else $HF_ENDPOINT, else https://huggingface.co (no trailing /).
std::string hub_endpoint(const DownloadOptions& options);

/// The token: options.token, else $HF_TOKEN, else the token file ($HF_TOKEN_PATH, $HF_HOME/token,
/// ~/.cache/huggingface/token); "" when none.
std::string hub_token(const DownloadOptions& options);

/// Whether HF_HUB_OFFLINE asks for no network (1, true, yes, on).
bool offline_from_environment();

/// Asks the hub what `options` would download (the commit, the files and their sizes) and which
/// files are cached already. Offline: the cached snapshot's files, or FileError when the
/// revision is not cached. FileError explains 401/403 (the licence to accept, HF_TOKEN), 404
/// and failures after the retries; Cancelled when `progress` answers false while it waits.
DownloadPlan plan_download(const DownloadOptions& options, const DownloadCallback& progress = {});

/// Fetches the plan's missing files into the cache and returns the snapshot folder. Errors as
/// plan_download, and FileError for a file whose size or sha256 differs (it is removed), a full
/// disk, or a file-size limit.
std::string download(const DownloadOptions& options, const DownloadPlan& plan, const DownloadCallback& progress = {});

/// plan_download then download.
std::string download_model(const DownloadOptions& options, const DownloadCallback& progress = {});

}  // namespace attnviz::hub
