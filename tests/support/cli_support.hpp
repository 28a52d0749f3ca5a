#pragma once
// Helpers of the command-line tests: attnviz-cli run as a subprocess in a
// temporary directory, its output and exit code, tiny training flags.
#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "catch_torch.hpp"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

// POSIX calls rather than std::filesystem: the PyTorch wheel's libtorch.so exports
// std::filesystem symbols of its own, and remove_all() through them crashes.
namespace attnviz_cli_test {

inline bool exists(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

inline int remove_entry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }

/// A fresh directory per test, removed afterwards.
struct TempDir {
    std::string path;
    TempDir() {
        const char* base = std::getenv("TMPDIR");
        std::string tmpl = std::string(base && *base ? base : "/tmp") + "/attnviz-cli-test-XXXXXX";
        REQUIRE(mkdtemp(tmpl.data()) != nullptr);
        path = tmpl;
    }
    ~TempDir() { nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS); }
    std::string operator/(const std::string& name) const { return path + "/" + name; }
};

inline std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

inline std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

inline void write_file(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
}

inline std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

struct Result {
    int code = -1;
    std::string out, err;
};

/// Runs `command` followed by the quoted args (stdin from stdin_path; stdout and
/// stderr through files in dir) and collects the exit code and both outputs.
inline Result run_command(const TempDir& dir, std::string command, const std::vector<std::string>& args,
                          const std::string& stdin_path = "/dev/null") {
    const std::string out = dir / "stdout.txt", err = dir / "stderr.txt";
    for (const auto& a : args) command += " " + quote(a);
    command += " <" + quote(stdin_path) + " >" + quote(out) + " 2>" + quote(err);
    const int status = std::system(command.c_str());
    Result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = read_file(out);
    r.err = read_file(err);
    return r;
}

/// Runs attnviz-cli with the given arguments (and stdin text), in dir.
inline Result cli(const TempDir& dir, const std::vector<std::string>& args, const std::string& input = "") {
    const std::string in = dir / "stdin.txt";
    write_file(in, input);
    // One LibTorch thread: the tests share the machine with each other.
    return run_command(dir, quote(ATTNVIZ_CLI_PATH) + " --threads 1", args, in);
}

/// The documented error form: exactly one line `attnviz-cli: error: ...` and nothing on stdout.
inline void require_one_error_line(const Result& r, const std::string& must_contain) {
    INFO("stderr: " << r.err);
    auto lines = lines_of(r.err);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].rfind("attnviz-cli: error: ", 0) == 0);
    CHECK(lines[0].find(must_contain) != std::string::npos);
    CHECK(r.out.empty());
}

/// Flags of a model small enough to train in a second or two.
inline std::vector<std::string> tiny(std::vector<std::string> extra = {}) {
    std::vector<std::string> a{"--embed", "16", "--hidden", "24", "--batch", "32", "--device", "cpu", "-q"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
}

inline std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

/// Trains a tiny reverse-task model and returns its checkpoint path.
inline std::string train_tiny(const TempDir& dir, const std::string& name = "model.ckpt") {
    std::string ckpt = dir / name;
    Result r = cli(dir, cat({"train", "--task", "reverse", "--pairs", "300", "--epochs", "3",
                             "--seed", "1", "--save", ckpt},
                            tiny()));
    INFO("stderr: " << r.err);
    REQUIRE(r.code == 0);
    REQUIRE(exists(ckpt));
    return ckpt;
}

inline void check_rows_sum_to_one(const std::vector<std::vector<float>>& rows, size_t columns) {
    REQUIRE(!rows.empty());
    for (const auto& row : rows) {
        REQUIRE(row.size() == columns);
        double sum = 0;
        for (float w : row) {
            CHECK(w >= 0.0f);
            sum += w;
        }
        CHECK(std::abs(sum - 1.0) < 1e-5);
    }
}

}  // namespace attnviz_cli_test
