// Checkpoints: round trip, damaged files, interrupted saves, resuming.
#include "catch_torch.hpp"

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "core/persist/checkpoint.hpp"
#include "core/decode/translation.hpp"
#include "core/io/error.hpp"
#include "core/data/tasks.hpp"
#include "file_limits.hpp"
#include "test_support.hpp"

using namespace attnviz;
using attnviz::testing::read_all;
using attnviz::testing::write_all;
namespace fs = std::filesystem;

namespace {
fs::path temp_dir() {
    auto d = fs::temp_directory_path() / ("attnviz-ckpt-" + std::to_string(::getpid()) + "-" +
                                          std::to_string(std::rand()));
    fs::create_directories(d);
    return d;
}

std::unique_ptr<Trainer> trained(int epochs = 2) {
    TaskOptions t;
    t.num_pairs = 150;
    t.max_len = 5;
    TrainConfig c;
    c.epochs = epochs;
    c.batch_size = 32;
    c.device = "cpu";
    ModelConfig m;
    m.embed_size = 8;
    m.hidden_size = 16;
    auto tr = std::make_unique<Trainer>(prepare_data(task_corpus(TaskKind::reverse, t), c), m, c);
    REQUIRE(tr->run() == StopReason::finished);
    return tr;
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
    CHECK(c.model->history().batch_loss == tr->history().batch_loss);
    CHECK(c.model->history().epochs.size() == 2);
    CHECK(c.model->corpus_name() == "reverse");
    std::vector<std::string> inputs = {"a b c", "c a", "b b a c"};
    DecodeOptions o;
    auto before = tr->snapshot()->translate(inputs, o);
    auto after = c.model->translate(inputs, o);
    for (size_t i = 0; i < inputs.size(); ++i) {
        CHECK(before[i].best().ids == after[i].best().ids);
        CHECK(before[i].best().attention == after[i].best().attention);
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

TEST_CASE("training resumes from a checkpoint", "[checkpoint]") {
    auto dir = temp_dir();
    auto tr = trained(2);
    const auto path = (dir / "model.attnviz").string();
    save_checkpoint(tr->checkpoint(), path);
    auto c = load_checkpoint(path);
    auto cfg = c.model->trained_with();
    cfg.epochs = 4;
    TaskOptions t;
    t.num_pairs = 150;
    t.max_len = 5;
    auto resumed = std::make_unique<Trainer>(c, prepare_data(task_corpus(TaskKind::reverse, t), cfg), cfg);
    REQUIRE(resumed->run() == StopReason::finished);
    CHECK(resumed->history().epochs_done == 4);
    CHECK(resumed->history().epochs.size() == 4);
    CHECK(resumed->history().global_step == 2 * tr->history().global_step);
    CHECK(resumed->history().epochs[3].val_loss < c.model->history().epochs[1].val_loss);
    testing::remove_tree(dir);
}
