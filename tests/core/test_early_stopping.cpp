// Early stopping that stops (issue 27, item 10): --min-delta, the smallest fall of
// the validation loss that counts as an improvement (Keras' and Lightning's
// min_delta), so that patience fires on a task that keeps improving by crumbs.
#include "catch_torch.hpp"

#include <cmath>

#include "core/config/registry.hpp"
#include "core/data/tasks.hpp"
#include "core/train/train.hpp"

using namespace attnviz;

namespace {

std::vector<EpochReport> epochs_of(const std::vector<double>& losses) {
    std::vector<EpochReport> out;
    for (size_t i = 0; i < losses.size(); ++i) {
        EpochReport e;
        e.epoch = static_cast<int>(i + 1);
        e.val_loss = losses[i];
        out.push_back(e);
    }
    return out;
}

}  // namespace

TEST_CASE("min_delta: only a fall by more than it, below the last improvement, counts", "[train][early]") {
    const double nan = std::nan("");
    const auto e = epochs_of({2.0, 1.0, 0.995, 0.992, 0.9905, nan, 0.9902});
    CHECK(last_improvement_epoch(e, 0.0) == 7);    // any decrease counts: the lowest loss
    CHECK(last_improvement_epoch(e, 0.01) == 2);   // nothing after falls more than 0.01 below 1.0
    CHECK(last_improvement_epoch(e, 0.008) == 5);  // crumbs add up against the last improvement's loss
    CHECK(last_improvement_epoch(e, 1.5) == 1);    // the first finite loss always counts
    CHECK(last_improvement_epoch(epochs_of({nan, nan}), 0.0) == 0);
    CHECK(last_improvement_epoch({}, 0.1) == 0);
    // The registry declares it: flag, range, JSON.
    const ParamSpec& p = find_parameter("min-delta");
    CHECK(p.name == "min_delta");
    TrainConfig t;
    t.min_delta = 0.001;
    CHECK(TrainConfig::from_json(t.to_json()).min_delta == 0.001);
    t.min_delta = -0.1;
    CHECK_THROWS_AS(t.validate(), ConfigError);
}

TEST_CASE("toy-french, 100 epochs: with a min_delta, patience stops the converged run early", "[train][early][slow]") {
    TaskOptions task;
    task.num_pairs = 600;
    TrainConfig t;
    t.epochs = 100;
    t.batch_size = 32;
    t.device = "cpu";
    t.eval_sample = 0;
    t.patience = 3;
    t.min_delta = 0.01;
    t.keep_best = true;
    ModelConfig m;
    m.embed_size = 32;
    m.hidden_size = 64;
    Trainer trainer(prepare_data(task_corpus(TaskKind::toy_french, task), t), m, t);
    REQUIRE(trainer.run() == StopReason::early_stop);
    const TrainHistory& h = trainer.history();
    INFO("stopped after epoch " << h.epochs_done << ", best " << h.best_epoch);
    CHECK(h.epochs_done < 100);
    // It stopped exactly `patience` epochs after the last fall of more than min_delta...
    const int last = last_improvement_epoch(h.epochs, t.min_delta);
    CHECK(h.epochs_done - last == t.patience);
    const double reference = h.epochs[static_cast<size_t>(last - 1)].val_loss;
    for (int e = last + 1; e <= h.epochs_done; ++e) CHECK(h.epochs[static_cast<size_t>(e - 1)].val_loss >= reference - t.min_delta);
    // ...while keep-best keeps the lowest loss, an improvement however small.
    CHECK(h.best_epoch >= last);
    for (const auto& e : h.epochs) CHECK(e.val_loss >= h.best_val_loss());
}
