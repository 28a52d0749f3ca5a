// Downloading from the hub (core/hub/hub_download.hpp) against the local hub server
// (tests/hub/hub_server.py on 127.0.0.1): the cache's layout, resuming, hashes, the hub's
// errors, retries, redirects, offline mode, concurrent downloads, cancelling, a full disk.
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <limits>
#include <thread>

#include <catch2/catch.hpp>

#include "core/hub/hub_cache.hpp"
#include "core/hub/hub_download.hpp"
#include "core/io/error.hpp"
#include "hub_fixture.hpp"

using namespace attnviz;
using namespace attnviz::hub;
using attnviz::testing::HubServer;
using attnviz::testing::HubTempDir;
using attnviz::testing::ScopedEnv;
namespace fs = std::filesystem;

namespace {

DownloadOptions options_for(const HubServer& server, const HubTempDir& cache, const std::string& id) {
    DownloadOptions o;
    o.repo_id = id;
    o.endpoint = server.endpoint();
    o.cache_dir = cache.str();
    o.token = "-";              // never the token of whoever runs the tests
    o.first_backoff_s = 0.01;   // retries wait, but not long
    return o;
}

std::vector<std::string> snapshot_files(const std::string& snapshot) {
    std::vector<std::string> names;
    for (const auto& e : fs::recursive_directory_iterator(snapshot))
        if (!e.is_directory()) names.push_back(e.path().lexically_relative(snapshot).string());
    std::sort(names.begin(), names.end());
    return names;
}

/// Every file of the snapshot is a relative link into blobs/ whose blob holds the same bytes
/// as the server's; the LFS blobs are named by their sha256.
void check_layout(const fs::path& cache, const std::string& id, const std::string& snapshot) {
    const fs::path repo = cache / repo_folder_name(id);
    for (const auto& e : fs::recursive_directory_iterator(snapshot)) {
        if (e.is_directory()) continue;
        INFO(e.path());
        REQUIRE(fs::is_symlink(e.symlink_status()));
        const fs::path target = fs::read_symlink(e.path());
        CHECK(target.is_relative());
        CHECK((e.path().parent_path() / target).lexically_normal().parent_path() == (repo / "blobs").lexically_normal());
        CHECK(fs::is_regular_file(e.path()));
    }
    CHECK(fs::is_directory(cache / ".locks" / repo_folder_name(id)));
}

const std::vector<std::string> k_tiny_files = {"config.json",   "generation_config.json",  "model.safetensors",
                                               "source.spm",    "special_tokens_map.json", "target.spm",
                                               "tokenizer_config.json", "vocab.json"};

/// The FileError a download of the plan throws ("" when it throws none).
std::string download_refusal(const DownloadOptions& o, const DownloadPlan& plan) {
    try {
        download(o, plan);
    } catch (const FileError& e) {
        return e.what();
    }
    return {};
}

}  // namespace

TEST_CASE("hub download: a model's files into the cache as huggingface_hub lays it out, nothing it does not need", "[hub]") {
    HubServer server;
    HubTempDir cache;
    auto o = options_for(server, cache, "tiny/model");
    const DownloadPlan plan = plan_download(o);
    CHECK(plan.commit.size() == 40);
    std::vector<std::string> names;
    for (const auto& f : plan.files) names.push_back(f.name);
    CHECK(names.back() == "config.json");  // last: a snapshot with a config.json is complete
    for (const auto& never : {"tf_model.h5", "flax_model.msgpack", "onnx/encoder_model.onnx", "pytorch_model.bin", "README.md"})
        CHECK(std::find(names.begin(), names.end(), never) == names.end());
    CHECK(plan.missing_bytes > (3 << 20));
    int progress_calls = 0;
    int64_t last_done = -1;
    const std::string snapshot = download(o, plan, [&](const DownloadProgress& p) {
        ++progress_calls;
        CHECK(p.done >= last_done);
        last_done = p.done;
        return true;
    });
    CHECK(snapshot == (cache.path / "models--tiny--model" / "snapshots" / plan.commit).string());
    CHECK(snapshot_files(snapshot) == k_tiny_files);
    check_layout(cache.path, "tiny/model", snapshot);
    CHECK(last_done == plan.missing_bytes);
    CHECK(progress_calls >= int(plan.files.size()));
    CHECK(testing::read_file_text(cache.path / "models--tiny--model" / "refs" / "main") == plan.commit);
    const auto& lfs = *std::find_if(plan.files.begin(), plan.files.end(), [](const PlannedFile& f) { return f.lfs; });
    CHECK(fs::is_regular_file(cache.path / "models--tiny--model" / "blobs" / lfs.etag));
    CHECK(fs::exists(cache.path / ".locks" / "models--tiny--model" / (lfs.etag + ".lock")));
    // Found by the lookup the CLI and the app use, and a second download fetches nothing.
    {
        ScopedEnv hub_cache("HF_HUB_CACHE", cache.str().c_str());
        CHECK(find_snapshot("tiny/model") == snapshot);
    }
    const int gets = server.requests("/_cdn/", "GET");
    const DownloadPlan again = plan_download(o);
    CHECK(again.missing_bytes == 0);
    CHECK(download(o, again) == snapshot);
    CHECK(server.requests("/_cdn/", "GET") == gets);
}

TEST_CASE("hub download: sharded safetensors take the index then its shards, a bin-only model its bin", "[hub]") {
    HubServer server;
    HubTempDir cache;
    const std::string sharded = download_model(options_for(server, cache, "tiny/sharded"));
    CHECK(snapshot_files(sharded) == std::vector<std::string>{"config.json", "model-00001-of-00002.safetensors",
                                                              "model-00002-of-00002.safetensors",
                                                              "model.safetensors.index.json", "tokenizer.json"});
    const std::string bin = download_model(options_for(server, cache, "tiny/bin-only"));
    CHECK(snapshot_files(bin) == std::vector<std::string>{"config.json", "pytorch_model.bin", "spiece.model"});
}

TEST_CASE("hub download: a dropped connection resumes with a Range request from the incomplete file", "[hub]") {
    HubServer server;
    HubTempDir cache;
    const std::string snapshot = download_model(options_for(server, cache, "faults/drop"));
    CHECK(snapshot_files(snapshot) == k_tiny_files);
    int full = 0, ranged = 0;
    const nlohmann::json log = server.stats()["log"];  // a copy: the temporary dies
    for (const auto& e : log)
        if (e["path"].get<std::string>().find("/_cdn/faults/drop/") != std::string::npos &&
            e["path"].get<std::string>().find("model.safetensors") != std::string::npos && e["method"] == "GET")
            (e["range"].is_null() ? full : ranged) += 1;
    CHECK(full == 1);
    CHECK(ranged == 1);  // the second try asked for the rest only
    check_layout(cache.path, "faults/drop", snapshot);
    // The blob is whole: its name is its sha256, which the download checked.
    for (const auto& b : fs::directory_iterator(cache.path / "models--faults--drop" / "blobs"))
        CHECK(b.path().extension() != ".incomplete");
}

TEST_CASE("hub download: a file whose sha256 differs from the hub's etag never becomes a blob", "[hub]") {
    HubServer server;
    HubTempDir cache;
    const auto o = options_for(server, cache, "faults/badsha");
    REQUIRE_THROWS_WITH(download_model(o), Catch::Contains("sha256") && Catch::Contains("model.safetensors") &&
                                               Catch::Contains("nothing was kept"));
    const fs::path repo = cache.path / "models--faults--badsha";
    for (const auto& b : fs::directory_iterator(repo / "blobs")) {
        INFO(b.path());
        CHECK(b.path().filename().string().size() != 64);  // no blob named by the claimed sha256
        CHECK(b.path().extension() != ".incomplete");
    }
    CHECK_FALSE(fs::exists(repo / "refs" / "main"));
    ScopedEnv hub_cache("HF_HUB_CACHE", cache.str().c_str());
    CHECK(find_snapshot("faults/badsha").empty());  // no config.json: it never looks like a model
}

TEST_CASE("hub download: 401 and 403 say to accept the licence and set HF_TOKEN, a token opens them", "[hub]") {
    HubServer server;
    HubTempDir cache;
    auto priv = options_for(server, cache, "faults/private");
    REQUIRE_THROWS_WITH(plan_download(priv), Catch::Contains("401") && Catch::Contains("HF_TOKEN") &&
                                                 Catch::Contains("accept its licence at " + server.endpoint() + "/faults/private"));
    auto gated = options_for(server, cache, "faults/gated");
    REQUIRE_THROWS_WITH(plan_download(gated), Catch::Contains("403") && Catch::Contains("HF_TOKEN") &&
                                                  Catch::Contains(server.endpoint() + "/faults/gated"));
    SECTION("the token from HF_TOKEN") {
        ScopedEnv token("HF_TOKEN", "hf_good_token");
        priv.token = gated.token = "";
        CHECK(snapshot_files(download_model(priv)) == k_tiny_files);
        CHECK(snapshot_files(download_model(gated)) == k_tiny_files);
    }
    SECTION("the token file huggingface_hub writes ($HF_HOME/token)") {
        HubTempDir home;
        { std::ofstream(home.path / "token") << "hf_good_token\n"; }
        ScopedEnv no_token("HF_TOKEN", nullptr), hf_home("HF_HOME", home.str().c_str()), path("HF_TOKEN_PATH", nullptr);
        gated.token = "";
        CHECK(snapshot_files(download_model(gated)) == k_tiny_files);
    }
    // The token goes to the hub, never to the CDN the files redirect to (another origin).
    const nlohmann::json log = server.stats()["log"];  // a copy: the temporary dies
    for (const auto& e : log)
        if (e["path"].get<std::string>().rfind("/_cdn/", 0) == 0) CHECK(e["auth"] == false);
}

TEST_CASE("hub download: 404 names what is missing, 500 is retried, a hub that stays down is given up", "[hub]") {
    HubServer server;
    HubTempDir cache;
    REQUIRE_THROWS_WITH(plan_download(options_for(server, cache, "nobody/nothing")),
                        Catch::Contains("'nobody/nothing' is not on") && Catch::Contains("HF_TOKEN"));
    auto missing_rev = options_for(server, cache, "tiny/model");
    missing_rev.revision = "v9";
    REQUIRE_THROWS_WITH(plan_download(missing_rev), Catch::Contains("has no revision 'v9'"));
    std::vector<std::string> notes;
    const std::string snapshot = download_model(options_for(server, cache, "faults/flaky"), [&](const DownloadProgress& p) {
        if (!p.note.empty()) notes.push_back(p.note);
        return true;
    });
    CHECK(snapshot_files(snapshot) == k_tiny_files);
    CHECK(!notes.empty());
    CHECK(notes.front().find("retrying") != std::string::npos);
    auto down = options_for(server, cache, "faults/down");
    down.max_attempts = 3;
    REQUIRE_THROWS_WITH(plan_download(down), Catch::Contains("500") && Catch::Contains("3 tries"));
    CHECK(server.requests("/api/models/faults/down/") == 3);
}

TEST_CASE("hub download: a renamed repository's relative redirect and the CDN's redirect are followed", "[hub]") {
    HubServer server;
    HubTempDir cache;
    const DownloadPlan plan = plan_download(options_for(server, cache, "faults/renamed"));
    const std::string snapshot = download(options_for(server, cache, "faults/renamed"), plan);
    CHECK(snapshot_files(snapshot) == k_tiny_files);
    CHECK(server.requests("/tiny/model/resolve/", "HEAD") > 0);  // followed to the new name
    CHECK(server.requests("/_cdn/tiny/model/", "GET") > 0);      // the LFS files from the CDN
}

TEST_CASE("hub download: offline mode uses the cache and asks nothing, or says the model is not cached", "[hub]") {
    HubServer server;
    HubTempDir cache;
    auto o = options_for(server, cache, "tiny/model");
    const std::string snapshot = download_model(o);
    const auto before = server.stats()["log"].size();
    {
        ScopedEnv offline("HF_HUB_OFFLINE", "1");
        const DownloadPlan plan = plan_download(o);
        CHECK(plan.from_cache);
        CHECK(download(o, plan) == snapshot);
        REQUIRE_THROWS_WITH(plan_download(options_for(server, cache, "tiny/sharded")),
                            Catch::Contains("offline") && Catch::Contains("HF_HUB_OFFLINE"));
    }
    o.offline = true;
    CHECK(download_model(o) == snapshot);
    CHECK(server.stats()["log"].size() == before);
}

TEST_CASE("hub download: two downloads of one model at once both succeed with whole blobs", "[hub]") {
    HubServer server;
    HubTempDir cache;
    const auto o = options_for(server, cache, "tiny/model");
    std::string a, b, error;
    std::thread t1([&] {
        try {
            a = download_model(o);
        } catch (const std::exception& e) {
            error = e.what();
        }
    });
    try {
        b = download_model(o);
    } catch (const std::exception& e) {
        error = e.what();
    }
    t1.join();
    CHECK(error.empty());
    CHECK(a == b);
    CHECK(snapshot_files(a) == k_tiny_files);
    check_layout(cache.path, "tiny/model", a);
    for (const auto& e : fs::directory_iterator(cache.path / "models--tiny--model" / "blobs"))
        CHECK(e.path().extension() != ".incomplete");
}

TEST_CASE("hub download: the blob lock is the one huggingface_hub's filelock takes", "[hub]") {
    HubTempDir dir;
    const std::string path = (dir.path / "x.lock").string();
    const std::string python = ATTNVIZ_HUB_VENV_PYTHON;
    if (python.empty() || std::system((python + " -c 'import filelock' 2>/dev/null").c_str()) != 0) {
        WARN("no Python with filelock: the lock's compatibility is not checked");
        return;
    }
    const std::string try_lock = python + " -c 'import filelock,sys\ntry:\n filelock.FileLock(sys.argv[1]).acquire(timeout=0)\nexcept filelock.Timeout:\n sys.exit(3)' " + path;
    {
        BlobLock lock(path);
        CHECK(WEXITSTATUS(std::system(try_lock.c_str())) == 3);  // held by us: filelock waits
    }
    CHECK(WEXITSTATUS(std::system(try_lock.c_str())) == 0);  // released
    CHECK(BlobLock::is_free(path));
}

TEST_CASE("hub download: cancelling leaves an incomplete file that the next download resumes", "[hub]") {
    HubServer server;
    HubTempDir cache;
    const auto o = options_for(server, cache, "tiny/model");
    const DownloadPlan plan = plan_download(o);
    REQUIRE_THROWS_AS(download(o, plan, [](const DownloadProgress& p) {
                          return !(p.file == "model.safetensors" && p.file_done > 0);
                      }),
                      Cancelled);
    const fs::path repo = cache.path / "models--tiny--model";
    CHECK_FALSE(fs::exists(repo / "refs" / "main"));
    CHECK_FALSE(fs::exists(repo / "snapshots" / plan.commit / "config.json"));
    bool incomplete = false;
    for (const auto& e : fs::directory_iterator(repo / "blobs")) incomplete |= e.path().extension() == ".incomplete";
    CHECK(incomplete);
    const std::string snapshot = download(o, plan_download(o));
    CHECK(snapshot_files(snapshot) == k_tiny_files);
    bool resumed = false;
    const nlohmann::json log = server.stats()["log"];  // a copy: the temporary dies
    for (const auto& e : log)
        resumed |= e["path"].get<std::string>().find("model.safetensors") != std::string::npos && !e["range"].is_null();
    CHECK(resumed);
}

TEST_CASE("hub download: a full disk (a file-size limit) leaves nothing that looks complete, and resumes", "[hub]") {
    HubServer server;
    HubTempDir cache;
    auto o = options_for(server, cache, "tiny/model");
    const DownloadPlan plan = plan_download(o);
    SECTION("checked before starting") {
        const pid_t pid = ::fork();
        if (pid == 0) {
            struct rlimit lim {1 << 20, 1 << 20};
            ::setrlimit(RLIMIT_FSIZE, &lim);
            try {
                download(o, plan);
                ::_exit(0);
            } catch (const FileError& e) {
                ::_exit(std::string(e.what()).find("ulimit -f") != std::string::npos ? 7 : 8);
            } catch (...) {
                ::_exit(9);
            }
        }
        int status = 0;
        ::waitpid(pid, &status, 0);
        CHECK(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 7);
    }
    SECTION("failing in the middle of a file") {
        o.check_space = false;
        const pid_t pid = ::fork();
        if (pid == 0) {
            std::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG, as on a full disk
            struct rlimit lim {1 << 20, 1 << 20};
            ::setrlimit(RLIMIT_FSIZE, &lim);
            try {
                download(o, plan);
                ::_exit(0);
            } catch (const FileError& e) {
                ::_exit(std::string(e.what()).find("File too large") != std::string::npos ? 7 : 8);
            } catch (...) {
                ::_exit(9);
            }
        }
        int status = 0;
        ::waitpid(pid, &status, 0);
        CHECK(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 7);
    }
    const fs::path repo = cache.path / "models--tiny--model";
    CHECK_FALSE(fs::exists(repo / "refs" / "main"));
    CHECK_FALSE(fs::exists(repo / "snapshots" / plan.commit / "config.json"));
    for (const auto& f : plan.files)
        if (f.lfs && f.size > (1 << 20)) CHECK_FALSE(fs::exists(repo / "blobs" / f.etag));
    {
        ScopedEnv hub_cache("HF_HUB_CACHE", cache.str().c_str());
        CHECK(find_snapshot("tiny/model").empty());
    }
    o.check_space = true;
    CHECK(snapshot_files(download(o, plan_download(o))) == k_tiny_files);
}

TEST_CASE("hub download: a model larger than the disk's free space is refused before any byte", "[hub]") {
    // faults/huge: the API and the headers say its weights are 1 PiB, more than any disk has free.
    HubServer server;
    HubTempDir cache;
    const auto o = options_for(server, cache, "faults/huge");
    const DownloadPlan plan = plan_download(o);
    const std::string message = download_refusal(o, plan);
    INFO(message);
    CHECK(message.find("not enough space for 'faults/huge'") != std::string::npos);
    CHECK(message.find("it needs 1125.9 TB") != std::string::npos);  // 2^50 bytes
    CHECK(message.find("HF_HUB_CACHE") != std::string::npos);
    // Nothing fetched: no GET of any file, no blob, no incomplete file, no snapshot.
    CHECK(server.requests("/_cdn/", "GET") == 0);
    CHECK(server.requests("/resolve/", "GET") == 0);
    const fs::path repo = cache.path / "models--faults--huge";
    if (fs::exists(repo / "blobs"))
        for (const auto& e : fs::directory_iterator(repo / "blobs")) FAIL_CHECK("left in blobs/: " << e.path());
    CHECK_FALSE(fs::exists(repo / "snapshots" / plan.commit));
}

TEST_CASE("hub download: a size of more digits than 64 bits hold is refused as too large, not read as unknown",
          "[hub]") {
    // faults/vast: X-Linked-Size 100000000000000000000 (10^20). Read as unknown it skipped the
    // free-space check and the download ran until the disk was full.
    HubServer server;
    HubTempDir cache;
    const auto o = options_for(server, cache, "faults/vast");
    const DownloadPlan plan = plan_download(o);
    const auto weights = std::find_if(plan.files.begin(), plan.files.end(),
                                      [](const PlannedFile& f) { return f.name == "model.safetensors"; });
    REQUIRE(weights != plan.files.end());
    CHECK(weights->size == std::numeric_limits<int64_t>::max());
    CHECK(plan.missing_bytes == std::numeric_limits<int64_t>::max());  // the sum saturates
    const std::string message = download_refusal(o, plan);
    INFO(message);
    CHECK(message.find("not enough space for 'faults/vast'") != std::string::npos);
    CHECK(server.requests("/_cdn/", "GET") == 0);
    CHECK(server.requests("/resolve/", "GET") == 0);
}

TEST_CASE("hub download: a 300 MB file against curl from the same server", "[.][hub_bench]") {
    // Run by hand: attnviz_tests_hub "[hub_bench]". The download computes and checks the file's
    // sha256 while it arrives (on a thread of its own), then links it; curl only writes it. Best of
    // ATTNVIZ_BENCH_ROUNDS (5) each, alternating; ATTNVIZ_BENCH_MB sets the size.
    const int mb = std::getenv("ATTNVIZ_BENCH_MB") ? std::atoi(std::getenv("ATTNVIZ_BENCH_MB")) : 300;
    // ATTNVIZ_BENCH_RATE_MB paces the server as a network link of that many MB/s (0: as fast as
    // loopback goes, where the download and the server share the machine's cores).
    const char* rate = std::getenv("ATTNVIZ_BENCH_RATE_MB");
    HubServer server({"--big-mb", std::to_string(mb), "--rate-mb", rate ? rate : "0"});
    HubTempDir work;
    const std::string url = server.endpoint() + "/bench/big/resolve/main/model.safetensors";
    double ours = 1e9, curl = 1e9;
    const int rounds = std::getenv("ATTNVIZ_BENCH_ROUNDS") ? std::atoi(std::getenv("ATTNVIZ_BENCH_ROUNDS")) : 5;
    for (int round = 0; round < rounds; ++round) {
        const std::string out = (work.path / "curl.bin").string();
        auto t0 = std::chrono::steady_clock::now();
        REQUIRE(std::system(("curl -sS -L -o " + out + " " + url).c_str()) == 0);
        curl = std::min(curl, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        fs::remove(out);
        HubTempDir cache;
        t0 = std::chrono::steady_clock::now();
        download_model(options_for(server, cache, "bench/big"));
        ours = std::min(ours, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    const double bytes = double(mb) * (1 << 20);
    std::printf("{\"benchmark\": \"hub download vs curl\", \"mb\": %d, \"server_rate_mb_per_s\": %s, "
                "\"attnviz_mb_per_s\": %.1f, \"curl_mb_per_s\": %.1f, \"ratio\": %.3f, \"cores\": %u}\n",
                mb, rate ? rate : "0", bytes / ours / 1e6, bytes / curl / 1e6, curl / ours, std::thread::hardware_concurrency());
}
