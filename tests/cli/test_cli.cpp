// attnviz-cli, run as a user would: a subprocess with its output in temporary
// files. Models are tiny and train for a few epochs: these tests check the
// tool's plumbing (files, formats, exit codes), the learning tests check learning.
#include <dlfcn.h>
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "catch_torch.hpp"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/decode/beam_tree.hpp"
#include "core/config/config.hpp"
#include "core/analysis/export.hpp"
#include "core/config/registry.hpp"
#include "core/model/mkl_dispatch.hpp"
#include "cli_support.hpp"

using nlohmann::json;

using namespace attnviz_cli_test;

TEST_CASE("cli: --help, --version and tasks", "[cli]") {
    TempDir dir;
    Result help = cli(dir, {"--help"});
    CHECK(help.code == 0);
    for (const char* cmd : {"train", "translate", "eval", "bench", "compare", "tasks"})
        CHECK(help.out.find(cmd) != std::string::npos);
    Result train_help = cli(dir, {"train", "--help"});
    CHECK(train_help.code == 0);
    for (const char* flag : {"--scoring", "--teacher-forcing", "--bidirectional", "--resume", "--json", "--steps"})
        CHECK(train_help.out.find(flag) != std::string::npos);

    Result version = cli(dir, {"--version"});
    CHECK(version.code == 0);
    CHECK(version.out.rfind("attnviz-cli ", 0) == 0);

    Result tasks = cli(dir, {"tasks", "--json"});
    REQUIRE(tasks.code == 0);
    json j = json::parse(tasks.out);
    std::vector<std::string> names;
    for (const auto& t : j) names.push_back(t.at("name"));
    CHECK((names == std::vector<std::string>{"reverse", "lookup", "dates", "toy-french"}));
    Result plain = cli(dir, {"tasks"});
    CHECK(lines_of(plain.out).size() == 4);
}

namespace {

/// attnviz-cli run under `env ENV_ARGS` (e.g. "ATTNVIZ_CUDA=1", "-u ATTNVIZ_CUDA"), --version by default.
Result cli_under(const TempDir& dir, const std::string& env_args, const std::vector<std::string>& args = {"--version"}) {
    return run_command(dir, "env " + env_args + " " + quote(ATTNVIZ_CLI_PATH), args);
}

}  // namespace

TEST_CASE("cli: --version names MKL's code path: a vector one on an AMD CPU with AVX2 and FMA, MKL's own "
          "choice with ATTNVIZ_MKL_INTEL_PATHS=0",
          "[cli]") {
    TempDir dir;
    const Result on = cli_under(dir, "-u ATTNVIZ_MKL_INTEL_PATHS");
    REQUIRE(on.code == 0);
    INFO(on.out);
    const auto mkl_path = [](const std::string& out) {
        const std::string key = "\nMKL code path: ";
        const auto at = out.find(key);
        return at == std::string::npos ? std::string() : out.substr(at + key.size(), out.find('\n', at + 1) - at - key.size());
    };
    if (mkl_path(on.out).empty()) {
        WARN("this LibTorch carries no MKL: no line to check");
        return;
    }
    // This test process decides as the CLI does (the same CPU, no ATTNVIZ_MKL_INTEL_PATHS here).
    if (attnviz::mkl_intel_paths_enabled()) {
        CHECK(mkl_path(on.out) != "generic");
        const Result off = cli_under(dir, "ATTNVIZ_MKL_INTEL_PATHS=0");
        REQUIRE(off.code == 0);
        INFO(off.out);
        CHECK(mkl_path(off.out) == "generic");  // MKL's own choice on AMD
    }
}

TEST_CASE("cli: LibTorch's CUDA library is loaded where an NVIDIA driver is, ATTNVIZ_CUDA overrides, and "
          "--version says which",
          "[cli]") {
    TempDir dir;
    const Result forced = cli_under(dir, "ATTNVIZ_CUDA=1");
    REQUIRE(forced.code == 0);
    INFO(forced.out << forced.err);
    if (forced.out.find("CUDA: none:") != std::string::npos) {
        WARN("this LibTorch has no CUDA library: nothing to load");
        return;
    }
    // Loaded even without a driver: the library, its kernels (aten::add's for CUDA) and hooks registered.
    CHECK((forced.out.find("CUDA: loaded (CUDA runtime ") != std::string::npos ||
           forced.out.find("CUDA: linked (CUDA runtime ") != std::string::npos));
    CHECK(forced.err.empty());
    const Result plain = cli_under(dir, "-u ATTNVIZ_CUDA");
    REQUIRE(plain.code == 0);
    const bool driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) != nullptr;
    if (forced.out.find("CUDA: loaded") != std::string::npos) {  // built to load it on demand
        CHECK(plain.out.find(driver ? "CUDA: loaded (CUDA runtime " : "CUDA: not loaded: no NVIDIA driver") !=
              std::string::npos);
        const Result off = cli_under(dir, "ATTNVIZ_CUDA=0");
        CHECK(off.out.find("CUDA: not loaded: ATTNVIZ_CUDA=0") != std::string::npos);
        // CUDA asked for where it is not loaded: one line saying why.
        const Result cuda = cli_under(dir, "ATTNVIZ_CUDA=0",
                                      {"train", "--task", "reverse", "--pairs", "50", "--epochs", "1", "--device", "cuda",
                                       "--save", dir / "m.ckpt", "-q"});
        CHECK(cuda.code == 2);  // a usage error, as every unusable --device
        require_one_error_line(cuda, "(CUDA: not loaded: ATTNVIZ_CUDA=0; use --device cpu or auto)");
        CHECK_FALSE(exists(dir / "m.ckpt"));
    }
}

TEST_CASE("cli: train -> translate -> eval round trip, then resume", "[cli]") {
    TempDir dir;
    std::string ckpt = dir / "reverse.ckpt";
    Result train = cli(dir, cat({"train", "--task", "reverse", "--pairs", "300", "--epochs", "3", "--seed", "1",
                                 "--save", ckpt, "--json"},
                                tiny()));
    INFO("stderr: " << train.err);
    REQUIRE(train.code == 0);
    json t = json::parse(train.out);  // one JSON object, nothing else on stdout
    CHECK(t.at("stop_reason") == "finished");
    CHECK(t.at("epochs") == 3);
    for (const char* k : {"train_loss", "val_loss", "val_accuracy", "val_bleu", "tokens_per_second", "seconds"})
        REQUIRE(t.at(k).is_number());
    CHECK(t.at("device").get<std::string>().rfind("cpu", 0) == 0);
    CHECK(t.at("saved") == ckpt);
    CHECK(t.at("val_accuracy").get<double>() >= 0.0);
    CHECK(t.at("val_accuracy").get<double>() <= 1.0);
    CHECK(t.at("tokens_per_second").get<double>() > 0.0);
    REQUIRE(exists(ckpt));

    Result tr = cli(dir, {"translate", "--model", ckpt, "a b c", "d e f g h"});
    INFO("stderr: " << tr.err);
    REQUIRE(tr.code == 0);
    CHECK(lines_of(tr.out).size() == 2);

    // eval --split val re-derives training's held-out pairs: same loss as training reported.
    Result ev = cli(dir, {"eval", "--model", ckpt, "--task", "reverse", "--pairs", "300", "--json"});
    INFO("stderr: " << ev.err);
    REQUIRE(ev.code == 0);
    json e = json::parse(ev.out);
    CHECK(e.at("split") == "val");
    CHECK(e.at("pairs") == 30);
    CHECK(e.at("val_loss").get<double>() == Approx(t.at("val_loss").get<double>()).epsilon(1e-4));
    for (const char* k : {"accuracy", "token_accuracy"}) {
        CHECK(e.at(k).get<double>() >= 0.0);
        CHECK(e.at(k).get<double>() <= 1.0);
    }
    CHECK(e.at("bleu").get<double>() >= 0.0);
    CHECK(e.at("bleu").get<double>() <= 100.0);
    Result ev_all = cli(dir, {"eval", "--model", ckpt, "--task", "reverse", "--pairs", "300", "--split", "all"});
    CHECK(ev_all.code == 0);
    CHECK(ev_all.out.find("BLEU") != std::string::npos);

    // Resuming continues the epoch count; the model's shape cannot change.
    std::string ckpt2 = dir / "reverse2.ckpt";
    Result re = cli(dir, {"train", "--resume", ckpt, "--epochs", "4", "--save", ckpt2, "--json", "-q"});
    INFO("stderr: " << re.err);
    REQUIRE(re.code == 0);
    json r = json::parse(re.out);
    CHECK(r.at("epochs") == 4);
    CHECK(r.at("epochs_this_run") == 1);
    CHECK(exists(ckpt2));
    Result bad = cli(dir, {"train", "--resume", ckpt, "--hidden", "64", "--epochs", "5"});
    CHECK(bad.code == 2);
    require_one_error_line(bad, "--hidden");
}

TEST_CASE("cli: translate reads stdin in order, --attention-out JSON", "[cli]") {
    TempDir dir;
    std::string ckpt = train_tiny(dir);
    const std::string input = "a b c\n\nd e f g\nh i\r\n";  // a blank line and a CRLF line
    Result from_stdin = cli(dir, {"translate", "--model", ckpt, "--attention-out", dir / "att.json"}, input);
    INFO("stderr: " << from_stdin.err);
    REQUIRE(from_stdin.code == 0);
    auto lines = lines_of(from_stdin.out);
    REQUIRE(lines.size() == 4);
    CHECK(lines[1].empty());  // an empty sentence gives an empty line, not a crash

    Result from_args = cli(dir, {"translate", "--model", ckpt, "a b c", "", "d e f g", "h i"});
    REQUIRE(from_args.code == 0);
    CHECK(from_args.out == from_stdin.out);

    json att = json::parse(read_file(dir / "att.json"));
    REQUIRE(att.is_array());
    REQUIRE(att.size() == 4);  // one entry per sentence, in input order
    const std::vector<std::string> inputs{"a b c", "", "d e f g", "h i"};
    for (size_t i = 0; i < att.size(); ++i) {
        CHECK(att[i].at("sentence") == i);
        CHECK(att[i].at("input") == inputs[i]);
        CHECK(att[i].at("text") == lines[i]);
        if (inputs[i].empty()) continue;
        auto source = att[i].at("source").get<std::vector<std::string>>();
        auto output = att[i].at("output").get<std::vector<std::string>>();
        auto weights = att[i].at("weights").get<std::vector<std::vector<float>>>();
        CHECK(weights.size() == output.size());
        check_rows_sum_to_one(weights, source.size());
        CHECK(source.back() == "<eos>");
    }

    Result unk = cli(dir, {"translate", "--model", ckpt, "--show-unk", "a zebra b"});
    REQUIRE(unk.code == 0);
    CHECK(unk.err.find("zebra") != std::string::npos);
}

TEST_CASE("cli: --attention-out CSV and N-best", "[cli]") {
    TempDir dir;
    std::string ckpt = train_tiny(dir);
    std::string csv_path = dir / "att.csv";
    Result r = cli(dir, {"translate", "--model", ckpt, "--beam", "3", "--nbest", "2", "--attention-out", csv_path},
                   "a b c\nd e f\n");
    INFO("stderr: " << r.err);
    REQUIRE(r.code == 0);
    auto lines = lines_of(r.out);
    REQUIRE(lines.size() == 4);  // two hypotheses per sentence
    CHECK(lines[0].rfind("0 ||| ", 0) == 0);
    CHECK(lines[2].rfind("1 ||| ", 0) == 0);

    // Tables separated by one blank line, one per sentence and hypothesis.
    std::vector<std::string> blocks{""};
    for (const auto& line : lines_of(read_file(csv_path))) {
        if (line.empty()) {
            blocks.emplace_back();
            continue;
        }
        blocks.back() += line + "\n";
    }
    REQUIRE(blocks.size() == 4);
    for (const auto& b : blocks) {
        attnviz::AttentionTable t = attnviz::parse_attention_csv(b);
        CHECK(t.output.size() == t.weights.size());
        check_rows_sum_to_one(t.weights, t.source.size());
    }

    // --attention-format overrides the extension.
    Result forced = cli(dir, {"translate", "--model", ckpt, "--attention-out", dir / "att.txt", "--attention-format",
                              "csv", "a b"});
    REQUIRE(forced.code == 0);
    attnviz::AttentionTable t = attnviz::parse_attention_csv(read_file(dir / "att.txt"));
    check_rows_sum_to_one(t.weights, t.source.size());
}

TEST_CASE("cli: bad input gives one error line and the documented exit code", "[cli]") {
    TempDir dir;
    SECTION("missing checkpoint: 1") {
        Result r = cli(dir, {"translate", "--model", dir / "nope.ckpt", "a b"});
        CHECK(r.code == 1);
        require_one_error_line(r, "nope.ckpt");
    }
    SECTION("corrupt checkpoint: 1") {
        std::string garbage;
        for (int i = 0; i < 4096; ++i) garbage += char((i * 7919 + 13) & 0xff);
        write_file(dir / "garbage.ckpt", garbage);
        Result r = cli(dir, {"translate", "--model", dir / "garbage.ckpt", "a b"});
        CHECK(r.code == 1);
        require_one_error_line(r, "garbage.ckpt");
        Result e = cli(dir, {"eval", "--model", dir / "garbage.ckpt", "--task", "reverse"});
        CHECK(e.code == 1);
        require_one_error_line(e, "garbage.ckpt");
    }
    SECTION("missing data file: 1") {
        Result r = cli(dir, {"train", "--data", dir / "missing.tsv", "--epochs", "1"});
        CHECK(r.code == 1);
        require_one_error_line(r, "missing.tsv");
    }
    SECTION("unknown task: 2") {
        Result r = cli(dir, {"train", "--task", "nosuch", "--epochs", "1"});
        CHECK(r.code == 2);
        require_one_error_line(r, "nosuch");
    }
    SECTION("bad flag values: 2") {
        Result r = cli(dir, {"train", "--task", "reverse", "--hidden", "abc"});
        CHECK(r.code == 2);
        require_one_error_line(r, "--hidden");
        Result s = cli(dir, {"train", "--task", "reverse", "--scoring", "cosine"});
        CHECK(s.code == 2);
        require_one_error_line(s, "cosine");
        Result b = cli(dir, {"translate", "--model", "x.ckpt", "--beam", "many", "a"});
        CHECK(b.code == 2);
        require_one_error_line(b, "--beam");
        Result lr = cli(dir, {"train", "--task", "reverse", "--lr", "-1"});
        CHECK(lr.code == 2);
        require_one_error_line(lr, "--lr");
    }
    SECTION("unknown flag, no command, missing required: 2") {
        Result r = cli(dir, {"train", "--task", "reverse", "--frobnicate"});
        CHECK(r.code == 2);
        require_one_error_line(r, "frobnicate");
        Result n = cli(dir, {});
        CHECK(n.code == 2);
        require_one_error_line(n, "");
        Result m = cli(dir, {"translate", "a b"});
        CHECK(m.code == 2);
        require_one_error_line(m, "--model");
        Result d = cli(dir, {"train", "--epochs", "1"});
        CHECK(d.code == 2);
        require_one_error_line(d, "--task");
    }
    SECTION("nothing half-written") {
        // A --save into a missing directory fails before training.
        Result s = cli(dir, {"train", "--task", "reverse", "--save", dir / "no/such/dir/m.ckpt"});
        CHECK(s.code == 1);
        require_one_error_line(s, "no/such/dir");
        // An attention file with an unknown format is refused before anything is written.
        std::string ckpt = train_tiny(dir);
        Result a = cli(dir, {"translate", "--model", ckpt, "--attention-out", dir / "att.xyz", "a b"});
        CHECK(a.code == 2);
        require_one_error_line(a, "att.xyz");
        CHECK_FALSE(exists(dir / "att.xyz"));
        // An unwritable attention path leaves no file behind.
        Result w = cli(dir, {"translate", "--model", ckpt, "--attention-out", dir / "missing/att.json", "a b"});
        CHECK(w.code == 1);
        require_one_error_line(w, "att.json");
        CHECK_FALSE(exists(dir / "missing"));
    }
}

TEST_CASE("cli: compare prints a table and writes curves", "[cli]") {
    TempDir dir;
    std::string curves = dir / "curves.csv";
    Result r = cli(dir, cat({"compare", "--task", "reverse", "--pairs", "200", "--epochs", "2", "--vary",
                             "scoring=additive,none", "--curves", curves, "--json"},
                            tiny()));
    INFO("stderr: " << r.err);
    REQUIRE(r.code == 0);
    json j = json::parse(r.out);
    REQUIRE(j.size() == 2);
    CHECK(j[0].at("run") == "scoring=additive");
    CHECK(j[1].at("run") == "scoring=none");
    for (const auto& run : j) {
        CHECK(run.at("status") == "finished");
        CHECK(run.at("val_loss").is_number());
        CHECK(run.at("val_bleu").is_number());
    }
    auto lines = lines_of(read_file(curves));
    REQUIRE(lines.size() == 1 + 2 * 2);
    CHECK(lines[0].rfind("run,epoch,train_loss,val_loss,val_bleu", 0) == 0);
    CHECK(lines[1].rfind("\"scoring=additive\",1,", 0) == 0);

    Result table = cli(dir, cat({"compare", "--task", "reverse", "--pairs", "200", "--epochs", "1", "--vary",
                                 "teacher-forcing=1.0,0.5"},
                                tiny()));
    REQUIRE(table.code == 0);
    auto rows = lines_of(table.out);
    REQUIRE(rows.size() == 3);
    CHECK(rows[0].find("val_loss") != std::string::npos);
    CHECK(rows[2].rfind("teacher-forcing=0.5", 0) == 0);

    Result bad = cli(dir, {"compare", "--task", "reverse", "--vary", "colour=red,blue"});
    CHECK(bad.code == 2);
    require_one_error_line(bad, "colour");
}

TEST_CASE("cli: Ctrl+C stops training cleanly and still saves", "[cli]") {
    TempDir dir;
    std::string ckpt = dir / "stopped.ckpt", out = dir / "out.json", err = dir / "err.txt";
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        freopen(out.c_str(), "w", stdout);
        freopen(err.c_str(), "w", stderr);
        std::vector<std::string> args{ATTNVIZ_CLI_PATH, "--threads", "1", "train", "--task", "reverse", "--pairs", "300", "--epochs",
                                      "100000", "--save", ckpt, "--json", "--embed", "16", "--hidden", "24",
                                      "--device", "cpu"};
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        execv(argv[0], argv.data());
        _exit(127);
    }
    // Wait for the first epoch line, then interrupt.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (read_file(err).find("epoch 1/") == std::string::npos && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    kill(pid, SIGINT);
    int status = 0;
    waitpid(pid, &status, 0);
    INFO("stderr: " << read_file(err));
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 130);
    json j = json::parse(read_file(out));
    CHECK(j.at("stop_reason") == "stopped");
    CHECK(j.at("saved") == ckpt);
    CHECK(exists(ckpt));
    Result tr = cli(dir, {"translate", "--model", ckpt, "a b c"});
    CHECK(tr.code == 0);
}

TEST_CASE("cli: train and bench on the Tatoeba sample", "[cli][tatoeba]") {
    if (!exists(ATTNVIZ_TATOEBA)) {
        WARN("skipped: " ATTNVIZ_TATOEBA " is absent");
        return;
    }
    TempDir dir;
    Result t = cli(dir, cat({"train", "--data", ATTNVIZ_TATOEBA, "--max-pairs", "400", "--epochs", "1", "--json"},
                            tiny()));
    INFO("stderr: " << t.err);
    REQUIRE(t.code == 0);
    json j = json::parse(t.out);
    CHECK(j.at("train_pairs").get<int>() + j.at("val_pairs").get<int>() == 400);

    Result b = cli(dir, {"bench", "--data", ATTNVIZ_TATOEBA, "--epochs", "1", "--embed", "16", "--hidden", "16",
                         "--layers", "1", "--num-train", "64", "--num-val", "16", "--device", "cpu", "-q"});
    INFO("stderr: " << b.err);
    REQUIRE(b.code == 0);
    json r = json::parse(b.out);
    for (const char* k : {"train_seconds", "target_tokens", "tokens_per_second", "last_val_loss", "threads"})
        CHECK(r.at(k).is_number());
    CHECK(r.at("num_train") == 64);
    CHECK(r.at("num_val") == 16);
    REQUIRE(r.at("samples").size() == 4);
    CHECK(r.at("samples")[0].at("src") == "go .");
    CHECK(r.at("samples")[0].at("ref") == "va !");
    CHECK(r.at("torch").get<std::string>().size() > 0);
}

TEST_CASE("cli: params lists the registry, and a bad value names its flag", "[cli][params]") {
    TempDir dir;
    Result r = cli(dir, {"params", "--json"});
    INFO("stderr: " << r.err);
    REQUIRE(r.code == 0);
    json j = json::parse(r.out);
    REQUIRE(j.is_array());
    REQUIRE(j.size() == attnviz::parameters().size());
    auto entry = [&](const std::string& flag) {
        for (const auto& e : j)
            if (e.at("flag") == flag) return e;
        FAIL("no entry for --" << flag);
        return json();
    };
    for (const auto& e : j)
        for (const char* key : {"name", "flag", "type", "default", "help"}) CHECK(e.contains(key));
    // The CLI, the checkpoint, the core's validation and the GUI form share one range.
    const json dropout = entry("dropout");
    CHECK(dropout.at("name") == "dropout");
    CHECK(dropout.at("max") == 0.99);
    CHECK(dropout.at("max") == *attnviz::find_parameter("dropout").max);
    attnviz::ModelConfig m;
    m.dropout = dropout.at("max").get<double>();
    CHECK_NOTHROW(m.validate());
    m.dropout = 0.995;
    CHECK_THROWS(m.validate());
    CHECK(entry("hidden").at("name") == "hidden_size");
    CHECK(entry("hidden").at("default") == attnviz::ModelConfig{}.hidden_size);
    CHECK(entry("lr").at("min_exclusive") == true);
    CHECK(entry("scoring").at("choices").size() == 5);
    CHECK(entry("patience").at("group") == "training");

    Result plain = cli(dir, {"params"});
    REQUIRE(plain.code == 0);
    CHECK(plain.out.find("--lr-schedule") != std::string::npos);
    CHECK(plain.out.find("[0, 0.99]") != std::string::npos);

    // Out of range: exit code 2, one line naming the flag and what was given.
    Result bad = cli(dir, {"train", "--task", "reverse", "--dropout", "1.5"});
    CHECK(bad.code == 2);
    require_one_error_line(bad, "--dropout: expected a number in [0, 0.99], got '1.5'");
    Result seed = cli(dir, {"train", "--task", "reverse", "--seed", "-1"});
    CHECK(seed.code == 2);
    require_one_error_line(seed, "--seed");
    Result vary = cli(dir, {"compare", "--task", "reverse", "--vary", "lr-factor=0.5,2"});
    CHECK(vary.code == 2);
    require_one_error_line(vary, "--lr-factor");
    // Booleans stay flags and also take a value.
    Result help = cli(dir, {"train", "--help"});
    for (const char* flag : {"--patience", "--keep-best", "--lr-schedule", "--snapshot-every"})
        CHECK(help.out.find(flag) != std::string::npos);
    Result off = cli(dir, cat({"train", "--task", "reverse", "--pairs", "100", "--epochs", "1", "--bidirectional=false",
                               "--keep-best=true", "--json"},
                              tiny()));
    INFO("stderr: " << off.err);
    CHECK(off.code == 0);
}

TEST_CASE("cli: early stopping and keep-best: the saved model is the best epoch's", "[cli][controls]") {
    TempDir dir;
    const std::string ckpt = dir / "best.ckpt";
    Result r = cli(dir, cat({"train", "--task", "reverse", "--pairs", "300", "--epochs", "60", "--seed", "1",
                             "--lr", "0.03", "--patience", "1", "--keep-best", "--save", ckpt, "--json"},
                            tiny()));
    INFO("stderr: " << r.err);
    REQUIRE(r.code == 0);
    json j = json::parse(r.out);
    REQUIRE(j.at("stop_reason") == "early_stop");
    const int best = j.at("best_epoch").get<int>();
    CHECK(j.at("epochs").get<int>() == best + 1);  // patience 1: one epoch without a new best
    CHECK(j.at("epochs").get<int>() < 60);
    CHECK(j.at("kept_epoch").get<int>() == best);
    // The checkpoint holds the best epoch's weights: its validation loss is the best one.
    Result e = cli(dir, {"eval", "--model", ckpt, "--task", "reverse", "--pairs", "300", "--json"});
    INFO("eval stderr: " << e.err);
    REQUIRE(e.code == 0);
    CHECK(json::parse(e.out).at("val_loss").get<double>() ==
          Approx(j.at("best_val_loss").get<double>()).epsilon(1e-4));
}

TEST_CASE("cli: translate --force, --prefix and --topk", "[cli][forced]") {
    TempDir dir;
    const std::string ckpt = train_tiny(dir);
    // The model's own greedy output, forced back, has no divergence and the same log-probability.
    const std::string plain_json = dir / "plain.json";
    Result plain = cli(dir, {"translate", "--model", ckpt, "--attention-out", plain_json, "a b c"});
    REQUIRE(plain.code == 0);
    const std::string own = lines_of(plain.out).at(0);
    const double own_logp = json::parse(read_file(plain_json)).at(0).at("log_prob").get<double>();
    const std::string forced_json = dir / "forced.json";
    Result f = cli(dir, {"translate", "--model", ckpt, "--force", "--topk", "3", "--attention-out", forced_json},
                   "a b c ||| " + own + "\nc b ||| a a a a a a\n");
    INFO("stderr: " << f.err);
    REQUIRE(f.code == 0);
    auto lines = lines_of(f.out);
    REQUIRE(lines.size() == 2);
    CHECK(lines[0].rfind(own + " ||| ", 0) == 0);
    CHECK(lines[0].substr(lines[0].rfind(" ||| ") + 5) == "-1");
    json entries = json::parse(read_file(forced_json));
    REQUIRE(entries.size() == 2);
    CHECK(entries[0].at("log_prob").get<double>() == Approx(own_logp).margin(1e-5));
    CHECK(entries[0].at("first_divergence").is_null());
    CHECK(entries[1].at("forced_steps") == 7);  // six tokens and <eos>
    CHECK(entries[1].at("first_divergence").get<int>() >= 0);  // reversing "c b" is not "a a a ..."
    for (const auto& step : entries[1].at("top_k")) CHECK(step.size() == 3);
    CHECK(entries[1].at("rank").size() == 7);

    Result p = cli(dir, {"translate", "--model", ckpt, "--prefix", "a b c ||| b"});
    REQUIRE(p.code == 0);
    CHECK(lines_of(p.out).at(0).rfind("b", 0) == 0);

    require_one_error_line(cli(dir, {"translate", "--model", ckpt, "--force", "no bars here"}), "SOURCE ||| TARGET");
    CHECK(cli(dir, {"translate", "--model", ckpt, "--force", "a ||| b"}).code == 0);
    // A reference is scored, not searched.
    require_one_error_line(cli(dir, {"translate", "--model", ckpt, "--force", "--beam", "3", "a ||| b"}), "--beam");
    require_one_error_line(cli(dir, {"translate", "--model", ckpt, "--force", "--beam-tree", dir / "t.json", "a ||| b"}),
                           "--beam-tree");
}

TEST_CASE("cli: translate --beam-tree, and --topk and --prefix with beam search", "[cli][beam_tree]") {
    TempDir dir;
    const std::string ckpt = train_tiny(dir);
    const std::string tree_path = dir / "tree.json", att_path = dir / "att.json";
    Result r = cli(dir, {"translate", "--model", ckpt, "--beam", "3", "--nbest", "2", "--topk", "2", "--beam-tree",
                         tree_path, "--attention-out", att_path, "a b c", "", "d e f g"});
    INFO("stderr: " << r.err);
    REQUIRE(r.code == 0);
    auto lines = lines_of(r.out);
    REQUIRE(lines.size() == 4);  // two hypotheses for each non-empty sentence

    // The file parses back; its finished leaves, best first, are the printed N-best list.
    const std::string text = read_file(tree_path);
    std::vector<attnviz::BeamTree> trees = attnviz::parse_beam_trees(text);
    REQUIRE(trees.size() == 3);
    json raw = json::parse(text);
    CHECK(raw[1].at("input") == "");
    CHECK(trees[1].nodes.empty());
    size_t line = 0;
    for (size_t i : {size_t{0}, size_t{2}}) {
        CHECK(raw[i].at("sentence") == i);
        CHECK(trees[i].beam_size == 3);
        REQUIRE(trees[i].finished.size() >= 2);
        for (size_t k = 0; k < 2; ++k, ++line) {
            const auto leaf = trees[i].finished[k];
            std::ostringstream expected;
            expected << i << " ||| " << trees[i].partial_hypothesis(leaf).text << " ||| " << std::fixed
                     << std::setprecision(6) << trees[i].node(leaf).score;
            CHECK(lines[line] == expected.str());
        }
    }
    // --topk with beam search: each hypothesis carries its candidates per step.
    json att = json::parse(read_file(att_path));
    REQUIRE(att.size() == 5);  // 2 + 1 (empty input) + 2
    for (const auto& e : att) {
        if (e.at("input") == "") continue;
        REQUIRE(e.at("top_k").size() == e.at("output").size());
        for (const auto& step : e.at("top_k")) CHECK(step.size() == 2);
        CHECK(e.at("rank").size() == e.at("output").size());
    }

    // --prefix with beam search: N continuations of the same prefix.
    Result p = cli(dir, {"translate", "--model", ckpt, "--prefix", "--beam", "3", "--nbest", "3", "a b c ||| b"});
    INFO("stderr: " << p.err);
    REQUIRE(p.code == 0);
    auto plines = lines_of(p.out);
    REQUIRE(plines.size() == 3);
    for (const auto& l : plines) CHECK(l.rfind("0 ||| b", 0) == 0);

    // Greedy decoding has a tree too (beam width 1); a directory that is not there is refused.
    Result g = cli(dir, {"translate", "--model", ckpt, "--beam-tree", tree_path, "a b"});
    REQUIRE(g.code == 0);
    auto greedy_tree = attnviz::parse_beam_trees(read_file(tree_path));
    REQUIRE(greedy_tree.size() == 1);
    CHECK(greedy_tree[0].partial_hypothesis(greedy_tree[0].finished.at(0)).text == lines_of(g.out).at(0));
    Result bad = cli(dir, {"translate", "--model", ckpt, "--beam-tree", dir / "no/such/dir/t.json", "a b"});
    CHECK(bad.code == 1);
    require_one_error_line(bad, "--beam-tree");

    // bench-decode times the five ways of decoding and prints one JSON object.
    Result bench = cli(dir, {"bench-decode", "--model", ckpt, "--task", "reverse", "--pairs", "20", "--sentences", "8",
                             "--repeat", "1", "--beam", "3", "--topk", "2"});
    INFO("bench stderr: " << bench.err);
    REQUIRE(bench.code == 0);
    json b = json::parse(bench.out);
    CHECK(b.at("sentences") == 8);
    std::vector<std::string> names;
    for (const auto& run : b.at("runs")) {
        names.push_back(run.at("name"));
        CHECK(run.at("median_seconds").get<double>() > 0.0);
    }
    CHECK((names == std::vector<std::string>{"greedy", "greedy+topk", "beam3", "beam3+tree", "beam3+topk"}));
    CHECK(b.at("runs")[3].at("overhead_vs") == "beam3");
    CHECK(b.at("runs")[3].at("tree_nodes").get<int>() > 0);
}

TEST_CASE("cli: compare-attention lines two models up on the same sentences", "[cli][compare_attention]") {
    TempDir dir;
    const std::string a = train_tiny(dir, "a.ckpt");
    Result rb = cli(dir, cat({"train", "--task", "reverse", "--pairs", "300", "--epochs", "3", "--seed", "2", "--scoring",
                              "dot", "--save", dir / "b.ckpt"},
                             tiny()));
    REQUIRE(rb.code == 0);
    const std::string out = dir / "cmp.json";
    Result r = cli(dir, {"compare-attention", "--model", a, "--with", dir / "b.ckpt", "--out", out, "a b c", "d e"});
    INFO("stderr: " << r.err);
    REQUIRE(r.code == 0);
    const auto lines = lines_of(r.out);
    REQUIRE(lines.size() == 2);
    const json j = json::parse(read_file(out));
    REQUIRE(j.size() == 2);
    for (size_t i = 0; i < 2; ++i) {
        CHECK(j[i].at("format") == "attnviz-attention-comparison");
        REQUIRE(j[i].at("comparable") == true);
        const auto& wa = j[i].at("a").at("weights");
        const auto& wb = j[i].at("b_on_a").at("weights");
        const auto& d = j[i].at("difference");
        REQUIRE(d.size() == wa.size());
        double max_abs = 0;
        for (size_t t = 0; t < d.size(); ++t)
            for (size_t s = 0; s < d[t].size(); ++s) {
                CHECK(d[t][s].get<double>() == Approx(wa[t][s].get<double>() - wb[t][s].get<double>()).margin(1e-6));
                max_abs = std::max(max_abs, std::abs(d[t][s].get<double>()));
            }
        CHECK(j[i].at("max_abs_difference").get<double>() == Approx(max_abs).margin(1e-6));
        // The printed line: A ||| B ||| mean ||| max.
        CHECK(lines[i].find(j[i].at("a").at("text").get<std::string>() + " ||| ") == 0);
    }
    // A model compared with itself: no difference at all.
    Result self = cli(dir, {"compare-attention", "--model", a, "--with", a, "a b c"});
    REQUIRE(self.code == 0);
    CHECK(self.out.find("||| 0.000000 ||| 0.000000") != std::string::npos);
    // A missing model: exit 1 with the file named.
    Result bad = cli(dir, {"compare-attention", "--model", a, "--with", dir / "missing.ckpt", "a"});
    CHECK(bad.code == 1);
    CHECK(bad.err.find("missing.ckpt") != std::string::npos);
}
