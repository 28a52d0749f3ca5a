// Resuming training from a checkpoint (the train layer): the run goes on where it
// stopped, with the same losses as one that never stopped, and a checkpoint whose
// tensors do not fit its configuration is refused, naming the tensor.
#include "catch_torch.hpp"

#include <unistd.h>

#include <filesystem>

#include "core/data/tasks.hpp"
#include "core/io/error.hpp"
#include "core/persist/checkpoint.hpp"
#include "checkpoint_fixture.hpp"
#include "test_support.hpp"

using namespace attnviz;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir() { return attnviz::testing::checkpoint_temp_dir("attnviz-resume-"); }

using attnviz::testing::quick;
using attnviz::testing::reverse_data;
using attnviz::testing::small_model;
using attnviz::testing::trained;

}  // namespace

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

TEST_CASE("resuming from a checkpoint continues with identical losses", "[checkpoint]") {
    for (auto kind : {OptimizerKind::adam, OptimizerKind::sgd, OptimizerKind::adadelta}) {
        INFO("optimizer " << to_string(kind));
        auto straight = trained(4, kind);
        const auto dir = temp_dir();
        const auto path = (dir / "half.ckpt").string();
        save_checkpoint(trained(2, kind)->checkpoint(), path);
        const Checkpoint c = load_checkpoint(path);
        const auto cfg = quick(4, kind);
        Trainer resumed(c, reverse_data(cfg), cfg);
        REQUIRE(resumed.run() == StopReason::finished);
        REQUIRE(resumed.history().batch_loss.size() == straight->history().batch_loss.size());
        CHECK(resumed.history().batch_loss.points() == straight->history().batch_loss.points());  // exactly, not approximately
        testing::remove_tree(dir);
    }
}

TEST_CASE("tensors of the wrong shape are refused on resume, naming the tensor", "[checkpoint]") {
    auto tr = trained(1);
    const Checkpoint good = tr->checkpoint();
    const auto cfg = quick(2);
    {
        // A network whose tensor was replaced (copy_ would broadcast a scalar silently).
        Network network = good.model->clone_network(torch::kCPU);
        {
            torch::NoGradGuard no_grad;
            network->named_parameters()["dense.bias"].set_(torch::zeros({}));
        }
        Checkpoint bad;
        bad.model = std::make_shared<const TranslationModel>(network, good.model->src_vocab_ptr(),
                                                             good.model->tgt_vocab_ptr(), good.model->level());
        CHECK_THROWS_WITH(Trainer(bad, reverse_data(cfg), cfg), Catch::Contains("'decoder.dense.bias'") && Catch::Contains("[]"));
    }
    for (const auto& shape : std::vector<std::vector<int64_t>>{{}, {48, 1}}) {
        Checkpoint bad = good;
        bad.optimizer_state.params.at("dec_rnn_weight_hh_l0").slots["exp_avg"] = torch::zeros(shape);
        CHECK_THROWS_WITH(Trainer(bad, reverse_data(cfg), cfg),
                          Catch::Contains("dec_rnn_weight_hh_l0") && Catch::Contains("exp_avg") && Catch::Contains("shape"));
    }
    Checkpoint f64 = good;
    f64.optimizer_state.params.at("dense.weight").slots["exp_avg_sq"] =
        good.optimizer_state.params.at("dense.weight").slots.at("exp_avg_sq").to(torch::kDouble);
    CHECK_THROWS_WITH(Trainer(f64, reverse_data(cfg), cfg), Catch::Contains("dense.weight") && Catch::Contains("float32"));
    CHECK_NOTHROW(Trainer(good, reverse_data(cfg), cfg));
}
