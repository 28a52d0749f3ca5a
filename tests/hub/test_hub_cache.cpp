// The local Hugging Face cache without a network (core/hub/hub_cache.hpp): which files a
// model needs, revisions that never leave snapshots/, listing and deleting revisions.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "core/hub/hub_cache.hpp"
#include "core/hub/hub_download.hpp"
#include "core/io/error.hpp"
#include "hub_fixture.hpp"

using namespace attnviz;
using namespace attnviz::hub;
using attnviz::testing::HubTempDir;
using attnviz::testing::ScopedEnv;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
}

/// A model in `cache` as huggingface_hub writes it: blobs, a snapshot of links, refs/main.
void plant(const fs::path& cache, const std::string& id, const std::string& commit,
           const std::vector<std::pair<std::string, std::string>>& files, const std::string& ref = "main") {
    const fs::path repo = cache / repo_folder_name(id);
    for (const auto& [name, text] : files) {
        const std::string blob = "blob-" + std::to_string(std::hash<std::string>()(text));
        write(repo / "blobs" / blob, text);
        fs::create_directories(repo / "snapshots" / commit);
        std::error_code ec;
        fs::create_symlink("../../blobs/" + blob, repo / "snapshots" / commit / name, ec);
    }
    if (!ref.empty()) write(repo / "refs" / ref, commit);
}

}  // namespace

TEST_CASE("hub files: the weights, the tokenizer and the configs, never other frameworks' files", "[hub_unit]") {
    std::vector<std::string> skipped;
    const auto files = model_files({"config.json", "model.safetensors", "pytorch_model.bin", "tf_model.h5",
                                    "flax_model.msgpack", "onnx/decoder_model.onnx", "model.tflite", "source.spm",
                                    "target.spm", "vocab.json", "tokenizer_config.json", "README.md",
                                    "generation_config.json", "sentencepiece.bpe.model", "sub/config.json"},
                                   {}, &skipped);
    CHECK(files == std::vector<std::string>{"model.safetensors", "tokenizer_config.json", "vocab.json",
                                            "sentencepiece.bpe.model", "source.spm", "target.spm",
                                            "generation_config.json", "config.json"});
    CHECK(std::find(skipped.begin(), skipped.end(), "pytorch_model.bin") != skipped.end());
    CHECK(model_files({"config.json", "pytorch_model.bin", "spiece.model"}, {}) ==
          std::vector<std::string>{"pytorch_model.bin", "spiece.model", "config.json"});
    CHECK(model_files({"config.json", "model.safetensors.index.json", "model-1.safetensors", "model-2.safetensors",
                       "model.safetensors"},
                      {"model-1.safetensors", "model-2.safetensors"}) ==
          std::vector<std::string>{"model.safetensors.index.json", "model-1.safetensors", "model-2.safetensors",
                                   "config.json"});
}

TEST_CASE("hub revisions: a commit or a ref name, never a path out of snapshots/", "[hub_unit]") {
    CHECK(is_revision_name("main"));
    CHECK(is_revision_name("refs/pr/1"));
    CHECK(is_revision_name("0123456789abcdef0123456789abcdef01234567"));
    for (const char* bad : {"", ".", "..", "../x", "a/../b", "/main", "main/", "a//b", "a b", "x\ny"}) {
        INFO(bad);
        CHECK_FALSE(is_revision_name(bad));
    }
    CHECK_FALSE(is_commit_name("refs/pr/1"));
    CHECK(is_repo_id("Helsinki-NLP/opus-mt-en-de"));
    for (const char* bad : {"a", "a/b/c", "../x", "a/..", "a/.b", "a--b/c", "a/b c"}) CHECK_FALSE(is_repo_id(bad));
}

TEST_CASE("hub cache: a refs file holding .. or . or a path never leads out of snapshots", "[hub_unit]") {
    HubTempDir cache;
    ScopedEnv hub_cache("HF_HUB_CACHE", cache.str().c_str());
    const fs::path repo = cache.path / "models--org--name";
    // A model planted where ".." (the model's own folder) and "." (snapshots/ itself) lead.
    write(repo / "config.json", "{}");
    write(repo / "snapshots" / "config.json", "{}");
    write(cache.path / "elsewhere" / "config.json", "{}");
    fs::create_directories(repo / "snapshots");
    for (const char* hostile : {"..", ".", "../../elsewhere", "..\n", " .. "}) {
        INFO(hostile);
        write(repo / "refs" / "main", hostile);
        CHECK(find_snapshot("org/name").empty());
        CHECK_THROWS_AS(read_ref(repo.string(), "main"), FileError);
    }
    // A real snapshot beside it is what "main" finds (the newest one with a config.json).
    write(repo / "snapshots" / "abc123" / "config.json", "{}");
    CHECK(find_snapshot("org/name") == (repo / "snapshots" / "abc123").string());
    // A snapshot that is a link to another folder is not followed either.
    fs::remove_all(repo / "snapshots" / "abc123");
    fs::create_directory_symlink(cache.path / "elsewhere", repo / "snapshots" / "linked");
    write(repo / "refs" / "main", "linked");
    CHECK(find_snapshot("org/name").empty());
}

TEST_CASE("hub cache: listing models with revisions, sizes and last use, then deleting a revision", "[hub_unit]") {
    HubTempDir cache;
    plant(cache.path, "org/a", "c1", {{"config.json", "{}"}, {"model.safetensors", std::string(1000, 'x')}});
    plant(cache.path, "org/a", "c2", {{"config.json", "{\"v\": 2}"}, {"model.safetensors", std::string(1000, 'x')}}, "v2");
    plant(cache.path, "org/b", "d1", {{"config.json", "{}"}});
    fs::create_directories(cache.path / "datasets--x--y");
    write(cache.path / "models--org--a" / "blobs" / "e.incomplete", "12345");
    const auto models = scan_cache(cache.str());
    REQUIRE(models.size() == 2);
    CHECK(models[0].id == "org/a");
    REQUIRE(models[0].revisions.size() == 2);
    CHECK(models[0].size_on_disk == 2 + 1000 + 8 + 5);
    CHECK(models[0].incomplete_bytes == 5);
    CHECK(models[0].last_used > 0);
    for (const auto& r : models[0].revisions) {
        CHECK(r.files == std::vector<std::string>{"config.json", "model.safetensors"});
        CHECK(r.refs == std::vector<std::string>{r.commit == "c1" ? "main" : "v2"});
    }
    // Deleting c1 keeps the weights c2 shares, frees its config; the ref main goes with it.
    const DeleteResult d = delete_revision(cache.str(), "org/a", "main");
    CHECK(d.commits == std::vector<std::string>{"c1"});
    CHECK(d.freed == 2);
    CHECK_FALSE(d.removed_model);
    CHECK_FALSE(fs::exists(cache.path / "models--org--a" / "refs" / "main"));
    CHECK(fs::exists(cache.path / "models--org--a" / "snapshots" / "c2" / "model.safetensors"));
    REQUIRE_THROWS_WITH(delete_revision(cache.str(), "org/a", "nope"), Catch::Contains("'v2'") && Catch::Contains("c2"));
    // The last revision takes the model's folder with it.
    const DeleteResult all = delete_revision(cache.str(), "org/a", "");
    CHECK(all.removed_model);
    CHECK_FALSE(fs::exists(cache.path / "models--org--a"));
    CHECK(scan_cache(cache.str()).size() == 1);
    REQUIRE_THROWS_WITH(delete_revision(cache.str(), "org/a", ""), Catch::Contains("not in the cache"));
}

TEST_CASE("hub cache: listing 50 models takes well under a second", "[.][hub_bench]") {
    HubTempDir cache;
    for (int i = 0; i < 50; ++i)
        for (int r = 0; r < 2; ++r)
            plant(cache.path, "org/m" + std::to_string(i), "c" + std::to_string(r),
                  {{"config.json", "{}" + std::to_string(i * 2 + r)},
                   {"model.safetensors", std::string(1000, char('a' + r))},
                   {"tokenizer_config.json", "{}"}, {"source.spm", "s"}, {"target.spm", "t"}});
    const auto t0 = std::chrono::steady_clock::now();
    const auto models = scan_cache(cache.str());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(models.size() == 50);
    std::printf("{\"benchmark\": \"hub cache listing\", \"models\": %zu, \"revisions_each\": 2, \"seconds\": %.4f}\n",
                models.size(), s);
}
