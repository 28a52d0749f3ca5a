#pragma once
// What hub_download.cpp and hub_fetch.cpp share: one download's state (the HTTP client, the
// progress it reports, the retries), the requests with retries, and the hub's errors in words.
#include <chrono>
#include <deque>
#include <string>
#include <utility>

#include "core/hub/hub_download.hpp"
#include "core/hub/hub_http.hpp"

namespace attnviz::hub::detail {

/// One download (or plan): the client, the callback and what it was told so far.
struct Session {
    Session(const DownloadOptions& o, const DownloadCallback& cb, std::string endpoint, std::string token);
    const DownloadOptions& options;
    const DownloadCallback& callback;
    std::string endpoint, token;
    HttpClient http;
    DownloadProgress progress;
    bool cancelled = false;

    /// Tells the callback (at most every 100 ms unless `now`); false once it asked to cancel.
    bool report(bool now);
    /// Adds `n` fetched bytes to the progress (speed and ETA over the last few seconds).
    void add_bytes(int64_t n);
    /// The request with the token, the timeouts and cancellation set.
    HttpRequest request(const std::string& url) const;

private:
    std::chrono::steady_clock::time_point m_last_report{};
    std::deque<std::pair<double, int64_t>> m_samples;  ///< (seconds, done) for the speed
    std::chrono::steady_clock::time_point m_start = std::chrono::steady_clock::now();
};

/// Tries of one request or file: backoff doubling from first_backoff_s (at most 30 s), at most
/// max_attempts tries in a row without progress, none after retry_time_s.
class Retries {
public:
    explicit Retries(Session& s) : m_session(s), m_first(std::chrono::steady_clock::now()) {}
    /// Waits before the next try and returns true, or returns false when the tries are spent.
    /// Throws Cancelled when the callback cancels while it waits.
    bool again(const std::string& why);
    /// Bytes came: the count of failures in a row starts again.
    void progressed() { m_failures = 0; }
    int failures() const { return m_failures; }

private:
    Session& m_session;
    std::chrono::steady_clock::time_point m_first;
    int m_failures = 0;
};

/// A small request (the API, a HEAD, an index) with retries on 5xx, 429 and dropped
/// connections. Returns the answer whatever its status; FileError when the tries are spent.
HttpResponse fetch_small(Session& s, HttpRequest req, const std::string& what);

/// FileError for an answer that is not a success, in words a user can act on (401/403: the
/// licence and HF_TOKEN; 404: which of the model, the revision or the file).
[[noreturn]] void throw_http_error(const Session& s, const HttpResponse& r, const std::string& id,
                                   const std::string& revision, const std::string& file);

/// Fetches one file into `blob_path` (through blob_path.incomplete, resumed when present):
/// size and sha256 (when file.lfs and its etag is one) checked before the rename.
void fetch_blob(Session& s, const DownloadPlan& plan, const PlannedFile& file, const std::string& blob_path);

/// "https://hub/ORG/NAME/resolve/REV/FILE", each part percent-encoded as huggingface_hub does.
std::string resolve_url(const std::string& endpoint, const std::string& id, const std::string& revision,
                        const std::string& file);
/// Percent-encodes all but letters, digits, "-._~" (and '/', when keep_slash).
std::string percent_encode(const std::string& s, bool keep_slash);

}  // namespace attnviz::hub::detail
