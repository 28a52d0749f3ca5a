// attnviz-cli export and d2l safetensors files: what export writes translates as
// the checkpoint did, a model trained with --source-steps keeps it, a variant is
// written with a note that d2l's classes cannot load it.
#include "catch_torch.hpp"

#include <nlohmann/json.hpp>

#include "cli_support.hpp"

using namespace attnviz_cli_test;

namespace {
const std::vector<std::string> k_sentences = {"a b c", "d e f g", "h i", "c b a d e f g h i j"};
}  // namespace

TEST_CASE("cli: export writes d2l's layout, translate reads it back with the checkpoint's output",
          "[cli][d2l]") {
    TempDir dir;
    for (const std::string steps : {"0", "4"}) {
        INFO("--source-steps " << steps);
        const std::string ckpt = dir / ("m" + steps + ".ckpt"), out = dir / ("m" + steps + ".safetensors");
        Result tr = cli(dir, cat({"train", "--task", "reverse", "--pairs", "300", "--epochs", "2", "--seed", "1",
                                  "--source-steps", steps, "--save", ckpt},
                                 tiny()));
        INFO("stderr: " << tr.err);
        REQUIRE(tr.code == 0);
        Result ex = cli(dir, {"export", "--model", ckpt, "--out", out});
        INFO("export stderr: " << ex.err);
        REQUIRE(ex.code == 0);
        CHECK(ex.out.find("load_state_dict") != std::string::npos);
        CHECK((ex.out.find("num_steps " + steps) != std::string::npos) == (steps != "0"));

        Result a = cli(dir, cat({"translate", "--model", ckpt, "--attention-out", dir / "a.json"}, k_sentences));
        Result b = cli(dir, cat({"translate", "--model", out, "--attention-out", dir / "b.json"}, k_sentences));
        INFO("stderr: " << b.err);
        REQUIRE(a.code == 0);
        REQUIRE(b.code == 0);
        CHECK(a.out == b.out);
        const auto ja = nlohmann::json::parse(read_file(dir / "a.json")),
                   jb = nlohmann::json::parse(read_file(dir / "b.json"));
        for (size_t i = 0; i < ja.size(); ++i) {
            CHECK(ja[i]["source"] == jb[i]["source"]);
            CHECK(ja[i]["weights"] == jb[i]["weights"]);
        }
        // With 4 source steps the long sentence is read as its first 4 tokens.
        if (steps == "4") CHECK(jb[3]["source"].size() == 4);
    }
}

TEST_CASE("cli: a variant exports with a note, bad files and paths are one-line errors", "[cli][d2l]") {
    TempDir dir;
    const std::string ckpt = dir / "lstm.ckpt";
    Result tr = cli(dir, cat({"train", "--task", "reverse", "--pairs", "200", "--epochs", "1", "--cell", "lstm",
                              "--bidirectional", "--save", ckpt},
                             tiny()));
    INFO("stderr: " << tr.err);
    REQUIRE(tr.code == 0);
    Result ex = cli(dir, {"export", "--model", ckpt, "--out", dir / "lstm.safetensors"});
    REQUIRE(ex.code == 0);
    CHECK(ex.out.find("LSTM cell, bidirectional encoder") != std::string::npos);
    CHECK(ex.out.find("cannot load it") != std::string::npos);
    Result back = cli(dir, {"translate", "--model", dir / "lstm.safetensors", "a b c"});
    CHECK(back.code == 0);

    Result missing = cli(dir, {"export", "--model", dir / "nope.ckpt", "--out", dir / "x.safetensors"});
    CHECK(missing.code == 1);
    require_one_error_line(missing, "nope.ckpt");
    Result nowhere = cli(dir, {"export", "--model", ckpt, "--out", dir / "no/such/dir/x.safetensors"});
    CHECK(nowhere.code == 1);
    require_one_error_line(nowhere, "x.safetensors");
    Result usage = cli(dir, {"export", "--model", ckpt});
    CHECK(usage.code == 2);
}
