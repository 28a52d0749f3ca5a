// Version-1 checkpoints (weights in a LibTorch archive): refused by default with
// the upgrade command, converted by upgrade_checkpoint with every check that can
// come before LibTorch's loader. The fixture was written by attnviz before
// format 2 (`train --task reverse --pairs 200 --epochs 1 --seed 3 --embed 8
// --hidden 16`, see tests/data/README.md).
#include "catch_torch.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/persist/model_file.hpp"
#include "core/persist/checkpoint.hpp"
#include "core/persist/checkpoint_legacy.hpp"
#include "core/io/checksum.hpp"
#include "core/io/error.hpp"
#include "test_support.hpp"

using namespace attnviz;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
const std::string k_v1 = std::string(ATTNVIZ_TEST_DATA) + "/checkpoint_v1_tiny.ckpt";

fs::path temp_dir() {
    auto d = fs::temp_directory_path() / ("attnviz-ckpt1-" + std::to_string(::getpid()) + "-" + std::to_string(std::rand()));
    fs::create_directories(d);
    return d;
}
std::string read_all(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write_all(const fs::path& p, const std::string& s) {
    std::ofstream out(p, std::ios::binary);
    out << s;
}

uint64_t get_u64(const std::string& s, size_t at) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(s[at + i])) << (8 * i);
    return v;
}
std::string u64(uint64_t v) {
    std::string s;
    for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return s;
}

/// The fixture with its JSON metadata changed and the checksum made to match again.
std::string v1_with_metadata(const std::function<void(json&)>& edit) {
    const std::string bytes = read_all(k_v1);
    const size_t meta_at = 12;
    const uint64_t n = get_u64(bytes, meta_at);
    json meta = json::parse(bytes.substr(meta_at + 8, n));
    edit(meta);
    const std::string text = meta.dump();
    std::string out = bytes.substr(0, meta_at) + u64(text.size()) + text +
                      bytes.substr(meta_at + 8 + n, bytes.size() - 8 - (meta_at + 8 + n));
    return out + u64(fnv1a(out.data(), out.size()));
}
}  // namespace

TEST_CASE("a version-1 checkpoint is refused by default with the upgrade command", "[checkpoint][legacy]") {
    REQUIRE(fs::exists(k_v1));
    CHECK(detect_model_file(k_v1) == ModelFileKind::legacy_checkpoint);
    try {
        load_checkpoint(k_v1);
        FAIL("a version-1 file was opened");
    } catch (const FileError& e) {
        const std::string msg = e.what();
        CHECK_THAT(msg, Catch::Contains("old format") && Catch::Contains(k_v1) &&
                            Catch::Contains("attnviz-cli upgrade-checkpoint '" + k_v1 + "' NEW.ckpt --trust") &&
                            Catch::Contains("trusts sizes"));
    }
    CHECK_THROWS_AS(load_model(k_v1), FileError);
}

TEST_CASE("upgrade_checkpoint converts a version-1 file exactly", "[checkpoint][legacy]") {
    const auto dir = temp_dir();
    const Checkpoint old = load_legacy_checkpoint(k_v1);
    const auto path = (dir / "upgraded.ckpt").string();
    upgrade_checkpoint(k_v1, path);
    CHECK(detect_model_file(path) == ModelFileKind::checkpoint);
    const Checkpoint c = load_checkpoint(path);

    auto a = old.model->network()->named_parameters();
    auto b = c.model->network()->named_parameters();
    REQUIRE(a.size() == b.size());
    for (const auto& item : a) CHECK(torch::equal(item.value(), b[item.key()]));
    CHECK(c.model->src_vocab() == old.model->src_vocab());
    CHECK(c.model->tgt_vocab() == old.model->tgt_vocab());
    CHECK(c.model->history().to_json() == old.model->history().to_json());
    CHECK(c.model->history().epochs_done == 1);
    CHECK(c.model->trained_with().to_json() == old.model->trained_with().to_json());
    CHECK(c.model->corpus_name() == old.model->corpus_name());
    REQUIRE_FALSE(old.optimizer_state.empty());
    CHECK(c.optimizer_state.params.size() == a.size());
    for (const auto& [name, p] : old.optimizer_state.params) {
        CHECK(c.optimizer_state.params.at(name).step == p.step);
        CHECK(p.step > 0);
        for (const auto& [slot, t] : p.slots) CHECK(torch::equal(t, c.optimizer_state.params.at(name).slots.at(slot)));
    }
    const std::vector<std::string> inputs = {"a b c", "d e f g", "h i"};
    DecodeOptions o;
    const auto before = old.model->translate(inputs, o);
    const auto after = c.model->translate(inputs, o);
    for (size_t i = 0; i < inputs.size(); ++i) {
        CHECK(before[i].best().ids == after[i].best().ids);
        CHECK(before[i].best().attention.weights() == after[i].best().attention.weights());
    }
    testing::remove_tree(dir);
}

TEST_CASE("the version-1 reader checks what it can before LibTorch reads the file", "[checkpoint][legacy]") {
    const auto dir = temp_dir();
    const auto bad = dir / "bad.ckpt";
    auto refused = [&](const std::string& bytes) -> std::string {
        write_all(bad, bytes);
        try {
            load_legacy_checkpoint(bad.string());
        } catch (const FileError& e) {
            return e.what();
        }
        return "(loaded)";
    };
    CHECK(refused(read_all(k_v1)) == "(loaded)");
    // A configuration whose weights cannot fit in the archive: refused by size, before loading.
    CHECK_THAT(refused(v1_with_metadata([](json& m) {
                   m["model"]["hidden_size"] = 4096;
                   m["model"]["num_layers"] = 8;
               })),
               Catch::Contains("implausible"));
    CHECK_THAT(refused(v1_with_metadata([](json& m) { m["history"]["epochs_done"] = 2147483647; })),
               Catch::Contains("epochs_done"));
    CHECK_THAT(refused(v1_with_metadata([](json& m) { m["model"]["embed_size"] = -3; })), Catch::Contains("embed_size"));
    CHECK_THAT(refused(v1_with_metadata([](json& m) {
                   json deep = json::array();
                   for (int i = 0; i < 40; ++i) deep = json::array({deep});
                   m["corpus"] = deep;
               })),
               Catch::Contains("nested more than"));
    std::string flipped = read_all(k_v1);
    flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x21);
    CHECK_THAT(refused(flipped), Catch::Contains("corrupt"));
    CHECK_THAT(refused(read_all(k_v1).substr(0, 100)), Catch::Contains("truncated"));
    testing::remove_tree(dir);
}
