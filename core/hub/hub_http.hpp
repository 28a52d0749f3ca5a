#pragma once
// A small HTTP client over libcurl, for the hub's protocol (core/hub/hub_download.hpp): one
// request at a time per client, connections kept between requests, bodies streamed to a
// callback, a bearer token that never follows a redirect to another host (libcurl's own
// rule for CURLOPT_XOAUTH2_BEARER), cancellation from a callback.
//
// Why libcurl: Debian ships it (libcurl4-openssl-dev), it is in core so the CLI and the app
// share one downloader, it speaks HTTP/1.1 and HTTP/2 over TLS with the system's CA
// certificates, follows redirects, resumes with Range, and reads at the speed of the
// connection. Torch-free, Qt-free.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace attnviz::hub {

/// What a request asks for. Every field has a usable default but `url`.
struct HttpRequest {
    std::string url;                  ///< absolute http:// or https:// address
    bool head = false;                ///< HEAD instead of GET
    bool follow_redirects = true;     ///< follow 3xx (at most 10); false: a 3xx is the answer
    std::string token;                ///< sent as "Authorization: Bearer TOKEN" to the url's host only ("" none)
    int64_t range_from = -1;          ///< >= 0: ask for bytes from this offset on ("Range: bytes=N-")
    long connect_timeout_s = 10;      ///< giving up on connecting after this long
    long stall_timeout_s = 30;        ///< a transfer that moves no byte for this long counts as dropped
    size_t max_body = size_t(16) << 20;  ///< a body kept in memory (no on_body) larger than this is an error
    /// When set, the body of a 200 or 206 answer goes here, chunk by chunk, instead of into
    /// HttpResponse::body; it returns false to stop (the request then ends with `aborted`).
    std::function<bool(const char* data, size_t size)> on_body;
    /// When set, called once before the first chunk given to on_body, with the answer's status
    /// (200 or 206) and headers; false stops the request as on_body's false does.
    std::function<bool(long status, const std::map<std::string, std::string>& headers)> on_start;
    /// When set, asked about once a second and on every chunk; false cancels the request.
    std::function<bool()> keep_going;
};

/// The final answer (after redirects).
struct HttpResponse {
    long status = 0;                             ///< 0 when no answer came (see error)
    std::map<std::string, std::string> headers;  ///< the final answer's headers, names in lower case
    std::string body;                            ///< the body when no on_body took it (or an error body)
    std::string url;                             ///< the address that answered (after redirects)
    /// Transport failure: "" none, else libcurl's words ("Connection refused", "transfer closed
    /// with 123 bytes remaining to read"); `dropped` says a retry may help.
    std::string error;
    bool dropped = false;
    bool aborted = false;                        ///< on_body or keep_going stopped it
    /// The header's value ("" when absent).
    std::string header(const std::string& lower_name) const;
};

class HttpClient {
public:
    HttpClient();
    ~HttpClient();
    HttpClient(const HttpClient&) = delete;
    HttpClient& operator=(const HttpClient&) = delete;
    /// Runs one request. Never throws for HTTP statuses or transport failures (they are in the
    /// response); std::bad_alloc and exceptions thrown by the callbacks pass through.
    HttpResponse request(const HttpRequest& req);
    /// The User-Agent header sent.
    static std::string user_agent();

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

}  // namespace attnviz::hub
