#pragma once
// The local Hugging Face cache, laid out exactly as huggingface_hub lays it out, so that
// attnviz, transformers and huggingface_hub share one copy of each model:
//
//   CACHE/models--ORG--NAME/blobs/<etag>            the files' contents, named by their etag
//                                                    (an LFS file's sha256, else its git oid)
//   CACHE/models--ORG--NAME/snapshots/<commit>/FILE  relative symlinks ../../blobs/<etag>
//   CACHE/models--ORG--NAME/refs/<revision>          the commit a branch or tag names
//   CACHE/.locks/models--ORG--NAME/<etag>.lock       one lock per blob (flock(2), as the
//                                                    `filelock` package huggingface_hub uses)
//
// CACHE is $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub. A revision is a commit hash or a ref name, and it never leaves
// snapshots/: a refs/ file holding "..", "." or a path is not a commit.
//
// This file reads and deletes; core/hub/hub_download.hpp writes. Torch-free, Qt-free, no network.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace attnviz::hub {

/// The cache huggingface_hub downloads into, as it resolves it ($HF_HUB_CACHE,
/// $HUGGINGFACE_HUB_CACHE, $HF_HOME/hub, $XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub);
/// FileError when none can be named (no HOME).
std::string default_cache_dir();

/// Every cache a model may be found in, in the order they are searched (the download cache
/// first, then the others the variables name); duplicates removed.
std::vector<std::string> cache_dirs();

/// Whether `id` has the form of a hub id: ORG/NAME (one slash; letters, digits, '-', '_', '.';
/// no "..").
bool is_repo_id(const std::string& id);

/// "models--ORG--NAME" for "ORG/NAME" (the caller checked is_repo_id).
std::string repo_folder_name(const std::string& id);

/// Whether `name` can be a commit's folder under snapshots/: one path component of letters,
/// digits, '.', '-', '_', not "." nor "..", at most 255 bytes.
bool is_commit_name(const std::string& name);

/// Whether `rev` can be a revision (a branch, tag or commit; "refs/pr/1" too): components of
/// letters, digits, '.', '-', '_' separated by single '/', none "." nor "..", at most 255 bytes.
bool is_revision_name(const std::string& rev);

/// The commit refs/<revision> of `repo_dir` names ("" when absent); FileError when the file
/// holds something that is not a commit name (it is never followed).
std::string read_ref(const std::string& repo_dir, const std::string& revision);

/// The snapshot folder of `id` at `revision` in the first cache of cache_dirs() that holds it
/// with a config.json: the commit refs/<revision> names (or `revision` itself when it is a
/// commit folder); for "main" and no usable ref, the newest snapshot with a config.json.
/// "" when no cache holds it; `looked` (optional) receives the model folders searched.
std::string find_snapshot(const std::string& id, const std::string& revision = "main",
                          std::vector<std::string>* looked = nullptr);

/// One revision of a cached model.
struct CachedRevision {
    std::string commit;              ///< the snapshot folder's name
    std::vector<std::string> refs;   ///< the refs naming it ("main", ...), sorted
    std::vector<std::string> files;  ///< its files, relative to the snapshot, sorted
    int64_t size = 0;                ///< bytes of the distinct blobs its files link to
    double last_modified = 0;        ///< seconds since the epoch: the snapshot folder's mtime
};

/// One cached model (a models--ORG--NAME folder).
struct CachedModel {
    std::string id;                           ///< ORG/NAME
    std::string path;                         ///< its models--ORG--NAME folder
    std::vector<CachedRevision> revisions;    ///< newest first
    int64_t size_on_disk = 0;                 ///< bytes of every file in blobs/ (.incomplete included)
    double last_used = 0;                     ///< the newest access or change of a blob or snapshot (epoch s)
    double last_modified = 0;                 ///< the newest change of a blob or snapshot (epoch s)
    int64_t incomplete_bytes = 0;             ///< bytes of interrupted downloads (blobs/*.incomplete)
};

/// Every model of one cache folder, sorted by id (huggingface-cli scan-cache). A folder that
/// is not a model's (datasets--, spaces--, .locks) is skipped; an absent cache is empty.
std::vector<CachedModel> scan_cache(const std::string& cache_dir);

/// What delete_revision removed.
struct DeleteResult {
    std::vector<std::string> commits;  ///< the snapshots removed
    int64_t freed = 0;                 ///< bytes of the blobs removed
    bool removed_model = false;        ///< the whole models--ORG--NAME folder went (no snapshot left)
};

/// Removes one revision of `id` from `cache_dir` (huggingface-cli delete-cache): `revision` is a
/// commit or a ref; "" removes every revision. The snapshot goes, so do the refs naming it and the
/// blobs no other snapshot links to; the model's folder (and its locks) go when no snapshot is
/// left. FileError when the model or the revision is not there, naming what is.
DeleteResult delete_revision(const std::string& cache_dir, const std::string& id, const std::string& revision);

/// An exclusive lock on a blob, compatible with huggingface_hub's: flock(LOCK_EX) on the file
/// `path` (created 0664, never through a symlink, never removed), held until destruction. The
/// lock file found unlinked after locking (a peer removed it) is opened again.
class BlobLock {
public:
    /// Waits for the lock; every `poll_ms` it asks `keep_waiting` (when given) whether to go on,
    /// and throws Cancelled when it answers false. FileError when the file cannot be created.
    explicit BlobLock(const std::string& path, const std::function<bool()>& keep_waiting = {}, int poll_ms = 100);
    ~BlobLock();
    BlobLock(const BlobLock&) = delete;
    BlobLock& operator=(const BlobLock&) = delete;
    /// Whether the lock is free right now (tries and releases it; for tests).
    static bool is_free(const std::string& path);

private:
    int m_fd = -1;
};

}  // namespace attnviz::hub
