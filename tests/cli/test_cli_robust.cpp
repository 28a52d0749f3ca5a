// attnviz-cli under hostile conditions (issue 11): long validation targets,
// out-of-range integers, output paths that cannot be written, a full disk, a
// read-only directory, SIGTERM, signals during saves, periodic checkpoints.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "catch_torch.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_support.hpp"

using nlohmann::json;
using namespace attnviz_cli_test;

namespace {

/// attnviz-cli started in the background, its stdout and stderr in files of dir.
struct Background {
    pid_t pid = -1;
    std::string out, err;
    Background(const TempDir& dir, const std::vector<std::string>& args, const std::string& tag = "bg")
        : out(dir / (tag + ".out")), err(dir / (tag + ".err")) {
        pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            if (!freopen(out.c_str(), "w", stdout) || !freopen(err.c_str(), "w", stderr)) _exit(126);
            std::vector<std::string> a{ATTNVIZ_CLI_PATH, "--threads", "1"};
            a.insert(a.end(), args.begin(), args.end());
            std::vector<char*> argv;
            for (auto& s : a) argv.push_back(s.data());
            argv.push_back(nullptr);
            execv(argv[0], argv.data());
            _exit(127);
        }
    }
    ~Background() {
        if (pid > 0) {
            kill(pid, SIGKILL);
            waitpid(pid, nullptr, 0);
        }
    }
    /// Waits until stderr contains text (or the file exists, for a path); false after the timeout.
    bool wait_for(const std::function<bool()>& pred, int seconds = 60) const {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
        while (!pred()) {
            if (std::chrono::steady_clock::now() > deadline) return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        return true;
    }
    bool err_has(const std::string& text) const { return read_file(err).find(text) != std::string::npos; }
    /// Waits for the exit; returns the wait status.
    int finish() {
        int status = 0;
        waitpid(pid, &status, 0);
        pid = -1;
        return status;
    }
};

/// attnviz-cli with exactly these arguments (cli() adds --threads 1).
Result cli_raw(const TempDir& dir, const std::vector<std::string>& args) {
    return run_command(dir, quote(ATTNVIZ_CLI_PATH), args);
}

/// The names in a directory, one per line (sorted, no . and ..).
std::string read_file_list(const std::string& dir) {
    std::vector<std::string> names;
    if (DIR* d = opendir(dir.c_str())) {
        while (const dirent* e = readdir(d))
            if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") names.push_back(e->d_name);
        closedir(d);
    }
    std::sort(names.begin(), names.end());
    std::string out;
    for (const auto& n : names) out += n + "\n";
    return out;
}

/// Files in dir whose name starts with prefix (temporary files of a save to dir/prefix...).
std::vector<std::string> files_starting(const TempDir& dir, const std::string& prefix) {
    std::vector<std::string> out;
    for (const auto& name : lines_of(read_file_list(dir.path)))
        if (name.rfind(prefix, 0) == 0) out.push_back(name);
    return out;
}

}  // namespace

TEST_CASE("cli: validation targets longer than decoding allows still train and save", "[cli][robust][defect5]") {
    // Targets of 520 tokens: validation decodes up to 2 x longest + 2 tokens, above the
    // decoder's limit of 1000; that ended training and --save wrote nothing.
    TempDir dir;
    std::string tsv;
    for (int i = 0; i < 24; ++i) {
        std::string target;
        for (int k = 0; k < 520; ++k) target += (k ? " " : "") + std::string(1, char('a' + (i + k) % 7));
        tsv += "w" + std::to_string(i % 5) + " v" + std::to_string(i % 3) + "\t" + target + "\n";
    }
    write_file(dir / "long.tsv", tsv);
    const std::string ckpt = dir / "long.ckpt";
    Result r = cli(dir, {"train", "--data", dir / "long.tsv", "--epochs", "1", "--val-fraction", "0.25",
                         "--eval-sample", "2", "--save", ckpt, "--json", "--embed", "8", "--hidden", "8", "--batch",
                         "32", "--device", "cpu", "-q"});
    INFO("stderr: " << r.err);
    CHECK(r.code == 0);
    REQUIRE(exists(ckpt));
    const json j = json::parse(r.out);
    CHECK(j.at("stop_reason") == "finished");
    CHECK(j.at("epochs") == 1);
    CHECK(j.at("saved") == ckpt);
    CHECK(cli(dir, {"translate", "--model", ckpt, "w1 v2"}).code == 0);
}

TEST_CASE("cli: integer flags are range-checked before they are narrowed", "[cli][robust][defect10]") {
    TempDir dir;
    auto usage = [&](const std::vector<std::string>& args, const std::string& flag) {
        Result r = cli_raw(dir, args);
        INFO("args: " << args.back() << "  stderr: " << r.err);
        CHECK(r.code == 2);
        require_one_error_line(r, flag);
    };
    usage({"--threads", "100000", "tasks"}, "--threads");
    usage({"--threads", "4294967297", "tasks"}, "--threads");
    usage({"--threads", "-1", "tasks"}, "--threads");
    usage({"train", "--task", "reverse", "--epochs", "4294967297"}, "--epochs");
    usage({"train", "--task", "reverse", "--epochs", "0"}, "--epochs");
    usage({"train", "--task", "reverse", "--min-freq", "4294967298"}, "--min-freq");
    usage({"train", "--task", "reverse", "--batch", "99999999999999999999"}, "--batch");
    usage({"train", "--task", "reverse", "--seed", "-1"}, "--seed");
    usage({"train", "--task", "reverse", "--max-batches", "1e3"}, "--max-batches");
    usage({"train", "--task", "reverse", "--pairs", "100000000000"}, "--pairs");
    usage({"compare", "--task", "reverse", "--vary", "epochs=1,4294967297"}, "--epochs");
    // In range: accepted (--threads 2 then lists the tasks).
    CHECK(cli_raw(dir, {"--threads", "2", "tasks"}).code == 0);
    CHECK(cli_raw(dir, {"--threads", "1024", "tasks"}).code == 0);
}

TEST_CASE("cli: output paths that cannot be written fail before any work", "[cli][robust][defect10]") {
    TempDir dir;
    REQUIRE(mkdir((dir / "adir").c_str(), 0755) == 0);
    REQUIRE(mkdir((dir / "out.json").c_str(), 0755) == 0);  // a directory with an output's name
    auto before_work = [&](const std::vector<std::string>& args, const std::string& what) {
        Result r = cli(dir, args);  // not --quiet: training would describe its data first
        INFO("stderr: " << r.err);
        CHECK(r.code == 1);
        require_one_error_line(r, what);
    };
    before_work({"train", "--task", "reverse", "--epochs", "2", "--save", dir / "adir"}, "is a directory");
    before_work({"train", "--task", "reverse", "--epochs", "2", "--save", "/proc/attnviz-test.ckpt"},
                "attnviz-test.ckpt");
    before_work({"compare", "--task", "reverse", "--epochs", "1", "--vary", "hidden=8,16", "--curves", dir / "adir"},
                "is a directory");
    const std::string ckpt = train_tiny(dir);
    for (const char* flag : {"--attention-out", "--beam-tree", "--alignment-out"}) {
        std::vector<std::string> args{"translate", "--model", ckpt, flag, dir / "out.json", "a b"};
        before_work(args, "is a directory");
    }
    before_work({"compare-attention", "--model", ckpt, "--with", ckpt, "--out", dir / "out.json", "a b"},
                "is a directory");
    CHECK(files_starting(dir, "adir.tmp").empty());
    CHECK(files_starting(dir, "out.json.tmp").empty());
}

TEST_CASE("cli: a full disk (a file-size limit) keeps the previous checkpoint and leaves no temporary",
          "[cli][robust][disk]") {
    TempDir dir;
    const std::string ckpt = train_tiny(dir, "model.ckpt");
    const std::string before = read_file(ckpt);
    // ulimit -f: no file may grow past 64 blocks; a write beyond gets EFBIG (SIGXFSZ is ignored by the CLI).
    const std::string cmd = "ulimit -f 64; exec " + quote(ATTNVIZ_CLI_PATH) + " --threads 1 train --task reverse " +
                            "--pairs 300 --epochs 1 --embed 64 --hidden 128 --device cpu -q --save " + quote(ckpt) +
                            " >" + quote(dir / "out.txt") + " 2>" + quote(dir / "err.txt");
    const int status = std::system(("sh -c " + quote(cmd)).c_str());
    Result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.err = read_file(dir / "err.txt");
    INFO("stderr: " << r.err);
    CHECK(r.code == 1);
    require_one_error_line(r, "File too large");
    CHECK(read_file(ckpt) == before);
    CHECK(files_starting(dir, "model.ckpt.tmp").empty());
    CHECK(cli(dir, {"translate", "--model", ckpt, "1 2 3"}).code == 0);
}

TEST_CASE("cli: a read-only directory keeps the previous checkpoint, refused before training",
          "[cli][robust][disk]") {
    TempDir dir;
    REQUIRE(chmod(dir.path.c_str(), 0755) == 0);  // nobody may look inside (mkdtemp made it 0700)
    REQUIRE(mkdir((dir / "ro").c_str(), 0755) == 0);
    const std::string ckpt = train_tiny(dir, "ro/model.ckpt");
    const std::string before = read_file(ckpt);
    REQUIRE(chmod((dir / "ro").c_str(), 0555) == 0);
    std::string prefix;
    if (geteuid() == 0) {
        // Root writes into a 0555 directory anyway: run the CLI as the user nobody.
        prefix = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
        if (std::system((prefix + quote(ATTNVIZ_CLI_PATH) + " --version >/dev/null 2>&1").c_str()) != 0) {
            chmod((dir / "ro").c_str(), 0755);
            WARN("skipped: running as root and cannot run the CLI as the user nobody (setpriv)");
            return;
        }
    }
    const std::string cmd = prefix + quote(ATTNVIZ_CLI_PATH) + " --threads 1 train --task reverse --epochs 1 " +
                            "--device cpu --save " + quote(ckpt) + " >" + quote(dir / "out.txt") + " 2>" +
                            quote(dir / "err.txt");
    const int status = std::system(cmd.c_str());
    chmod((dir / "ro").c_str(), 0755);
    Result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.err = read_file(dir / "err.txt");
    INFO("stderr: " << r.err);
    CHECK(r.code == 1);
    require_one_error_line(r, "Permission denied");
    CHECK(read_file(ckpt) == before);
    CHECK(lines_of(read_file_list(dir / "ro")) == std::vector<std::string>{"model.ckpt"});
}

TEST_CASE("cli: SIGTERM stops training, saves and exits 143", "[cli][robust][signals]") {
    TempDir dir;
    const std::string ckpt = dir / "term.ckpt";
    Background p(dir, {"train", "--task", "reverse", "--pairs", "300", "--epochs", "100000", "--save", ckpt, "--json",
                       "--embed", "16", "--hidden", "24", "--device", "cpu"});
    REQUIRE(p.wait_for([&] { return p.err_has("epoch 1/"); }));
    kill(p.pid, SIGTERM);
    const int status = p.finish();
    INFO("stderr: " << read_file(p.err));
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 143);
    const json j = json::parse(read_file(p.out));
    CHECK(j.at("stop_reason") == "stopped");
    CHECK(j.at("saved") == ckpt);
    CHECK(cli(dir, {"translate", "--model", ckpt, "1 2 3"}).code == 0);
}

TEST_CASE("cli: more signals during the final save do not cut it", "[cli][robust][signals]") {
    TempDir dir;
    const std::string ckpt = dir / "big.ckpt";
    // A model big enough that writing it takes a while (~50 MB with Adam's state).
    Background p(dir, {"train", "--task", "reverse", "--pairs", "64", "--batch", "64", "--epochs", "100000",
                       "--embed", "256", "--hidden", "512", "--device", "cpu", "--save", ckpt});
    REQUIRE(p.wait_for([&] { return p.err_has("epoch 1/"); }, 120));
    kill(p.pid, SIGINT);
    REQUIRE(p.wait_for([&] { return p.err_has("saving "); }, 120));
    int sent = 0;
    while (kill(p.pid, sent % 2 ? SIGINT : SIGTERM) == 0 && sent < 200) {  // until it has exited
        ++sent;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        int status = 0;
        if (waitpid(p.pid, &status, WNOHANG) == p.pid) {
            p.pid = -1;
            INFO("stderr: " << read_file(p.err));
            REQUIRE(WIFEXITED(status));
            CHECK(WEXITSTATUS(status) == 130);  // the first signal was SIGINT
            break;
        }
    }
    if (p.pid > 0) CHECK(WEXITSTATUS(p.finish()) == 130);
    INFO("signals sent during the save: " << sent);
    CHECK(sent > 0);
    CHECK(p.err_has("writing the checkpoint first"));
    CHECK(files_starting(dir, "big.ckpt.tmp").empty());
    CHECK(cli(dir, {"translate", "--model", ckpt, "1 2 3"}).code == 0);
}

TEST_CASE("cli: a second Ctrl+C during a periodic save aborts without leaving a temporary file",
          "[cli][robust][signals]") {
    // Large saves back to back (every 6 ms): Ctrl+C once a temporary file exists (a save is
    // being written), then again while it still exists. The second one aborts; the handler
    // removes the temporary file before the process dies. (Two signals sent at once would
    // merge into one: the second waits until the first was seen.)
    int landed = 0;
    for (int attempt = 0; attempt < 4 && landed == 0; ++attempt) {
        TempDir dir;
        const std::string ckpt = dir / "p.ckpt";
        Background p(dir, {"train", "--task", "reverse", "--pairs", "64", "--batch", "64", "--epochs", "100000",
                           "--embed", "256", "--hidden", "512", "--device", "cpu", "--save", ckpt,
                           "--checkpoint-every-minutes", "0.0001"});
        REQUIRE(p.wait_for([&] { return exists(ckpt); }, 120));
        REQUIRE(p.wait_for([&] { return !files_starting(dir, "p.ckpt.tmp").empty(); }, 60));
        kill(p.pid, SIGINT);
        REQUIRE(p.wait_for([&] { return p.err_has("stopping after this batch"); }, 10));
        const bool saving = !files_starting(dir, "p.ckpt.tmp").empty();
        kill(p.pid, SIGINT);
        const int status = p.finish();
        INFO("stderr: " << read_file(p.err));
        CHECK(files_starting(dir, "p.ckpt.tmp").empty());  // in every case
        CHECK(cli(dir, {"translate", "--model", ckpt, "1 2 3"}).code == 0);
        if (saving && WIFSIGNALED(status)) {
            CHECK(WTERMSIG(status) == SIGINT);
            ++landed;
        }
    }
    if (landed == 0) WARN("no attempt had its second Ctrl+C land during a save (the machine is too busy?)");
}

TEST_CASE("cli: --checkpoint-every-minutes saves while training", "[cli][robust][periodic]") {
    TempDir dir;
    const std::string ckpt = dir / "periodic.ckpt";
    Background p(dir, {"train", "--task", "reverse", "--pairs", "300", "--epochs", "100000", "--save", ckpt,
                       "--checkpoint-every-minutes", "0.005", "--embed", "16", "--hidden", "24", "--device", "cpu",
                       "-q", "--memory-log", dir / "memory.jsonl"});
    REQUIRE(p.wait_for([&] { return exists(ckpt); }, 60));
    // It keeps training (and saving) meanwhile; the file on disk always loads.
    for (int i = 0; i < 3; ++i) {
        CHECK(cli(dir, {"translate", "--model", ckpt, "1 2 3"}).code == 0);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    CHECK(waitpid(p.pid, nullptr, WNOHANG) == 0);  // still running
    kill(p.pid, SIGINT);
    const int status = p.finish();
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 130);
    CHECK(files_starting(dir, "periodic.ckpt.tmp").empty());
    // --memory-log (tools/soak.sh): a line at the start and every 10 s.
    const std::string log = read_file(dir / "memory.jsonl");
    REQUIRE_FALSE(log.empty());
    const auto first = nlohmann::json::parse(log.substr(0, log.find('\n')));
    CHECK(first.at("rss_mb").get<double>() > 1.0);
    CHECK(first.at("t").get<double>() >= 0.0);
    CHECK(cli(dir, {"train", "--task", "reverse", "--epochs", "1", "--memory-log", dir / "no/such/m.jsonl"})
              .err.find("--memory-log: cannot write") != std::string::npos);
}
