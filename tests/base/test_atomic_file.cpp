// Atomic writes (core/io/atomic_file.hpp): unpredictable temporary files that are
// never written through a symlink, stale temporaries of killed writers, and
// failing writes (a size limit, an unwritable directory) that keep the previous
// file and leave nothing behind.
#include "catch_torch.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "core/io/atomic_file.hpp"
#include "core/io/error.hpp"
#include "file_limits.hpp"
#include "test_support.hpp"

using namespace attnviz;
using attnviz::testing::names_in;

namespace {

struct Dir {
    std::string path;
    Dir() {
        std::string tmpl = std::filesystem::temp_directory_path().string() + "/attnviz-atomic-XXXXXX";
        REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
        path = tmpl;
    }
    ~Dir() { attnviz::testing::remove_tree(path); }
    std::string operator/(const std::string& name) const { return path + "/" + name; }
};

std::string read_all(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

void write_plain(const std::string& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

/// A process id that no process has now: a child that has exited and been reaped.
pid_t dead_pid() {
    const pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    int status = 0;
    ::waitpid(child, &status, 0);
    return child;
}

}  // namespace

TEST_CASE("atomic write: replaces the file and leaves only it", "[atomic]") {
    Dir dir;
    const std::string path = dir / "out.txt";
    write_file_atomic(path, "first");
    write_file_atomic(path, "second");
    CHECK(read_all(path) == "second");
    CHECK(names_in(dir.path) == std::vector<std::string>{"out.txt"});
    // A relative path (no directory part) works too.
    const std::string cwd = std::filesystem::current_path().string();
    REQUIRE(::chdir(dir.path.c_str()) == 0);
    write_file_atomic("relative.txt", "r");
    REQUIRE(::chdir(cwd.c_str()) == 0);
    CHECK(read_all(dir / "relative.txt") == "r");
}

TEST_CASE("atomic write, streamed: pieces in order, and a failing producer or a full disk leaves the previous file",
          "[atomic][disk]") {
    Dir dir;
    const std::string path = dir / "attention.json";
    write_file_atomic_streamed(path, [](const AtomicWrite& write) {
        write("[1,", 3);
        write("2]", 2);
    });
    CHECK(read_all(path) == "[1,2]");
    // The producer's own error: the exception goes on, nothing half-written is left.
    CHECK_THROWS_WITH(write_file_atomic_streamed(path,
                                                 [](const AtomicWrite& write) {
                                                     write("half", 4);
                                                     throw FileError("the producer failed");
                                                 }),
                      "the producer failed");
    CHECK_THROWS_AS(write_file_atomic_streamed(path,
                                               [](const AtomicWrite& write) {
                                                   write("half", 4);
                                                   throw std::runtime_error("bad");
                                               }),
                    std::runtime_error);
    CHECK(read_all(path) == "[1,2]");
    CHECK(names_in(dir.path) == std::vector<std::string>{"attention.json"});
    // A size limit half-way through the pieces.
    {
        attnviz::testing::FileSizeLimit limit(64 * 1024);
        REQUIRE(limit.ok());
        const std::string piece(16 * 1024, 'x');
        CHECK_THROWS_WITH(write_file_atomic_streamed(path,
                                                     [&](const AtomicWrite& write) {
                                                         for (int i = 0; i < 64; ++i) write(piece.data(), piece.size());
                                                     }),
                          Catch::Contains(path) && Catch::Contains("File too large"));
    }
    CHECK(read_all(path) == "[1,2]");
    CHECK(names_in(dir.path) == std::vector<std::string>{"attention.json"});
}

TEST_CASE("atomic write: a planted symlink at the old temporary name is not followed", "[atomic][security]") {
    Dir dir;
    const std::string path = dir / "model.ckpt", victim = dir / "victim.txt";
    write_plain(victim, "precious");
    // attnviz used to write PATH.tmp.<pid>: anyone who could guess it could redirect the write.
    REQUIRE(::symlink(victim.c_str(), (path + ".tmp." + std::to_string(::getpid())).c_str()) == 0);
    write_file_atomic(path, "checkpoint bytes");
    CHECK(read_all(victim) == "precious");
    CHECK(read_all(path) == "checkpoint bytes");
}

TEST_CASE("atomic write: temporary names", "[atomic]") {
    long pid = 0;
    CHECK(is_temporary_name("m.ckpt.tmp-1234-abcdefgh2345", "m.ckpt", &pid));
    CHECK(pid == 1234);
    CHECK(is_temporary_name("m.ckpt.tmp.99", "m.ckpt", &pid));  // the old form
    CHECK(pid == 99);
    CHECK_FALSE(is_temporary_name("m.ckpt.tmp-1234-abcdefgh234", "m.ckpt"));   // 11 random characters
    CHECK_FALSE(is_temporary_name("m.ckpt.tmp-1234-ABCDEFGH2345", "m.ckpt"));  // not the alphabet
    CHECK_FALSE(is_temporary_name("m.ckpt.tmp-12x4-abcdefgh2345", "m.ckpt"));
    CHECK_FALSE(is_temporary_name("m.ckpt.tmp-1234-abcdefgh2345", "other.ckpt"));
    CHECK_FALSE(is_temporary_name("m.ckpt.tmp.", "m.ckpt"));
    CHECK_FALSE(is_temporary_name("m.ckpt.tmp.12345678901", "m.ckpt"));  // no pid is that long
    CHECK_FALSE(is_temporary_name("m.ckpt", "m.ckpt"));
    CHECK_FALSE(is_temporary_name("m.ckpt.bak", "m.ckpt"));
}

TEST_CASE("atomic write: stale temporaries of dead writers are removed, nothing else", "[atomic][stale]") {
    Dir dir;
    const std::string path = dir / "model.ckpt";
    const std::string dead = std::to_string(dead_pid());
    const std::string live = std::to_string(::getppid());  // the process that started the tests runs
    write_plain(dir / ("model.ckpt.tmp-" + dead + "-abcdefghijkl"), "half a checkpoint");
    write_plain(dir / ("model.ckpt.tmp." + dead), "an old-style leftover");
    write_plain(dir / ("model.ckpt.tmp-" + live + "-abcdefghijkl"), "another process is writing");
    write_plain(dir / ("other.ckpt.tmp-" + dead + "-abcdefghijkl"), "not ours to judge");
    write_plain(dir / "model.ckpt.tmp-notes.txt", "a user's file");
    REQUIRE(::mkdir((dir / ("model.ckpt.tmp-" + dead + "-mkdirmkdirmk")).c_str(), 0755) == 0);

    write_file_atomic(path, "new");
    std::vector<std::string> kept{"model.ckpt", "model.ckpt.tmp-" + dead + "-mkdirmkdirmk",
                                  "model.ckpt.tmp-" + live + "-abcdefghijkl", "model.ckpt.tmp-notes.txt",
                                  "other.ckpt.tmp-" + dead + "-abcdefghijkl"};
    std::sort(kept.begin(), kept.end());
    CHECK(names_in(dir.path) == kept);
    CHECK(remove_stale_temporaries(path) == 0);
}

TEST_CASE("atomic write: a size limit (a full disk) keeps the previous file and leaves no temporary",
          "[atomic][disk]") {
    Dir dir;
    const std::string path = dir / "model.ckpt";
    write_file_atomic(path, "previous checkpoint");
    const std::string big(1 << 20, 'x');
    {
        attnviz::testing::FileSizeLimit limit(64 * 1024);
        REQUIRE(limit.ok());
        CHECK_THROWS_AS(write_file_atomic(path, big), FileError);
        CHECK_THROWS_WITH(write_file_atomic(path, big), Catch::Contains(path) && Catch::Contains("File too large"));
    }
    CHECK(read_all(path) == "previous checkpoint");
    CHECK(names_in(dir.path) == std::vector<std::string>{"model.ckpt"});
}

TEST_CASE("atomic write: an unwritable directory keeps the previous file and leaves no temporary",
          "[atomic][disk]") {
    Dir dir;
    const std::string path = dir / "model.ckpt";
    write_file_atomic(path, "previous checkpoint");
    // Root writes into a read-only (0555) directory anyway: as root the write is
    // made by a child that has become `nobody`, for whom the directory is read-only.
    REQUIRE(::chmod(dir.path.c_str(), 0555) == 0);
    const bool root = ::geteuid() == 0;
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        if (root && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(3);
        int code = 1;
        try {
            write_file_atomic(path, "new");
        } catch (const FileError& e) {
            code = std::string(e.what()).find("Permission denied") != std::string::npos ? 0 : 2;
        } catch (...) {
            code = 2;
        }
        try {
            check_writable_path(path);
            if (code == 0) code = 4;
        } catch (const FileError&) {
        }
        ::_exit(code);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    ::chmod(dir.path.c_str(), 0755);
    REQUIRE(WIFEXITED(status));
    if (WEXITSTATUS(status) == 3) {
        WARN("skipped: running as root and cannot switch to the user nobody to make a directory read-only");
        return;
    }
    CHECK(WEXITSTATUS(status) == 0);  // 1: it wrote; 2: another error; 4: check_writable_path said yes
    CHECK(read_all(path) == "previous checkpoint");
    CHECK(names_in(dir.path) == std::vector<std::string>{"model.ckpt"});
}

TEST_CASE("check_writable_path: directories, missing directories, and a good path leaves nothing", "[atomic]") {
    Dir dir;
    CHECK_THROWS_WITH(check_writable_path(dir.path), Catch::Contains("is a directory"));
    CHECK_THROWS_WITH(check_writable_path(dir.path + "/"), Catch::Contains("directory"));
    CHECK_THROWS_WITH(check_writable_path(dir / "no/such/m.ckpt"), Catch::Contains("does not exist"));
    write_plain(dir / "file", "x");
    CHECK_THROWS_WITH(check_writable_path(dir / "file/m.ckpt"), Catch::Contains("not a directory"));
    CHECK_NOTHROW(check_writable_path(dir / "m.ckpt"));
    CHECK(names_in(dir.path) == std::vector<std::string>{"file"});
}

// --- a set of files as one folder (issue 46: a failed export left one model's config beside
// another's weights) ----------------------------------------------------------------------------

namespace {

using Files = std::vector<std::pair<std::string, std::string>>;

bool model_file(const std::string& name) { return name == "tokenizer.json" || name.rfind("weights", 0) == 0; }

}  // namespace

TEST_CASE("folder write: a new folder, then the whole set replaced, other files kept", "[atomic][folder]") {
    Dir dir;
    const std::string out = dir / "model";
    write_folder_atomic(out, Files{{"config.json", "A"}, {"weights.bin", "AAAA"}, {"tokenizer.json", "tA"}}, model_file);
    CHECK(names_in(out) == std::vector<std::string>{"config.json", "tokenizer.json", "weights.bin"});
    write_plain(out + "/README.md", "mine");
    REQUIRE(::mkdir((out + "/.git").c_str(), 0755) == 0);
    write_plain(out + "/.git/HEAD", "ref");
    // The next model has no tokenizer.json: the old one must not stay beside the new weights.
    write_folder_atomic(out, Files{{"config.json", "B"}, {"weights.bin", "BBBB"}}, model_file);
    CHECK(names_in(out) == std::vector<std::string>{".git", "README.md", "config.json", "weights.bin"});
    CHECK(read_all(out + "/config.json") == "B");
    CHECK(read_all(out + "/weights.bin") == "BBBB");
    CHECK(read_all(out + "/README.md") == "mine");
    CHECK(read_all(out + "/.git/HEAD") == "ref");
    CHECK(names_in(dir.path) == std::vector<std::string>{"model"});  // nothing left beside it
}

TEST_CASE("folder write: a size limit (a full disk) half-way leaves the old folder exactly as it was",
          "[atomic][folder][disk]") {
    Dir dir;
    const std::string out = dir / "model";
    write_folder_atomic(out, Files{{"config.json", "m2m100"}, {"weights.bin", "m2m100 weights"}, {"vocab.json", "v"}});
    const std::string big(1 << 20, 'x');
    {
        attnviz::testing::FileSizeLimit limit(64 * 1024);
        REQUIRE(limit.ok());
        // config.json and generation_config.json fit; the weights do not.
        CHECK_THROWS_WITH(write_folder_atomic(out, Files{{"config.json", "marian"}, {"generation_config.json", "g"},
                                                         {"weights.bin", big}}, model_file),
                          Catch::Contains("weights.bin") && Catch::Contains("File too large"));
    }
    CHECK(names_in(out) == std::vector<std::string>{"config.json", "vocab.json", "weights.bin"});
    CHECK(read_all(out + "/config.json") == "m2m100");
    CHECK(read_all(out + "/weights.bin") == "m2m100 weights");
    CHECK(names_in(dir.path) == std::vector<std::string>{"model"});
}

TEST_CASE("folder write: a file in the way, a link to a folder, names that are not file names", "[atomic][folder]") {
    Dir dir;
    write_plain(dir / "file", "x");
    CHECK_THROWS_WITH(write_folder_atomic(dir / "file", Files{{"a", "1"}}), Catch::Contains("it is a file"));
    CHECK(read_all(dir / "file") == "x");
    CHECK_THROWS_WITH(write_folder_atomic(dir / "missing/model", Files{{"a", "1"}}), Catch::Contains("does not exist"));
    for (const char* bad : {"", "..", "sub/a"})
        CHECK_THROWS_WITH(write_folder_atomic(dir / "m", Files{{bad, "1"}}), Catch::Contains("not a file name"));
    CHECK_THROWS_WITH(write_folder_atomic(dir / "m", Files{{"a", "1"}, {"a", "2"}}), Catch::Contains("not a file name"));
    write_folder_atomic(dir / "real", Files{{"a", "1"}});
    REQUIRE(::symlink("real", (dir / "link").c_str()) == 0);
    write_folder_atomic(dir / "link", Files{{"a", "2"}});
    CHECK(read_all(dir / "real/a") == "2");
    struct stat st;
    REQUIRE(::lstat((dir / "link").c_str(), &st) == 0);
    CHECK(S_ISLNK(st.st_mode));  // the link still names the folder
    CHECK(names_in(dir.path) == std::vector<std::string>{"file", "link", "real"});
}

TEST_CASE("folder write: a staging folder of a killed writer is removed by the next write", "[atomic][folder][stale]") {
    Dir dir;
    const std::string out = dir / "model";
    write_folder_atomic(out, Files{{"a", "1"}});
    const std::string stale = out + ".tmp-" + std::to_string(dead_pid()) + "-abcdefghijkl";
    REQUIRE(::mkdir(stale.c_str(), 0755) == 0);
    write_plain(stale + "/a", "half");
    // One that holds a folder may hold a kept folder not yet moved back: it stays.
    const std::string stale_with_folder = out + ".tmp-" + std::to_string(dead_pid()) + "-bcdefghijklm";
    REQUIRE(::mkdir(stale_with_folder.c_str(), 0755) == 0);
    REQUIRE(::mkdir((stale_with_folder + "/.git").c_str(), 0755) == 0);
    write_folder_atomic(out, Files{{"a", "2"}});
    const auto names = names_in(dir.path);
    CHECK(std::find(names.begin(), names.end(), "model.tmp-" + stale.substr(stale.find(".tmp-") + 5)) == names.end());
    CHECK(names.size() == 2);
    CHECK(read_all(out + "/a") == "2");
}
