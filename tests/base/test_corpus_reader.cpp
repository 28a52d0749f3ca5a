// The corpus reader: layouts (Tatoeba, Tatoeba-Challenge, chosen columns,
// two-file parallel text), refusing what cannot be read (FIFOs, devices,
// UTF-16, CR-only, binary), bounded streaming with --max-pairs, progress and
// cancellation, and the vocabulary cap.
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catch_torch.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "core/data/corpus_reader.hpp"
#include "core/text/text.hpp"
#include "core/text/vocab.hpp"

using namespace attnviz;
using Tokens = std::vector<std::string>;

namespace {

int remove_entry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }

/// A fresh directory per test, removed afterwards (with nftw: std::filesystem::remove_all
/// crashes in programs linked with this LibTorch).
struct Dir {
    std::string path;
    Dir() {
        std::string tmpl = std::filesystem::temp_directory_path().string() + "/attnviz-corpus-XXXXXX";
        REQUIRE(mkdtemp(tmpl.data()) != nullptr);
        path = tmpl;
    }
    ~Dir() { nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS); }
    std::string file(const std::string& name, const std::string& bytes) const {
        const std::string p = path + "/" + name;
        std::ofstream(p, std::ios::binary) << bytes;
        return p;
    }
};

const std::string k_challenge =
    "eng\tfra\tGo.\tVa !\n"
    "eng\tfra\tHi.\tSalut !\n"
    "eng\tfra_Latn\tRun!\tCours !\n";

}  // namespace

TEST_CASE("corpus: Tatoeba-Challenge 4-column files are detected and said so", "[data][corpus]") {
    const Corpus c = parse_tsv(k_challenge, "eng-fra.txt");
    CHECK(c.layout == CorpusLayout::challenge);
    CHECK(c.detected.find("Tatoeba-Challenge") != std::string::npos);
    CHECK(c.detected.find("column 3 (eng)") != std::string::npos);
    CHECK(c.detected.find("column 4 (fra)") != std::string::npos);
    REQUIRE(c.pairs.size() == 3);
    CHECK(c.pairs[0].src == Tokens{"go", "."});  // the sentences, not the language codes
    CHECK(c.pairs[0].tgt == Tokens{"va", "!"});
    CHECK(c.pairs[2].tgt == Tokens{"cours", "!"});
    CHECK(c.skipped.empty());

    // A plain Tatoeba file says what it is too.
    const Corpus t = parse_tsv("Go.\tVa !\tCC-BY\nHi.\tSalut !\n", "fra.txt");
    CHECK(t.layout == CorpusLayout::pairs);
    CHECK(t.detected.find("source<TAB>target") != std::string::npos);
}

TEST_CASE("corpus: --columns chooses by number or by language code", "[data][corpus]") {
    TsvOptions by_lang;
    by_lang.columns = "fra,eng";
    Corpus c = parse_tsv(k_challenge, "eng-fra.txt", by_lang);
    CHECK(c.layout == CorpusLayout::challenge);
    REQUIRE(c.pairs.size() == 3);
    CHECK(c.pairs[0].src == Tokens{"va", "!"});
    CHECK(c.pairs[0].tgt == Tokens{"go", "."});
    CHECK(c.pairs[2].src == Tokens{"cours", "!"});  // fra_Latn is fra
    CHECK(c.detected.find("source = column 4 (fra)") != std::string::npos);

    TsvOptions by_number;
    by_number.columns = "4,3";
    c = parse_tsv(k_challenge, "eng-fra.txt", by_number);
    CHECK(c.layout == CorpusLayout::columns);
    CHECK(c.pairs[1].src == Tokens{"salut", "!"});
    CHECK(c.detected.find("columns 4 (source) and 3 (target) of 4") != std::string::npos);

    // Numbers on any TSV; reverse still swaps after choosing.
    by_number.columns = "3,1";
    by_number.reverse = true;
    c = parse_tsv("a\tignored\tb\nc\tx\td\n", "x.tsv", by_number);
    REQUIRE(c.pairs.size() == 2);
    CHECK(c.pairs[1].src == Tokens{"c"});
    CHECK(c.pairs[1].tgt == Tokens{"d"});

    // A language the file does not have, on the line where it happens.
    TsvOptions other;
    other.columns = "deu,eng";
    CHECK_THROWS_WITH(parse_tsv(k_challenge, "eng-fra.txt", other),
                      Catch::Contains("'eng-fra.txt' line 1") && Catch::Contains("deu,eng"));
    // Language codes need a Tatoeba-Challenge file.
    CHECK_THROWS_WITH(parse_tsv("a\tb\n", "x.tsv", other),
                      Catch::Contains("'x.tsv' line 1") && Catch::Contains("Tatoeba-Challenge"));
    // Too few columns for the numbers chosen.
    TsvOptions far;
    far.columns = "1,5";
    CHECK_THROWS_WITH(parse_tsv("a\tb\tc\n", "x.tsv", far), Catch::Contains("line 1 has 3 columns") &&
                                                               Catch::Contains("need at least 5"));
}

TEST_CASE("corpus: a column spec is two numbers or two language codes", "[data][corpus]") {
    CHECK(parse_column_choice("3,4").src == 3);
    CHECK(parse_column_choice("3,4").tgt == 4);
    CHECK(parse_column_choice("zho_Hans,eng").src_lang == "zho_Hans");
    for (const char* bad : {"3", "1,1", "0,1", "1,2,3", "", "eng,eng", "eng,3", "Eng,fra", "a b,c", "1,-2"})
        CHECK_THROWS_WITH(parse_column_choice(bad), Catch::Contains("expected SRC,TGT"));
    CHECK(is_language_code("eng"));
    CHECK(is_language_code("fr"));
    CHECK(is_language_code("cmn_Hans_CN"));
    CHECK_FALSE(is_language_code("Go."));
    CHECK_FALSE(is_language_code("english"));
    CHECK_FALSE(is_language_code("eng_"));
}

TEST_CASE("corpus: an ambiguous or mismatched layout is an error naming file, line and what was expected",
          "[data][corpus]") {
    // 4 columns whose first two are sentences, not language codes.
    CHECK_THROWS_WITH(parse_tsv("Go.\tVa !\tx\ty\n", "four.tsv"),
                      Catch::Contains("'four.tsv' line 1") && Catch::Contains("not language codes") &&
                          Catch::Contains("lang<TAB>lang<TAB>source<TAB>target"));
    // 5 columns.
    CHECK_THROWS_WITH(parse_tsv("\n\na\tb\tc\td\te\n", "five.tsv"),
                      Catch::Contains("'five.tsv' line 3 has 5 columns"));
    // A Tatoeba-Challenge file with a 3-column line further down.
    CHECK_THROWS_WITH(parse_tsv(k_challenge + "eng\tfra\tOops.\n", "c.txt"),
                      Catch::Contains("'c.txt' line 4 has 3 columns") && Catch::Contains("from line 1"));
    // ... or a line without language codes.
    CHECK_THROWS_WITH(parse_tsv(k_challenge + "Oops.\tAïe.\tx\ty\n", "c.txt"),
                      Catch::Contains("'c.txt' line 4") && Catch::Contains("not language codes"));
    // A Tatoeba file with a 4-column line (a tab inside a sentence).
    CHECK_THROWS_WITH(parse_tsv("Go.\tVa !\tCC\nHi.\tSal\tut !\tCC\n", "t.tsv"),
                      Catch::Contains("'t.tsv' line 2 has 4 columns") && Catch::Contains("source<TAB>target"));
    // Chosen columns: every line has the same count.
    TsvOptions chosen;
    chosen.columns = "1,2";
    CHECK_THROWS_WITH(parse_tsv("a\tb\tc\nd\te\n", "x.tsv", chosen),
                      Catch::Contains("'x.tsv' line 2 has 2 columns, but line 1 has 3"));
    // A line without a tab stays a skipped line, as before.
    const Corpus c = parse_tsv("junk\n" + k_challenge, "c.txt");
    CHECK(c.layout == CorpusLayout::challenge);
    REQUIRE(c.skipped.size() == 1);
    CHECK(c.skipped[0].reason == "no tab");
}

TEST_CASE("corpus: two-file parallel text", "[data][corpus][parallel]") {
    const std::string en = "Go.\n\nHi.\n\nRun!\n", fr = "Va !\n\nSalut !\n  \n\n";
    Corpus c = parse_parallel(en, fr, "train.en", "train.fr");
    CHECK(c.name == "train.en + train.fr");
    CHECK(c.layout == CorpusLayout::parallel);
    CHECK(c.detected.find("source 'train.en', target 'train.fr'") != std::string::npos);
    REQUIRE(c.pairs.size() == 2);
    CHECK(c.pairs[1].src == Tokens{"hi", "."});
    CHECK(c.pairs[1].tgt == Tokens{"salut", "!"});
    REQUIRE(c.skipped.size() == 1);  // line 5: "Run!" has a blank partner
    CHECK(c.skipped[0].line == 5);
    CHECK(c.skipped[0].reason == "empty target");

    TsvOptions rev;
    rev.reverse = true;
    c = parse_parallel("a\nb\n", "c\nd", "s", "t", rev);
    CHECK(c.pairs[1].src == Tokens{"d"});

    // Different line counts: both files, both counts, the first line without a partner.
    CHECK_THROWS_WITH(parse_parallel("a\nb\nc\nd\n", "w\nx\n", "s.txt", "t.txt"),
                      Catch::Contains("'s.txt' and 't.txt' have different line counts (4 and 2)") &&
                          Catch::Contains("line 3 of 's.txt' ('c') has no partner"));
    CHECK_THROWS_WITH(parse_parallel("a\n", "w\nx\n\n", "s.txt", "t.txt"),
                      Catch::Contains("(1 and 3)") && Catch::Contains("line 2 of 't.txt' ('x')"));
    // Blank lines at the end of one file are not pairs without partners.
    CHECK(parse_parallel("a\nb\n\n\n", "w\nx", "s", "t").pairs.size() == 2);
    // With max_pairs the rest is not read.
    TsvOptions two;
    two.max_pairs = 2;
    c = parse_parallel("a\nb\nc\nd\n", "w\nx\n", "s", "t", two);
    CHECK(c.pairs.size() == 2);
    CHECK(c.stopped_early);
    // A TSV given as parallel text.
    CHECK_THROWS_WITH(parse_parallel("a\tb\n", "c\n", "pairs.tsv", "t"),
                      Catch::Contains("'pairs.tsv' line 1 has a tab"));
    TsvOptions cols;
    cols.columns = "1,2";
    CHECK_THROWS_AS(parse_parallel("a\n", "b\n", "s", "t", cols), ConfigError);
    // Nothing usable.
    CHECK_THROWS_WITH(parse_parallel("\n", "\n", "s", "t"), Catch::Contains("no sentence pairs"));
}

TEST_CASE("corpus: read_parallel reads two files with the same checks", "[data][corpus][parallel]") {
    Dir d;
    const std::string en = d.file("train.en", "\xEF\xBB\xBFGo.\r\nHi.\r\n"), fr = d.file("train.fr", "Va !\nSalut !\n");
    const Corpus c = read_parallel(en, fr);
    CHECK(c.name == "train.en + train.fr");
    REQUIRE(c.pairs.size() == 2);
    CHECK(c.pairs[0].src == Tokens{"go", "."});
    CHECK(c.bytes_read > 0);
    CHECK_THROWS_WITH(read_parallel(en, "/dev/zero"), Catch::Contains("character device"));
    CHECK_THROWS_WITH(read_parallel(en, d.path + "/missing.fr"), Catch::Contains("missing.fr"));
    const std::string utf16 = d.file("train.de", std::string("\xFF\xFE" "a\0\n\0", 6));
    CHECK_THROWS_WITH(read_parallel(en, utf16), Catch::Contains("UTF-16"));
}

TEST_CASE("corpus: FIFOs, devices and directories are refused without blocking", "[data][corpus][bounded]") {
    Dir d;
    const std::string fifo = d.path + "/pairs.tsv";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    // No writer ever opens it: reading must not wait for one.
    auto refused = std::async(std::launch::async, [&] {
        try {
            read_tsv(fifo);
        } catch (const FileError& e) {
            return std::string(e.what());
        }
        return std::string("read");
    });
    if (refused.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
        const int fd = ::open(fifo.c_str(), O_WRONLY);  // let the blocked reader go before failing
        if (fd >= 0) ::close(fd);
        FAIL("reading a FIFO without a writer blocked");
    }
    const std::string message = refused.get();
    CHECK(message.find("FIFO") != std::string::npos);
    CHECK(message.find(fifo) != std::string::npos);
    CHECK(message.find("regular file") != std::string::npos);

    CHECK_THROWS_WITH(read_tsv("/dev/zero"), Catch::Contains("'/dev/zero' is a character device"));
    // A symbolic link to a device is the device.
    const std::string link = d.path + "/zero.tsv";
    REQUIRE(::symlink("/dev/zero", link.c_str()) == 0);
    CHECK_THROWS_WITH(read_tsv(link), Catch::Contains("character device"));
    CHECK_THROWS_WITH(read_tsv(d.path), Catch::Contains("Is a directory"));
}

TEST_CASE("corpus: UTF-16, CR-only and binary files are refused with how to convert them", "[data][corpus][bounded]") {
    Dir d;
    auto utf16 = [](const std::string& ascii, bool little) {
        std::string out;
        for (char ch : ascii) out += little ? std::string{ch, '\0'} : std::string{'\0', ch};
        return out;
    };
    const std::string text = "Go.\tVa !\nHi.\tSalut !\n";
    const std::string le = d.file("le.tsv", "\xFF\xFE" + utf16(text, true));
    CHECK_THROWS_WITH(read_tsv(le), Catch::Contains("is UTF-16 (little-endian") && Catch::Contains("FF FE") &&
                                        Catch::Contains("iconv -f UTF-16 -t UTF-8") && Catch::Contains(le));
    const std::string be = d.file("be.tsv", "\xFE\xFF" + utf16(text, false));
    CHECK_THROWS_WITH(read_tsv(be), Catch::Contains("big-endian") && Catch::Contains("FE FF"));
    const std::string no_bom = d.file("nobom.tsv", utf16(text, true));
    CHECK_THROWS_WITH(read_tsv(no_bom), Catch::Contains("UTF-16 little-endian without a byte order mark") &&
                                            Catch::Contains("iconv -f UTF-16LE"));
    CHECK_THROWS_WITH(parse_tsv(utf16(text, false), "mem.tsv"), Catch::Contains("UTF-16 big-endian"));
    CHECK_THROWS_WITH(parse_tsv(std::string("\xFF\xFE\0\0a\0\0\0", 8), "x"), Catch::Contains("UTF-32"));

    const std::string cr = d.file("mac.tsv", "Go.\tVa !\rHi.\tSalut !\rRun!\tCours !\r");
    CHECK_THROWS_WITH(read_tsv(cr), Catch::Contains("CR-only line endings") && Catch::Contains("tr '\\r' '\\n'") &&
                                        Catch::Contains(cr));
    // CRLF is fine, and so is a lone CR inside a line.
    CHECK(parse_tsv("Go.\tVa !\r\nHi.\tSa\rlut !\r\n", "x").pairs.size() == 2);

    std::string binary(4096, '\0');
    for (size_t i = 0; i < binary.size(); i += 3) binary[i] = char(i * 7 % 251 + 1);
    CHECK_THROWS_WITH(parse_tsv(binary, "blob.bin"), Catch::Contains("NUL bytes") && Catch::Contains("binary"));
    // A stray NUL in one line of a text file skips that line.
    std::string stray = std::string("c\0\td\n", 5);
    for (int i = 0; i < 20; ++i) stray += "a sentence\tune phrase\n";
    const Corpus c = parse_tsv(stray, "x");
    CHECK(c.pairs.size() == 20);
    REQUIRE(c.skipped.size() == 1);
    CHECK(c.skipped[0].line == 1);
    CHECK(c.skipped[0].reason == "NUL byte");
}

TEST_CASE("corpus: reading is streamed and stops as soon as max_pairs pairs are in", "[data][corpus][bounded]") {
    Dir d;
    const std::string path = d.path + "/big.tsv";
    {
        std::ofstream out(path, std::ios::binary);
        for (int i = 0; i < 400000; ++i) out << "the sentence number " << i << " .\tla phrase numéro " << i << " .\n";
    }
    const auto size = std::filesystem::file_size(path);
    REQUIRE(size > 15'000'000);
    TsvOptions o;
    o.max_pairs = 1000;
    const Corpus c = read_tsv(path, o);
    CHECK(c.pairs.size() == 1000);
    CHECK(c.lines_read == 1000);
    CHECK(c.stopped_early);
    CHECK(c.bytes_read <= 2 * 65536);  // two chunks at most, not the file
    CHECK(c.pairs[999].src[3] == "999");

    // The size bound applies to a file read whole, and not with max_pairs.
    TsvOptions bound;
    bound.max_file_bytes = 1'000'000;
    CHECK_THROWS_WITH(read_tsv(path, bound), Catch::Contains("more than the") && Catch::Contains("--max-pairs"));
    bound.max_pairs = 10;
    CHECK(read_tsv(path, bound).pairs.size() == 10);
}

TEST_CASE("corpus: line length is bounded whatever max_line_bytes says", "[data][corpus][bounded]") {
    std::string text = "a\tb\n" + std::string(hard_line_limit + 10, 'x') + "\tz\r\nc\td\n";
    TsvOptions no_limit;
    no_limit.max_line_bytes = 0;
    const Corpus c = parse_tsv(text, "long.tsv", no_limit);
    CHECK(c.pairs.size() == 2);
    REQUIRE(c.skipped.size() == 1);
    CHECK(c.skipped[0].line == 2);
    CHECK(c.skipped[0].reason ==
          "line too long (" + std::to_string(hard_line_limit + 12) + " bytes, limit " + std::to_string(hard_line_limit) + ")");
    // One byte over, with a final CR: still too long; at the limit with a CR: kept.
    TsvOptions four;
    four.max_line_bytes = 4;
    const Corpus e = parse_tsv("ab\tcd\r\nab\tc\r\n", "x", four);
    REQUIRE(e.skipped.size() == 1);
    CHECK(e.skipped[0].reason == "line too long (5 bytes, limit 4)");
    CHECK(e.pairs.size() == 1);
}

TEST_CASE("corpus: progress reports bytes and lines, and can cancel", "[data][corpus][progress]") {
    Dir d;
    std::string text;
    for (int i = 0; i < 20000; ++i) text += "word " + std::to_string(i) + "\tmot " + std::to_string(i) + "\n";
    const std::string path = d.file("p.tsv", text);
    std::vector<ReadProgress> seen;
    TsvOptions o;
    o.progress = [&](const ReadProgress& p) {
        seen.push_back(p);
        return true;
    };
    const Corpus c = read_tsv(path, o);
    REQUIRE(seen.size() >= 3);  // about one per 64 KiB chunk, and the last
    for (size_t i = 1; i < seen.size(); ++i) CHECK(seen[i].bytes_read >= seen[i - 1].bytes_read);
    CHECK(seen.back().bytes_read == text.size());
    CHECK(seen.back().total_bytes == text.size());
    CHECK(seen.back().lines == 20000);
    CHECK(seen.back().pairs == c.pairs.size());

    int calls = 0;
    o.progress = [&](const ReadProgress& p) { return ++calls < 2; };
    CHECK_THROWS_AS(read_tsv(path, o), ReadCancelled);
    CHECK(calls == 2);
    // Parallel text reports both files' bytes.
    std::string many_a, many_b;
    for (int i = 0; i < 2000; ++i) {
        many_a += std::string(99, 'a') + "\n";
        many_b += "b\n";
    }
    const std::string en = d.file("a.en", many_a), fr = d.file("a.fr", many_b);
    o.progress = [&](const ReadProgress& p) {
        seen.push_back(p);
        return true;
    };
    seen.clear();
    read_parallel(en, fr, o);
    CHECK(seen.back().total_bytes == 204000);
    CHECK(seen.back().bytes_read == 204000);
    CHECK(seen.back().pairs == 2000);
}

TEST_CASE("vocabulary cap: the most frequent tokens are kept, ties as Vocab::build orders them", "[data][vocab]") {
    const std::vector<std::vector<std::string>> s = {{"a", "b", "c", "d"}, {"a", "b", "c"}, {"a", "e"}};
    const Vocab all = Vocab::build(s);
    REQUIRE(all.size() == 4 + 5);
    const Vocab two = Vocab::build(s, 1, 2);
    CHECK(two.size() == 4 + 2);
    CHECK(two.tokens() == std::vector<std::string>(all.tokens().begin(), all.tokens().begin() + 6));
    CHECK(two.contains("a"));
    CHECK(two.contains("b"));
    CHECK(two.id("c") == Vocab::unk_id);
    // Ties (d and e, once each) alphabetically: a cap of 4 keeps d, not e.
    const Vocab four = Vocab::build(s, 1, 4);
    CHECK(four.contains("d"));
    CHECK_FALSE(four.contains("e"));
    // With min_freq, the cap counts what is left.
    CHECK(Vocab::build(s, 2, 10).size() == 4 + 3);
    CHECK(Vocab::build(s, 1, 100).size() == all.size());
}
