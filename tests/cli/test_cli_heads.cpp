// attnviz-cli heads (which heads matter) and --mask-heads on the commands that apply a model.
#include "catch_torch.hpp"

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_support.hpp"

using nlohmann::json;
using namespace attnviz_cli_test;

namespace {
/// A reverse-task Transformer of 2 blocks x 2 heads, trained for a moment.
std::string heads_cli_transformer(const TempDir& dir) {
    const std::string ckpt = dir / "heads.ckpt";
    Result r = cli(dir, {"train", "--task", "reverse", "--pairs", "300", "--epochs", "2", "--seed", "1", "--arch",
                         "transformer", "--hidden", "16", "--layers", "2", "--heads", "2", "--ffn", "24", "--batch",
                         "32", "--device", "cpu", "-q", "--save", ckpt});
    INFO("stderr: " << r.err);
    REQUIRE(r.code == 0);
    return ckpt;
}
}  // namespace

TEST_CASE("cli: heads reports every head of every kind as JSON, a table and a pruning curve", "[cli][heads]") {
    TempDir dir;
    const std::string ckpt = heads_cli_transformer(dir);
    const std::string out = dir / "heads.json", csv = dir / "curve.csv";
    Result r = cli(dir, {"heads", "--model", ckpt, "--task", "reverse", "--pairs", "300", "--sentences", "20", "--json",
                         "--out", out, "--prune-curve", "--prune-seeds", "1", "--csv", csv});
    INFO("stderr: " << r.err);
    REQUIRE(r.code == 0);
    const json j = json::parse(r.out);
    CHECK(json::parse(read_file(out)) == j);
    CHECK(j["sentences"] == 20);
    CHECK(j["loss"].is_number());
    REQUIRE(j["heads"].size() == 3 * 2 * 2);
    for (const auto& h : j["heads"]) {
        for (const char* key : {"kind", "layer", "head", "confidence", "entropy", "positional", "rare_share",
                                "sink_share", "importance"})
            CHECK(h.contains(key));
        CHECK(h["confidence"].get<double>() > 0);
        CHECK(h["confidence"].get<double>() <= 1);
        CHECK(h["importance"].get<double>() >= 0);
        if (h["kind"] == "cross") {
            CHECK(h["positional"].is_null());
            CHECK(h["aer"].is_number());  // the reverse task knows its alignments
        } else {
            CHECK(h["positional"]["share"].is_number());
            CHECK_FALSE(h.contains("aer"));
        }
        if (h["kind"] == "decoder_self") CHECK(h["rare_share"].is_null());
    }
    // (importance, confidence, random:1) x (all and each of 3 kinds) x 10 fractions
    REQUIRE(j["prune_curve"].size() == 3 * 4 * 10);
    const auto& first = j["prune_curve"][0];
    CHECK(first["order"] == "importance");
    CHECK(first["kinds"] == "all");
    CHECK(first["heads_masked"] == 0);
    CHECK(first["loss"].get<double>() == Approx(j["loss"].get<double>()).epsilon(1e-5));
    CHECK(j["prune_curve"][9]["heads_masked"] == 11);  // 90% of 12
    CHECK(lines_of(read_file(csv)).size() == 1 + 120);
    // The table.
    Result t = cli(dir, {"heads", "--model", ckpt, "--task", "reverse", "--pairs", "300", "--sentences", "10"});
    REQUIRE(t.code == 0);
    CHECK(t.out.find("encoder_self") != std::string::npos);
    CHECK(t.out.find("importance") != std::string::npos);
    CHECK(lines_of(t.out).size() == 3 + 12);
}

TEST_CASE("cli: --mask-heads switches heads off and names what is wrong", "[cli][heads]") {
    TempDir dir;
    const std::string ckpt = heads_cli_transformer(dir);
    // Every cross head off: the translation no longer depends on the source.
    const std::string all_cross = "cross:0:0,cross:0:1,cross:1:0,cross:1:1";
    Result u = cli(dir, {"translate", "--model", ckpt, "a b c d", "j i h"});
    REQUIRE(u.code == 0);
    REQUIRE(lines_of(u.out).size() == 2);
    REQUIRE(lines_of(u.out)[0] != lines_of(u.out)[1]);  // unmasked they differ: masking can show
    Result a = cli(dir, {"translate", "--model", ckpt, "--mask-heads", all_cross, "a b c d", "j i h"});
    INFO("stderr: " << a.err);
    REQUIRE(a.code == 0);
    const auto lines = lines_of(a.out);
    REQUIRE(lines.size() == 2);
    CHECK(lines[0] == lines[1]);
    // eval and heads with a mask: the loss changes, the mask is reported.
    Result e0 = cli(dir, {"eval", "--model", ckpt, "--task", "reverse", "--pairs", "300", "--json"});
    Result e1 = cli(dir, {"eval", "--model", ckpt, "--task", "reverse", "--pairs", "300", "--json", "--mask-heads",
                          "encoder_self:1:0"});
    REQUIRE(e0.code == 0);
    REQUIRE(e1.code == 0);
    CHECK(json::parse(e1.out)["mask_heads"] == "encoder_self:1:0");
    CHECK(json::parse(e0.out)["val_loss"] != json::parse(e1.out)["val_loss"]);
    Result h = cli(dir, {"heads", "--model", ckpt, "--task", "reverse", "--pairs", "300", "--sentences", "10", "--json",
                         "--mask-heads", "dec:0:1"});
    REQUIRE(h.code == 0);
    CHECK(json::parse(h.out)["mask_heads"] == "dec:0:1");
    Result b = cli(dir, {"bench-decode", "--model", ckpt, "--task", "reverse", "--sentences", "5", "--repeat", "1",
                         "--mask-heads", "cross:1:1"});
    CHECK(b.code == 0);
    Result at = cli(dir, {"attribute", "--model", ckpt, "--method", "grad-input", "--mask-heads", "cross:1:1", "a b"});
    CHECK(at.code == 0);
    // Errors: one line naming the flag and the item; out of range names the model's sizes.
    require_one_error_line(cli(dir, {"translate", "--model", ckpt, "--mask-heads", "cross:0", "a"}), "--mask-heads: 'cross:0'");
    require_one_error_line(cli(dir, {"eval", "--model", ckpt, "--task", "reverse", "--mask-heads", "self:0:0"}),
                           "unknown kind 'self'");
    Result range = cli(dir, {"translate", "--model", ckpt, "--mask-heads", "cross:0:0,cross:2:0", "a"});
    require_one_error_line(range, "'cross:2:0'");
    CHECK(range.err.find("2 layers x 2 heads") != std::string::npos);
    CHECK(range.code == 2);
    require_one_error_line(cli(dir, {"heads", "--model", ckpt, "--task", "reverse", "--csv", dir / "c.csv"}),
                           "--prune-curve");
}

TEST_CASE("cli: train --head-stats reports every head's importance and confidence", "[cli][heads]") {
    TempDir dir;
    Result r = cli(dir, {"train", "--task", "reverse", "--pairs", "300", "--epochs", "2", "--seed", "1", "--arch",
                         "transformer", "--hidden", "16", "--layers", "2", "--heads", "2", "--ffn", "24", "--batch",
                         "32", "--device", "cpu", "-q", "--json", "--head-stats", "8"});
    INFO("stderr: " << r.err);
    REQUIRE(r.code == 0);
    const json j = json::parse(r.out);
    REQUIRE(j["heads"].size() == 3 * 2 * 2);
    CHECK(j["heads"][0]["kind"] == "encoder_self");
    CHECK(j["heads"][0]["importance"].is_number());
    CHECK(j["heads"][0]["confidence"].is_number());
    // Off by default.
    Result off = cli(dir, {"train", "--task", "reverse", "--pairs", "300", "--epochs", "1", "--seed", "1", "--arch",
                           "transformer", "--hidden", "16", "--layers", "2", "--heads", "2", "--ffn", "24", "--device",
                           "cpu", "-q", "--json"});
    REQUIRE(off.code == 0);
    CHECK_FALSE(json::parse(off.out).contains("heads"));
}
