// attnviz-cli against the third hostile-input audit (issue 27, items 2-10): crafted
// subword models, vocabulary tokens and optimiser state in checkpoints, long pairs,
// output paths that name a FIFO or a device, gold alignments that never end,
// --threads beyond the machine. Every case ends in one error line (or one warning)
// and an exit code, never a crash, a hang or a damaged file.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "catch_torch.hpp"

#include <nlohmann/json.hpp>

#include "checkpoint_edit.hpp"
#include "cli_support.hpp"
#include "proto_fields.hpp"
#include "core/io/base64.hpp"
#include "core/text/tokenizer.hpp"

using nlohmann::json;
using namespace attnviz_cli_test;
using Editable = attnviz::testing::EditableCheckpoint;
using attnviz::testing::bytes_field;

namespace {

/// Runs attnviz-cli under `timeout` (a hang fails the test instead of stopping the suite)
/// and, with vm_kb, a virtual memory limit (a runaway allocation fails instead of swapping).
Result bounded_cli(const TempDir& dir, const std::vector<std::string>& args, long vm_kb = 0) {
    std::string command = "timeout 300 " + quote(ATTNVIZ_CLI_PATH) + " --threads 1";
    if (vm_kb > 0) command = "ulimit -v " + std::to_string(vm_kb) + "; exec " + command;
    return run_command(dir, command, args);
}

/// A tiny subword model trained by the CLI.
std::string train_subword(const TempDir& dir) {
    std::string text;
    for (int i = 0; i < 40; ++i) text += "the red car sees a dog " + std::to_string(i % 7) + "\tla voiture voit un chien\n";
    write_file(dir / "sw.tsv", text);
    const std::string ckpt = dir / "sw.ckpt";
    Result r = cli(dir, cat({"train", "--data", dir / "sw.tsv", "--level", "subword", "--subword-vocab", "60",
                             "--epochs", "1", "--save", ckpt},
                            tiny()));
    INFO("stderr: " << r.err);
    REQUIRE(r.code == 0);
    CHECK(r.err.find("LOG(") == std::string::npos);  // SentencePiece's trainer kept quiet
    return ckpt;
}

/// The checkpoint with its subword model's bytes extended by `extra` (protocol buffer fields).
void with_subword_fields(const std::string& from, const std::string& to, const std::string& extra) {
    Editable e(from);
    json a = e.attnviz();
    a["tokenizer"]["model"] = attnviz::base64_encode(attnviz::base64_decode(a["tokenizer"]["model"].get<std::string>()) + extra);
    e.set_attnviz(a);
    e.write(to);
}

}  // namespace

TEST_CASE("cli: a crafted subword model in a checkpoint is refused in one line, and SentencePiece keeps quiet",
          "[cli][hostile][sentencepiece]") {
    TempDir dir;
    const std::string ckpt = train_subword(dir);
    // The audit's crash: a normalizer rule table whose trie points outside itself (SIGSEGV).
    with_subword_fields(ckpt, dir / "bad.ckpt",
                        bytes_field(3, bytes_field(1, "nmt_nfkc") + bytes_field(2, attnviz::testing::broken_rule_table())));
    Result r = bounded_cli(dir, {"translate", "--model", dir / "bad.ckpt", "the red car"});
    CHECK(r.code == 1);
    require_one_error_line(r, "nmt_nfkc");
    // Self-test samples that fail: SentencePiece ran them on load and wrote its LOG lines on
    // stderr. They are dropped: the model loads and stderr stays empty.
    with_subword_fields(ckpt, dir / "selftest.ckpt",
                        bytes_field(4, bytes_field(1, bytes_field(1, "the red car") + bytes_field(2, "nope"))));
    Result ok = bounded_cli(dir, {"translate", "--model", dir / "selftest.ckpt", "the red car"});
    INFO("stderr: " << ok.err);
    CHECK(ok.code == 0);
    CHECK(ok.err.empty());
    CHECK(lines_of(ok.out).size() == 1);
}

TEST_CASE("cli: vocabulary tokens that break lines are refused, and messages quote file contents short and escaped",
          "[cli][hostile][vocab]") {
    TempDir dir;
    const std::string ckpt = train_tiny(dir);
    {
        Editable e(ckpt);
        json v = json::parse(e.metadata.at("tgt_vocab"));
        for (size_t i = 4; i < v.size(); ++i) v[i] = v[i].get<std::string>() + "\nINJECTED";
        e.metadata["tgt_vocab"] = v.dump();
        e.write(dir / "lines.ckpt");
    }
    // Two input lines gave five output lines.
    Result r = cli(dir, {"translate", "--model", dir / "lines.ckpt"}, "a b c\nc b a\n");
    CHECK(r.code == 1);
    require_one_error_line(r, "line break");
    {
        Editable e(ckpt);
        json v = json::parse(e.metadata.at("tgt_vocab"));
        v[4] = v[5] = "\x1b[31mEVIL" + std::string(300000, 'A');
        e.metadata["tgt_vocab"] = v.dump();
        e.write(dir / "long.ckpt");
    }
    Result longer = cli(dir, {"translate", "--model", dir / "long.ckpt", "a b"});
    CHECK(longer.code == 1);
    require_one_error_line(longer, "control character");  // refused before it is seen twice (issue 40)
    CHECK(longer.err.size() < 600);
    CHECK(longer.err.find('\x1b') == std::string::npos);
    CHECK(longer.err.find("\\x1B[31mEVIL") != std::string::npos);
}

TEST_CASE("cli: resuming from NaN or negative optimiser state is refused and the checkpoint is left as it was",
          "[cli][hostile][resume]") {
    TempDir dir;
    const std::string ckpt = train_tiny(dir);
    {
        Editable e(ckpt);
        for (auto& [name, t] : e.tensors)
            if (name.size() > 11 && name.compare(name.size() - 11, 11, ".exp_avg_sq") == 0) t.fill_(-1.0f);
        e.write(dir / "x.ckpt");
    }
    const std::string before = read_file(dir / "x.ckpt");
    // It trained on, wrote NaN weights over x.ckpt and said the last good weights were kept.
    Result r = cli(dir, cat({"train", "--resume", dir / "x.ckpt", "--save", dir / "x.ckpt", "--task", "reverse",
                             "--pairs", "300", "--epochs", "5"},
                            tiny()));
    CHECK(r.code == 1);
    require_one_error_line(r, "exp_avg_sq");
    CHECK(read_file(dir / "x.ckpt") == before);
}

TEST_CASE("cli: a pair too long to train is refused with its line, never an abort", "[cli][hostile][memory]") {
    TempDir dir;
    std::string text, side;
    for (int i = 0; i < 2400; ++i) side += i ? " w" : "w";
    for (int line = 1; line <= 30; ++line) text += line == 12 ? side + "\t" + side + "\n" : "a b c\tx y z\n";
    write_file(dir / "long.tsv", text);
    // Unbounded, one step asked for ~6 GB at once: SIGABRT, nothing saved. Under a memory
    // limit, so that a regression fails here instead of taking the machine's memory.
    Result r = bounded_cli(dir, {"train", "--data", dir / "long.tsv", "--epochs", "1", "--save", dir / "m.ckpt", "-q"},
                           8000000);
    INFO("stderr: " << r.err);
    CHECK((r.code == 1 || r.code == 2));
    require_one_error_line(r, "long.tsv, line 12");
    CHECK(r.err.find("--max-length") != std::string::npos);
    CHECK_FALSE(exists(dir / "m.ckpt"));
}

TEST_CASE("cli: outputs refuse a FIFO, a device and a link to one, before any work", "[cli][hostile][outputs]") {
    TempDir dir;
    const std::string ckpt = train_tiny(dir);
    REQUIRE(mkfifo((dir / "fifo.json").c_str(), 0600) == 0);
    REQUIRE(symlink("/dev/null", (dir / "null.json").c_str()) == 0);
    const bool node = mknod((dir / "node.json").c_str(), S_IFCHR | 0600, makedev(1, 3)) == 0;
    std::vector<std::string> targets{dir / "fifo.json", dir / "null.json"};
    if (node) targets.push_back(dir / "node.json");
    for (const auto& target : targets) {
        INFO(target);
        for (const char* flag : {"--attention-out", "--beam-tree", "--alignment-out"}) {
            Result r = bounded_cli(dir, {"translate", "--model", ckpt, flag, target, "a b"});
            CHECK(r.code == 1);
            require_one_error_line(r, "not a regular file");
        }
        Result save = bounded_cli(dir, {"train", "--task", "reverse", "--epochs", "1", "--save", target});
        CHECK(save.code == 1);
        require_one_error_line(save, "not a regular file");  // before training: no data line first
        Result out = bounded_cli(dir, {"export", "--model", ckpt, "--out", target});
        CHECK(out.code == 1);
        require_one_error_line(out, "not a regular file");
    }
    struct stat st;
    REQUIRE(stat((dir / "fifo.json").c_str(), &st) == 0);
    CHECK(S_ISFIFO(st.st_mode));
    REQUIRE(lstat((dir / "null.json").c_str(), &st) == 0);
    CHECK(S_ISLNK(st.st_mode));
    if (node) {
        REQUIRE(stat((dir / "node.json").c_str(), &st) == 0);
        CHECK(S_ISCHR(st.st_mode));
    }
}

TEST_CASE("cli: eval --alignments refuses a FIFO and a device at once", "[cli][hostile][alignment]") {
    TempDir dir;
    write_file(dir / "c.tsv", "a b c\tx y z\nb c a\ty z x\nc a b\tz x y\n");
    const std::string ckpt = dir / "m.ckpt";
    REQUIRE(cli(dir, cat({"train", "--data", dir / "c.tsv", "--epochs", "1", "--save", ckpt}, tiny())).code == 0);
    REQUIRE(mkfifo((dir / "gold.fifo").c_str(), 0600) == 0);
    Result fifo = bounded_cli(dir, {"eval", "--model", ckpt, "--data", dir / "c.tsv", "--alignments", dir / "gold.fifo"});
    CHECK(fifo.code == 1);  // it waited for a writer forever
    require_one_error_line(fifo, "FIFO");
    Result zero = bounded_cli(dir, {"eval", "--model", ckpt, "--data", dir / "c.tsv", "--alignments", "/dev/zero"},
                              8000000);
    CHECK(zero.code == 1);  // it read until memory ran out
    require_one_error_line(zero, "character device");
}

TEST_CASE("cli: --threads beyond the cores is capped with one warning", "[cli][hostile][threads]") {
    TempDir dir;
    Result many = run_command(dir, quote(ATTNVIZ_CLI_PATH), {"--threads", "1000", "tasks"});
    CHECK(many.code == 0);
    INFO("stderr: " << many.err);
    REQUIRE(lines_of(many.err).size() == 1);
    CHECK(many.err.rfind("attnviz-cli: warning: --threads 1000 is more than the ", 0) == 0);
    CHECK(many.err.find("cores") != std::string::npos);
    CHECK_FALSE(many.out.empty());
    Result one = run_command(dir, quote(ATTNVIZ_CLI_PATH), {"--threads", "1", "tasks"});
    CHECK(one.code == 0);
    CHECK(one.err.empty());
    // And --min-delta is a flag of the registry.
    Result params = run_command(dir, quote(ATTNVIZ_CLI_PATH), {"params", "--json"});
    CHECK(params.out.find("\"min_delta\"") != std::string::npos);
}

TEST_CASE("cli: paths with control characters are quoted in what the commands print", "[cli][hostile][message]") {
    TempDir dir;
    const std::string save = dir / "m\x1b[2J\x07.ckpt";
    const Result r = cli(dir, cat({"train", "--task", "reverse", "--pairs", "100", "--epochs", "1", "--save", save},
                                  {"--embed", "8", "--hidden", "8", "--batch", "32", "--device", "cpu"}));
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(r.err.find("saved ") != std::string::npos);
    for (const std::string& text : {r.out, r.err}) {
        CHECK(text.find('\x1b') == std::string::npos);
        CHECK(text.find('\x07') == std::string::npos);
    }
    const Result up = cli(dir, {"upgrade", save, dir / "new\x1b.ckpt"});
    CHECK(up.err.find('\x1b') == std::string::npos);
}
