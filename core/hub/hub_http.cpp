// libcurl behind HttpClient (core/hub/hub_http.hpp).
#include "core/hub/hub_http.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <exception>
#include <mutex>
#include <stdexcept>

namespace attnviz::hub {

namespace {

std::once_flag g_curl_init;

struct Transfer {
    const HttpRequest* req = nullptr;
    HttpResponse* resp = nullptr;
    CURL* curl = nullptr;
    bool stopped = false;             ///< a callback asked to stop
    bool started = false;             ///< on_start has been called
    std::exception_ptr failure;       ///< thrown by a callback: rethrown after curl returns
    std::chrono::steady_clock::time_point last_ask{};
};

std::string lower(std::string s) {
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const std::string line(data, size * n);
    if (line.rfind("HTTP/", 0) == 0) {
        t->resp->headers.clear();  // a new answer (after a redirect, or 100 Continue)
        return size * n;
    }
    const size_t colon = line.find(':');
    if (colon == std::string::npos) return size * n;
    std::string value = line.substr(colon + 1);
    const auto not_space = [](unsigned char c) { return !std::isspace(c); };
    value.erase(value.begin(), std::find_if(value.begin(), value.end(), not_space));
    value.erase(std::find_if(value.rbegin(), value.rend(), not_space).base(), value.end());
    t->resp->headers[lower(line.substr(0, colon))] = value;
    return size * n;
}

size_t on_write(char* data, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const size_t bytes = size * n;
    long status = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
    try {
        if (t->req->on_body && (status == 200 || status == 206)) {
            if (!t->started) {
                t->started = true;
                if (t->req->on_start && !t->req->on_start(status, t->resp->headers)) {
                    t->stopped = true;
                    return 0;
                }
            }
            if (!t->req->on_body(data, bytes)) {
                t->stopped = true;
                return 0;
            }
            return bytes;
        }
        // An error's body (kept short) or a small answer (JSON).
        const size_t limit = t->req->on_body ? size_t(64) << 10 : t->req->max_body;
        if (t->resp->body.size() + bytes > limit) {
            if (t->req->on_body) return bytes;  // the error's start is enough
            t->resp->error = "the answer is larger than " + std::to_string(limit) + " bytes";
            t->stopped = true;
            return 0;
        }
        t->resp->body.append(data, bytes);
        return bytes;
    } catch (...) {
        t->failure = std::current_exception();
        t->stopped = true;
        return 0;
    }
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    auto* t = static_cast<Transfer*>(user);
    if (!t->req->keep_going) return 0;
    try {
        if (!t->req->keep_going()) {
            t->stopped = true;
            return 1;
        }
    } catch (...) {
        t->failure = std::current_exception();
        t->stopped = true;
        return 1;
    }
    return 0;
}

bool is_dropped(CURLcode code) {
    switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
        return true;
    default:
        return false;
    }
}

}  // namespace

std::string HttpResponse::header(const std::string& lower_name) const {
    const auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
}

struct HttpClient::Impl {
    CURL* curl = nullptr;
};

HttpClient::HttpClient() : m_impl(std::make_unique<Impl>()) {
    std::call_once(g_curl_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    m_impl->curl = curl_easy_init();
    if (!m_impl->curl) throw std::runtime_error("cannot start libcurl (curl_easy_init failed)");
}

HttpClient::~HttpClient() { curl_easy_cleanup(m_impl->curl); }

std::string HttpClient::user_agent() {
#ifdef ATTNVIZ_VERSION
    return std::string("attnviz/") + ATTNVIZ_VERSION + "; hf_hub/compatible; " + curl_version();
#else
    return std::string("attnviz; hf_hub/compatible; ") + curl_version();
#endif
}

HttpResponse HttpClient::request(const HttpRequest& req) {
    HttpResponse resp;
    Transfer t;
    t.req = &req;
    t.resp = &resp;
    CURL* c = t.curl = m_impl->curl;
    curl_easy_reset(c);  // options only: the connection cache stays
    curl_easy_setopt(c, CURLOPT_URL, req.url.c_str());
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, req.follow_redirects ? 1L : 0L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, user_agent().c_str());
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, req.connect_timeout_s);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, req.stall_timeout_s);
    curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 512L * 1024L);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &t);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    if (req.head) curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    // The real size of the file: no compression (as huggingface_hub asks).
    curl_slist* headers = curl_slist_append(nullptr, "Accept-Encoding: identity");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    if (!req.token.empty()) {
        // libcurl sends it to the url's host only, never to the host a redirect names.
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, long(CURLAUTH_BEARER));
        curl_easy_setopt(c, CURLOPT_XOAUTH2_BEARER, req.token.c_str());
    }
    std::string range;
    if (req.range_from > 0) {
        range = std::to_string(req.range_from) + "-";
        curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
    }
    const CURLcode code = curl_easy_perform(c);
    curl_slist_free_all(headers);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp.status);
    char* url = nullptr;
    if (curl_easy_getinfo(c, CURLINFO_EFFECTIVE_URL, &url) == CURLE_OK && url) resp.url = url;
    if (t.failure) std::rethrow_exception(t.failure);
    if (code != CURLE_OK) {
        resp.aborted = t.stopped && resp.error.empty();
        if (resp.error.empty()) resp.error = curl_easy_strerror(code);
        resp.dropped = !t.stopped && is_dropped(code);
    }
    return resp;
}

}  // namespace attnviz::hub
