// Checkpoints as files (the persist layer): the parameter table, round trips
// (translations, weights, history, vocabularies, optimiser state), damaged and
// foreign files, interrupted saves, and files that lie about themselves refused
// before a model is built. Resuming from one: test_resume.cpp; the history's
// curve: tests/base/test_history.cpp; the version-1 upgrade: test_checkpoint_legacy.cpp.
#include "catch_torch.hpp"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/persist/checkpoint.hpp"
#include "core/persist/checkpoint_meta.hpp"
#include "core/io/error.hpp"
#include "core/persist/parameter_names.hpp"
#include "core/persist/safetensors_torch.hpp"
#include "core/data/tasks.hpp"
#include "core/decode/translation.hpp"
#include "checkpoint_edit.hpp"
#include "file_limits.hpp"
#include "checkpoint_fixture.hpp"
#include "test_support.hpp"

using namespace attnviz;
using attnviz::testing::read_all;
using attnviz::testing::write_all;
namespace st = attnviz::safetensors;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

fs::path temp_dir() { return attnviz::testing::checkpoint_temp_dir("attnviz-ckpt2-"); }

using attnviz::testing::quick;
using attnviz::testing::reverse_data;
using attnviz::testing::small_model;
using attnviz::testing::trained;


using Editable = attnviz::testing::EditableCheckpoint;

std::string load_error(const fs::path& p) {
    try {
        load_checkpoint(p.string());
    } catch (const FileError& e) {
        return e.what();
    }
    return "(loaded)";
}

long max_rss_kb() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;
}

}  // namespace

TEST_CASE("checkpoint round trip gives identical translations", "[checkpoint]") {
    auto dir = temp_dir();
    auto tr = trained();
    const auto path = (dir / "model.attnviz").string();
    save_checkpoint(tr->checkpoint(), path);
    auto c = load_checkpoint(path);
    CHECK(c.model->src_vocab() == tr->data().src_vocab);
    CHECK(c.model->tgt_vocab() == tr->data().tgt_vocab);
    CHECK(c.model->config().to_json() == tr->model_config().to_json());
    CHECK(c.model->history().batch_loss.points() == tr->history().batch_loss.points());
    CHECK(c.model->history().epochs.size() == 2);
    CHECK(c.model->corpus_name() == "reverse");
    std::vector<std::string> inputs = {"a b c", "c a", "b b a c"};
    DecodeOptions o;
    auto before = tr->snapshot()->translate(inputs, o);
    auto after = c.model->translate(inputs, o);
    for (size_t i = 0; i < inputs.size(); ++i) {
        CHECK(before[i].best().ids == after[i].best().ids);
        CHECK(before[i].best().attention.weights() == after[i].best().attention.weights());
    }
    testing::remove_tree(dir);
}

TEST_CASE("truncated, corrupt and foreign files are rejected with a message", "[checkpoint]") {
    auto dir = temp_dir();
    auto tr = trained(1);
    const auto good = dir / "good.attnviz";
    save_checkpoint(tr->checkpoint(), good.string());
    const std::string bytes = read_all(good);

    const auto truncated = dir / "truncated.attnviz";
    write_all(truncated, bytes.substr(0, bytes.size() / 2));
    CHECK_THROWS_AS(load_checkpoint(truncated.string()), FileError);
    CHECK_THROWS_WITH(load_checkpoint(truncated.string()), Catch::Contains("truncated") && Catch::Contains("truncated.attnviz"));

    std::string flipped = bytes;
    flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x5a);
    const auto corrupt = dir / "corrupt.attnviz";
    write_all(corrupt, flipped);
    CHECK_THROWS_WITH(load_checkpoint(corrupt.string()), Catch::Contains("corrupt"));

    const auto foreign = dir / "foreign.attnviz";
    write_all(foreign, "Go.\tVa !\n");
    CHECK_THROWS_WITH(load_checkpoint(foreign.string()), Catch::Contains("not an attnviz checkpoint"));

    CHECK_THROWS_WITH(load_checkpoint((dir / "missing.attnviz").string()), Catch::Contains("cannot open"));
    testing::remove_tree(dir);
}

TEST_CASE("the previous checkpoint survives an interrupted save", "[checkpoint]") {
    auto dir = temp_dir();
    auto tr = trained(1);
    const auto path = dir / "model.attnviz";
    save_checkpoint(tr->checkpoint(), path.string());
    const std::string before = read_all(path);
    // Make the save fail half-way: the file may not grow past 4 KiB (as a full disk).
    {
        testing::FileSizeLimit limit(4096);
        REQUIRE(limit.ok());
        CHECK_THROWS_AS(save_checkpoint(tr->checkpoint(), path.string()), FileError);
    }
    CHECK(testing::names_in(dir.string()) == std::vector<std::string>{"model.attnviz"});
    CHECK(read_all(path) == before);
    CHECK_NOTHROW(load_checkpoint(path.string()));
    testing::remove_tree(dir);
}

TEST_CASE("parameter table: names and shapes match the model for every variant", "[checkpoint]") {
    int checked = 0;
    for (auto cell : {CellType::gru, CellType::lstm})
        for (bool bidirectional : {false, true})
            for (auto scoring : {Scoring::additive, Scoring::dot, Scoring::scaled_dot, Scoring::general, Scoring::none})
                for (int64_t layers : {1, 3})
                    for (int64_t attention : {0, 24}) {
                        auto cfg = testing::tiny_config(scoring);
                        cfg.cell = cell;
                        cfg.bidirectional = bidirectional;
                        cfg.num_layers = layers;
                        cfg.attention_size = attention;
                        try {
                            cfg.validate_for_build();
                        } catch (const ConfigError&) {
                            continue;  // e.g. dot scoring with a bidirectional encoder
                        }
                        INFO(to_string(cell) << " bidirectional " << bidirectional << " " << to_string(scoring)
                                             << " layers " << layers << " attention " << attention);
                        Seq2Seq model(cfg);
                        const auto named = model->named_parameters();
                        const auto table = parameter_names(cfg);
                        REQUIRE(table.size() == named.size());
                        uint64_t bytes = 0;
                        for (const auto& p : table) {
                            INFO(p.module << " -> " << p.file);
                            const torch::Tensor* t = named.find(p.module);
                            REQUIRE(t != nullptr);
                            CHECK(t->sizes().vec() == p.shape);
                            bytes += static_cast<uint64_t>(t->numel()) * 4;
                        }
                        CHECK(parameter_bytes(table) == bytes);
                        ++checked;
                    }
    CHECK(checked > 40);

    // d2l's own names for d2l's model.
    auto d2l = testing::tiny_config(Scoring::additive);
    CHECK(has_d2l_shape(d2l));
    std::vector<std::string> files;
    for (const auto& p : parameter_names(d2l)) files.push_back(p.file);
    for (const char* name : {"encoder.embedding.weight", "encoder.rnn.weight_ih_l0", "encoder.rnn.bias_hh_l1",
                             "decoder.attention.W_q.weight", "decoder.attention.W_k.weight",
                             "decoder.attention.w_v.weight", "decoder.embedding.weight", "decoder.rnn.weight_ih_l0",
                             "decoder.dense.weight", "decoder.dense.bias"})
        CHECK(std::find(files.begin(), files.end(), name) != files.end());
    d2l.cell = CellType::lstm;
    CHECK_FALSE(has_d2l_shape(d2l));
    CHECK(parameter_names(d2l)[1].shape == std::vector<int64_t>{64, 8});  // LSTM: 4 gates of H = 16
}

TEST_CASE("checkpoint v2 round trip: bit-identical weights, history, vocabularies, optimiser state", "[checkpoint]") {
    for (auto kind : {OptimizerKind::adam, OptimizerKind::sgd, OptimizerKind::adadelta}) {
        INFO("optimizer " << to_string(kind));
        const auto dir = temp_dir();
        auto tr = trained(2, kind);
        const Checkpoint saved = tr->checkpoint();
        const auto path = (dir / "model.ckpt").string();
        save_checkpoint(saved, path);
        CHECK(detect_model_file(path) == ModelFileKind::checkpoint);
        const Checkpoint c = load_checkpoint(path);

        auto a = saved.model->network()->named_parameters();
        auto b = c.model->network()->named_parameters();
        REQUIRE(a.size() == b.size());
        for (const auto& item : a) CHECK(torch::equal(item.value(), b[item.key()]));
        CHECK(c.model->history().to_json() == tr->history().to_json());
        CHECK(c.model->src_vocab() == tr->data().src_vocab);
        CHECK(c.model->tgt_vocab() == tr->data().tgt_vocab);
        CHECK(c.model->config().to_json() == tr->model_config().to_json());
        CHECK(c.model->trained_with().to_json() == tr->train_config().to_json());
        CHECK(c.model->corpus_name() == "reverse");

        CHECK(c.optimizer_state.kind == kind);
        REQUIRE(c.optimizer_state.params.size() == saved.optimizer_state.params.size());
        CHECK(c.optimizer_state.params.size() == a.size());
        for (const auto& [name, p] : saved.optimizer_state.params) {
            const auto& q = c.optimizer_state.params.at(name);
            CHECK(q.step == p.step);
            REQUIRE(q.slots.size() == p.slots.size());
            for (const auto& [slot, t] : p.slots) CHECK(torch::equal(t, q.slots.at(slot)));
        }

        // The same file, read as plain safetensors: d2l's names, the vocabularies as arrays, a config.
        const st::File f = st::read_file(path);
        CHECK(f.find("encoder.embedding.weight"));
        CHECK(f.find("decoder.attention.W_q.weight"));
        CHECK(f.find("decoder.dense.bias"));
        CHECK(json::parse(f.metadata.at("src_vocab")) == json(tr->data().src_vocab.tokens()));
        CHECK(json::parse(f.metadata.at("config")).at("hidden") == 16);
        CHECK(f.metadata.at("version") == "2");
        const std::string slot = kind == OptimizerKind::adam ? "exp_avg" : kind == OptimizerKind::sgd ? "momentum_buffer" : "acc_delta";
        CHECK(f.find("optimizer.encoder.embedding.weight." + slot));
        testing::remove_tree(dir);
    }
}

TEST_CASE("a small file claiming a huge model is refused at once, naming a tensor", "[checkpoint]") {
    const auto dir = temp_dir();
    const auto good = dir / "good.ckpt";
    save_checkpoint(trained(1)->checkpoint(), good.string());
    Editable e(good.string());
    json a = e.attnviz();
    ModelConfig huge = ModelConfig::from_json(a["model"]);
    huge.hidden_size = 4096;
    huge.num_layers = 8;
    huge.cell = CellType::lstm;
    huge.bidirectional = true;
    a["model"] = huge.to_json();
    e.set_attnviz(a);
    e.metadata["config"] = d2l_style_config(huge, TokenLevel::word).dump();
    const auto bad = dir / "huge.ckpt";
    e.write(bad);
    CHECK(fs::file_size(bad) < 200000);

    const long rss_before = max_rss_kb();
    const auto t0 = std::chrono::steady_clock::now();
    const std::string msg = load_error(bad);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    INFO(msg);
    CHECK_THAT(msg, Catch::Contains("huge.ckpt") && Catch::Contains("tensor 'encoder.rnn.weight_ih_l0'") &&
                        Catch::Contains("GB of weights"));
    CHECK(seconds < 2.0);
    // Building that model would take gigabytes; the peak RSS does not move by more than noise.
    CHECK(max_rss_kb() - rss_before < 200 * 1024);
    testing::remove_tree(dir);
}

TEST_CASE("tensors of the wrong dtype or shape are refused on load, naming the tensor", "[checkpoint]") {
    const auto dir = temp_dir();
    const auto good = dir / "good.ckpt";
    save_checkpoint(trained(1)->checkpoint(), good.string());
    const auto bad = dir / "bad.ckpt";
    const int64_t H3 = 3 * 16;
    auto refused = [&](const std::function<void(Editable&)>& edit) {
        Editable e(good.string());
        edit(e);
        e.write(bad);
        return load_error(bad);
    };
    CHECK_THAT(refused([](Editable& e) { e.tensor("decoder.dense.weight") = e.tensor("decoder.dense.weight").to(torch::kDouble); }),
               Catch::Contains("'decoder.dense.weight'") && Catch::Contains("F64"));
    CHECK_THAT(refused([](Editable& e) { e.tensor("encoder.embedding.weight") = e.tensor("encoder.embedding.weight").to(torch::kLong); }),
               Catch::Contains("'encoder.embedding.weight'") && Catch::Contains("I64"));
    CHECK_THAT(refused([](Editable& e) { e.tensor("decoder.rnn.weight_hh_l0") = torch::zeros({}); }),
               Catch::Contains("'decoder.rnn.weight_hh_l0'") && Catch::Contains("shape []"));
    CHECK_THAT(refused([&](Editable& e) { e.tensor("decoder.rnn.weight_hh_l0") = torch::zeros({H3, 1}); }),
               Catch::Contains("'decoder.rnn.weight_hh_l0'") && Catch::Contains("[48, 1]") && Catch::Contains("[48, 16]"));
    CHECK_THAT(refused([&](Editable& e) { e.tensor("optimizer.decoder.dense.bias.exp_avg") = torch::zeros({3}); }),
               Catch::Contains("'optimizer.decoder.dense.bias.exp_avg'"));
    CHECK_THAT(refused([](Editable& e) { e.tensors.emplace_back("encoder.extra", torch::zeros({2})); }),
               Catch::Contains("unexpected tensor 'encoder.extra'"));
    CHECK_THAT(refused([](Editable& e) { e.tensors.emplace_back("optimizer.decoder.dense.bias.velocity", torch::zeros({2})); }),
               Catch::Contains("unexpected tensor 'optimizer.decoder.dense.bias.velocity'"));
    CHECK_THAT(refused([](Editable& e) {
                   e.tensors.erase(std::remove_if(e.tensors.begin(), e.tensors.end(),
                                                  [](const auto& t) { return t.first == "decoder.dense.bias"; }),
                                   e.tensors.end());
               }),
               Catch::Contains("'decoder.dense.bias' is missing"));
    CHECK_THAT(refused([](Editable& e) { e.metadata["attnviz"] = std::string(100000, '[') + std::string(100000, ']'); }),
               Catch::Contains("nested more than"));
    CHECK_THAT(refused([](Editable& e) {
                   json a = e.attnviz();
                   a["model"]["hidden_size"] = 100000;  // beyond the registry's range
                   e.set_attnviz(a);
               }),
               Catch::Contains("hidden_size"));
    CHECK_THAT(refused([](Editable& e) { e.metadata["src_vocab"] = R"(["<pad>", "<bos>", "<eos>", "<unk>", "a"])"; }),
               Catch::Contains("inconsistent"));
    CHECK_THAT(refused([](Editable& e) {
                   json a = e.attnviz();
                   a["optimizer"]["steps"]["decoder.dense.bias"] = -5;
                   e.set_attnviz(a);
               }),
               Catch::Contains("step count of 'decoder.dense.bias'"));
    // And a byte flipped after writing is caught by the checksum.
    std::string bytes = read_all(good);
    bytes[bytes.size() - 5] = static_cast<char>(bytes[bytes.size() - 5] ^ 0x40);
    write_all(bad, bytes);
    CHECK_THAT(load_error(bad), Catch::Contains("corrupt"));
    testing::remove_tree(dir);
}

TEST_CASE("a checkpoint of a very long run saves and opens (its loss curve is bounded)", "[checkpoint]") {
    // 2.5 million batches: unbounded, the curve alone (~27 bytes a point) outgrew the
    // 64 MiB header the reader accepts, and the checkpoint saved but did not open.
    auto tr = trained(1);
    TrainHistory& h = tr->history();
    const int64_t first = h.global_step;
    for (int64_t i = 1; i <= 2500000; ++i) h.record_batch(first + i, 2.0 + 1.0 / double(i));
    h.global_step = first + 2500000;
    const auto dir = temp_dir();
    const auto path = dir / "long.ckpt";
    save_checkpoint(tr->checkpoint(), path.string());
    CHECK(fs::file_size(path) < (uintmax_t(4) << 20));
    const Checkpoint c = load_checkpoint(path.string());
    CHECK(c.model->history().to_json() == h.to_json());
    CHECK(c.model->history().batch_loss.size() < TrainHistory::max_batch_points);
    testing::remove_tree(dir);
}

TEST_CASE("foreign files are refused naming the formats attnviz reads", "[checkpoint]") {
    const auto dir = temp_dir();
    const std::string formats = readable_model_formats();
    CHECK_THAT(formats, Catch::Contains(".ckpt") && Catch::Contains("d2l") && Catch::Contains("upgrade-checkpoint"));
    auto check = [&](const std::string& name, const std::string& bytes, const std::string& says) {
        write_all(dir / name, bytes);
        const std::string msg = load_error(dir / name);
        INFO(msg);
        CHECK_THAT(msg, Catch::Contains(name) && Catch::Contains(formats) && Catch::Contains(says));
        CHECK(detect_model_file((dir / name).string()) == ModelFileKind::unknown);
    };
    check("empty.ckpt", "", "empty");
    const char pickle[] = "\x80\x02}q\x00(X\x05\x00\x00\x00model";
    check("pickle.pt", std::string(pickle, sizeof(pickle) - 1), "pickle");
    std::string random(4096, '\0');
    for (size_t i = 0; i < random.size(); ++i) random[i] = static_cast<char>((i * 2654435761u) >> 13);
    check("random.bin", random, "not an attnviz checkpoint");
    check("text.ckpt", "Go.\tVa !\n", "text");
    // A PyTorch zip archive, as torch.save (and Joey NMT) write them.
    torch::save(torch::ones({2, 3}), (dir / "joey.ckpt").string());
    const std::string msg = load_error(dir / "joey.ckpt");
    CHECK_THAT(msg, Catch::Contains("zip archive") && Catch::Contains("PyTorch") && Catch::Contains(formats));
    // A safetensors file that is not a checkpoint (e.g. a d2l model).
    const float w[2] = {1, 2};
    write_all(dir / "d2l.safetensors", st::serialize({{"decoder.dense.bias", st::DType::F32, {2}, w, 8}}));
    CHECK(detect_model_file((dir / "d2l.safetensors").string()) == ModelFileKind::safetensors);
    CHECK_THAT(load_error(dir / "d2l.safetensors"), Catch::Contains("not an attnviz checkpoint") && Catch::Contains(formats));
    // Not regular files: refused at once (a FIFO without writer used to block forever).
    REQUIRE(::mkfifo((dir / "pipe.ckpt").c_str(), 0600) == 0);
    CHECK_THAT(load_error(dir / "pipe.ckpt"), Catch::Contains("FIFO"));
    CHECK_THAT(load_error("/dev/zero"), Catch::Contains("character device"));
    CHECK_THAT(load_error(dir), Catch::Contains("directory"));
    testing::remove_tree(dir);
}

TEST_CASE("training history from a file is validated", "[checkpoint]") {
    const json good = {{"batch_step", {1, 2, 3}}, {"batch_loss", {2.0, 1.5, 1.2}}, {"epochs", json::array()},
                       {"global_step", 3},        {"epochs_done", 1},             {"best_epoch", 0},
                       {"seconds", 1.5}};
    CHECK(TrainHistory::from_json(good).epochs_done == 1);
    auto with = [&](const char* key, json value) {
        json j = good;
        j[key] = std::move(value);
        return j;
    };
    CHECK_THROWS_AS(TrainHistory::from_json(with("epochs_done", INT_MAX)), FileError);
    CHECK_THROWS_WITH(TrainHistory::from_json(with("epochs_done", INT_MAX)), Catch::Contains("epochs_done"));
    CHECK_THROWS_WITH(TrainHistory::from_json(with("epochs_done", -1000000)), Catch::Contains("epochs_done"));
    CHECK_THROWS_WITH(TrainHistory::from_json(with("epochs_done", 1.5)), Catch::Contains("epochs_done"));
    CHECK_THROWS_WITH(TrainHistory::from_json(with("global_step", -1)), Catch::Contains("global_step"));
    CHECK_THROWS_WITH(TrainHistory::from_json(with("best_epoch", -1)), Catch::Contains("best_epoch"));
    CHECK_THROWS_WITH(TrainHistory::from_json(with("seconds", -3.0)), Catch::Contains("seconds"));
    CHECK_THROWS_WITH(TrainHistory::from_json(with("batch_loss", {1.0, 2.0})), Catch::Contains("differ in length"));
    CHECK_THROWS_WITH(TrainHistory::from_json(with("batch_step", {1, 1, 2})), Catch::Contains("batch step 1"));
    CHECK_THROWS_WITH(TrainHistory::from_json(with("batch_step", {1, 2, -4})), Catch::Contains("batch step 2"));
    CHECK_THROWS_WITH(TrainHistory::from_json(with("batch_loss", {1.0, "x", 2.0})), Catch::Contains("batch loss 1"));
    CHECK_THROWS_WITH(TrainHistory::from_json(with("epochs", json::array({json{{"epoch", 0}, {"train_loss", 1.0}, {"val_loss", nullptr}}}))),
                      Catch::Contains("epoch report 0"));
    CHECK_THROWS_AS(TrainHistory::from_json(json::array()), FileError);

    // Through a checkpoint: the history is checked before the model is built.
    const auto dir = temp_dir();
    const auto good_file = dir / "good.ckpt";
    save_checkpoint(trained(1)->checkpoint(), good_file.string());
    for (const json& v : {json(INT_MAX), json(-1000000)}) {
        Editable e(good_file.string());
        json a = e.attnviz();
        a["history"]["epochs_done"] = v;
        e.set_attnviz(a);
        e.write(dir / "bad.ckpt");
        CHECK_THAT(load_error(dir / "bad.ckpt"), Catch::Contains("epochs_done") && Catch::Contains("bad.ckpt"));
    }
    testing::remove_tree(dir);
}

TEST_CASE("resuming never damages a good checkpoint: bad optimiser state and non-finite weights are refused",
          "[checkpoint][hostile]") {
    const auto dir = temp_dir();
    const auto good = dir / "good.ckpt";
    const Checkpoint trained_checkpoint = trained(1)->checkpoint();
    save_checkpoint(trained_checkpoint, good.string());
    const auto bad = dir / "bad.ckpt";
    auto refused = [&](const std::function<void(Editable&)>& edit) {
        Editable e(good.string());
        edit(e);
        e.write(bad);
        return load_error(bad);
    };
    const std::string slot = "optimizer.decoder.dense.weight.exp_avg_sq";
    // Values no Adam step leaves: the first step from them made every weight NaN.
    CHECK_THAT(refused([&](Editable& e) { e.tensor(slot).fill_(-1.0f); }),
               Catch::Contains("'dense.weight'") && Catch::Contains("exp_avg_sq") && Catch::Contains("negative"));
    CHECK_THAT(refused([&](Editable& e) { e.tensor(slot)[0][0] = std::nanf(""); }),
               Catch::Contains("exp_avg_sq") && Catch::Contains("NaN"));
    CHECK_THAT(refused([&](Editable& e) { e.tensor("optimizer.decoder.dense.bias.exp_avg")[0] = INFINITY; }),
               Catch::Contains("exp_avg") && Catch::Contains("infinite"));
    // A padded width from the file beyond what decoding can use (100,000: many GB per sentence).
    CHECK_THAT(refused([](Editable& e) {
                   json a = e.attnviz();
                   a["model"]["source_steps"] = 100000;
                   e.set_attnviz(a);
               }),
               Catch::Contains("source_steps"));

    // A model whose weights are no longer finite (a diverged run) is never written over a good file.
    Checkpoint diverged = trained_checkpoint;
    diverged.model = std::make_shared<const TranslationModel>(
        trained_checkpoint.model->clone_network(torch::kCPU), trained_checkpoint.model->src_vocab_ptr(),
        trained_checkpoint.model->tgt_vocab_ptr(), trained_checkpoint.model->tokenizer_ptr(),
        trained_checkpoint.model->trained_with(), trained_checkpoint.model->history());
    {
        torch::NoGradGuard no_grad;
        diverged.model->network()->named_parameters()["dense.bias"].fill_(std::nanf(""));
    }
    const std::string before = read_all(good);
    CHECK_THROWS_WITH(save_checkpoint(diverged, good.string()),
                      Catch::Contains("left as it was") && Catch::Contains("decoder.dense.bias") && Catch::Contains("NaN"));
    CHECK(read_all(good) == before);
    // Nor is a non-finite optimiser state.
    Checkpoint bad_state = trained_checkpoint;
    bad_state.optimizer_state.params.begin()->second.slots.begin()->second =
        bad_state.optimizer_state.params.begin()->second.slots.begin()->second.clone().fill_(std::nanf(""));
    CHECK_THROWS_WITH(save_checkpoint(bad_state, good.string()), Catch::Contains("left as it was"));
    CHECK(read_all(good) == before);
    testing::remove_tree(dir);
}
