// attnviz-cli with subwords: train --level subword on the English-Russian test corpus,
// translate with pieces or --merge-subwords, eval and resume with the model's own pieces.
#include "cli_support.hpp"

#include <nlohmann/json.hpp>

using namespace attnviz_cli_test;
using json = nlohmann::json;

namespace {
const std::string k_corpus = std::string(ATTNVIZ_TEST_DATA) + "/eng-rus.tsv";
const std::string k_boundary = "\xE2\x96\x81";  // "▁"
}  // namespace

TEST_CASE("cli: subword level trains, translates with pieces or merged words, evaluates and resumes",
          "[cli][subword]") {
    TempDir dir;
    const std::string ckpt = dir / "rus.ckpt";
    Result train = cli(dir, cat({"train", "--data", k_corpus, "--reverse", "--level", "subword", "--subword-vocab", "120",
                                 "--subword-model", "bpe", "--epochs", "3", "--seed", "1", "--save", ckpt, "--json"},
                                tiny()));
    INFO("stderr: " << train.err);
    REQUIRE(train.code == 0);
    const json t = json::parse(train.out);
    CHECK(t.at("train").at("subword_vocab") == 120);
    CHECK(t.at("train").at("subword_model") == "bpe");
    CHECK(t.at("src_vocab").get<int>() <= 120 + 4);  // pieces, not words
    REQUIRE(exists(ckpt));

    // Pieces: the source tokens as the model saw them, "▁" starting each word.
    Result tr = cli(dir, {"translate", "--model", ckpt, "ПРИВЕТ, Том!", "--attention-out", dir / "pieces.json"});
    INFO("stderr: " << tr.err);
    REQUIRE(tr.code == 0);
    CHECK(lines_of(tr.out).size() == 1);
    const json pieces = json::parse(read_file(dir / "pieces.json")).at(0);
    CHECK_FALSE(pieces.contains("merged"));
    const auto src = pieces.at("source").get<std::vector<std::string>>();
    REQUIRE(src.size() >= 5);
    CHECK(src.front().compare(0, k_boundary.size(), k_boundary) == 0);

    // --merge-subwords: words, rows still summing to 1, and the note; CSV says it too.
    Result merged = cli(dir, {"translate", "--model", ckpt, "ПРИВЕТ, Том!", "--merge-subwords", "--attention-out",
                              dir / "words.json"});
    INFO("stderr: " << merged.err);
    REQUIRE(merged.code == 0);
    CHECK(merged.out == tr.out);  // the translation itself is the same
    const json words = json::parse(read_file(dir / "words.json")).at(0);
    CHECK(words.at("merged") == "words (columns summed, rows averaged)");
    CHECK(words.at("source") == json({"привет", ",", "том", "!", "<eos>"}));
    for (const auto& row : words.at("weights")) {
        double sum = 0;
        for (const auto& w : row) sum += w.get<double>();
        CHECK(sum == Approx(1.0).epsilon(1e-5));
    }
    Result csv = cli(dir, {"translate", "--model", ckpt, "Спасибо!", "--merge-subwords", "--attention-out",
                           dir / "words.csv"});
    REQUIRE(csv.code == 0);
    CHECK(read_file(dir / "words.csv").rfind("\"merged: words (columns summed, rows averaged)\",спасибо,!,<eos>,", 0) == 0);

    // eval re-splits the corpus with the model's own SentencePiece model: training's validation loss.
    Result ev = cli(dir, {"eval", "--model", ckpt, "--data", k_corpus, "--reverse", "--level", "subword", "--json"});
    INFO("stderr: " << ev.err);
    REQUIRE(ev.code == 0);
    CHECK(json::parse(ev.out).at("val_loss").get<double>() == Approx(t.at("val_loss").get<double>()).epsilon(1e-4));

    // Resuming keeps the SentencePiece model (and so the vocabularies).
    Result re = cli(dir, cat({"train", "--resume", ckpt, "--data", k_corpus, "--reverse", "--level", "subword",
                              "--epochs", "4", "--save", dir / "rus2.ckpt", "--json"},
                             {"-q", "--device", "cpu"}));
    INFO("stderr: " << re.err);
    REQUIRE(re.code == 0);
    CHECK(json::parse(re.out).at("src_vocab") == t.at("src_vocab"));
    Result again = cli(dir, {"translate", "--model", dir / "rus2.ckpt", "ПРИВЕТ, Том!", "--attention-out", dir / "p2.json"});
    REQUIRE(again.code == 0);
    CHECK(json::parse(read_file(dir / "p2.json")).at(0).at("source") == pieces.at("source"));
}

TEST_CASE("cli: subword errors name what to change", "[cli][subword]") {
    TempDir dir;
    // Fewer pieces than the corpus has characters: the message says how many are needed.
    Result small = cli(dir, cat({"train", "--data", k_corpus, "--level", "subword", "--subword-vocab", "50", "--epochs",
                                 "1"},
                                tiny()));
    CHECK(small.code == 2);  // refused before training begins (TrainingSession::refused), as a range error is
    require_one_error_line(small, "--subword-vocab");
    Result bound = cli(dir, cat({"train", "--data", k_corpus, "--level", "subword", "--subword-vocab", "10"}, tiny()));
    CHECK(bound.code == 2);
    require_one_error_line(bound, "--subword-vocab");
    Result model = cli(dir, cat({"train", "--data", k_corpus, "--level", "subword", "--subword-model", "wordpiece"},
                                tiny()));
    CHECK(model.code == 2);
    require_one_error_line(model, "--subword-model");
    // --merge-subwords on a word-level model: nothing to merge.
    const std::string ckpt = train_tiny(dir);
    Result merge = cli(dir, {"translate", "--model", ckpt, "a b c", "--merge-subwords"});
    CHECK(merge.code == 2);
    require_one_error_line(merge, "--merge-subwords");
}
