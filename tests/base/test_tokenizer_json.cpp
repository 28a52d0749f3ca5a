// tokenizer.json (core/text/tokenizer_json.hpp): every component on small hand-written files, the
// messages for files attnviz cannot read, and -- on the fixtures tools/make_tokenizer_json_fixtures.py
// makes with the `tokenizers` library and transformers 5 -- the same ids, tokens and decoded text as
// the library on a multilingual sample. The fixture test skips (with a warning) without them.
#include "catch_torch.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/io/error.hpp"
#include "core/text/tokenizer_json.hpp"

using namespace attnviz;
using json = nlohmann::json;
using Catch::Contains;

namespace {

const std::string k_tj_fixtures = ATTNVIZ_TOKENIZER_JSON_FIXTURES;

/// A tokenizer.json around a model, with the other components given (null when absent).
std::shared_ptr<const TokenizerJson> make(const json& model, const json& extra = json::object()) {
    json j{{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", json::array()},
           {"normalizer", nullptr}, {"pre_tokenizer", nullptr}, {"post_processor", nullptr}, {"decoder", nullptr},
           {"model", model}};
    for (const auto& [k, v] : extra.items()) j[k] = v;
    return TokenizerJson::parse(j.dump(), "tokenizer.json");
}

json word_level(const std::vector<std::string>& words) {
    json vocab = json::object();
    vocab["[UNK]"] = 0;
    for (const auto& w : words)
        if (!vocab.contains(w)) vocab[w] = vocab.size();
    return {{"type", "WordLevel"}, {"vocab", vocab}, {"unk_token", "[UNK]"}};
}

std::string read_all_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

std::string refusal(const json& j) {
    try {
        TokenizerJson::parse(j.dump(), "folder 'm': tokenizer.json");
    } catch (const FileError& e) {
        return e.what();
    }
    return "(accepted)";
}

json base_file() {
    return {{"added_tokens", json::array()}, {"normalizer", nullptr}, {"pre_tokenizer", nullptr},
            {"post_processor", nullptr}, {"decoder", nullptr}, {"model", word_level({"a", "b"})}};
}

}  // namespace

TEST_CASE("tokenizer.json: Unigram takes the best-scoring path, fuses unknown characters, falls back to bytes",
          "[tokenizer_json]") {
    json vocab = json::array({json::array({"<unk>", 0.0}), json::array({"a", -1.0}), json::array({"b", -1.0}),
                              json::array({"ab", -1.5}), json::array({"abc", -5.0}), json::array({"c", -1.0})});
    const auto t = make({{"type", "Unigram"}, {"unk_id", 0}, {"vocab", vocab}});
    // "ab" (-1.5) beats "a" + "b" (-2); "abc" (-5) loses to "ab" + "c" (-2.5).
    CHECK(t->encode("abc").tokens == std::vector<std::string>{"ab", "c"});
    CHECK(t->encode("abc").ids == std::vector<int64_t>{3, 5});
    // Unknown characters next to each other are one unknown piece, its own text, the unknown id.
    const auto e = t->encode("xy\xC3\xA9" "a");
    CHECK(e.tokens == std::vector<std::string>{"xy\xC3\xA9", "a"});
    CHECK(e.ids == std::vector<int64_t>{0, 1});
    CHECK(t->unk_token() == "<unk>");
    CHECK(t->model_type() == "Unigram");

    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        vocab.push_back(json::array({name, -20.0}));
    }
    const auto f = make({{"type", "Unigram"}, {"unk_id", 0}, {"vocab", vocab}, {"byte_fallback", true}});
    const auto fe = f->encode("a\xC3\xA9");
    CHECK(fe.tokens == std::vector<std::string>{"a", "<0xC3>", "<0xA9>"});
    CHECK(fe.ids == std::vector<int64_t>{1, 6 + 0xC3, 6 + 0xA9});
    // Without unk_id an unknown character is an error, as the library's.
    CHECK_THROWS_AS(make({{"type", "Unigram"}, {"vocab", json::array({json::array({"a", -1.0})})}})->encode("z"), Error);
}

TEST_CASE("tokenizer.json: BPE merges by rank, in both the \"a b\" and the list forms", "[tokenizer_json]") {
    const json vocab{{"<unk>", 0}, {"a", 1}, {"b", 2}, {"c", 3}, {"ab", 4}, {"bc", 5}, {"abc", 6}};
    for (const json& merges : {json::array({"b c", "a b", "a bc"}), json::array({json::array({"b", "c"}), json::array({"a", "b"}),
                                                                                 json::array({"a", "bc"})})}) {
        const auto t = make({{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"unk_token", "<unk>"}, {"dropout", 0.1}});
        // "b c" ranks first: a + bc, then a bc -> abc.
        CHECK(t->encode("abc").tokens == std::vector<std::string>{"abc"});
        CHECK(t->encode("abab").tokens == std::vector<std::string>{"ab", "ab"});
        CHECK(t->encode("cab").ids == std::vector<int64_t>{3, 4});
        // Unknown characters: each its own <unk> without fuse_unk.
        CHECK(t->encode("xxa").ids == std::vector<int64_t>{0, 0, 1});
    }
    const auto fused = make({{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}, {"unk_token", "<unk>"}, {"fuse_unk", true}});
    CHECK(fused->encode("xxa").ids == std::vector<int64_t>{0, 1});
    CHECK(fused->encode("xxa").tokens == std::vector<std::string>{"<unk>", "a"});
    // No unknown token: an unknown character is left out, as the library does.
    const auto no_unk = make({{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}});
    CHECK(no_unk->encode("axb").tokens == std::vector<std::string>{"a", "b"});
    // ignore_merges: a word in the vocabulary is one token whatever the merges say.
    const json v2{{"a", 0}, {"b", 1}, {"ab", 2}, {"aba", 3}};
    CHECK(make({{"type", "BPE"}, {"vocab", v2}, {"merges", json::array({"a b"})}})->encode("aba").tokens ==
          std::vector<std::string>{"ab", "a"});
    CHECK(make({{"type", "BPE"}, {"vocab", v2}, {"merges", json::array({"a b"})}, {"ignore_merges", true}})->encode("aba").tokens ==
          std::vector<std::string>{"aba"});
}

TEST_CASE("tokenizer.json: BPE with a continuing prefix, an end-of-word suffix, and byte fallback", "[tokenizer_json]") {
    const json vocab{{"[UNK]", 0}, {"a", 1}, {"##b", 2}, {"##c", 3}, {"ab", 4}, {"##bc", 5}};
    const auto t = make({{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array({"a ##b", "##b ##c"})},
                         {"unk_token", "[UNK]"}, {"continuing_subword_prefix", "##"}},
                        {{"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}}});
    CHECK(t->encode("abc").tokens == std::vector<std::string>{"ab", "##c"});
    CHECK(t->encode("acb").tokens == std::vector<std::string>{"a", "##c", "##b"});
    CHECK(t->decode(t->encode("abc").ids) == "abc");

    const json v2{{"a", 0}, {"b</w>", 1}, {"ab</w>", 2}, {"<unk>", 3}};
    const auto s = make({{"type", "BPE"}, {"vocab", v2}, {"merges", json::array({"a b</w>"})}, {"unk_token", "<unk>"},
                         {"end_of_word_suffix", "</w>"}},
                        {{"pre_tokenizer", {{"type", "WhitespaceSplit"}}}, {"decoder", {{"type", "BPEDecoder"}, {"suffix", "</w>"}}}});
    CHECK(s->encode("ab b").tokens == std::vector<std::string>{"ab</w>", "b</w>"});
    CHECK(s->decode(s->encode("ab b").ids) == "ab b");

    json v3{{"<unk>", 0}, {"a", 1}};
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        v3[name] = 2 + b;
    }
    const auto f = make({{"type", "BPE"}, {"vocab", v3}, {"merges", json::array()}, {"unk_token", "<unk>"}, {"byte_fallback", true}},
                        {{"decoder", {{"type", "Sequence"}, {"decoders", json::array({{{"type", "ByteFallback"}}, {{"type", "Fuse"}}})}}}});
    const auto e = f->encode("a\xE2\x98\x83");  // "a☃"
    CHECK(e.tokens == std::vector<std::string>{"a", "<0xE2>", "<0x98>", "<0x83>"});
    CHECK(f->decode(e.ids) == "a\xE2\x98\x83");
    // Bytes that are not UTF-8: one U+FFFD per byte, as the library's ByteFallback.
    CHECK(f->decode({1, 2 + 0xE2, 2 + 0x98, 1}) == "a\xEF\xBF\xBD\xEF\xBF\xBD" "a");
}

TEST_CASE("tokenizer.json: WordLevel, Whitespace and BertProcessing", "[tokenizer_json]") {
    json model = word_level({"hello", "world", "!", "[CLS]", "[SEP]"});
    const auto t = make(model, {{"pre_tokenizer", {{"type", "Whitespace"}}},
                                {"post_processor", {{"type", "BertProcessing"}, {"sep", json::array({"[SEP]", 5})},
                                                    {"cls", json::array({"[CLS]", 4})}}},
                                {"added_tokens", json::array({{{"id", 4}, {"content", "[CLS]"}, {"special", true}},
                                                              {{"id", 5}, {"content", "[SEP]"}, {"special", true}}})},
                                {"decoder", {{"type", "WordPiece"}}}});
    const auto e = t->encode("hello   world!! x");
    CHECK(e.tokens == std::vector<std::string>{"[CLS]", "hello", "world", "[UNK]", "[UNK]", "[SEP]"});
    CHECK(e.ids == std::vector<int64_t>{4, 1, 2, 0, 0, 5});
    CHECK(t->encode("hello", false).ids == std::vector<int64_t>{1});
    CHECK(t->decode(e.ids) == "hello world [UNK] [UNK]");
    CHECK(t->decode(e.ids, false) == "[CLS] hello world [UNK] [UNK] [SEP]");
    CHECK(t->single_template().first == std::vector<std::string>{"[CLS]"});
    CHECK(t->single_template().second == std::vector<std::string>{"[SEP]"});
}

TEST_CASE("tokenizer.json: normalizers", "[tokenizer_json]") {
    // Each normalizer is checked through a WordLevel model whose one word is the expected text.
    auto check = [](const json& normalizer, const std::string& text, const std::string& expected) {
        const auto t = make(word_level({expected}), {{"normalizer", normalizer}});
        INFO(normalizer.dump() << " on " << json(text).dump());
        CHECK(t->encode(text, false).tokens == std::vector<std::string>{expected});
    };
    check({{"type", "Lowercase"}}, "\xCE\x9F\xCE\x94\xCE\x9F\xCE\xA3 ABC", "\xCE\xBF\xCE\xB4\xCE\xBF\xCF\x83 abc");  // ΟΔΟΣ: σ, never ς
    check({{"type", "NFKC"}}, "\xEF\xBC\xA1\xE2\x91\xA0", "A1");                                                     // Ａ① -> A1
    check({{"type", "NFC"}}, "e\xCC\x81", "\xC3\xA9");
    check({{"type", "NFD"}}, "\xC3\xA9", "e\xCC\x81");
    check({{"type", "NFKD"}}, "\xEF\xAC\x81", "fi");
    check({{"type", "Sequence"}, {"normalizers", json::array({{{"type", "NFD"}}, {{"type", "StripAccents"}}})}}, "caf\xC3\xA9", "cafe");
    check({{"type", "Replace"}, {"pattern", {{"String", "ab"}}}, {"content", "X"}}, "abcab", "XcX");
    check({{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}}, "a   b  c", "a b c");
    check({{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}}, "a", "\xE2\x96\x81" "a");
    check({{"type", "Strip"}, {"strip_left", true}, {"strip_right", false}}, " \t a ", "a ");
    check({{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}}, "\xE3\x80\x80 a\xC2\xA0", "a");
    check({{"type", "BertNormalizer"}, {"lowercase", true}}, "H\xC3\xA9llo\x0b\t\xE4\xB8\xAD", "hello  \xE4\xB8\xAD ");
    // Prepend leaves an empty text empty.
    const auto p = make(word_level({"x"}), {{"normalizer", {{"type", "Prepend"}, {"prepend", "x"}}}});
    CHECK(p->encode("", false).ids.empty());
}

TEST_CASE("tokenizer.json: pre-tokenizers", "[tokenizer_json]") {
    // Every piece is a word of the model: the tokens are the pieces.
    auto check = [](const json& pre, const std::string& text, const std::vector<std::string>& expected) {
        const auto t = make(word_level(expected), {{"pre_tokenizer", pre}});
        INFO(pre.dump() << " on " << json(text).dump());
        CHECK(t->encode(text, false).tokens == expected);
    };
    const std::string m = "\xE2\x96\x81";  // ▁
    check({{"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", "always"}, {"split", true}}, "Hey  friend",
          {m + "Hey", m, m + "friend"});
    check({{"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", "never"}, {"split", true}}, "Hey friend", {"Hey", m + "friend"});
    check({{"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", "always"}, {"split", false}}, "Hey friend",
          {m + "Hey" + m + "friend"});
    check({{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}}, "Hello world's 42!!",
          {"\xC4\xA0Hello", "\xC4\xA0world", "'s", "\xC4\xA0" "42", "!!"});
    check({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}, "a  b\xC3\xA9",
          {"a", "\xC4\xA0", "\xC4\xA0" "b\xC3\x83\xC2\xA9"});
    check({{"type", "Whitespace"}}, "Hi, you\xE2\x80\x94there!", {"Hi", ",", "you", "\xE2\x80\x94", "there", "!"});
    check({{"type", "WhitespaceSplit"}}, " a\tb,c  ", {"a", "b,c"});
    check({{"type", "Digits"}, {"individual_digits", true}}, "a123", {"a", "1", "2", "3"});
    check({{"type", "Digits"}, {"individual_digits", false}}, "a123b4", {"a", "123", "b", "4"});
    check({{"type", "Punctuation"}, {"behavior", "Isolated"}}, "a,,b$", {"a", ",", ",", "b", "$"});
    check({{"type", "Punctuation"}, {"behavior", "Contiguous"}}, "a,,b", {"a", ",,", "b"});
    check({{"type", "CharDelimiterSplit"}, {"delimiter", "-"}}, "a-b--c", {"a", "b", "c"});
    check({{"type", "BertPreTokenizer"}}, "Hi, you!", {"Hi", ",", "you", "!"});
    const json dash{{"String", "-"}};
    check({{"type", "Split"}, {"pattern", dash}, {"behavior", "Removed"}, {"invert", false}}, "a-b--c", {"a", "b", "c"});
    check({{"type", "Split"}, {"pattern", dash}, {"behavior", "Isolated"}, {"invert", false}}, "a-b--c", {"a", "-", "b", "-", "-", "c"});
    check({{"type", "Split"}, {"pattern", dash}, {"behavior", "MergedWithPrevious"}, {"invert", false}}, "a-b--c",
          {"a-", "b-", "-", "c"});
    check({{"type", "Split"}, {"pattern", dash}, {"behavior", "MergedWithNext"}, {"invert", false}}, "a-b--c",
          {"a", "-b", "-", "-c"});
    check({{"type", "Split"}, {"pattern", dash}, {"behavior", "Contiguous"}, {"invert", false}}, "a-b--c", {"a", "-", "b", "--", "c"});
    check({{"type", "Split"}, {"pattern", {{"Regex", "[0-9]+"}}}, {"behavior", "Removed"}, {"invert", true}}, "a12b3", {"12", "3"});
    check({{"type", "Split"},
           {"pattern", {{"Regex", "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"}}},
           {"behavior", "Isolated"}, {"invert", false}},
          "I'll  go 2x", {"I", "'ll", " ", " go", " 2", "x"});
    check({{"type", "Sequence"},
           {"pretokenizers", json::array({{{"type", "WhitespaceSplit"}}, {{"type", "Digits"}, {"individual_digits", true}}})}},
          "ab12 c", {"ab", "1", "2", "c"});
}

TEST_CASE("tokenizer.json: Metaspace prepends only at the text's start with prepend_scheme first", "[tokenizer_json]") {
    const std::string m = "\xE2\x96\x81";
    const auto t = make(word_level({m + "a", "b", m + "b", "<x>"}),
                        {{"pre_tokenizer", {{"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", "first"}, {"split", true}}},
                         {"added_tokens", json::array({{{"id", 5}, {"content", "<x>"}, {"special", true}, {"normalized", false}}})}});
    CHECK(t->encode("a<x>b", false).tokens == std::vector<std::string>{m + "a", "<x>", "b"});
    CHECK(t->encode("<x>b", false).tokens == std::vector<std::string>{"<x>", "b"});
    // A piece after leading whitespace another pre-tokenizer or the normalizer removed starts later: no mark.
    const json first{{"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", "first"}, {"split", true}};
    const auto split = make(word_level({m + "a", "a", "b"}),
                            {{"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", json::array({{{"type", "WhitespaceSplit"}}, first})}}}});
    CHECK(split->encode("a b", false).tokens == std::vector<std::string>{m + "a", "b"});
    CHECK(split->encode(" a b", false).tokens == std::vector<std::string>{"a", "b"});
    const auto strip = make(word_level({m + "a", "a"}), {{"normalizer", {{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}}},
                                                         {"pre_tokenizer", first}});
    CHECK(strip->encode("a", false).tokens == std::vector<std::string>{m + "a"});
    CHECK(strip->encode("  a", false).tokens == std::vector<std::string>{"a"});
}

TEST_CASE("tokenizer.json: added tokens split first, with lstrip, rstrip, single_word and normalized", "[tokenizer_json]") {
    json model = word_level({"a", "b", "ab", "hello"});
    json added = json::array({
        {{"id", 10}, {"content", "<m>"}, {"lstrip", true}, {"rstrip", true}, {"special", true}, {"normalized", false}},
        {{"id", 11}, {"content", "ab"}, {"single_word", true}, {"special", false}, {"normalized", false}},
        {{"id", 12}, {"content", "HEY"}, {"special", false}, {"normalized", true}},
    });
    const auto t = make(model, {{"added_tokens", added}, {"normalizer", {{"type", "Lowercase"}}}, {"pre_tokenizer", {{"type", "WhitespaceSplit"}}}});
    // The ids as the library gives them (the file's are not read back): the next after the model's
    // 5 entries, or the model's own id for a content it has ("ab").
    auto e = t->encode("a  <m>  b", false);
    CHECK(e.ids == std::vector<int64_t>{1, 5, 2});
    CHECK(e.tokens == std::vector<std::string>{"a", "  <m>  ", "b"});  // the text it took
    // single_word: not inside a word.
    CHECK(t->encode("ab xab", false).ids == std::vector<int64_t>{3, 0});
    // normalized: matched in the lower-cased text against its lower-cased form.
    CHECK(t->encode("a Hey b", false).ids == std::vector<int64_t>{1, 6, 2});
    CHECK(t->token_to_id("<m>") == 5);
    CHECK(t->id_to_token(6) == "hey");  // as the library's id_to_token: the normalized form
    CHECK(t->vocab_size() == 7);
    CHECK(t->is_special("<m>"));
    CHECK_FALSE(t->is_special("ab"));
    CHECK(t->decode({1, 5, 2}, true) == "a b");
    CHECK(t->decode({1, 5, 2}, false) == "a <m> b");
    CHECK(t->decode({1, 999, 2}) == "a b");  // an id with no token is left out
}

TEST_CASE("tokenizer.json: post-processors", "[tokenizer_json]") {
    json model = word_level({"x", "<s>", "</s>", "en"});
    const json tmpl{{"type", "TemplateProcessing"},
                    {"single", json::array({{{"SpecialToken", {{"id", "en"}, {"type_id", 0}}}},
                                            {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                            {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}})},
                    {"pair", json::array()},
                    {"special_tokens", {{"en", {{"id", "en"}, {"ids", json::array({4})}, {"tokens", json::array({"en"})}}},
                                        {"</s>", {{"id", "</s>"}, {"ids", json::array({3})}, {"tokens", json::array({"</s>"})}}}}}};
    CHECK(make(model, {{"post_processor", tmpl}})->encode("x").ids == std::vector<int64_t>{4, 1, 3});
    const json roberta{{"type", "RobertaProcessing"}, {"sep", json::array({"</s>", 3})}, {"cls", json::array({"<s>", 2})},
                       {"trim_offsets", true}, {"add_prefix_space", true}};
    const json bytelevel{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
    CHECK(make(model, {{"post_processor", {{"type", "Sequence"}, {"processors", json::array({bytelevel, roberta})}}}})->encode("x").tokens ==
          std::vector<std::string>{"<s>", "x", "</s>"});
}

TEST_CASE("tokenizer.json: decoders", "[tokenizer_json]") {
    const std::string m = "\xE2\x96\x81";
    auto check = [&](const json& decoder, const std::vector<std::string>& tokens, const std::string& expected) {
        const auto t = make(word_level(tokens), {{"decoder", decoder}});
        std::vector<int64_t> ids;
        for (const auto& tok : tokens) ids.push_back(t->token_to_id(tok));
        INFO(decoder.dump());
        CHECK(t->decode(ids) == expected);
        CHECK(t->decode_tokens(tokens) == expected);
    };
    check({{"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", "always"}}, {m + "Hey", m + "friend" + m}, "Hey friend ");
    check({{"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", "never"}}, {m + "Hey", m + "friend"}, " Hey friend");
    check({{"type", "ByteLevel"}}, {"\xC4\xA0" "caf\xC3\x83\xC2\xA9", "\xC4\xA0" "ok"}, " caf\xC3\xA9 ok");
    check({{"type", "Replace"}, {"pattern", {{"String", m}}}, {"content", " "}}, {m + "a", m + "b"}, " a b");
    check({{"type", "Fuse"}}, {"a", "b"}, "ab");
    check({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 1}}, {" a ", "  b  "}, "a b ");
    check({{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}, {"hel", "##lo", ",", "you", "n't"}, "hello, youn't");
    check({{"type", "Sequence"}, {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", m}}}, {"content", " "}},
                                                            {{"type", "ByteFallback"}}, {{"type", "Fuse"}},
                                                            {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}},
          {m + "a", "<0xE2>", "<0x98>", "<0x83>"}, "a\xE2\x98\x83");
    // No decoder: tokens joined by spaces.
    check(nullptr, {"a", "b"}, "a b");
}

TEST_CASE("tokenizer.json: a component attnviz does not read is one line naming it and listing the supported ones",
          "[tokenizer_json][hostile]") {
    json j = base_file();
    j["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array({{{"type", "NFC"}}, {{"type", "Nmt"}}})}};
    const std::string msg = refusal(j);
    CHECK(msg == "folder 'm': tokenizer.json: normalizer.normalizers[1]: unknown normalizer type 'Nmt'; attnviz reads " +
                     TokenizerJson::supported("normalizer"));
    CHECK_THAT(msg, Contains("Precompiled") && Contains("Replace"));
    CHECK(msg.find('\n') == std::string::npos);

    j = base_file();
    j["pre_tokenizer"] = {{"type", "UnicodeScripts"}};
    CHECK_THAT(refusal(j), Contains("pre_tokenizer: unknown pre_tokenizer type 'UnicodeScripts'; attnviz reads ") &&
                               Contains("Metaspace"));
    j = base_file();
    j["model"] = {{"type", "WordPiece"}, {"vocab", json::object()}};
    CHECK_THAT(refusal(j), Contains("model: unknown model type 'WordPiece'; attnviz reads Unigram, BPE, WordLevel"));
    j = base_file();
    j["decoder"] = {{"type", "CTC"}};
    CHECK_THAT(refusal(j), Contains("decoder: unknown decoder type 'CTC'; attnviz reads ") && Contains("ByteFallback"));
    j = base_file();
    j["post_processor"] = {{"type", "Whatever"}};
    CHECK_THAT(refusal(j), Contains("post_processor: unknown post_processor type 'Whatever'; attnviz reads ") &&
                               Contains("TemplateProcessing"));
}

TEST_CASE("tokenizer.json: a malformed file is refused naming the file, the key and what was expected",
          "[tokenizer_json][hostile]") {
    json j = base_file();
    j["added_tokens"] = json::array({{{"id", 3}, {"content", "<x>"}, {"lstrip", "yes"}}});
    CHECK(refusal(j) == "folder 'm': tokenizer.json: added_tokens[0].lstrip: expected true or false, got 'yes'");
    j = base_file();
    j["model"] = {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}}}, {"merges", json::array({"a c"})}};
    CHECK(refusal(j) == "folder 'm': tokenizer.json: model.merges[0]: the merge's token 'c' is not in the vocabulary");
    j["model"]["merges"] = json::array({"a b c"});
    CHECK_THAT(refusal(j), Contains("model.merges[0]: expected \"a b\" (two tokens and one space)"));
    j["model"]["merges"] = json::array({"a b"});
    CHECK_THAT(refusal(j), Contains("model.merges[0]: the merged token 'ab' is not in the vocabulary"));
    j["model"]["vocab"] = {{"a", 0}, {"b", 0}};
    CHECK_THAT(refusal(j), Contains("model.vocab: tokens") && Contains("have the same id 0"));
    j = base_file();
    j["model"] = {{"type", "Unigram"}, {"vocab", json::array({json::array({"a", "high"})})}};
    CHECK(refusal(j) == "folder 'm': tokenizer.json: model.vocab[0]: expected [piece, score], got an array of 2 values");
    j["model"] = {{"type", "Unigram"}, {"vocab", json::array({json::array({"a", -1.0})})}, {"unk_id", 4}};
    CHECK_THAT(refusal(j), Contains("model.unk_id: expected an integer from 0 to 0"));
    j = base_file();
    j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
    CHECK_THAT(refusal(j), Contains("pre_tokenizer.pattern.Regex: the regular expression '(unclosed' is not one ICU reads"));
    j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", "Sideways"}};
    CHECK_THAT(refusal(j), Contains("pre_tokenizer.behavior: expected Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous"));
    j = base_file();
    j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}};
    CHECK_THAT(refusal(j), Contains("normalizer.precompiled_charsmap: its normalizer rule table"));
    j = base_file();
    j["normalizer"] = {{"kind", "NFC"}};
    CHECK(refusal(j) == "folder 'm': tokenizer.json: normalizer: has no \"type\"");
    j = base_file();
    j.erase("model");
    CHECK_THAT(refusal(j), Contains("has no \"model\""));
    CHECK_THROWS_WITH(TokenizerJson::parse("[1, 2]", "t.json"), Contains("t.json: expected a JSON object"));
    CHECK_THROWS_AS(TokenizerJson::parse("{\"model\" 1}", "t.json"), FileError);
    // Nesting past the bound is refused before the parser recurses.
    std::string deep = "{\"model\": " + std::string(5000, '[') + std::string(5000, ']') + "}";
    CHECK_THROWS_AS(TokenizerJson::parse(deep, "t.json"), FileError);
    j = base_file();
    j["post_processor"] = {{"type", "TemplateProcessing"}, {"single", json::array({{{"SpecialToken", {{"id", "<s>"}}}}})},
                           {"special_tokens", json::object()}};
    CHECK_THAT(refusal(j), Contains("post_processor.single[0]: the special token '<s>' is not in special_tokens"));
}

TEST_CASE("tokenizer.json: the bounds are kept", "[tokenizer_json][hostile]") {
    TokenizerJsonLimits small;
    small.max_vocab = 2;
    small.max_pattern_bytes = 8;
    small.max_components = 3;
    small.max_bytes = 2000;
    json j = base_file();
    auto refused = [&](const json& file) {
        try {
            TokenizerJson::parse(file.dump(), "t.json", small);
        } catch (const FileError& e) {
            return std::string(e.what());
        }
        return std::string("(accepted)");
    };
    j["model"] = word_level({"a", "b", "c"});
    CHECK_THAT(refused(j), Contains("model.vocab: 4 tokens, more than the 2 attnviz reads"));
    j = base_file();
    j["model"] = word_level({"a"});
    j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "aaaaaaaaaaaa"}}}, {"behavior", "Isolated"}};
    CHECK_THAT(refused(j), Contains("a pattern of 12 bytes, more than the 8 attnviz reads"));
    j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", json::array({{{"type", "Whitespace"}}, {{"type", "Whitespace"}},
                                                                               {{"type", "Whitespace"}}})}};
    CHECK_THAT(refused(j), Contains("more than 3 components"));
    j["pre_tokenizer"] = nullptr;
    j["padding"] = std::string(3000, 'x');
    CHECK_THAT(refused(j), Contains("t.json: 3") && Contains("bytes, more than the 2000 attnviz reads"));
    // A pattern that backtracks without end is an error on the text, not a hang.
    j = base_file();
    j["model"] = word_level({"a"});
    j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(a+)+$"}}}, {"behavior", "Isolated"}};
    const auto t = TokenizerJson::parse(j.dump(), "t.json");
    CHECK_THROWS_AS(t->encode(std::string(64, 'a') + "!"), Error);
}

TEST_CASE("tokenizer.json: one tokenizer encodes on several threads at once as on one", "[tokenizer_json]") {
    json vocab = json::object();
    for (int b = 0x21; b < 0x7F; ++b) vocab[std::string(1, static_cast<char>(b))] = vocab.size();
    vocab["\xC4\xA0"] = vocab.size();  // Ġ
    vocab["\xC4\xA0t"] = vocab.size();
    vocab["he"] = vocab.size();
    const auto t = make({{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array({"\xC4\xA0 t", "h e"})}},
                        {{"normalizer", {{"type", "Replace"}, {"pattern", {{"Regex", "[0-9]+"}}}, {"content", "#"}}},
                         {"pre_tokenizer", {{"type", "Sequence"},
                                            {"pretokenizers", json::array({{{"type", "Split"}, {"pattern", {{"Regex", "\\s+"}}},
                                                                            {"behavior", "MergedWithNext"}},
                                                                           {{"type", "ByteLevel"}, {"add_prefix_space", false}}})}}},
                         {"decoder", {{"type", "ByteLevel"}}}});
    std::vector<std::string> texts;
    for (int i = 0; i < 200; ++i) texts.push_back("the text " + std::to_string(i) + " he said, to them  " + std::string(i % 7, '!'));
    std::vector<std::vector<int64_t>> want;
    for (const auto& s : texts) want.push_back(t->encode(s).ids);
    std::vector<std::thread> threads;
    std::vector<int> wrong(4, 0);
    for (int k = 0; k < 4; ++k)
        threads.emplace_back([&, k] {
            for (int round = 0; round < 5; ++round)
                for (size_t i = 0; i < texts.size(); ++i)
                    if (t->encode(texts[i]).ids != want[i] || t->decode(want[i]) != t->decode(want[i])) ++wrong[static_cast<size_t>(k)];
        });
    for (auto& th : threads) th.join();
    CHECK(wrong == std::vector<int>(4, 0));
    CHECK(t->decode(want[3]) == "the text # he said, to them  !!!");
}

TEST_CASE("tokenizer.json: text that is not UTF-8 is an error", "[tokenizer_json]") {
    const auto t = make(word_level({"a"}));
    CHECK_THROWS_WITH(t->encode("a\xFF"), Contains("not valid UTF-8"));
}

TEST_CASE("tokenizer.json: ids, tokens and decoded text equal the tokenizers library's on a multilingual sample",
          "[tokenizer_json][tokenizer_json_fixtures]") {
    const std::string expected_file = k_tj_fixtures + "/expected.json";
    if (!std::filesystem::exists(expected_file)) {
        WARN("skipped: no tokenizer.json fixtures at " << k_tj_fixtures
                                                        << " (tools/make_tokenizer_json_fixtures.py needs tokenizers and transformers)");
        return;
    }
    const json expected = json::parse(read_all_text(expected_file));
    INFO("tokenizers " << expected["tokenizers"].get<std::string>() << ", transformers " << expected["transformers"].get<std::string>());
    size_t cases = 0, fixtures = 0;
    for (const auto& f : expected["fixtures"]) {
        const std::string name = f["name"];
        INFO("fixture " << name);
        const auto t = TokenizerJson::parse(read_all_text(k_tj_fixtures + "/" + f["file"].get<std::string>()), name);
        ++fixtures;
        for (const auto& c : f["cases"]) {
            const std::string text = c["text"];
            INFO("text " << json(text).dump());
            const auto enc = t->encode(text, true);
            const auto ids = c["ids"].get<std::vector<int64_t>>();
            CHECK(enc.ids == ids);
            CHECK(enc.tokens == c["tokens"].get<std::vector<std::string>>());
            const auto plain = t->encode(text, false);
            CHECK(plain.ids == c["plain_ids"].get<std::vector<int64_t>>());
            CHECK(plain.tokens == c["plain_tokens"].get<std::vector<std::string>>());
            CHECK(t->decode(ids, true) == c["decoded"].get<std::string>());
            CHECK(t->decode(ids, false) == c["decoded_all"].get<std::string>());
            if (c.contains("hf_decoded")) {
                CHECK(enc.ids == c["hf_ids"].get<std::vector<int64_t>>());
                CHECK(t->decode(ids, true) == c["hf_decoded"].get<std::string>());
            }
            ++cases;
        }
    }
    CHECK(fixtures >= 20);
    CHECK(cases >= 20 * 200);
}

// Run by hand (hidden from ctest; attnviz_tests_base "[tokenizer_json_bench]"): tools/bench_tokenizer_json.py runs it beside the `tokenizers`
// library. Encodes every line of DIR/bench_sentences.txt with each tokenizer of DIR (default: the
// fixtures; ATTNVIZ_TOKENIZER_JSON_BENCH_DIR otherwise), one sentence at a time on this thread, and
// prints one JSON line per tokenizer. Asserts nothing.
TEST_CASE("bench: tokenizer.json encodes 10,000 sentences one at a time", "[.][bench][tokenizer_json_bench]") {
    const char* env = std::getenv("ATTNVIZ_TOKENIZER_JSON_BENCH_DIR");
    const std::string dir = env && *env ? env : k_tj_fixtures;
    const std::string sentences_file = dir + "/bench_sentences.txt";
    if (!std::filesystem::exists(sentences_file)) {
        WARN("skipped: no " << sentences_file << " (tools/make_tokenizer_json_fixtures.py DIR --sentences 10000)");
        return;
    }
    std::vector<std::string> sentences;
    std::ifstream in(sentences_file);
    for (std::string line; std::getline(in, line);) sentences.push_back(line);
    const char* names_env = std::getenv("ATTNVIZ_TOKENIZER_JSON_BENCH_NAMES");
    std::string names = names_env && *names_env ? names_env : "hf_t5,hf_nllb,hf_bart,hf_llama,hf_xlmr,wordlevel_bert";
    std::stringstream list(names);
    for (std::string name; std::getline(list, name, ',');) {
        const std::string file = dir + "/" + name + ".json";
        if (!std::filesystem::exists(file)) continue;
        const auto t = TokenizerJson::parse(read_all_text(file), name);
        size_t tokens = 0;
        for (size_t i = 0; i < std::min<size_t>(200, sentences.size()); ++i) tokens += t->encode(sentences[i]).ids.size();  // warm-up
        tokens = 0;
        double best = 1e30;
        for (int round = 0; round < 3; ++round) {
            const auto start = std::chrono::steady_clock::now();
            size_t n = 0;
            for (const auto& s : sentences) n += t->encode(s).ids.size();
            best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
            tokens = n;
        }
        std::cout << json{{"bench", "tokenizer_json_encode"}, {"tokenizer", name}, {"sentences", sentences.size()},
                          {"tokens", tokens}, {"seconds", best}, {"sentences_per_second", sentences.size() / best}}
                         .dump()
                  << "\n";
    }
}
