// Attention export: CSV (RFC 4180) and JSON, atomic writes.
#include "catch_torch.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/analysis/alignment.hpp"
#include "core/io/error.hpp"
#include "core/analysis/export.hpp"
#include "file_limits.hpp"

using namespace attnviz;

namespace {

// A translation built by hand: softmax rows over awkward source tokens.
Translation sample() {
    Translation t;
    t.input = "Il dit, \"oui\".";
    t.src_tokens = {"il", "dit", ",", "\"oui\"", " ", "line\nbreak", "<eos>"};
    t.unknown = {"\"oui\""};
    Hypothesis h;
    h.tokens = {"he", "says", ",", "\"yes\"", "<eos>"};
    h.ids = {4, 5, 6, 3, 2};
    h.log_prob = -1.25;
    h.score = -0.25;
    h.text = "he says , \"yes\"";
    for (size_t r = 0; r < h.tokens.size(); ++r) {
        std::vector<float> raw, w;
        float sum = 0.0f;
        for (size_t s = 0; s < t.src_tokens.size(); ++s) {
            raw.push_back(std::sin(static_cast<float>(3 * r + 7 * s + 1)) * 4.0f);
            w.push_back(std::exp(raw.back()));
            sum += w.back();
        }
        for (float& x : w) x /= sum;
        h.attention.at({}).scores.push_back(raw);
        h.attention.at({}).weights.push_back(w);
        h.context_norm.push_back(1.5f + static_cast<float>(r));
    }
    t.hypotheses = {h};
    return t;
}

std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

TEST_CASE("attention_csv quotes awkward tokens and parses back", "[export][csv]") {
    const Translation t = sample();
    const std::string csv = attention_csv(t);
    // Header: empty cell, then the source tokens, quoted where RFC 4180 needs it.
    CHECK(csv.rfind(",il,dit,\",\",\"\"\"oui\"\"\",\" \",\"line\nbreak\",<eos>,entropy,max_weight\n", 0) == 0);
    CHECK(csv.find("\n\",\",") != std::string::npos);  // the output token "," is quoted too

    const AttentionTable table = parse_attention_csv(csv);
    CHECK(table.source == t.src_tokens);
    CHECK(table.output == t.best().tokens);
    REQUIRE(table.weights.size() == t.best().attention.weights().size());
    for (size_t r = 0; r < table.weights.size(); ++r) {
        REQUIRE(table.weights[r].size() == t.src_tokens.size());
        double sum = 0.0;
        for (size_t s = 0; s < table.weights[r].size(); ++s) {
            CHECK(table.weights[r][s] == t.best().attention.weights()[r][s]);  // exact float round trip
            sum += table.weights[r][s];
        }
        CHECK(sum == Approx(1.0).margin(1e-5));
    }
    // The statistics come back as written: a column per step, a row per source token.
    const AttentionStats stats = attention_stats(t.best().attention.weights());
    CHECK(table.entropy == stats.entropy);
    CHECK(table.max_weight == stats.max_weight);
    CHECK(table.coverage == stats.coverage);
    CHECK(csv.find("\ncoverage,") != std::string::npos);
    CHECK(csv.substr(csv.size() - 3) == ",,\n");
}

TEST_CASE("parse_attention_csv reads tables without statistics, and tokens named like them", "[export][csv]") {
    // A table as attnviz wrote it before the statistics: no stats.
    const AttentionTable plain = parse_attention_csv(",a,<eos>\nx,0.75,0.25\n<eos>,0.5,0.5\n");
    CHECK(plain.source == std::vector<std::string>{"a", "<eos>"});
    CHECK(plain.weights.size() == 2);
    CHECK(plain.entropy.empty());
    CHECK(plain.coverage.empty());
    // Source words "entropy" and "max_weight", output word "coverage": still a plain table,
    // since a plain row cannot end in empty cells.
    const AttentionTable words = parse_attention_csv(",entropy,max_weight\ncoverage,0.5,0.5\n");
    CHECK(words.source == std::vector<std::string>{"entropy", "max_weight"});
    CHECK(words.output == std::vector<std::string>{"coverage"});
    CHECK(words.entropy.empty());
    // The same words in a table with statistics.
    Translation t;
    t.src_tokens = {"entropy", "<eos>"};
    Hypothesis h;
    h.tokens = {"coverage", "<eos>"};
    h.attention.at({}).weights = {{1.0f, 0.0f}, {0.5f, 0.5f}};
    t.hypotheses = {h};
    const AttentionTable back = parse_attention_csv(attention_csv(t));
    CHECK(back.source == t.src_tokens);
    CHECK(back.output == h.tokens);
    CHECK(back.weights == h.attention.weights());
    CHECK(back.entropy == std::vector<float>{0.0f, static_cast<float>(std::log(2.0))});
    CHECK(back.max_weight == std::vector<float>{1.0f, 0.5f});
    CHECK(back.coverage == std::vector<float>{1.5f, 0.5f});
    CHECK_THROWS_WITH(parse_attention_csv(",a,entropy,max_weight\nx,1,0,1\ncoverage,zz,,\n"),
                      Catch::Contains("line 3") && Catch::Contains("coverage 1"));
}

TEST_CASE("parse_attention_csv accepts CRLF and a BOM, rejects malformed input", "[export][csv]") {
    const AttentionTable t = parse_attention_csv("\xEF\xBB\xBF,a,\"b,c\",<eos>\r\nx,0.5,0.25,0.25\r\n\r\n");
    CHECK(t.source == std::vector<std::string>{"a", "b,c", "<eos>"});
    CHECK(t.output == std::vector<std::string>{"x"});
    CHECK(t.weights[0][1] == 0.25f);

    CHECK_THROWS_AS(parse_attention_csv(""), FileError);
    CHECK_THROWS_WITH(parse_attention_csv(",a,b\nx,0.5\n"), Catch::Contains("line 2") && Catch::Contains("2 weights"));
    CHECK_THROWS_WITH(parse_attention_csv(",a\nx,0.5\ny,abc\n"), Catch::Contains("line 3") && Catch::Contains("abc"));
    CHECK_THROWS_WITH(parse_attention_csv(",\"a\nx,1\n"), Catch::Contains("not closed"));
    CHECK_THROWS_WITH(parse_attention_csv("src,a\nx,1\n"), Catch::Contains("empty"));
}

TEST_CASE("attention_csv refuses what it cannot export", "[export][csv]") {
    Translation t = sample();
    CHECK_THROWS_AS(attention_csv(t, 1), Error);
    t.hypotheses[0].attention.maps.clear();
    t.attention_available = false;
    CHECK_THROWS_AS(attention_csv(t), Error);
    CHECK_THROWS_AS(attention_csv(Translation{}), Error);
}

TEST_CASE("attention_json carries every field", "[export][json]") {
    const Translation t = sample();
    const nlohmann::json model = {{"hidden", 32}, {"scoring", "additive"}};
    const nlohmann::json decode = {{"beam_size", 1}, {"max_length", 30}};
    const nlohmann::json j = attention_json(t, 0, model, decode);
    CHECK(j.at("source") == t.src_tokens);
    CHECK(j.at("output") == t.best().tokens);
    CHECK(j.at("input") == t.input);
    CHECK(j.at("unknown") == t.unknown);
    CHECK(j.at("text") == t.best().text);
    CHECK(j.at("log_prob").get<double>() == -1.25);
    CHECK(j.at("score").get<double>() == -0.25);
    CHECK(j.at("context_norm").size() == 5);
    CHECK(j.at("model") == model);
    CHECK(j.at("decode") == decode);
    CHECK(j.at("hypothesis") == 0);
    CHECK(j.at("attention_available") == true);
    const AttentionStats stats = attention_stats(t.best().attention.weights());
    CHECK(j.at("entropy").get<std::vector<float>>() == stats.entropy);
    CHECK(j.at("max_weight").get<std::vector<float>>() == stats.max_weight);
    CHECK(j.at("coverage").get<std::vector<float>>() == stats.coverage);
    nlohmann::json links = nlohmann::json::array();
    const AlignmentLinks argmax = hard_alignment(t);
    for (const auto& l : argmax.links()) links.push_back({l.src, l.tgt});
    CHECK(j.at("alignment") == links);
    REQUIRE(j.at("weights").size() == 5);
    REQUIRE(j.at("raw_scores").size() == 5);
    for (size_t r = 0; r < 5; ++r) {
        const auto row = j["weights"][r].get<std::vector<float>>();
        REQUIRE(row.size() == t.src_tokens.size());
        double sum = 0.0;
        for (float w : row) sum += w;
        CHECK(sum == Approx(1.0).margin(1e-5));
        CHECK(j["raw_scores"][r].get<std::vector<float>>() == t.best().attention.scores()[r]);
    }
    // Every map the model recorded, by name: the RNN's one cross map (layer 0, head 0),
    // the same weights and raw scores as the fields above.
    REQUIRE(j.at("attention_maps").size() == 1);
    const nlohmann::json& map = j["attention_maps"][0];
    CHECK(map.at("kind") == "cross");
    CHECK(map.at("layer") == 0);
    CHECK(map.at("head") == 0);
    CHECK(map.at("weights") == j.at("weights"));
    CHECK(map.at("raw_scores") == j.at("raw_scores"));
    // Text form parses back, and missing settings become empty objects.
    const nlohmann::json back = nlohmann::json::parse(j.dump(1));
    CHECK(back == j);
    const nlohmann::json bare = attention_json(t);
    CHECK(bare.at("model").is_object());
    CHECK(bare.at("decode").empty());
    CHECK_THROWS_AS(attention_json(t, 3), Error);
}

TEST_CASE("write_attention_json streams the same value as attention_json, a map row at a time", "[export][json]") {
    Translation t = sample();
    // A second map with no raw scores, so both forms of a map entry are written.
    AttentionMap extra_map = t.best().attention.maps.at(0);
    extra_map.id.layer = 1;
    extra_map.scores.clear();
    t.hypotheses[0].attention.maps.push_back(extra_map);
    const nlohmann::json model = {{"hidden", 32}}, decode = {{"beam_size", 1}};
    std::vector<std::string> pieces;
    write_attention_json(t, 0, model, decode, {{"sentence", 7}}, [&](const std::string& p) { pieces.push_back(p); });
    std::string text;
    for (const auto& p : pieces) text += p;
    nlohmann::json expected = attention_json(t, 0, model, decode);
    expected["sentence"] = 7;
    CHECK(nlohmann::json::parse(text) == expected);
    // The maps went out a row at a time, not as one piece holding them all.
    const size_t rows = t.best().attention.maps[0].weights.size();
    CHECK(pieces.size() >= 3 * rows);
    size_t largest = 0;
    for (const auto& p : pieces)
        if (p.find("\"attention_maps\"") == std::string::npos) largest = std::max(largest, p.size());
    CHECK(largest < nlohmann::json(t.best().attention.maps[0].weights).dump().size());
    CHECK_THROWS_AS(write_attention_json(t, 3, model, decode, {}, [](const std::string&) {}), Error);
}

TEST_CASE("write_file_atomic replaces files and cleans up on failure", "[export][file]") {
    const auto dir = std::filesystem::temp_directory_path() / ("attnviz_export_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "attention.csv").string();
    write_file_atomic(path, "first");
    write_file_atomic(path, attention_csv(sample()));
    CHECK(parse_attention_csv(read_all(path)).output.size() == 5);
    CHECK(attnviz::testing::names_in(dir.string()) == std::vector<std::string>{"attention.csv"});

    const std::string missing_dir = (dir / "no" / "such" / "out.csv").string();
    CHECK_THROWS_AS(write_file_atomic(missing_dir, "x"), FileError);
    CHECK_THROWS_WITH(write_file_atomic(missing_dir, "x"),
                      Catch::Contains(missing_dir) && Catch::Contains("No such file"));

    // Renaming onto a directory fails after the temporary file was written: it is removed.
    const auto target_dir = dir / "is_a_dir";
    std::filesystem::create_directories(target_dir / "child");
    CHECK_THROWS_AS(write_file_atomic(target_dir.string(), "x"), FileError);
    CHECK(attnviz::testing::names_in(dir.string()) == std::vector<std::string>{"attention.csv", "is_a_dir"});

    // Not remove_all: libtorch.so exports its own std::filesystem::remove_all, which crashes.
    std::filesystem::remove(target_dir / "child");
    std::filesystem::remove(target_dir);
    std::filesystem::remove(path);
    std::filesystem::remove(dir);
}
