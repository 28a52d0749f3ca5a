// The fifth hostile-input audit (issue 46), config.json and generation_config.json: every
// generation field that may be one token id or a list of them is read one way, and a bad one
// is one line naming the file, the key and what was expected (it crashed on an empty list).
#include <catch2/catch.hpp>

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/config/pretrained_config.hpp"
#include "core/config/registry.hpp"
#include "core/io/error.hpp"
#include "core/io/json_bounded.hpp"

using namespace attnviz;
using Catch::Contains;
using json = nlohmann::json;

namespace {

json tiny_marian() {
    return json{{"model_type", "marian"},  {"vocab_size", 100},         {"d_model", 16},
                {"encoder_layers", 1},     {"decoder_layers", 1},      {"encoder_attention_heads", 2},
                {"decoder_attention_heads", 2}, {"encoder_ffn_dim", 32}, {"decoder_ffn_dim", 32},
                {"max_position_embeddings", 64}, {"pad_token_id", 99},  {"eos_token_id", 0},
                {"decoder_start_token_id", 99}};
}

std::string generation_refusal(const json& generation) {
    const auto model = PretrainedConfig::from_json(tiny_marian(), "dir: config.json");
    try {
        GenerationConfig::from_json(generation, model, "dir: generation_config.json");
    } catch (const FileError& e) {
        return e.what();
    }
    return "(accepted)";
}

}  // namespace

TEST_CASE("generation fields of one id or a list of ids: empty, nested, negative, past the vocabulary",
          "[hostile][pretrained_config]") {
    for (const char* key : {"forced_eos_token_id", "eos_token_id"}) {
        INFO(key);
        const std::string empty = generation_refusal({{key, json::array()}});
        CHECK_THAT(empty, Contains("generation_config.json") && Contains(std::string("\"") + key + "\" is an empty list"));
        const std::string nested = generation_refusal({{key, json::array({json::array({0})})}});
        CHECK_THAT(nested, Contains(std::string("\"") + key + "[0]\"") && Contains("flat list"));
        const std::string negative = generation_refusal({{key, json::array({-3})}});
        CHECK_THAT(negative, Contains(std::string("\"") + key + "[0]\" is -3") && Contains("0..99"));
        const std::string past = generation_refusal({{key, 100}});
        CHECK_THAT(past, Contains(std::string("\"") + key + "\" is 100") && Contains("0..99"));
        CHECK_THAT(generation_refusal({{key, "0"}}), Contains("expected a whole number"));
    }
    for (const char* key : {"suppress_tokens", "begin_suppress_tokens"}) {
        INFO(key);
        CHECK(generation_refusal({{key, json::array()}}) == "(accepted)");  // transformers accepts an empty list
        CHECK_THAT(generation_refusal({{key, json::array({1, json::array({2})})}}), Contains(std::string(key) + "[1]"));
        CHECK_THAT(generation_refusal({{key, json::array({1, 100})}}), Contains(std::string(key) + "[1]\" is 100"));
        CHECK_THAT(generation_refusal({{key, -1}}), Contains(std::string(key) + "\" is -1"));
    }
    SECTION("bad_words_ids is a list of non-empty lists of ids") {
        CHECK(generation_refusal({{"bad_words_ids", json::array()}}) == "(accepted)");
        CHECK_THAT(generation_refusal({{"bad_words_ids", json::array({json::array()})}}),
                   Contains("\"bad_words_ids[0]\" is an array of 0 values") && Contains("non-empty list"));
        CHECK_THAT(generation_refusal({{"bad_words_ids", json::array({1, 2})}}), Contains("\"bad_words_ids[0]\" is 1"));
        CHECK_THAT(generation_refusal({{"bad_words_ids", json::array({json::array({1, json::array({2})})})}}),
                   Contains("\"bad_words_ids[0][1]\""));
        CHECK_THAT(generation_refusal({{"bad_words_ids", json::array({json::array({5, 18446744073709551615ull})})}}),
                   Contains("\"bad_words_ids[0][1]\""));
    }
    SECTION("forced_eos_token_id of one id, a list of one, or several") {
        const auto model = PretrainedConfig::from_json(tiny_marian(), "config.json");
        CHECK(GenerationConfig::from_json({{"forced_eos_token_id", 0}}, model, "g").forced_eos_token_id == 0);
        CHECK(GenerationConfig::from_json({{"forced_eos_token_id", json::array({7})}}, model, "g").forced_eos_token_id == 7);
        CHECK(GenerationConfig::from_json(json::object(), model, "g").forced_eos_token_id == -1);
        CHECK_THAT(generation_refusal({{"forced_eos_token_id", json::array({0, 7})}}),
                   Contains("lists 2 tokens") && Contains("keep one id"));
    }
    SECTION("generation_config.json's eos_token_id: the model's, one token") {
        // A list holding the model's eos and another: what attnviz cannot do, said as such.
        CHECK_THAT(generation_refusal({{"eos_token_id", json::array({0, 7})}}),
                   Contains("\"eos_token_id\" lists 2 tokens") && Contains("the model's (0)") && Contains("keep that one"));
        CHECK_THAT(generation_refusal({{"eos_token_id", 7}}), Contains("\"eos_token_id\" 7 differs from the model's (0)"));
        CHECK(generation_refusal({{"eos_token_id", json::array({0})}}) == "(accepted)");
    }
    SECTION("config.json's eos_token_id") {
        json c = tiny_marian();
        c["eos_token_id"] = json::array();
        CHECK_THROWS_WITH(PretrainedConfig::from_json(c, "dir: config.json"),
                          Contains("dir: config.json") && Contains("\"eos_token_id\" is an empty list"));
    }
}

TEST_CASE("config.json's width is checked against the registry's one range, naming the file and the key",
          "[hostile][pretrained_config]") {
    const int64_t most = static_cast<int64_t>(find_parameter("hidden_size").max.value());
    json c = tiny_marian();
    c["d_model"] = most;
    CHECK(PretrainedConfig::from_json(c, "dir: config.json").d_model == most);
    for (const int64_t width : {most + 2, int64_t(16384)}) {
        c["d_model"] = width;
        CHECK_THROWS_WITH(PretrainedConfig::from_json(c, "dir: config.json"),
                          Contains("dir: config.json") && Contains("\"d_model\" is " + std::to_string(width)) &&
                              Contains("2.." + std::to_string(most)) && !Contains("--hidden"));
    }
}

namespace {

std::string parse_refusal(const std::string& text) {
    try {
        parse_json_bounded(text, "dir: tokenizer_config.json");
    } catch (const FileError& e) {
        return e.what();
    }
    return "(parsed)";
}

}  // namespace

TEST_CASE("JSON that does not parse: the file, the line and column, and the problem in plain words",
          "[hostile][json]") {
    const struct {
        const char* text;
        const char* where;
        const char* problem;
    } cases[] = {
        {"", "line 1, column 1", "the file is empty"},
        {"  \n \n", "line", "the file is empty"},
        {"{\"a\": NaN}", "line 1, column 7", "NaN and Infinity are not JSON numbers"},
        {"{\n  \"a\": Infinity\n}", "line 2, column 8", "NaN and Infinity"},
        {"{\"a\": -Infinity}", "line 1", "NaN and Infinity"},
        {"{\n  // the size\n  \"a\": 1\n}", "line 2", "comments (// or /* */) are not allowed"},
        {"{\"a\": 1 /* c */}", "line 1", "comments"},
        {"{\"a\": [1, 2,]}", "line 1", "a trailing comma"},
        {"{\"a\": 1,\n}", "line 2", "a trailing comma"},
        {"{\"a\": \"caf\xc3\"}", "line 1", "not UTF-8"},
        {"{\"a\": \"x\xff\"}", "line 1", "not UTF-8"},
        {"{\"a\": 1", "line 1", "the text ends before the JSON value does"},
        {"{'a': 1}", "line 1, column 2", "quoted with \""},
        {"{\"a\": 1} x", "line 1", "more text follows"},
    };
    for (const auto& c : cases) {
        INFO(c.text);
        const std::string m = parse_refusal(c.text);
        CHECK_THAT(m, Contains("dir: tokenizer_config.json: not valid JSON at ") && Contains(c.where) &&
                          Contains(c.problem) && !Contains("json.exception") && !Contains("last read"));
    }
}

TEST_CASE("a JSON value of the wrong type or a missing key: the file, the key's path and what was expected",
          "[hostile][json]") {
    const json j = parse_json_bounded(
        R"({"clean_up_tokenization_spaces": "yes", "added_tokens_decoder": {"5": {"lstrip": "x", "special": 1}},
            "language_codes": 5, "list": [1, {"b": null}]})",
        "f");
    auto refusal = [&](const std::function<void()>& read) {
        try {
            read_json_fields("dir: tokenizer_config.json", [&] {
                read();
                return 0;
            });
        } catch (const FileError& e) {
            return std::string(e.what());
        }
        return std::string("(read)");
    };
    CHECK(refusal([&] { (void)j.value("clean_up_tokenization_spaces", false); }) ==
          "dir: tokenizer_config.json: \"clean_up_tokenization_spaces\" is a string, expected true or false");
    CHECK(refusal([&] { (void)j["added_tokens_decoder"]["5"].value("lstrip", false); }) ==
          "dir: tokenizer_config.json: \"added_tokens_decoder[5].lstrip\" is a string, expected true or false");
    CHECK_THAT(refusal([&] { (void)j["added_tokens_decoder"]["5"]["special"].get<bool>(); }),
               Contains("\"added_tokens_decoder[5].special\" is a number, expected true or false"));
    CHECK_THAT(refusal([&] { (void)j.value("language_codes", std::string("m2m100")); }),
               Contains("\"language_codes\" is a number, expected a string"));
    CHECK_THAT(refusal([&] { (void)j["list"][1]["b"].get<std::string>(); }), Contains("\"list[1].b\" is null, expected a string"));
    CHECK_THAT(refusal([&] { (void)j.at("src_lang"); }), Contains("the key \"src_lang\" is missing"));
    CHECK(refusal([&] { (void)j.value("absent", 1); }) == "(read)");
}
