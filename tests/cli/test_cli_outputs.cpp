// attnviz-cli against issue 40's audit, items 4 and 5: an output path that is the same
// file as an input (the same path, a hard link, a symbolic link) or as another output is
// refused before any work, every path is checked up front (empty, an input not UTF-8), a
// wrong --method or a negative step is one short usage line, a vocabulary with any control
// or line-separating character is refused, and what a message repeats of the user's input
// is quoted: escaped and short.
#include <unistd.h>

#include "catch_torch.hpp"

#include <set>

#include <nlohmann/json.hpp>

#include "app/cli_app.hpp"
#include "app/cli_common.hpp"
#include "checkpoint_edit.hpp"
#include "cli_support.hpp"

using nlohmann::json;
using namespace attnviz_cli_test;
using Editable = attnviz::testing::EditableCheckpoint;

namespace {

/// Whether stderr holds a byte a terminal would act on, other than the line ends.
bool raw_control(const std::string& text) {
    for (size_t i = 0; i < text.size(); ++i) {
        const auto b = static_cast<unsigned char>(text[i]);
        if ((b < 0x20 && b != '\n') || b == 0x7f) return true;
        if (b == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) <= 0x9f) return true;
        if (text.compare(i, 3, "\xe2\x80\xa8") == 0 || text.compare(i, 3, "\xe2\x80\xa9") == 0) return true;
    }
    return false;
}

/// A usage error: exit 2 and one short line that names `what`.
void require_usage_line(const Result& r, const std::string& what) {
    CHECK(r.code == 2);
    require_one_error_line(r, what);
    CHECK(r.err.size() < 400);
    CHECK_FALSE(raw_control(r.err));
}

}  // namespace

TEST_CASE("cli: an output that is the same file as an input or another output is refused before any work",
          "[cli][hostile][paths]") {
    TempDir dir;
    const std::string model = train_tiny(dir);
    const std::string before = read_file(model);
    REQUIRE(::symlink(model.c_str(), (dir / "link.ckpt").c_str()) == 0);
    REQUIRE(::link(model.c_str(), (dir / "hard.ckpt").c_str()) == 0);
    write_file(dir / "pairs.tsv", "a b\tb a\nc d\td c\n");
    REQUIRE(::symlink((dir / "pairs.tsv").c_str(), (dir / "pairs-link.tsv").c_str()) == 0);
    const std::vector<std::vector<std::string>> over_input = {
        {"translate", "--model", model, "--html-out", model, "a b"},  // the audit's case
        {"translate", "--model", model, "--html-out", dir / "link.ckpt", "a b"},
        {"translate", "--model", model, "--html-out", dir / "hard.ckpt", "a b"},
        {"translate", "--model", dir / "link.ckpt", "--attention-out", dir / "hard.ckpt", "a b"},
        {"translate", "--model", model, "--beam-tree", dir / "hard.ckpt", "a b"},
        {"translate", "--model", model, "--alignment-out", model, "a b"},
        {"attribute", "--model", model, "--out", dir / "link.ckpt", "a b"},
        {"attribute", "--model", model, "--html-out", model, "a b"},
        {"compare-attention", "--model", model, "--with", dir / "model2.ckpt", "--out", dir / "hard.ckpt", "a b"},
        {"export-model", "--model", model, "--out", dir / "link.ckpt"},
        {"train", "--init-from", model, "--data", dir / "pairs.tsv", "--save", dir / "hard.ckpt", "--epochs", "1"},
        {"train", "--data", dir / "pairs.tsv", "--save", dir / "pairs-link.tsv", "--epochs", "1"},
        {"eval", "--model", model, "--data", dir / "pairs.tsv", "--split", "all", "--alignments", dir / "pairs.tsv",
         "--json"},  // two inputs may be the same file
    };
    for (size_t i = 0; i < over_input.size(); ++i) {
        const auto& args = over_input[i];
        INFO("case " << i << ": " << args[0]);
        Result r = cli(dir, args);
        if (args[0] == "eval") {  // no output: nothing to refuse (it fails later, reading pairs.tsv as gold)
            CHECK(r.err.find("same file") == std::string::npos);
            continue;
        }
        require_usage_line(r, "is the same file as");
        CHECK(read_file(model) == before);
        CHECK(read_file(dir / "pairs.tsv") == "a b\tb a\nc d\td c\n");
    }
    // Two outputs over one file: neither is written.
    Result two = cli(dir, {"translate", "--model", model, "--attention-out", dir / "a.json", "--beam-tree",
                           dir / "./a.json", "a b"});
    require_usage_line(two, "are the same file");
    CHECK_FALSE(exists(dir / "a.json"));
    write_file(dir / "b.json", "{}");
    REQUIRE(::link((dir / "b.json").c_str(), (dir / "b2.json").c_str()) == 0);
    require_usage_line(cli(dir, {"translate", "--model", model, "--attention-out", dir / "b.json", "--html-out",
                                 dir / "b2.json", "a b"}),
                       "are the same file");
    CHECK(read_file(dir / "b.json") == "{}");
    // Allowed: a checkpoint trained on in place, as docs/models.md shows (read whole, written atomically).
    Result resumed = cli(dir, {"train", "--resume", dir / "hard.ckpt", "--epochs", "4", "--save", model, "-q"});
    INFO("stderr: " << resumed.err);
    CHECK(resumed.code == 0);
    CHECK(read_file(model) != before);
}

TEST_CASE("cli: every path is checked up front, and a wrong method or a negative step is one short usage line",
          "[cli][hostile][paths]") {
    TempDir dir;
    const std::string model = train_tiny(dir);
    for (const char* flag : {"--html-out", "--attention-out", "--beam-tree", "--alignment-out"})
        require_usage_line(cli(dir, {"translate", "--model", model, flag, "", "a b"}),
                           std::string(flag) + ": the path is empty");
    require_usage_line(cli(dir, cat({"train", "--task", "reverse", "--epochs", "1", "--save", ""}, tiny())),
                       "--save: the path is empty");
    require_usage_line(cli(dir, {"translate", "--model", "", "a b"}), "--model: the path is empty");
    // An input path that is not UTF-8 would end in a JSON library's message after all the work
    // (the page names the model): refused first. An output path may be any bytes.
    const std::string latin1 = dir / "mod\xe8le.ckpt";
    write_file(latin1, read_file(model));
    require_usage_line(cli(dir, {"translate", "--model", latin1, "--html-out", dir / "p.html", "a b"}),
                       "mod\\xE8le.ckpt': the path is not UTF-8");
    CHECK_FALSE(exists(dir / "p.html"));
    Result out = cli(dir, {"translate", "--model", model, "--attention-out", dir / "att\xe8.json", "a b"});
    CHECK(out.code == 0);
    CHECK(exists(dir / "att\xe8.json"));
    // An output that cannot be written: refused before the model is even read.
    Result missing_dir = cli(dir, {"translate", "--model", dir / "no-such.ckpt", "--html-out", dir / "no/such/p.html"});
    CHECK(missing_dir.code == 1);
    require_one_error_line(missing_dir, "--html-out: cannot write");
    // "all" does not hide a wrong name after it.
    require_usage_line(cli(dir, {"attribute", "--model", model, "--method", "all,junk", "a b"}), "'junk'");
    require_usage_line(cli(dir, {"attribute", "--model", model, "--method", "junk,all", "a b"}), "'junk'");
    require_usage_line(cli(dir, {"agreement", "--model", model, "--task", "reverse", "--method", "saliency,,occlusion"}),
                       "''");
    require_usage_line(cli(dir, {"translate", "--model", model, "--intervene", "uniform", "--intervene-at", "-3", "a b"}),
                       "--intervene-at: expected an integer >= 0, got '-3'");
}

TEST_CASE("cli: messages that repeat what was typed quote it, escaped and short", "[cli][hostile][message]") {
    TempDir dir;
    const std::string model = train_tiny(dir);
    write_file(dir / "pairs.tsv", "a b\tb a\n");
    const std::string esc = "\x1b[31mRED\x1b]0;title\x07\xc2\x9b" "2J\xe2\x80\xa8";
    const std::vector<std::vector<std::string>> cases = {
        {"attribute", "--model", model, "--contrast", "0:" + esc, "a b"},                    // the audit's case
        {"attribute", "--model", model, "--contrast", esc + std::string(100000, 'A'), "a b"}, // echoed whole before
        {"attribute", "--model", model, "--method", esc, "a b"},
        {"translate", "--model", model, "--device", esc, "a b"},
        {"translate", "--model", model, "--intervene", "zero=" + esc, "a b"},
        {"translate", "--model", dir / (esc + ".ckpt"), "a b"},
        {"train", "--task", esc, "--epochs", "1"},
        {"train", "--data", dir / (esc + ".tsv"), "--epochs", "1"},
        {"eval", "--model", model, "--data", dir / "pairs.tsv", "--columns", esc},
        {"compare", "--task", "reverse", "--vary", esc},
    };
    for (size_t i = 0; i < cases.size(); ++i) {
        INFO("case " << i);
        Result r = cli(dir, cases[i]);
        INFO("stderr: " << r.err);
        CHECK(r.code != 0);
        CHECK(lines_of(r.err).size() == 1);
        CHECK_FALSE(raw_control(r.err));
        CHECK(r.err.size() < 1000);
    }
    // Words missing from the vocabulary, reported on stderr (--show-unk): quoted one by one.
    Result unk = cli(dir, {"translate", "--model", model, "--show-unk", "a zz\x1b[2Jzz b"});
    CHECK(unk.code == 0);
    CHECK_FALSE(raw_control(unk.err));
}

TEST_CASE("cli: a vocabulary token with any control or line-separating character is refused on load",
          "[cli][hostile][vocab]") {
    TempDir dir;
    const std::string model = train_tiny(dir);
    const std::vector<std::pair<const char*, std::string>> chars = {
        {"vertical tab", "\x0b"},  {"form feed", "\x0c"},        {"escape", "\x1b[2J"},  {"tab", "\t"},
        {"NEL", "\xc2\x85"},       {"CSI", "\xc2\x9b"},          {"DEL", "\x7f"},        {"bell", "\x07"},
        {"U+2028", "\xe2\x80\xa8"}, {"U+2029", "\xe2\x80\xa9"},
    };
    for (const char* side : {"src_vocab", "tgt_vocab"})
        for (const auto& [name, c] : chars) {
            INFO(side << ", " << name);
            {
                Editable e(model);
                json v = json::parse(e.metadata.at(side));
                v[5] = v[5].get<std::string>() + c + "X";
                e.metadata[side] = v.dump();
                e.write(dir / "crafted.ckpt");
            }
            Result r = cli(dir, {"translate", "--model", dir / "crafted.ckpt"}, "a b c\nc b a\n");
            CHECK(r.code == 1);
            require_one_error_line(r, "control character");
            CHECK_FALSE(raw_control(r.err));
        }
}

TEST_CASE("cli: every flag that names a file is known to the up-front check", "[cli][paths]") {
    using namespace attnviz::cli;
    const auto app = make_cli_app();
    std::set<std::string> seen;
    for (const Command& c : app->commands)
        for (const CLI::Option* opt : c.app->get_options()) {
            const std::string flag = flag_name(*opt), type = opt->get_type_name();
            const FileRole role = file_role(c.app->get_name(), flag);
            if (role != FileRole::none) seen.insert(flag);
            const bool names_a_file = type.find("FILE") != std::string::npos || type == "MODEL" ||
                                      (flag.size() > 4 && flag.compare(flag.size() - 4, 4, "-out") == 0);
            INFO(c.app->get_name() << " " << flag << " " << type);
            if (names_a_file) CHECK(role != FileRole::none);
        }
    for (const char* flag : {"--model", "--with", "--data", "--target-data", "--resume", "--init-from", "--alignments",
                             "OLD", "--save", "--out", "--attention-out", "--beam-tree", "--html-out", "--alignment-out",
                             "--curves", "--memory-log", "NEW"})
        CHECK(seen.count(flag) == 1);
    CHECK(file_role("translate", "--max-length") == FileRole::none);
    // export's --out may name a folder (a Hugging Face model): asked as main asks, by the
    // command's own name (its alias export-model is not what get_name() returns).
    bool found_export = false;
    for (const Command& c : app->commands)
        if (c.app->check_name("export-model")) {
            found_export = true;
            CHECK(file_role(c.app->get_name(), "--out") == FileRole::output_file_or_folder);
        }
    CHECK(found_export);
}
