// The fifth hostile-input audit (issue 46) on model folders, through attnviz-cli as a user runs it:
// no output may land on a file read from a model folder or a hub snapshot (its blobs included),
// and a folder written over another is replaced whole or not at all.
#include "cli_support.hpp"

#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

using namespace attnviz_cli_test;

namespace {

const std::string k_fixtures = ATTNVIZ_HF_FIXTURES;

bool have_fixtures() {
    if (exists(k_fixtures + "/reference.json")) return true;
    WARN("no pretrained fixtures at " << k_fixtures << " (tools/make_hf_fixtures.py needs transformers); skipping");
    return false;
}

/// A copy of a fixture folder (cp -r: POSIX calls, as cli_support.hpp explains).
std::string copy_folder(const TempDir& dir, const std::string& fixture, const std::string& as) {
    const std::string to = dir / as;
    REQUIRE(std::system(("cp -r " + quote(k_fixtures + "/" + fixture) + " " + quote(to)).c_str()) == 0);
    return to;
}

/// Every file of a folder and its bytes.
std::map<std::string, std::string> contents(const std::string& folder) {
    std::map<std::string, std::string> files;
    if (DIR* d = ::opendir(folder.c_str())) {
        while (const dirent* e = ::readdir(d)) {
            const std::string name = e->d_name;
            if (name != "." && name != "..") files[name] = read_file(folder + "/" + name);
        }
        ::closedir(d);
    }
    return files;
}

std::vector<std::string> names_in(const std::string& folder) {
    std::vector<std::string> names;
    for (const auto& [name, _] : contents(folder)) names.push_back(name);
    return names;
}

/// Runs attnviz-cli with `args` (output discarded) and returns its exit code and its own peak
/// resident memory in MB (wait4's rusage: this child alone).
std::pair<int, double> run_measured(const std::vector<std::string>& args) {
    std::vector<std::string> argv{ATTNVIZ_CLI_PATH, "--threads", "1"};
    argv.insert(argv.end(), args.begin(), args.end());
    const pid_t child = ::fork();
    if (child == 0) {
        std::vector<char*> p;
        for (auto& a : argv) p.push_back(a.data());
        p.push_back(nullptr);
        std::freopen("/dev/null", "w", stdout);
        std::freopen("/dev/null", "w", stderr);
        ::execv(p[0], p.data());
        ::_exit(127);
    }
    int status = 0;
    struct rusage usage {};
    ::wait4(child, &status, 0, &usage);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), usage.ru_maxrss / 1024.0};
}

/// Edits a copy of the Marian fixture's config.json with sed-free string surgery: one key's value.
std::string with_config_value(const TempDir& dir, const std::string& as, const std::string& key, const std::string& value) {
    const std::string model = copy_folder(dir, "marian", as);
    std::string config = read_file(model + "/config.json");
    const size_t at = config.find("\"" + key + "\"");
    REQUIRE(at != std::string::npos);
    const size_t colon = config.find(':', at), end = config.find_first_of(",}", colon);
    config.replace(colon + 1, end - colon - 1, " " + value);
    write_file(model + "/config.json", config);
    return model;
}

}  // namespace

TEST_CASE("cli: what config.json promises is checked against the weights before anything is sized from it",
          "[cli][hostile][pretrained][memory]") {
    if (!have_fixtures()) return;
    TempDir dir;
    // The same refusal path with nothing sized: the baseline of a CLI that opens a folder and stops.
    const auto [base_code, base_mb] = run_measured({"translate", "--model", with_config_value(dir, "bad-type", "d_model",
                                                                                             "\"wide\""), "hello"});
    REQUIRE(base_code == 1);
    for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
             {"vocab_size", "1048576"}, {"encoder_layers", "100"}, {"decoder_ffn_dim", "65536"}}) {
        INFO(key << " " << value);
        const std::string model = with_config_value(dir, key, key, value);
        const Result r = cli(dir, {"translate", "--model", model, "hello"});
        CHECK(r.code == 1);
        require_one_error_line(r, "config.json");
        const auto [code, mb] = run_measured({"translate", "--model", model, "hello"});
        CHECK(code == 1);
        CHECK(mb < base_mb + 64);  // before: the tokenizer and the network at the promised size
    }
    const Result vocab = cli(dir, {"translate", "--model", dir / "vocab_size", "hello"});
    CHECK(vocab.err.find("1048576 rows (config.json's vocab_size)") != std::string::npos);
    const Result layers = cli(dir, {"translate", "--model", dir / "encoder_layers", "hello"});
    CHECK(layers.err.find("model.encoder.layers.") != std::string::npos);
}

TEST_CASE("cli: an output on a file of the model folder the command reads is refused, the folder unchanged",
          "[cli][hostile][pretrained][inputs]") {
    if (!have_fixtures()) return;
    TempDir dir;
    const std::string model = copy_folder(dir, "marian", "opus");
    const auto before = contents(model);
    write_file(dir / "pairs.tsv", "hello\thallo\nthe house\tdas haus\n");
    SECTION("heads --out DIR/config.json") {
        const Result r = cli(dir, {"heads", "--model", model, "--out", model + "/config.json"});
        CHECK(r.code == 2);
        require_one_error_line(r, "is in the model folder --model");
    }
    SECTION("train --init-from DIR --save DIR/model.safetensors") {
        const Result r = cli(dir, {"train", "--init-from", model, "--data", dir / "pairs.tsv", "--epochs", "1",
                                   "--save", model + "/model.safetensors", "-q"});
        CHECK(r.code == 2);
        require_one_error_line(r, "--save");
    }
    SECTION("a new file in the folder would be read next time (a tokenizer.json), so it is refused too") {
        const Result r = cli(dir, {"translate", "--model", model, "--attention-out", model + "/tokenizer.json", "hello"});
        CHECK(r.code == 2);
        require_one_error_line(r, "--attention-out");
    }
    SECTION("the same file through another name: a link into the folder") {
        REQUIRE(::symlink(model.c_str(), (dir / "alias").c_str()) == 0);
        const Result r = cli(dir, {"heads", "--model", model, "--out", dir / "alias/vocab.json"});
        CHECK(r.code == 2);
        require_one_error_line(r, "is in the model folder");
    }
    SECTION("export --out a folder that holds the model") {
        const Result r = cli(dir, {"export-model", "--model", model, "--out", dir.path});
        CHECK(r.code == 2);
        require_one_error_line(r, "holds the model folder");
    }
    CHECK(contents(model) == before);
}

TEST_CASE("cli: an output on a hub snapshot's file or its blob is refused", "[cli][hostile][pretrained][hub][inputs]") {
    if (!have_fixtures()) return;
    TempDir dir;
    // The cache as huggingface_hub lays it out: blobs, and the snapshot's files as relative links to them.
    const std::string entry = dir / "hub/models--Tiny-NLP--opus-tiny";
    REQUIRE(std::system(("mkdir -p " + quote(entry + "/blobs") + " " + quote(entry + "/snapshots/abc123") + " " +
                         quote(entry + "/refs")).c_str()) == 0);
    write_file(entry + "/refs/main", "abc123");
    int n = 0;
    for (const auto& [name, bytes] : contents(k_fixtures + "/marian")) {
        const std::string blob = "blob" + std::to_string(n++);
        write_file(entry + "/blobs/" + blob, bytes);
        REQUIRE(::symlink(("../../blobs/" + blob).c_str(), (entry + "/snapshots/abc123/" + name).c_str()) == 0);
    }
    const auto before = contents(entry + "/blobs");
    // A hard link elsewhere to the config's blob: the same file under a name outside the cache.
    char target[4096] = {};
    REQUIRE(::readlink((entry + "/snapshots/abc123/config.json").c_str(), target, sizeof target - 1) > 0);
    const std::string blob_of_config = entry + "/snapshots/abc123/" + target;
    REQUIRE(::link(blob_of_config.c_str(), (dir / "outside.json").c_str()) == 0);
    const std::string env = "HF_HUB_CACHE=" + quote(dir / "hub") + " ";
    for (const std::string& out : {blob_of_config, entry + "/refs/main", dir / "outside.json"}) {
        INFO(out);
        const Result r = run_command(dir, env + quote(ATTNVIZ_CLI_PATH) + " --threads 1",
                                     {"heads", "--model", "Tiny-NLP/opus-tiny", "--out", out});
        CHECK(r.code == 2);
        require_one_error_line(r, "is in the model folder --model 'Tiny-NLP/opus-tiny'");
    }
    CHECK(contents(entry + "/blobs") == before);
    CHECK(read_file(entry + "/refs/main") == "abc123");
}

TEST_CASE("cli: export over another model's folder fails whole on a full disk, and the folder is as it was",
          "[cli][hostile][pretrained][export][disk]") {
    if (!have_fixtures()) return;
    TempDir dir;
    const std::string target = copy_folder(dir, "m2m100", "m2m");
    const auto before = contents(target);
    // dash's ulimit -f counts 512-byte blocks: 64 KiB holds the JSON files, not the weights.
    const Result r = run_command(dir, "ulimit -f 128; exec " + quote(ATTNVIZ_CLI_PATH) + " --threads 1",
                                 {"export-model", "--model", k_fixtures + "/marian", "--out", target});
    INFO(r.err);
    CHECK(r.code == 1);
    CHECK(r.err.find("File too large") != std::string::npos);
    CHECK(contents(target) == before);
    CHECK(names_in(dir.path) == std::vector<std::string>{"m2m", "stderr.txt", "stdout.txt"});
    SECTION("and without the limit the folder is Marian's, whole: no file of the M2M100 model stays") {
        const Result ok = cli(dir, {"export-model", "--model", k_fixtures + "/marian", "--out", target});
        INFO(ok.err);
        REQUIRE(ok.code == 0);
        const auto after = contents(target);
        CHECK(after.count("sentencepiece.bpe.model") == 0);
        CHECK(after.count("source.spm") == 1);
        CHECK(after.at("config.json").find("\"marian\"") != std::string::npos);
        const Result opened = cli(dir, {"translate", "--model", target, "hello"});
        CHECK(opened.code == 0);
    }
}

TEST_CASE("cli: export-model prints the folder it wrote quoted, no control character reaches the terminal",
          "[cli][hostile][pretrained][export][message]") {
    if (!have_fixtures()) return;
    TempDir dir;
    const std::string out = dir / "out\x1b[31m\x07";
    const Result r = cli(dir, {"export-model", "--model", k_fixtures + "/marian", "--out", out});
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(r.out.find('\x1b') == std::string::npos);
    CHECK(r.out.find('\x07') == std::string::npos);
    CHECK(r.out.find("wrote the model folder") != std::string::npos);
}

TEST_CASE("cli: tokenizer_config.json values of the wrong type are one line naming the file and the key",
          "[cli][hostile][pretrained][json]") {
    if (!have_fixtures()) return;
    TempDir dir;
    const struct {
        const char* name;
        const char* from;  // the text replaced in tokenizer_config.json
        const char* to;
        const char* key;
        const char* expected;
    } cases[] = {
        {"clean", "\"backend\"", "\"clean_up_tokenization_spaces\": \"yes\", \"backend\"", "\"clean_up_tokenization_spaces\"",
         "is a string, expected true or false"},
        {"lstrip", "\"lstrip\": false", "\"lstrip\": \"x\"", ".lstrip\"", "is a string, expected true or false"},
        {"special", "\"special\": true", "\"special\": 1", ".special\"", "is a number, expected true or false"},
        {"codes", "\"language_codes\": \"m2m100\"", "\"language_codes\": 5", "\"language_codes\"", "is a number, expected a string"},
        {"src", "\"src_lang\": \"en\"", "\"src_lang\": 5", "\"src_lang\"", "is a number, expected a string"},
    };
    for (const auto& c : cases) {
        INFO(c.name);
        const std::string model = copy_folder(dir, "m2m100", c.name);
        std::string text = read_file(model + "/tokenizer_config.json");
        const size_t at = text.find(c.from);
        REQUIRE(at != std::string::npos);
        text.replace(at, std::string(c.from).size(), c.to);
        write_file(model + "/tokenizer_config.json", text);
        const Result r = cli(dir, {"translate", "--model", model, "hello"});
        CHECK(r.code == 1);
        require_one_error_line(r, "tokenizer_config.json: ");
        CHECK(r.err.find(c.key) != std::string::npos);
        CHECK(r.err.find(c.expected) != std::string::npos);
        CHECK(r.err.find("json.exception") == std::string::npos);
    }
    SECTION("and the same for a tokenizer read from tokenizer.json (issue 47)") {
        for (const char* fixture : {"nllb", "mbart50", "m2m100_json"})
            for (const char* key : {"src_lang", "tgt_lang"}) {
                INFO(fixture << " " << key);
                const std::string model = copy_folder(dir, fixture, std::string(fixture) + "-" + key);
                std::string text = read_file(model + "/tokenizer_config.json");
                const std::string quoted = "\"" + std::string(key) + "\"";
                const size_t at = text.find(quoted);
                REQUIRE(at != std::string::npos);
                const size_t colon = text.find(':', at), end = text.find_first_of(",}", colon);
                text.replace(colon + 1, end - colon - 1, " 5");
                write_file(model + "/tokenizer_config.json", text);
                const Result r = cli(dir, {"translate", "--model", model, "hello"});
                CHECK(r.code == 1);
                require_one_error_line(r, "tokenizer_config.json: ");
                CHECK(r.err.find(quoted + " is a number, expected a string") != std::string::npos);
            }
    }
    SECTION("and a file that does not parse names the line and column") {
        const std::string model = copy_folder(dir, "m2m100", "comma");
        std::string text = read_file(model + "/tokenizer_config.json");
        text.insert(text.rfind('}'), ",");
        write_file(model + "/tokenizer_config.json", text);
        const Result r = cli(dir, {"translate", "--model", model, "hello"});
        require_one_error_line(r, "tokenizer_config.json: not valid JSON at line ");
        CHECK(r.err.find("trailing comma") != std::string::npos);
    }
}

TEST_CASE("cli: --source-lang or --target-lang for a model without languages is one line saying why there is no choice",
          "[cli][pretrained][languages]") {
    if (!have_fixtures()) return;
    TempDir dir;
    const struct {
        const char* fixture;
        const char* why;
    } cases[] = {{"bart", "(a BART model reads and writes one language)"},
                 {"bart_files", "(a BART model reads and writes one language)"},
                 {"t5", "(a T5 model reads its task from the text: type a prefix such as 'translate English to German: ')"},
                 {"marian", "(it translates one language pair)"}};
    for (const auto& c : cases)
        for (const char* side : {"source", "target"}) {
            // The Marian fixture is multilingual (>>fra<<, >>deu<<): only its source is one language.
            if (std::string(c.fixture) == "marian" && std::string(side) == "target") continue;
            INFO(c.fixture << " --" << side << "-lang");
            const Result r = cli(dir, {"translate", "--model", k_fixtures + "/" + c.fixture,
                                       std::string("--") + side + "-lang", "fr", "hello"});
            CHECK(r.code == 2);
            require_one_error_line(r, std::string("this model has no ") + side + " languages to choose from " + c.why);
        }
}

namespace {

/// The NLLB fixture copied with a tokenizer_config.json naming no target language (tgt_lang null),
/// as a hub model may have it, and dir/pairs.tsv: four English-French pairs. Returns the folder.
std::string nllb_without_target(TempDir& dir) {
    const std::string model = copy_folder(dir, "nllb", "nllb-no-tgt");
    std::string config = read_file(model + "/tokenizer_config.json");
    const std::string tgt = "\"tgt_lang\": \"fra_Latn\"";
    const size_t at = config.find(tgt);
    REQUIRE(at != std::string::npos);
    config.replace(at, tgt.size(), "\"tgt_lang\": null");
    write_file(model + "/tokenizer_config.json", config);
    write_file(dir / "pairs.tsv", "Hello, Tom.\tBonjour, Tom.\nI am a small frog.\tJe suis une petite grenouille.\n"
                                  "The cat sleeps.\tLe chat dort.\nGood morning.\tBonjour.\n");
    return model;
}

}  // namespace

TEST_CASE("cli: train --init-from a multilingual model fine-tunes on --source-lang/--target-lang and keeps them",
          "[cli][pretrained][languages][train]") {
    if (!have_fixtures()) return;
    TempDir dir;
    const std::string model = nllb_without_target(dir);  // tokenizer_config.json names no target
    const std::vector<std::string> train{"train", "--init-from", model, "--data", dir / "pairs.tsv", "--epochs", "1",
                                         "--device", "cpu", "-q"};
    auto with = [&](std::vector<std::string> extra) {
        std::vector<std::string> args = train;
        args.insert(args.end(), extra.begin(), extra.end());
        return cli(dir, args);
    };
    const Result missing = with({});
    CHECK(missing.code == 2);
    require_one_error_line(missing, "fine-tuning this model needs its target language");
    CHECK(missing.err.find("--target-lang") != std::string::npos);

    const Result ok = with({"--source-lang", "eng_Latn", "--target-lang", "fra_Latn", "--save", dir / "tuned.ckpt"});
    INFO(ok.err);
    REQUIRE(ok.code == 0);
    // Saved with the pair: it translates into French untold, and its export names the pair for transformers.
    CHECK(cli(dir, {"translate", "--model", dir / "tuned.ckpt", "--beam", "1", "Hello, Tom."}).code == 0);
    REQUIRE(cli(dir, {"export-model", "--model", dir / "tuned.ckpt", "--out", dir / "exported"}).code == 0);
    const std::string exported = read_file(dir / "exported/tokenizer_config.json");
    CHECK(exported.find("\"tgt_lang\": \"fra_Latn\"") != std::string::npos);
    CHECK(exported.find("\"src_lang\": \"eng_Latn\"") != std::string::npos);

    // A language the model lacks, a model without languages, a model trained from scratch: one line, exit 2.
    const Result unknown = with({"--target-lang", "xx_Yyyy"});
    CHECK(unknown.code == 2);
    require_one_error_line(unknown, "the model has no target language 'xx_Yyyy'");
    const Result bart = cli(dir, {"train", "--init-from", k_fixtures + "/bart", "--data", dir / "pairs.tsv", "--epochs", "1",
                                  "--device", "cpu", "-q", "--target-lang", "fr"});
    CHECK(bart.code == 2);
    require_one_error_line(bart, "(a BART model reads and writes one language)");
    const Result scratch = cli(dir, {"train", "--task", "reverse", "--epochs", "1", "--device", "cpu", "-q", "--target-lang", "fr"});
    CHECK(scratch.code == 2);
    require_one_error_line(scratch, "--source-lang and --target-lang choose the languages of a multilingual pretrained model");
}

TEST_CASE("cli: heads of a multilingual model scores the pairs in --source-lang/--target-lang, as eval does",
          "[cli][pretrained][languages][heads]") {
    // heads teacher-forces the corpus with the pairs' language codes (core/data/training_data.hpp); a
    // folder whose tokenizer_config.json names no target language could not be told one.
    if (!have_fixtures()) return;
    TempDir dir;
    const std::string model = nllb_without_target(dir);
    const std::vector<std::string> corpus{"--model", model, "--data", dir / "pairs.tsv", "--split", "all"};
    auto run = [&](const std::string& command, std::vector<std::string> extra) {
        std::vector<std::string> args{command};
        args.insert(args.end(), corpus.begin(), corpus.end());
        args.insert(args.end(), extra.begin(), extra.end());
        return cli(dir, args);
    };
    // No target language: one line naming the flag, before any work.
    const Result missing = run("heads", {});
    CHECK(missing.code == 2);
    require_one_error_line(missing, "choose one with --target-lang");
    CHECK(missing.err.find("tgt_lang") != std::string::npos);

    auto report = [&](const std::string& target, std::vector<std::string> extra = {}) {
        std::vector<std::string> args{"--source-lang", "eng_Latn", "--target-lang", target, "--json"};
        args.insert(args.end(), extra.begin(), extra.end());
        const Result r = run("heads", args);
        INFO(r.err);
        REQUIRE(r.code == 0);
        return nlohmann::json::parse(r.out);
    };
    const nlohmann::json french = report("fra_Latn", {"--prune-curve", "--prune-seeds", "1"});
    CHECK(french["target_lang"] == "fra_Latn");
    CHECK_FALSE(french["prune_curve"].empty());
    // Its loss is eval's teacher-forced loss of the same pairs in the same languages.
    const Result eval = run("eval", {"--source-lang", "eng_Latn", "--target-lang", "fra_Latn", "--json"});
    INFO(eval.err);
    REQUIRE(eval.code == 0);
    CHECK(french["loss"].get<double>() == Approx(nlohmann::json::parse(eval.out)["val_loss"].get<double>()).epsilon(1e-6));
    // Another target language is another loss and other importances: the codes reach the pairs.
    const nlohmann::json german = report("deu_Latn");
    CHECK(german["loss"].get<double>() != Approx(french["loss"].get<double>()).epsilon(1e-3));
    REQUIRE(german["heads"].size() == french["heads"].size());
    bool differ = false;
    for (size_t i = 0; i < german["heads"].size(); ++i)
        differ = differ || std::abs(german["heads"][i]["importance"].get<double>() -
                                    french["heads"][i]["importance"].get<double>()) > 1e-4;
    CHECK(differ);

    // A model without languages: the line translate gives, exit 2.
    const Result bart = cli(dir, {"heads", "--model", k_fixtures + "/bart", "--data", dir / "pairs.tsv", "--split", "all",
                                  "--target-lang", "fr"});
    CHECK(bart.code == 2);
    require_one_error_line(bart, "this model has no target languages to choose from (a BART model reads and writes one language)");
    const Result t5 = cli(dir, {"heads", "--model", k_fixtures + "/t5", "--data", dir / "pairs.tsv", "--split", "all",
                                "--source-lang", "en"});
    CHECK(t5.code == 2);
    require_one_error_line(t5, "this model has no source languages to choose from (a T5 model reads its task");
    REQUIRE(cli(dir, {"train", "--task", "reverse", "--pairs", "100", "--epochs", "1", "--arch", "transformer", "--hidden",
                      "16", "--device", "cpu", "-q", "--save", dir / "toy.attnviz"})
                .code == 0);
    const Result toy = cli(dir, {"heads", "--model", dir / "toy.attnviz", "--task", "reverse", "--pairs", "100",
                                 "--target-lang", "fr"});
    CHECK(toy.code == 2);
    require_one_error_line(toy, "this model translates one language pair: it has no languages to choose from");
}

TEST_CASE("cli: eval of a multilingual model scores the pairs as transformers' labels have them, the text as it is",
          "[cli][pretrained][languages]") {
    // The teacher-forced loss read the corpus at word level (lowercased, punctuation split: an NLLB
    // pair's loss 6.50) and without the language codes; transformers' loss of the same pair is 5.02.
    if (!have_fixtures()) return;
    TempDir dir;
    std::ifstream in(k_fixtures + "/reference.json");
    const nlohmann::json training = nlohmann::json::parse(in)["training"];
    for (const char* name : {"nllb", "m2m100", "mbart50"}) {
        INFO(name);
        REQUIRE(training.contains(name));
        const auto& e = training[name].at(0);
        const std::string tsv = dir / (std::string(name) + ".tsv");
        write_file(tsv, e["source"].get<std::string>() + "\t" + e["target"].get<std::string>() + "\n");
        const Result r = cli(dir, {"eval", "--model", k_fixtures + "/" + name, "--data", tsv, "--split", "all",
                                   "--source-lang", e["src_lang"].get<std::string>(), "--target-lang",
                                   e["tgt_lang"].get<std::string>(), "--json"});
        INFO(r.err);
        REQUIRE(r.code == 0);
        const auto j = nlohmann::json::parse(r.out);
        CHECK(j["val_loss"].get<double>() == Approx(e["loss"].get<double>()).epsilon(1e-4));
    }
}
