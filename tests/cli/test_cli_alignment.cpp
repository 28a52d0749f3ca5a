// attnviz-cli's alignment features, run as a user would: translate
// --alignment-out (Pharaoh), eval --alignments GOLD (AER) and the alignment
// figures of train --json and eval on a built-in task.
#include "catch_torch.hpp"

#include <nlohmann/json.hpp>

#include "cli_support.hpp"
#include "core/analysis/alignment.hpp"

using nlohmann::json;
using namespace attnviz_cli_test;

namespace {
// Reverse-task words (symbols a..j) as a TSV corpus, with its alignment; the last pair
// has sides of different lengths, so a link read the wrong way round falls outside it.
const std::string k_tsv = "a b c\tc b a\nd e\te d\nf g h i\ti h g f\nj a b\tb a j\na b\tb a a\n";
const std::string k_gold = "0-2 1-1 2-0\n0-1 1-0\n0-3 1-2 2-1 3-0\n0-2 1-1 2-0\n0-1 1-0 0-2\n";
const std::string k_gold_1 = "1-3 2-2 3-1\n1-2 2-1\n1-4 2-3 3-2 4-1\n1-3 2-2 3-1\n1-2 2-1 1-3\n";
}  // namespace

TEST_CASE("cli: translate --alignment-out writes Pharaoh lines that match the attention", "[cli][alignment]") {
    TempDir dir;
    const std::string ckpt = train_tiny(dir);
    const std::string al = dir / "align.txt", att = dir / "att.json";
    Result r = cli(dir, {"translate", "--model", ckpt, "--alignment-out", al, "--attention-out", att}, "a b c\n\nd e f g\n");
    INFO("stderr: " << r.err);
    REQUIRE(r.code == 0);
    const auto lines = attnviz::parse_pharaoh(read_file(al), al);
    REQUIRE(lines.size() == 3);  // one per input line, the empty one included
    CHECK(lines[1].empty());
    const json j = json::parse(read_file(att));
    REQUIRE(j.size() == 3);
    for (size_t i : {size_t{0}, size_t{2}}) {
        // The same links as the JSON export's "alignment", inside the sentence (no <eos>).
        json links = json::array();
        for (const auto& l : lines[i].links()) {
            CHECK(l.src < static_cast<int>(j[i]["source"].size()) - 1);
            CHECK(l.tgt < static_cast<int>(j[i]["output"].size()));
            links.push_back({l.src, l.tgt});
        }
        CHECK(links == j[i]["alignment"]);
        CHECK(j[i]["entropy"].size() == j[i]["output"].size());
        CHECK(j[i]["coverage"].size() == j[i]["source"].size());
    }

    // A threshold low enough keeps every argmax link (the argmax is >= 1/n) and adds others.
    Result low = cli(dir, {"translate", "--model", ckpt, "--alignment-out", al, "--alignment-threshold", "0.01"},
                     "a b c\n\nd e f g\n");
    REQUIRE(low.code == 0);
    const auto many = attnviz::parse_pharaoh(read_file(al), al);
    REQUIRE(many.size() == 3);
    for (size_t i : {size_t{0}, size_t{2}}) {
        CHECK(many[i].size() >= lines[i].size());
        for (const auto& l : lines[i].links()) CHECK(many[i].contains(l.src, l.tgt));
    }
    Result bad = cli(dir, {"translate", "--model", ckpt, "--alignment-out", al, "--alignment-threshold", "2", "a"});
    CHECK(bad.code == 2);
}

TEST_CASE("cli: eval --alignments prints AER and alignment accuracy of a gold file", "[cli][alignment]") {
    TempDir dir;
    const std::string ckpt = train_tiny(dir);
    const std::string tsv = dir / "pairs.tsv", gold = dir / "gold.txt", gold1 = dir / "gold1.txt";
    write_file(tsv, k_tsv);
    write_file(gold, k_gold);
    write_file(gold1, k_gold_1);
    Result r = cli(dir, {"eval", "--model", ckpt, "--data", tsv, "--split", "all", "--alignments", gold, "--json"});
    INFO("stderr: " << r.err);
    REQUIRE(r.code == 0);
    const json j = json::parse(r.out);
    CHECK(j.at("align_pairs") == 5);
    for (const char* k : {"align_accuracy", "aer", "align_precision", "align_recall"}) {
        INFO(k);
        REQUIRE(j.at(k).is_number());
        CHECK(j.at(k).get<double>() >= 0.0);
        CHECK(j.at(k).get<double>() <= 1.0);
    }
    // One link per target word, all sure: recall = accuracy, and AER = 1 - 2|A and S| / (|A| + |S|).
    CHECK(j.at("align_recall").get<double>() == Approx(j.at("align_accuracy").get<double>()));

    // The same gold 1-based gives the same figures; text output names them.
    Result one = cli(dir, {"eval", "--model", ckpt, "--data", tsv, "--split", "all", "--alignments", gold1,
                           "--alignments-one-based", "--json"});
    REQUIRE(one.code == 0);
    CHECK(json::parse(one.out).at("aer") == j.at("aer"));
    Result text = cli(dir, {"eval", "--model", ckpt, "--data", tsv, "--split", "all", "--alignments", gold});
    REQUIRE(text.code == 0);
    CHECK(text.out.find("AER ") != std::string::npos);
    CHECK(text.out.find("alignment acc ") != std::string::npos);
    // --reverse swaps the columns, and the gold's links with them (else the last pair's 0-2
    // would point past its new target "a b").
    Result rev = cli(dir, {"eval", "--model", ckpt, "--data", tsv, "--split", "all", "--alignments", gold,
                           "--reverse", "--json"});
    INFO("stderr: " << rev.err);
    CHECK(rev.code == 0);
    // Without a gold file a TSV corpus has no alignment figures.
    Result plain = cli(dir, {"eval", "--model", ckpt, "--data", tsv, "--split", "all", "--json"});
    REQUIRE(plain.code == 0);
    CHECK(json::parse(plain.out).at("aer").is_null());
    CHECK(json::parse(plain.out).at("align_pairs") == 0);
}

TEST_CASE("cli: eval --alignments rejects gold files that do not fit the corpus", "[cli][alignment]") {
    TempDir dir;
    const std::string ckpt = train_tiny(dir);
    const std::string tsv = dir / "pairs.tsv", gold = dir / "gold.txt";
    write_file(tsv, k_tsv);
    auto eval = [&](const std::string& gold_text, std::vector<std::string> extra = {}) {
        write_file(gold, gold_text);
        return cli(dir, cat({"eval", "--model", ckpt, "--data", tsv, "--split", "all", "--alignments", gold}, extra));
    };
    // Line counts: both files and both counts named.
    Result short_gold = eval("0-2 1-1 2-0\n");
    CHECK(short_gold.code == 1);
    require_one_error_line(short_gold, "has 1 lines but " + tsv + " has 5 sentence pairs");
    CHECK(short_gold.err.find(gold) != std::string::npos);
    // A malformed link: the file and line.
    Result malformed = eval("0-2 1-1 2-0\n0-1 1:0\n\n\n");
    CHECK(malformed.code == 1);
    require_one_error_line(malformed, gold + ":2: '1:0' is not a link");
    // A link outside its pair (a 1-based file read as 0-based): the hint.
    Result outside = eval(k_gold_1);
    CHECK(outside.code == 1);
    require_one_error_line(outside, "--alignments-one-based");
    // 0 in a 1-based file.
    Result zero = eval(k_gold, {"--alignments-one-based"});
    CHECK(zero.code == 1);
    require_one_error_line(zero, "position 0 in a 1-based file");
    // Built-in tasks know their alignments.
    Result task = cli(dir, {"eval", "--model", ckpt, "--task", "reverse", "--alignments", gold});
    CHECK(task.code == 2);
    require_one_error_line(task, "built-in tasks know their alignments");
}

TEST_CASE("cli: a built-in task reports alignment in train --json and eval", "[cli][alignment]") {
    TempDir dir;
    const std::string ckpt = dir / "m.ckpt";
    Result train = cli(dir, cat({"train", "--task", "reverse", "--pairs", "300", "--epochs", "2", "--seed", "1",
                                 "--save", ckpt, "--json"},
                                tiny()));
    INFO("stderr: " << train.err);
    REQUIRE(train.code == 0);
    const json t = json::parse(train.out);
    for (const char* k : {"val_align_accuracy", "val_aer"}) {
        INFO(k);
        REQUIRE(t.at(k).is_number());
        CHECK(t.at(k).get<double>() >= 0.0);
        CHECK(t.at(k).get<double>() <= 1.0);
    }
    Result ev = cli(dir, {"eval", "--model", ckpt, "--task", "reverse", "--pairs", "300", "--json"});
    INFO("stderr: " << ev.err);
    REQUIRE(ev.code == 0);
    const json e = json::parse(ev.out);
    CHECK(e.at("align_pairs").get<int>() > 0);
    CHECK(e.at("align_accuracy").is_number());
    CHECK(e.at("aer").is_number());
}
