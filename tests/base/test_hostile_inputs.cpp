// The third hostile-input audit (issue 27), torch-free parts: SentencePiece models
// from files checked and rebuilt before SentencePiece loads them, messages that
// quote file contents short and escaped, vocabulary tokens that would break one
// output line per input line, gold alignments read through the bounded line
// reader, and outputs that refuse to replace a device or a FIFO.
#include "catch_torch.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>
#include <sentencepiece_processor.h>

#include "core/io/base64.hpp"
#include "core/data/alignment_links.hpp"
#include "core/io/atomic_file.hpp"
#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/text/sentencepiece_model.hpp"
#include "core/text/tokenizer.hpp"
#include "core/text/vocab.hpp"
#include "proto_fields.hpp"
#include "test_support.hpp"

using namespace attnviz;
using Catch::Contains;
using namespace attnviz::testing;

namespace {

using Dir = attnviz::testing::ScratchDir;

/// A small model as attnviz trains it, serialized as SentencePiece wrote it.
const std::string& trained_model() {
    static const std::string proto = [] {
        const std::vector<std::string> sentences = {"the red car sees a dog", "a small dog sees the car",
                                                    "la voiture rouge voit un chien", "un petit chien voit la voiture"};
        return Tokenizer::train_subword(sentences, SubwordOptions{40, SubwordModel::unigram})->model_proto();
    }();
    return proto;
}

std::string refused(const std::string& proto) {
    try {
        Tokenizer::from_sentencepiece(proto, {});
    } catch (const FileError& e) {
        return e.what();
    }
    return "(loaded)";
}

}  // namespace

TEST_CASE("count_of: one noun for one, the plural for every other count", "[message]") {
    CHECK(count_of(1, "layer", "layers") == "1 layer");
    CHECK(count_of(2, "layer", "layers") == "2 layers");
    CHECK(count_of(0, "bad line", "bad lines") == "0 bad lines");
    CHECK(count_of(-1, "head", "heads") == "-1 heads");
}

TEST_CASE("quote: file contents in messages are short, escaped and valid UTF-8", "[hostile][message]") {
    CHECK(quote("plain") == "'plain'");
    CHECK(quote("caf\xC3\xA9 \xE2\x96\x81x") == "'caf\xC3\xA9 \xE2\x96\x81x'");  // UTF-8 stays as it is
    CHECK(quote("a\nb\tc\x1b[31m") == "'a\\x0Ab\\x09c\\x1B[31m'");
    CHECK(quote(std::string("a\0b", 3)) == "'a\\x00b'");
    CHECK(quote("\x7f\xC2\x85") == "'\\x7F\\u{0085}'");                      // DEL and a C1 control
    CHECK(quote("ab\xE2\x80\xAE" "cd") == "'ab\\u{202E}cd'");                 // right-to-left override
    CHECK(quote("\xFF\xC3(") == "'\\xFF\\xC3('");                             // not UTF-8
    CHECK(quote(std::string(300000, 'A'), 10) == "'AAAAAAAAAA...'");
    // Cut at a character boundary, never inside one.
    CHECK(quote("\xC3\xA9\xC3\xA9\xC3\xA9", 5) == "'\xC3\xA9\xC3\xA9...'");
    CHECK(printable("x\ny") == "x\\x0Ay");
    const std::string q = quote("\x1b]0;title\x07" + std::string(1000, '\n'));
    CHECK(q.size() < 4 * quote_default_max);
    for (const char c : q) CHECK(static_cast<unsigned char>(c) >= 0x20);
}

TEST_CASE("a SentencePiece model attnviz trained is rebuilt from its checked parts and encodes the same",
          "[hostile][sentencepiece]") {
    const std::string& original = trained_model();
    const SentencePieceSpec spec = parse_sentencepiece_model(original);
    CHECK(spec.pieces.size() >= 20);
    CHECK(spec.algorithm == SubwordModel::unigram);
    const std::string rebuilt = serialize_sentencepiece_model(spec);
    CHECK(parse_sentencepiece_model(rebuilt) == spec);
    CHECK(serialize_sentencepiece_model(parse_sentencepiece_model(rebuilt)) == rebuilt);
    // What SentencePiece makes of the bytes it wrote, and what attnviz hands it instead.
    sentencepiece::SentencePieceProcessor direct;
    REQUIRE(direct.LoadFromSerializedProto(original).ok());
    const auto tokenizer = Tokenizer::from_sentencepiece(original, {});
    CHECK(tokenizer->model_proto() == rebuilt);
    CHECK(tokenizer->piece_count() == direct.GetPieceSize());
    for (const std::string s : {"the red car sees a small dog", "un petit chien rouge", "zebra xylophone", "  a  b "}) {
        std::vector<std::string> expected;
        REQUIRE(direct.Encode(s, &expected).ok());
        CHECK(tokenizer->encode(s, /*normalize=*/false) == expected);
    }
    // And the same for BPE.
    const auto bpe = Tokenizer::train_subword({"the red car sees a dog", "a small dog sees the car"},
                                              SubwordOptions{30, SubwordModel::bpe});
    CHECK(parse_sentencepiece_model(bpe->model_proto()).algorithm == SubwordModel::bpe);
}

TEST_CASE("a crafted SentencePiece model is refused before SentencePiece reads it", "[hostile][sentencepiece]") {
    const std::string& good = trained_model();
    // The audit's crash: a normalizer rule table whose trie points outside it (SIGSEGV on load).
    const std::string blob = broken_rule_table();
    CHECK_THAT(refused(good + bytes_field(3, bytes_field(1, "nmt_nfkc") + bytes_field(2, blob))),
               Contains("nmt_nfkc"));
    CHECK_THAT(refused(good + bytes_field(3, bytes_field(2, blob))), Contains("rule table"));
    CHECK_THAT(refused(good + bytes_field(5, bytes_field(2, blob))), Contains("denormalizer rule table"));
    CHECK_THAT(refused(good + bytes_field(2, number_field(35, 1))), Contains("byte fallback"));
    CHECK_THAT(refused(good + bytes_field(2, number_field(24, 1))), Contains("word ends"));
    CHECK_THAT(refused(good + bytes_field(2, number_field(3, 3))), Contains("model type 3 (word)"));
    CHECK_THAT(refused(good + piece_field("<s>", 0, 4)), Contains("user-defined"));
    CHECK_THAT(refused(good + piece_field("<0x41>", 0, 6)), Contains("byte piece"));
    CHECK_THAT(refused(good + piece_field("<unk2>", 0, 2)), Contains("2 unknown pieces"));
    const std::string normal = parse_sentencepiece_model(good).pieces.back().piece;
    CHECK_THAT(refused(good + piece_field(normal, -1)), Contains("twice"));
    CHECK_THAT(refused(good + piece_field("x\ny", -1)), Contains("'x\\x0Ay'") && Contains("CR or LF"));
    CHECK_THAT(refused(good + piece_field("nan", std::numeric_limits<float>::quiet_NaN())), Contains("finite"));
    CHECK_THAT(refused(good + piece_field("\xFF", -1)), Contains("UTF-8"));
    CHECK_THAT(refused(good + piece_field(std::string(2000, 'a'), -1)), Contains("2000 bytes"));
    CHECK_THAT(refused(piece_field("a", -1) + piece_field("b", -1)), Contains("0 unknown pieces"));
    CHECK_THAT(refused(""), Contains("no pieces"));
    CHECK_THAT(refused(good.substr(0, good.size() - 3)), Contains("cut short"));
    CHECK_THAT(refused(good + "\x0b"), Contains("wire type 3"));
    // Everything a model may also hold that attnviz does not hand on: self-test samples
    // (SentencePiece runs them and logs failures on stderr), training options, unknown fields.
    const std::string self_test = bytes_field(4, bytes_field(1, bytes_field(1, "hello") + bytes_field(2, "nope")));
    const auto loaded = Tokenizer::from_sentencepiece(good + self_test + bytes_field(2, number_field(16, 64)) +
                                                          bytes_field(99, "extension"),
                                                      {});
    CHECK(loaded->model_proto() == serialize_sentencepiece_model(parse_sentencepiece_model(good)));
}

TEST_CASE("a checkpoint's tokenizer JSON with a crafted model is refused with a short message", "[hostile][sentencepiece]") {
    const std::string blob = broken_rule_table();
    const nlohmann::json j = {{"level", "subword"},
                              {"type", "sentencepiece"},
                              {"model", base64_encode(trained_model() + bytes_field(3, bytes_field(2, blob)))}};
    CHECK_THROWS_WITH(Tokenizer::from_json(j), Contains("rule table"));
    CHECK_THROWS_WITH(Tokenizer::from_json({{"level", "\x1b[2J" + std::string(5000, 'x')}}),
                      Contains("\\x1B[2J") && !Contains(std::string(200, 'x')));
}

TEST_CASE("vocabulary tokens that would break one output line per input line are refused", "[hostile][vocab]") {
    auto tokens = [](const std::string& t) {
        return nlohmann::json{{"tokens", {"<pad>", "<bos>", "<eos>", "<unk>", "ok", t}}};
    };
    CHECK_NOTHROW(Vocab::from_json(tokens("fine")));
    for (const std::string& bad : {std::string("x\ny"), std::string("x\r"), std::string("a\0b", 3), std::string("a|||b"),
                                  std::string("|||"), std::string()})
        CHECK_THROWS_WITH(Vocab::from_json(tokens(bad)), Contains("vocabulary token 5"));
    // An escape sequence hundreds of KB long is refused (issue 40: no control character in a
    // vocabulary) and comes back as a short, escaped quote; so does a long token twice.
    const std::string evil = "\x1b[31mEVIL" + std::string(300000, 'A');
    for (const std::string& token : {evil, std::string(300000, 'A')})
        try {
            Vocab::from_json(nlohmann::json{{"tokens", {"<pad>", "<bos>", "<eos>", "<unk>", token, token}}});
            FAIL("accepted");
        } catch (const FileError& e) {
            const std::string m = e.what();
            CHECK_THAT(m, Contains(token == evil ? "control character" : "appears twice"));
            if (token == evil) CHECK_THAT(m, Contains("\\x1B[31mEVIL"));
            CHECK(m.size() < 400);
            CHECK(m.find('\x1b') == std::string::npos);
        }
    // Built from text, such a token is left to <unk>: a model trained on it still saves and loads.
    const Vocab v = Vocab::build({{"a", "|||", "b"}, {"|||"}});
    CHECK_FALSE(v.contains("|||"));
    CHECK(Vocab::from_json(v.to_json()) == v);
}

TEST_CASE("gold alignments are read through the bounded line reader", "[hostile][alignment]") {
    Dir dir;
    const std::string fifo = dir / "gold.fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    // A FIFO without a writer: refused at once (the old reader waited for a writer forever).
    CHECK_THAT(attnviz::testing::refusal_without_blocking<FileError>(fifo, [&] { read_pharaoh(fifo); }),
               Contains("FIFO") && Contains("not a regular file"));
    // A device: refused before a byte is read (the old reader grew without bound on /dev/zero).
    CHECK_THROWS_WITH(read_pharaoh("/dev/zero"), Contains("character device"));
    // A file past the size bound: refused by its size, before reading (a sparse file: no disk used).
    const std::string big = dir / "big.txt";
    const int fd = ::open(big.c_str(), O_WRONLY | O_CREAT, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(max_pharaoh_file_bytes) + 1) == 0);
    ::close(fd);
    CHECK_THROWS_WITH(read_pharaoh(big), Contains("more than the"));
    // A line past the hard line limit: refused, naming the line.
    std::string links;
    while (links.size() <= hard_line_limit) links += "0-0 ";
    CHECK_THROWS_WITH(parse_pharaoh("0-1\n" + links + "\n", "gold.txt"), Contains("gold.txt:2:") && Contains("bytes long"));
    // A bad link is quoted escaped.
    CHECK_THROWS_WITH(parse_pharaoh("0-0 \x1b[2Jx\n", "gold.txt"), Contains("'\\x1B[2Jx'"));
    // What the reader accepts as before: BOM, CRLF, tabs, no final newline, blank lines.
    std::ofstream(dir / "ok.txt", std::ios::binary) << "\xEF\xBB\xBF" "0-0 1p2\r\n\r\n3?4\t5-6";
    const auto gold = read_pharaoh(dir / "ok.txt");
    REQUIRE(gold.size() == 3);
    CHECK(gold[0].size() == 2);
    CHECK(gold[1].empty());
    CHECK(gold[2].size() == 2);
}

TEST_CASE("atomic writes refuse to put a regular file in place of a FIFO, a socket or a device", "[hostile][atomic]") {
    Dir dir;
    const std::string fifo = dir / "out.fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THROWS_WITH(write_file_atomic(fifo, "x"), Contains("FIFO") && Contains("not a regular file"));
    CHECK_THROWS_WITH(check_writable_path(fifo), Contains("FIFO"));
    struct stat st;
    REQUIRE(::stat(fifo.c_str(), &st) == 0);
    CHECK(S_ISFIFO(st.st_mode));
    // A symbolic link to a device is refused too (its target is what the user named).
    const std::string link = dir / "null.json";
    REQUIRE(::symlink("/dev/null", link.c_str()) == 0);
    CHECK_THROWS_WITH(write_file_atomic(link, "x"), Contains("character device"));
    CHECK_THROWS_WITH(check_writable_path(link), Contains("character device"));
    // A device node of its own (root only; /dev/null itself is never put at risk).
    const std::string node = dir / "null.ckpt";
    if (::mknod(node.c_str(), S_IFCHR | 0600, makedev(1, 3)) == 0) {
        CHECK_THROWS_WITH(write_file_atomic(node, "x"), Contains("character device"));
        REQUIRE(::stat(node.c_str(), &st) == 0);
        CHECK(S_ISCHR(st.st_mode));
    } else {
        WARN("mknod not permitted here: the device-node case is covered by the symbolic link to /dev/null");
    }
    // A regular file (and a link to one) is still replaced.
    write_file_atomic(dir / "plain.txt", "one");
    write_file_atomic(dir / "plain.txt", "two");
    CHECK(attnviz::testing::read_all(dir / "plain.txt") == "two");
}
