// attnviz-cli on corpus files, as a user would run it: Tatoeba-Challenge
// files, --columns, two-file parallel text, refused inputs (FIFO, /dev/zero,
// UTF-16, CR-only) also when resuming from a checkpoint's corpus path,
// --max-pairs on a big file, and --max-vocab.
#include <sys/stat.h>
#include <unistd.h>

#include "catch_torch.hpp"

#include <nlohmann/json.hpp>

#include "cli_support.hpp"

using nlohmann::json;
using namespace attnviz_cli_test;

namespace {

/// Runs attnviz-cli in dir (relative paths resolve there), killed after limit seconds:
/// a read that blocks fails the test instead of hanging it (exit code 124).
Result cli_in(const TempDir& dir, const std::vector<std::string>& args, int limit = 60) {
    return run_command(dir,
                       "cd " + quote(dir.path) + " && timeout " + std::to_string(limit) + " " +
                           quote(ATTNVIZ_CLI_PATH) + " --threads 1",
                       args);
}

/// Training flags that stop after a couple of batches: these tests are about reading.
std::vector<std::string> quick(std::vector<std::string> extra = {}) {
    return cat(cat({"--epochs", "1", "--max-batches", "2", "--eval-sample", "0", "--json"}, tiny()), extra);
}

std::string challenge_lines(int n) {
    std::string s;
    for (int i = 0; i < n; ++i)
        s += "eng\tfra\tI see " + std::to_string(i % 17) + " cats .\tJe vois " + std::to_string(i % 17) + " chats .\n";
    return s;
}

}  // namespace

TEST_CASE("cli: a Tatoeba-Challenge file is detected and announced, --columns chooses", "[cli][corpus]") {
    TempDir dir;
    write_file(dir / "eng-fra.txt", challenge_lines(60));
    // Announced on stderr (without -q) and in --json.
    Result r = cli_in(dir, {"train", "--data", "eng-fra.txt", "--epochs", "1", "--max-batches", "1", "--embed", "8",
                            "--hidden", "8", "--device", "cpu", "--json"});
    INFO("stderr: " << r.err);
    REQUIRE(r.code == 0);
    CHECK(r.err.find("attnviz-cli: 'eng-fra.txt': Tatoeba-Challenge file") != std::string::npos);
    CHECK(r.err.find("source = column 3 (eng)") != std::string::npos);
    json j = json::parse(r.out);
    CHECK(j.at("corpus_layout") == "challenge");
    CHECK(j.at("train_pairs").get<int>() + j.at("val_pairs").get<int>() == 60);
    CHECK(j.at("src_vocab") == 4 + 17 + 4);  // i see N cats . : the English side, not "eng"

    Result swapped = cli_in(dir, cat({"train", "--data", "eng-fra.txt", "--columns", "fra,eng"}, quick()));
    INFO("stderr: " << swapped.err);
    REQUIRE(swapped.code == 0);
    CHECK(json::parse(swapped.out).at("src_vocab") == 4 + 17 + 4);  // je vois N chats .
    CHECK(json::parse(swapped.out).at("corpus_detected").get<std::string>().find("source = column 4 (fra)") !=
          std::string::npos);

    Result numbered = cli_in(dir, cat({"train", "--data", "eng-fra.txt", "--columns", "1,2"}, quick()));
    INFO("stderr: " << numbered.err);
    REQUIRE(numbered.code == 0);
    CHECK(json::parse(numbered.out).at("src_vocab") == 4 + 1);  // the codes themselves, as asked

    Result bad = cli_in(dir, cat({"train", "--data", "eng-fra.txt", "--columns", "3"}, quick()));
    CHECK(bad.code == 2);
    require_one_error_line(bad, "--columns: columns '3': expected SRC,TGT");
}

TEST_CASE("cli: an ambiguous or mismatched layout is one error line naming file and line", "[cli][corpus]") {
    TempDir dir;
    write_file(dir / "four.tsv", "Go.\tVa !\tCC-BY\tx\nHi.\tSalut !\tCC-BY\tx\n");
    Result four = cli_in(dir, cat({"train", "--data", "four.tsv"}, quick()));
    CHECK(four.code == 1);
    require_one_error_line(four, "'four.tsv' line 1 has 4 columns but columns 1 and 2");
    write_file(dir / "mixed.txt", challenge_lines(3) + "eng\tfra\tOne.\n");
    Result mixed = cli_in(dir, cat({"train", "--data", "mixed.txt"}, quick()));
    CHECK(mixed.code == 1);
    require_one_error_line(mixed, "'mixed.txt' line 4 has 3 columns");
}

TEST_CASE("cli: two-file parallel text trains, line counts must match", "[cli][corpus][parallel]") {
    TempDir dir;
    std::string en, fr;
    for (int i = 0; i < 50; ++i) {
        en += "I see " + std::to_string(i % 9) + " dogs .\n";
        fr += "Je vois " + std::to_string(i % 9) + " chiens .\n";
    }
    write_file(dir / "train.en", en);
    write_file(dir / "train.fr", fr);
    Result r = cli_in(dir, {"train", "--data", "train.en", "--target-data", "train.fr", "--epochs", "1", "--max-batches",
                            "1", "--embed", "8", "--hidden", "8", "--device", "cpu", "--json"});
    INFO("stderr: " << r.err);
    REQUIRE(r.code == 0);
    CHECK(r.err.find("parallel text, one sentence per line: source 'train.en', target 'train.fr'") != std::string::npos);
    json j = json::parse(r.out);
    CHECK(j.at("corpus_layout") == "parallel");
    CHECK(j.at("corpus") == "train.en + train.fr");
    CHECK(j.at("train_pairs").get<int>() + j.at("val_pairs").get<int>() == 50);
    CHECK(j.at("src_vocab") == 4 + 9 + 4);

    write_file(dir / "short.fr", "Je vois 1 chien .\nJe vois 2 chiens .\n");
    Result mismatch = cli_in(dir, cat({"train", "--data", "train.en", "--target-data", "short.fr"}, quick()));
    CHECK(mismatch.code == 1);
    require_one_error_line(mismatch, "'train.en' and 'short.fr' have different line counts (50 and 2)");
    CHECK(mismatch.err.find("line 3 of 'train.en' ('I see 2 dogs .') has no partner") != std::string::npos);

    Result alone = cli_in(dir, cat({"train", "--target-data", "train.fr", "--task", "reverse"}, quick()));
    CHECK(alone.code == 2);
    require_one_error_line(alone, "--target-data");
    Result cols = cli_in(dir, cat({"train", "--data", "train.en", "--target-data", "train.fr", "--columns", "1,2"}, quick()));
    CHECK(cols.code == 2);
    require_one_error_line(cols, "--columns");
}

TEST_CASE("cli: FIFOs, devices, UTF-16 and CR-only files are refused at once", "[cli][corpus][bounded]") {
    TempDir dir;
    REQUIRE(::mkfifo((dir / "fifo.tsv").c_str(), 0600) == 0);
    Result fifo = cli_in(dir, cat({"train", "--data", "fifo.tsv"}, quick()), 30);
    CHECK(fifo.code == 1);  // not 124: it did not wait for a writer
    require_one_error_line(fifo, "'fifo.tsv' is a FIFO (named pipe), not a regular file");

    Result zero = cli_in(dir, cat({"train", "--data", "/dev/zero"}, quick()), 30);
    CHECK(zero.code == 1);
    require_one_error_line(zero, "'/dev/zero' is a character device");

    write_file(dir / "utf16.tsv", std::string("\xFF\xFEG\0o\0\t\0V\0a\0\n\0", 14));
    Result u16 = cli_in(dir, cat({"train", "--data", "utf16.tsv"}, quick()));
    CHECK(u16.code == 1);
    require_one_error_line(u16, "iconv -f UTF-16 -t UTF-8 'utf16.tsv'");

    write_file(dir / "mac.tsv", "Go.\tVa !\rHi.\tSalut !\r");
    Result mac = cli_in(dir, cat({"train", "--data", "mac.tsv"}, quick()));
    CHECK(mac.code == 1);
    require_one_error_line(mac, "CR-only line endings");
    CHECK(mac.err.find("tr '\\r' '\\n' < 'mac.tsv'") != std::string::npos);
}

TEST_CASE("cli: resuming opens the checkpoint's corpus path with the same checks", "[cli][corpus][bounded]") {
    TempDir dir;
    write_file(dir / "pairs.tsv", challenge_lines(40));
    Result t = cli_in(dir, cat({"train", "--data", "pairs.tsv", "--save", "m.ckpt"}, quick()));
    INFO("stderr: " << t.err);
    REQUIRE(t.code == 0);
    // The corpus is still a file: resuming reads it.
    Result ok = cli_in(dir, {"train", "--resume", "m.ckpt", "--epochs", "2", "--max-batches", "3", "--json", "-q"});
    INFO("stderr: " << ok.err);
    CHECK(ok.code == 0);
    // Now a FIFO with no writer: refused, without waiting.
    REQUIRE(::unlink((dir / "pairs.tsv").c_str()) == 0);
    REQUIRE(::mkfifo((dir / "pairs.tsv").c_str(), 0600) == 0);
    Result fifo = cli_in(dir, {"train", "--resume", "m.ckpt", "--epochs", "2", "-q"}, 30);
    CHECK(fifo.code == 1);
    require_one_error_line(fifo, "--resume: the checkpoint's corpus: 'pairs.tsv' is a FIFO");
    // A link to /dev/zero: refused, before reading a byte.
    REQUIRE(::unlink((dir / "pairs.tsv").c_str()) == 0);
    REQUIRE(::symlink("/dev/zero", (dir / "pairs.tsv").c_str()) == 0);
    Result zero = cli_in(dir, {"train", "--resume", "m.ckpt", "--epochs", "2", "-q"}, 30);
    CHECK(zero.code == 1);
    require_one_error_line(zero, "'pairs.tsv' is a character device");
}

TEST_CASE("cli: --max-pairs stops reading a big file early, --max-vocab caps the vocabularies",
          "[cli][corpus][bounded]") {
    TempDir dir;
    {
        std::ofstream out(dir / "big.tsv", std::ios::binary);
        for (int i = 0; i < 600000; ++i)
            out << "sentence " << i % 5000 << " number " << i << " .\tphrase " << i % 5000 << " numéro " << i << " .\n";
    }
    struct stat st {};
    REQUIRE(::stat((dir / "big.tsv").c_str(), &st) == 0);
    REQUIRE(st.st_size > 25'000'000);
    Result r = cli_in(dir, cat({"train", "--data", "big.tsv", "--max-pairs", "1000", "--max-vocab", "50"}, quick()));
    INFO("stderr: " << r.err);
    REQUIRE(r.code == 0);
    json j = json::parse(r.out);
    CHECK(j.at("corpus_lines_read") == 1000);  // the rest of the file was not read
    CHECK(j.at("train_pairs").get<int>() + j.at("val_pairs").get<int>() == 1000);
    CHECK(j.at("src_vocab") == 4 + 50);
    CHECK(j.at("tgt_vocab") == 4 + 50);
    CHECK(j.at("train").at("max_vocab") == 50);
    Result capped_off = cli_in(dir, cat({"train", "--data", "big.tsv", "--max-pairs", "1000"}, quick()));
    REQUIRE(capped_off.code == 0);
    CHECK(json::parse(capped_off.out).at("src_vocab").get<int>() > 4 + 50);
    Result bad = cli_in(dir, cat({"train", "--task", "reverse", "--max-vocab", "-1"}, quick()));
    CHECK(bad.code == 2);
    require_one_error_line(bad, "--max-vocab");
}
