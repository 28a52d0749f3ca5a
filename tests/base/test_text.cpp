// Text: d2l normalisation, tokenisers, UTF-8 checks, Vocab.
#include "catch_torch.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/io/error.hpp"
#include "core/text/text.hpp"
#include "core/text/vocab.hpp"

using namespace attnviz;
using Tokens = std::vector<std::string>;

TEST_CASE("normalize matches d2l's preprocess", "[text]") {
    // Expected strings are what d2l's preprocess() returns for the same input.
    CHECK(normalize("Go.") == "go .");
    CHECK(normalize("Hi!") == "hi !");
    CHECK(normalize("I'm OK, thanks.") == "i'm ok , thanks .");
    CHECK(normalize("Who?!") == "who ? !");
    CHECK(normalize("Really ?") == "really ?");  // already spaced: unchanged
    CHECK(normalize(".Hello") == ".hello");      // index 0 gets no space
    CHECK(normalize("Wait...") == "wait . . .");
    // U+202F (narrow no-break space) and U+00A0 become spaces, so "?" is not re-spaced.
    CHECK(normalize("Vraiment\u202F?") == "vraiment ?");
    CHECK(normalize("Oui\u00A0!") == "oui !");
    // Latin-1 and Latin Extended-A capitals are lower-cased like Python's str.lower().
    CHECK(normalize("ÉTÉ À ÇA") == "été à ça");
    CHECK(normalize("ŒUVRE ÎLE ÔTE ÛË Ÿ") == "œuvre île ôte ûë ÿ");
    CHECK(normalize("ŁÓDŹ Ž") == "łódź ž");
    CHECK(normalize("×ß") == "×ß");  // no case: unchanged
    CHECK(normalize("") == "");
}

TEST_CASE("normalize leaves invalid UTF-8 bytes alone", "[text]") {
    const std::string bad = "A\xff.";
    CHECK(normalize(bad) == "a\xff .");
}

TEST_CASE("word tokeniser splits on spaces and drops empties", "[text]") {
    CHECK(tokenize_words("  il  est calme . ") == Tokens{"il", "est", "calme", "."});
    CHECK(tokenize_words("a\tb") == Tokens{"a", "b"});
    CHECK(tokenize_words("").empty());
    CHECK(tokenize_words("   ").empty());
    CHECK(tokenize("He's calm.", TokenLevel::word) == Tokens{"he's", "calm", "."});
    CHECK(tokenize("Ça va ?", TokenLevel::word) == Tokens{"ça", "va", "?"});
}

TEST_CASE("character tokeniser yields code points, spaces included", "[text]") {
    CHECK(tokenize_chars("ab c") == Tokens{"a", "b", " ", "c"});
    CHECK(tokenize_chars("été") == Tokens{"é", "t", "é"});
    CHECK(tokenize_chars("€𝄞x") == Tokens{"€", "𝄞", "x"});  // 3- and 4-byte sequences
    // Character level does not normalise.
    CHECK(tokenize("Go.", TokenLevel::character) == Tokens{"G", "o", "."});
}

TEST_CASE("character tokeniser rejects invalid UTF-8 with the byte offset", "[text]") {
    CHECK_THROWS_AS(tokenize_chars("ab\xc3"), Error);       // truncated sequence
    CHECK_THROWS_WITH(tokenize_chars("ab\xff"), Catch::Contains("byte 2"));
    CHECK_THROWS_AS(tokenize_chars("\xc0\xaf"), Error);     // overlong '/'
}

TEST_CASE("is_valid_utf8 is strict", "[text]") {
    CHECK(is_valid_utf8(""));
    CHECK(is_valid_utf8("plain ascii"));
    CHECK(is_valid_utf8("déjà vu € 𝄞"));
    CHECK_FALSE(is_valid_utf8("\x80"));              // lone continuation byte
    CHECK_FALSE(is_valid_utf8("\xc3"));              // truncated
    CHECK_FALSE(is_valid_utf8("\xc3\x28"));          // bad continuation
    CHECK_FALSE(is_valid_utf8("\xc0\x80"));          // overlong NUL
    CHECK_FALSE(is_valid_utf8("\xe0\x80\xaf"));      // overlong 3-byte
    CHECK_FALSE(is_valid_utf8("\xed\xa0\x80"));      // UTF-16 surrogate
    CHECK_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
    CHECK_FALSE(is_valid_utf8("latin-1 \xe9t\xe9"));
}

TEST_CASE("detokenize joins by level", "[text]") {
    CHECK(detokenize({"il", "est", "calme", "."}, TokenLevel::word) == "il est calme .");
    CHECK(detokenize({"2", "0", "-", " ", "é"}, TokenLevel::character) == "20- é");
    CHECK(detokenize({}, TokenLevel::word).empty());
}

TEST_CASE("Vocab orders specials, then frequency, then alphabet", "[text][vocab]") {
    const Vocab v = Vocab::build({{"b", "a", "c", "a"}, {"c", "a", "d"}});
    // a:3, c:2, b:1, d:1 (b before d: alphabetical tie-break)
    REQUIRE(v.tokens() == Tokens{"<pad>", "<bos>", "<eos>", "<unk>", "a", "c", "b", "d"});
    CHECK(v.size() == 8);
    CHECK(v.id("<pad>") == Vocab::pad_id);
    CHECK(v.id("<bos>") == Vocab::bos_id);
    CHECK(v.id("<eos>") == Vocab::eos_id);
    CHECK(v.id("<unk>") == Vocab::unk_id);
    CHECK(v.id("a") == 4);
    CHECK(v.id("zzz") == Vocab::unk_id);
    CHECK(v.contains("d"));
    CHECK_FALSE(v.contains("zzz"));
    CHECK(v.token(5) == "c");
    CHECK_THROWS_AS(v.token(8), std::out_of_range);
    CHECK_THROWS_AS(v.token(-1), std::out_of_range);
    CHECK(v.encode({"a", "zzz", "d"}) == std::vector<int64_t>{4, Vocab::unk_id, 7});
}

TEST_CASE("Vocab min_freq leaves rare tokens to <unk>", "[text][vocab]") {
    const Vocab v = Vocab::build({{"x", "y", "x"}, {"x", "z", "y"}}, 2);
    CHECK(v.tokens() == Tokens{"<pad>", "<bos>", "<eos>", "<unk>", "x", "y"});
    CHECK(v.id("z") == Vocab::unk_id);
    // Special tokens in the data are not duplicated.
    const Vocab w = Vocab::build({{"<eos>", "<unk>", "q"}});
    CHECK(w.size() == 5);
    CHECK(w.id("<eos>") == Vocab::eos_id);
}

TEST_CASE("Vocab decode skips padding and stops at <eos>", "[text][vocab]") {
    const Vocab v = Vocab::build({{"il", "est", "calme"}});
    const auto ids = v.encode({"il", "est", "calme"});
    std::vector<int64_t> seq = {ids[0], Vocab::pad_id, ids[1], Vocab::eos_id, ids[2], Vocab::pad_id};
    CHECK(v.decode(seq) == Tokens{"il", "est"});
    CHECK(v.decode(seq, false) == Tokens{"il", "est", "<eos>", "calme"});
    CHECK_THROWS_AS(v.decode({99}), std::out_of_range);
}

TEST_CASE("Vocab JSON and file round trip", "[text][vocab]") {
    const Vocab v = Vocab::build({{"été", "\"quoted\"", "a,b", "été"}});
    const Vocab back = Vocab::from_json(v.to_json());
    CHECK(back == v);
    CHECK(back.id("été") == v.id("été"));

    const auto dir = std::filesystem::temp_directory_path() / ("attnviz_vocab_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "vocab.json").string();
    v.save(path);
    CHECK(Vocab::load(path) == v);
    CHECK_FALSE(std::filesystem::exists(path + ".tmp." + std::to_string(::getpid())));

    // A file that is not JSON, and a JSON file that is not a vocabulary.
    std::ofstream(dir / "bad.json") << "{\"tokens\": [\"<pad>\",";
    CHECK_THROWS_AS(Vocab::load((dir / "bad.json").string()), FileError);
    CHECK_THROWS_WITH(Vocab::load((dir / "bad.json").string()), Catch::Contains("bad.json"));
    CHECK_THROWS_WITH(Vocab::load((dir / "missing.json").string()), Catch::Contains("missing.json"));
    // Not remove_all: libtorch.so exports its own std::filesystem::remove_all, which crashes.
    std::filesystem::remove(dir / "vocab.json");
    std::filesystem::remove(dir / "bad.json");
    std::filesystem::remove(dir);
}

TEST_CASE("Vocab::from_json rejects what is not a vocabulary", "[text][vocab]") {
    using nlohmann::json;
    CHECK_THROWS_AS(Vocab::from_json(json::array({"a"})), FileError);
    CHECK_THROWS_AS(Vocab::from_json(json{{"words", json::array()}}), FileError);
    CHECK_THROWS_AS(Vocab::from_json(json{{"tokens", {"<pad>", "<bos>", "<eos>"}}}), FileError);
    CHECK_THROWS_WITH(Vocab::from_json(json{{"tokens", {"<bos>", "<pad>", "<eos>", "<unk>"}}}),
                      Catch::Contains("expected '<pad>'"));
    CHECK_THROWS_AS(Vocab::from_json(json{{"tokens", {"<pad>", "<bos>", "<eos>", "<unk>", 5}}}), FileError);
    CHECK_THROWS_WITH(Vocab::from_json(json{{"tokens", {"<pad>", "<bos>", "<eos>", "<unk>", "a", "a"}}}),
                      Catch::Contains("twice"));
    CHECK_THROWS_AS(Vocab::from_json(json{{"format", "other"}, {"tokens", {"<pad>", "<bos>", "<eos>", "<unk>"}}}),
                    FileError);
    CHECK(Vocab::from_json(json{{"tokens", {"<pad>", "<bos>", "<eos>", "<unk>"}}}) == Vocab());
}

TEST_CASE("Vocab::from_tokens checks the tokens as from_json does and keeps their order", "[text][vocab]") {
    using Tokens = std::vector<std::string>;
    const Tokens tokens{"<pad>", "<bos>", "<eos>", "<unk>", "▁le", "été", "Ġthe"};
    const Vocab v = Vocab::from_tokens(tokens);
    CHECK(v.tokens() == tokens);
    CHECK(v == Vocab::from_json(nlohmann::json{{"tokens", tokens}}));
    CHECK(v.id("été") == 5);
    CHECK(v.id("absent") == Vocab::unk_id);
    CHECK_THROWS_WITH(Vocab::from_tokens({"<pad>", "<bos>", "<eos>"}), Catch::Contains("at least the 4 special tokens"));
    CHECK_THROWS_WITH(Vocab::from_tokens({"<bos>", "<pad>", "<eos>", "<unk>"}), Catch::Contains("expected '<pad>'"));
    CHECK_THROWS_WITH(Vocab::from_tokens({"<pad>", "<bos>", "<eos>", "<unk>", "a", "a"}),
                      Catch::Contains("token 5") && Catch::Contains("twice"));
    CHECK_THROWS_WITH(Vocab::from_tokens({"<pad>", "<bos>", "<eos>", "<unk>", "a\nb"}),
                      Catch::Contains("token 4") && Catch::Contains("control character"));
    CHECK_THROWS_WITH(Vocab::from_tokens({"<pad>", "<bos>", "<eos>", "<unk>", ""}), Catch::Contains("is empty"));
}
