// Nothing raw on a terminal or a line protocol (issue 40, item 4): every control or
// line-separating character -- C0 (tab, vertical tab, form feed, escape sequences), DEL,
// C1 (NEL U+0085, CSI U+009B), U+2028, U+2029, bytes that are not UTF-8 -- is refused in
// a vocabulary, escaped in a message (quote) and in a pretrained model's output text, and a
// pretrained model's tokens that attnviz's vocabularies refuse are renamed to ones they hold.
#include "catch_torch.hpp"

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/text/pretrained_tokenizer.hpp"
#include "core/text/tokenizer.hpp"
#include "core/text/unicode.hpp"
#include "core/text/vocab.hpp"

using namespace attnviz;
using Catch::Contains;

namespace {

/// Each character class of the audit, inside a token ("a" + c + "b").
struct Crafted {
    const char* name;
    std::string bytes;
};
const std::vector<Crafted>& crafted() {
    static const std::vector<Crafted> all = {
        {"line feed", "\n"},        {"carriage return", "\r"},  {"NUL", std::string(1, '\0')},
        {"tab", "\t"},              {"vertical tab", "\x0b"},   {"form feed", "\x0c"},
        {"escape sequence", "\x1b[31m"}, {"OSC title", "\x1b]0;pwned\x07"}, {"bell", "\x07"},
        {"DEL", "\x7f"},            {"NEL U+0085", "\xc2\x85"}, {"CSI U+009B", "\xc2\x9b" "2J"},
        {"line separator U+2028", "\xe2\x80\xa8"}, {"paragraph separator U+2029", "\xe2\x80\xa9"},
        {"a stray byte", "\xff"},   {"a cut sequence", "\xe2\x80"},
    };
    return all;
}

/// Whether text holds a byte or character a terminal would act on (the escape's own bytes,
/// C0, DEL, C1 and the separators as UTF-8).
bool raw_control(const std::string& text) {
    for (size_t i = 0; i < text.size(); ++i) {
        const auto b = static_cast<unsigned char>(text[i]);
        if (b < 0x20 || b == 0x7f) return true;
        if (b == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) <= 0x9f) return true;
        if (text.compare(i, 3, "\xe2\x80\xa8") == 0 || text.compare(i, 3, "\xe2\x80\xa9") == 0) return true;
    }
    return false;
}

nlohmann::json vocab_with(const std::string& token) {
    return nlohmann::json{{"tokens", {"<pad>", "<bos>", "<eos>", "<unk>", "ok", token}}};
}

}  // namespace

TEST_CASE("control characters: found, escaped in messages and output lines, and only those", "[hostile][message]") {
    for (const auto& c : crafted()) {
        INFO(c.name);
        const std::string token = "a" + c.bytes + "b";
        CHECK(has_control_characters(token));
        const std::string q = quote(token);
        CHECK_FALSE(raw_control(q));
        CHECK_FALSE(has_control_characters(q));
        CHECK_FALSE(has_control_characters(escape_controls(token)));
        CHECK_FALSE(raw_control(escape_controls(token)));
    }
    CHECK(quote("a\xe2\x80\xa8" "b\xe2\x80\xa9") == "'a\\u{2028}b\\u{2029}'");
    CHECK(escape_controls("x\x1b[31my\xc2\x85z") == "x\\x1B[31my\\u{0085}z");
    // Text as people write it stays as it is: accents, other scripts, no-break spaces and,
    // in output lines, the marks that order right-to-left text.
    for (const std::string& fine : {std::string("caf\xc3\xa9"), std::string("\xd0\xbc\xd0\xb8\xd1\x80"),
                                    std::string("a\xc2\xa0" "b"), std::string("\xe2\x96\x81x"),
                                    std::string("\xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d\xe2\x80\x8f")}) {
        CHECK_FALSE(has_control_characters(fine));
        CHECK(escape_controls(fine) == fine);
    }
    CHECK(printable("\xe2\x80\x8f") == "\\u{200F}");  // a message still shows the mark
    CHECK(escape_controls(std::string(100000, 'x')).size() == 100000);  // no length limit
}

TEST_CASE("vocabulary tokens with any control or line-separating character are refused on load",
          "[hostile][vocab]") {
    CHECK_NOTHROW(Vocab::from_json(vocab_with("fine")));
    for (const auto& c : crafted()) {
        INFO(c.name);
        const std::string token = "a" + c.bytes + "b";
        CHECK_FALSE(is_vocab_token(token));
        try {
            Vocab::from_json(vocab_with(token));
            FAIL("accepted");
        } catch (const FileError& e) {
            const std::string m = e.what();
            CHECK_THAT(m, Contains("vocabulary token 5") && Contains("control character"));
            CHECK_FALSE(raw_control(m));
        }
        // Built from a corpus, the token is left to <unk>: the model still saves and loads.
        const Vocab built = Vocab::build({{"x", token, "y"}});
        CHECK_FALSE(built.contains(token));
        CHECK(Vocab::from_json(built.to_json()) == built);
    }
}

TEST_CASE("a pretrained model's tokens with control characters are renamed to tokens a vocabulary holds, "
          "and its output text is one line",
          "[hostile][vocab][pretrained]") {
    const std::vector<std::string> sentences = {"the red car sees a dog", "a small dog sees the car",
                                                "la voiture rouge voit un chien", "un petit chien voit la voiture"};
    PretrainedTokenizerFiles files;
    files.kind = PretrainedTokenizerKind::marian;
    files.source_spm = Tokenizer::train_subword(sentences, SubwordOptions{40, SubwordModel::unigram})->model_proto();
    nlohmann::json vocab{{"</s>", 0}, {"<unk>", 1}, {"<pad>", 2}, {"ok", 3}};
    std::vector<std::string> in_json;  // every crafted token JSON text can carry (UTF-8)
    for (const auto& c : crafted()) {
        const std::string t = "a" + c.bytes + "b";
        if (!is_valid_utf8(t)) continue;
        vocab[t] = static_cast<int64_t>(4 + in_json.size());
        in_json.push_back(t);
    }
    REQUIRE(in_json.size() == crafted().size() - 2);
    files.vocab_json = vocab.dump();
    files.model_vocab_size = static_cast<int64_t>(4 + in_json.size());
    files.what = "crafted";
    const auto tokenizer = PretrainedTokenizer::load(files);
    const PretrainedVocabLayout layout = tokenizer->vocab_layout(true, files.model_vocab_size, 2, 0, 1);
    for (const auto& name : layout.names) {
        INFO(quote(name));
        CHECK((is_vocab_token(name) || name == Vocab::pad_token || name == Vocab::bos_token));
    }
    CHECK_NOTHROW(Vocab::from_json(nlohmann::json{{"tokens", layout.names}}));
    for (const auto& t : in_json) {
        INFO(quote(t));
        REQUIRE(layout.to_name.count(t) == 1);
        CHECK(layout.to_name.at(t) == printable(t, t.size() * 4 + 8));
        // Decoded to text, the model's own token is escaped on the output's one line.
        const std::string text = tokenizer->decode({"ok", t});
        CHECK_FALSE(has_control_characters(text));
    }
}
