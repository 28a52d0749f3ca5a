// attnviz-cli with --arch transformer, run as a user would: train, translate with every
// map in --attention-out, alignments from a chosen layer and heads, the per-head AER
// table, export and the checks of the flags.
#include "catch_torch.hpp"

#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "cli_support.hpp"
#include "core/analysis/alignment.hpp"

using nlohmann::json;
using namespace attnviz_cli_test;

namespace {
/// Trains a tiny reverse-task Transformer (2 blocks of 2 heads) and returns its checkpoint.
std::string train_tiny_transformer(const TempDir& dir) {
    const std::string ckpt = dir / "tf.ckpt";
    Result r = cli(dir, {"train", "--task", "reverse", "--pairs", "300", "--epochs", "2", "--seed", "1", "--arch",
                         "transformer", "--hidden", "16", "--layers", "2", "--heads", "2", "--ffn", "24", "--batch",
                         "32", "--device", "cpu", "-q", "--save", ckpt});
    INFO("stderr: " << r.err);
    REQUIRE(r.code == 0);
    REQUIRE(exists(ckpt));
    return ckpt;
}
}  // namespace

TEST_CASE("cli: a Transformer trains, translates and writes every attention map", "[cli][transformer]") {
    TempDir dir;
    const std::string ckpt = train_tiny_transformer(dir);
    const std::string att = dir / "att.json";
    Result r = cli(dir, {"translate", "--model", ckpt, "--attention-out", att, "--max-length", "6", "a b c d"});
    INFO("stderr: " << r.err);
    REQUIRE(r.code == 0);
    const json j = json::parse(read_file(att));
    REQUIRE(j.size() == 1);
    const size_t n = j[0]["source"].size(), steps = j[0]["output"].size();
    CHECK(n == 5);
    std::set<std::tuple<std::string, int, int>> seen;
    for (const auto& m : j[0]["attention_maps"]) {
        const std::string kind = m["kind"];
        const int layer = m["layer"], head = m["head"];
        INFO(kind << " " << layer << " " << head);
        CHECK(seen.insert({kind, layer, head}).second);
        const auto rows = m["weights"].get<std::vector<std::vector<float>>>();
        if (kind == "encoder_self") {
            check_rows_sum_to_one(rows, n);
            CHECK(rows.size() == n);
        } else if (kind == "cross") {
            check_rows_sum_to_one(rows, n);
            CHECK(rows.size() == steps);
        } else {
            REQUIRE(kind == "decoder_self");
            REQUIRE(rows.size() == steps);
            for (size_t t = 0; t < steps; ++t) CHECK(rows[t].size() == t + 1);  // causal
        }
    }
    // The primary map (the last layer's mean), then 2 layers x 2 heads of each kind.
    CHECK(j[0]["attention_maps"][0]["head"] == -1);
    CHECK(j[0]["attention_maps"][0]["layer"] == 1);
    CHECK(seen.size() == 1 + 3 * 2 * 2);
    CHECK(j[0]["weights"] == j[0]["attention_maps"][0]["weights"]);
    CHECK(j[0]["model"]["arch"] == "transformer");
    CHECK(j[0]["model"]["num_heads"] == 2);

    // Beam search and N-best go through the same seam.
    Result nbest = cli(dir, {"translate", "--model", ckpt, "--nbest", "3", "--beam", "4", "a b c"});
    REQUIRE(nbest.code == 0);
    CHECK(lines_of(nbest.out).size() == 3);
}

TEST_CASE("cli: alignments from a chosen Transformer layer and heads, and the per-head AER table",
          "[cli][transformer][alignment]") {
    TempDir dir;
    const std::string ckpt = train_tiny_transformer(dir);
    const std::string al = dir / "align.txt", att = dir / "att.json";
    Result r = cli(dir, {"translate", "--model", ckpt, "--alignment-out", al, "--alignment-layer", "0",
                         "--alignment-heads", "1", "--attention-out", att, "a b c d"});
    INFO("stderr: " << r.err);
    REQUIRE(r.code == 0);
    const auto lines = attnviz::parse_pharaoh(read_file(al), al);
    REQUIRE(lines.size() == 1);
    // The links are the argmax of layer 0's head 1, as the JSON export holds it.
    const json j = json::parse(read_file(att));
    std::vector<std::vector<float>> head;
    for (const auto& m : j[0]["attention_maps"])
        if (m["kind"] == "cross" && m["layer"] == 0 && m["head"] == 1) head = m["weights"];
    const size_t words = j[0]["source"].size() - 1;
    const auto out = j[0]["output"].get<std::vector<std::string>>();
    const size_t produced = static_cast<size_t>(std::find(out.begin(), out.end(), "<eos>") - out.begin());
    CHECK(lines[0] == attnviz::hard_alignment(head, words, produced));

    for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
             {"--alignment-heads", "2"}, {"--alignment-layer", "2"}, {"--alignment-heads", "0,0"}}) {
        Result bad = cli(dir, {"translate", "--model", ckpt, "--alignment-out", al, flag, value, "a b"});
        INFO(flag << " " << value);
        require_one_error_line(bad, "--alignment");
        CHECK(bad.code == 2);
    }

    Result e = cli(dir, {"eval", "--model", ckpt, "--task", "reverse", "--pairs", "60", "--split", "all",
                         "--per-head-aer", "--json"});
    INFO("stderr: " << e.err);
    REQUIRE(e.code == 0);
    const json ej = json::parse(e.out);
    REQUIRE(ej.at("per_head").size() == 2 * (2 + 1));  // per layer: 2 heads and their mean
    CHECK(ej["per_head"][2]["head"] == "mean");
    CHECK(ej["per_head"][3]["layer"] == 1);
    for (const auto& row : ej["per_head"]) {
        REQUIRE(row["aer"].is_number());
        CHECK(row["aer"].get<double>() >= 0.0);
        CHECK(row["aer"].get<double>() <= 1.0);
    }
    // The default alignment is the last layer's mean: the table's last row.
    CHECK(ej["aer"] == ej["per_head"][5]["aer"]);
    Result text = cli(dir, {"eval", "--model", ckpt, "--task", "reverse", "--pairs", "60", "--split", "all",
                            "--per-head-aer"});
    REQUIRE(text.code == 0);
    CHECK(text.out.find("layer  head  AER") != std::string::npos);
}

TEST_CASE("cli: Transformer flags are checked against the family", "[cli][transformer]") {
    TempDir dir;
    Result heads = cli(dir, {"train", "--task", "reverse", "--arch", "transformer", "--hidden", "30", "--heads", "4",
                             "--epochs", "1", "-q"});
    require_one_error_line(heads, "multiple of its heads");
    CHECK(heads.code == 2);
    Result cell = cli(dir, {"train", "--task", "reverse", "--arch", "transformer", "--cell", "lstm", "--epochs", "1",
                            "-q"});
    require_one_error_line(cell, "--cell applies to the RNN only");
    Result rnn = cli(dir, {"train", "--task", "reverse", "--ffn", "128", "--epochs", "1", "-q"});
    require_one_error_line(rnn, "--ffn applies to the Transformer only");
}

TEST_CASE("cli: a Transformer exports in d2l's layout and reads back the same", "[cli][transformer][d2l]") {
    TempDir dir;
    const std::string ckpt = train_tiny_transformer(dir);
    const std::string file = dir / "tf.safetensors";
    Result ex = cli(dir, {"export", "--model", ckpt, "--out", file});
    INFO("stderr: " << ex.err);
    REQUIRE(ex.code == 0);
    CHECK(ex.out.find("TransformerEncoder") != std::string::npos);
    Result a = cli(dir, {"translate", "--model", ckpt, "a b c d", "e f"});
    Result b = cli(dir, {"translate", "--model", file, "a b c d", "e f"});
    REQUIRE(a.code == 0);
    REQUIRE(b.code == 0);
    CHECK(a.out == b.out);
}
