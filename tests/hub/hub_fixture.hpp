#pragma once
// The local hub of the download tests (tests/hub/hub_server.py, on 127.0.0.1 only): one server
// per test case, started from the test and stopped with it (it also stops by itself). The tests
// of this folder need Python's standard library; main() exits 77 (skipped) without it.
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/hub/hub_http.hpp"

extern char** environ;

namespace attnviz::testing {

/// A fresh folder under the system's temporary folder, removed with everything in it.
struct HubTempDir {
    std::filesystem::path path;
    HubTempDir() {
        std::string tmpl = (std::filesystem::temp_directory_path() / "attnviz-hub-XXXXXX").string();
        if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
        path = tmpl;
    }
    /// Removed with nftw: std::filesystem::remove_all resolves to libtorch.so's exported copy in
    /// a process that links LibTorch (the ui tests), which crashes.
    ~HubTempDir() {
        ::nftw(
            path.c_str(),
            [](const char* p, const struct stat*, int type, struct FTW*) {
                return (type == FTW_DP ? ::rmdir(p) : ::unlink(p)) == 0 ? 0 : 0;
            },
            16, FTW_DEPTH | FTW_PHYS);
    }
    std::string str() const { return path.string(); }
};

/// Runs hub_server.py with `args`; endpoint() is its address.
class HubServer {
public:
    explicit HubServer(std::vector<std::string> args = {}) {
        std::vector<std::string> argv = {ATTNVIZ_HUB_PYTHON, ATTNVIZ_HUB_SERVER, "--lifetime", "300", "--port-file",
                                         (m_dir.path / "port").string()};
        argv.insert(argv.end(), args.begin(), args.end());
        std::vector<char*> cargv;
        for (auto& a : argv) cargv.push_back(a.data());
        cargv.push_back(nullptr);
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
        if (posix_spawn(&m_pid, cargv[0], &actions, nullptr, cargv.data(), environ) != 0)
            throw std::runtime_error("cannot start the hub server");
        posix_spawn_file_actions_destroy(&actions);
        // Waits for the port file: a bound on a hung start, not a measure of speed.
        for (int i = 0; i < 600 && m_port.empty(); ++i) {
            std::ifstream in(m_dir.path / "port");
            std::getline(in, m_port);
            if (m_port.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
            int status = 0;
            if (m_port.empty() && ::waitpid(m_pid, &status, WNOHANG) == m_pid) {
                m_pid = -1;
                throw std::runtime_error("the hub server exited at start");
            }
        }
        if (m_port.empty()) throw std::runtime_error("the hub server did not start within 30 s");
    }
    ~HubServer() {
        if (m_pid > 0) {
            ::kill(m_pid, SIGTERM);
            int status = 0;
            ::waitpid(m_pid, &status, 0);
        }
    }
    HubServer(const HubServer&) = delete;
    HubServer& operator=(const HubServer&) = delete;

    std::string endpoint() const { return "http://127.0.0.1:" + m_port; }
    /// The server's record: {"counts": {"METHOD PATH": n}, "log": [{"method", "path", "range", "auth"}]}.
    nlohmann::json stats() const {
        hub::HttpClient http;
        hub::HttpRequest req;
        req.url = endpoint() + "/_stats";
        const auto r = http.request(req);
        return nlohmann::json::parse(r.body);
    }
    /// Requests whose path contains `part` (and, when given, of that method).
    int requests(const std::string& part, const std::string& method = "") const {
        int n = 0;
        const nlohmann::json all = stats();  // (a range-for over stats()["log"] would read a destroyed temporary)
        for (const auto& e : all["log"])
            if (e["path"].get<std::string>().find(part) != std::string::npos &&
                (method.empty() || e["method"].get<std::string>() == method))
                ++n;
        return n;
    }

private:
    HubTempDir m_dir;
    pid_t m_pid = -1;
    std::string m_port;
};

/// Sets an environment variable for a scope (unset: nullptr), then puts it back.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value) : m_name(name) {
        if (const char* old = std::getenv(name)) m_old = old, m_had = true;
        if (value) ::setenv(name, value, 1);
        else ::unsetenv(name);
    }
    ~ScopedEnv() {
        if (m_had) ::setenv(m_name.c_str(), m_old.c_str(), 1);
        else ::unsetenv(m_name.c_str());
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    std::string m_name, m_old;
    bool m_had = false;
};

inline std::string read_file_text(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace attnviz::testing
