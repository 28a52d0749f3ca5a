// The trainer: determinism, cooperative control, divergence, snapshots.
#include "catch_torch.hpp"

#include <chrono>
#include <cmath>
#include <thread>
#include <atomic>

#include "core/io/error.hpp"
#include "core/data/tasks.hpp"
#include "core/train/train.hpp"

using namespace attnviz;

namespace {
TrainingData reverse_data(size_t pairs = 200) {
    TaskOptions t;
    t.num_pairs = pairs;
    t.max_len = 5;
    TrainConfig c;
    return prepare_data(task_corpus(TaskKind::reverse, t), c);
}

ModelConfig small_model() {
    ModelConfig m;
    m.embed_size = 8;
    m.hidden_size = 16;
    return m;
}

struct Recorder : TrainObserver {
    std::vector<BatchReport> batches;
    std::vector<EpochReport> epochs;
    StopReason reason = StopReason::error;
    std::string message;
    std::atomic<int> paused{0};
    std::atomic<int64_t> steps{0};
    void on_batch(const BatchReport& b) override {
        batches.push_back(b);
        steps = b.global_step;
    }
    void on_epoch(const EpochReport& e) override { epochs.push_back(e); }
    void on_paused(bool p) override { paused += p ? 1 : 0; }
    void on_finished(StopReason r, const std::string& m) override {
        reason = r;
        message = m;
    }
};
}  // namespace

TEST_CASE("same seed, same loss sequence", "[train]") {
    TrainConfig c;
    c.epochs = 2;
    c.batch_size = 32;
    c.device = "cpu";
    auto run = [&](uint64_t seed) {
        c.seed = seed;
        Trainer t(reverse_data(), small_model(), c);
        Recorder r;
        REQUIRE(t.run(&r) == StopReason::finished);
        return t.history().batch_loss.points();
    };
    auto a = run(5), b = run(5), other = run(6);
    const size_t per_epoch = (reverse_data().train.size() + 31) / 32;
    REQUIRE(a.size() == 2 * per_epoch);
    CHECK(a == b);
    CHECK(a != other);
}

TEST_CASE("the observer sees every batch and epoch, with validation figures", "[train]") {
    TrainConfig c;
    c.epochs = 3;
    c.batch_size = 32;
    c.device = "cpu";
    Trainer t(reverse_data(), small_model(), c);
    Recorder r;
    CHECK(t.run(&r) == StopReason::finished);
    CHECK(r.reason == StopReason::finished);
    const int64_t per_epoch = (static_cast<int64_t>(t.data().train.size()) + 31) / 32;
    CHECK(static_cast<int64_t>(r.batches.size()) == 3 * per_epoch);
    REQUIRE(r.epochs.size() == 3);
    for (const auto& e : r.epochs) {
        CHECK(std::isfinite(e.val_loss));
        CHECK(e.val_accuracy >= 0.0);
        CHECK(e.val_bleu >= 0.0);
        CHECK(e.tokens_per_second > 0.0);
    }
    CHECK(r.epochs.back().train_loss < r.epochs.front().train_loss);
    CHECK(r.batches.back().global_step == 3 * per_epoch);
    CHECK(r.batches.back().eta == Approx(0.0).margin(1e-9));
    REQUIRE(t.snapshot() != nullptr);
    // The snapshot is a copy of the trained weights, not the live tensors.
    auto live = t.model()->parameters();
    auto snap = t.snapshot()->network()->parameters();
    CHECK(torch::equal(live[0].cpu(), snap[0]));
    CHECK(live[0].data_ptr() != snap[0].data_ptr());
}

TEST_CASE("a snapshot somebody holds keeps its weights, a released one is refreshed", "[train]") {
    TrainConfig c;
    c.epochs = 3;
    c.batch_size = 32;
    c.device = "cpu";
    c.eval_sample = 0;
    Trainer t(reverse_data(), small_model(), c);
    // Holds epoch 1's snapshot, as the GUI holds the model it translates with.
    struct Holder : TrainObserver {
        Trainer* trainer = nullptr;
        TranslationModelPtr held;
        torch::Tensor held_weights;
        void on_snapshot(int epoch, int64_t) override {
            if (epoch != 1) return;
            held = trainer->snapshot();
            held_weights = held->network()->parameters()[0].clone();
        }
    } holder;
    holder.trainer = &t;
    REQUIRE(t.run(&holder) == StopReason::finished);
    REQUIRE(holder.held);
    CHECK(torch::equal(holder.held->network()->parameters()[0], holder.held_weights));
    auto latest = t.snapshot();
    CHECK(latest.get() != holder.held.get());
    CHECK(torch::equal(latest->network()->parameters()[0], t.model()->parameters()[0].cpu()));
    CHECK_FALSE(torch::equal(latest->network()->parameters()[0], holder.held_weights));
}

TEST_CASE("pause, resume and stop are cooperative and thread-safe", "[train]") {
    TrainConfig c;
    c.epochs = 1000;
    c.batch_size = 16;
    c.device = "cpu";
    Trainer t(reverse_data(), small_model(), c);
    Recorder r;
    std::thread worker([&] { t.run(&r); });
    while (r.steps < 3) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    t.pause();
    // The trainer says when it has paused (after the batch in flight, however long that takes
    // on this machine); from then on no batch runs.
    const auto asked = std::chrono::steady_clock::now();
    while (r.paused < 1 && std::chrono::steady_clock::now() - asked < std::chrono::seconds(60))
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    REQUIRE(r.paused >= 1);
    const int64_t at_pause = r.steps;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK(r.steps == at_pause);
    t.resume();
    const auto resumed = std::chrono::steady_clock::now();
    while (r.steps <= at_pause + 1 && std::chrono::steady_clock::now() - resumed < std::chrono::seconds(60))
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    CHECK(r.steps > at_pause + 1);
    const auto t0 = std::chrono::steady_clock::now();
    t.stop();
    worker.join();
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
    CHECK(r.reason == StopReason::stopped);
    CHECK(r.paused >= 1);
}

TEST_CASE("stop while paused ends the run", "[train]") {
    TrainConfig c;
    c.epochs = 1000;
    c.device = "cpu";
    Trainer t(reverse_data(), small_model(), c);
    t.pause();
    Recorder r;
    std::thread worker([&] { t.run(&r); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    t.stop();
    worker.join();
    CHECK(r.reason == StopReason::stopped);
    CHECK(t.history().global_step == 0);
}

TEST_CASE("a NaN loss stops training with a clear message and keeps the weights", "[train]") {
    TrainConfig c;
    c.epochs = 2;
    c.device = "cpu";
    Trainer t(reverse_data(), small_model(), c);
    {
        torch::NoGradGuard ng;
        t.model()->named_parameters()["dense.bias"].fill_(std::nan(""));
    }
    std::vector<torch::Tensor> before;
    for (const auto& p : t.model()->parameters()) before.push_back(p.clone());
    Recorder r;
    CHECK(t.run(&r) == StopReason::diverged);
    CHECK(r.reason == StopReason::diverged);
    CHECK_THAT(r.message, Catch::Contains("NaN"));
    auto after = t.model()->parameters();
    for (size_t i = 0; i < before.size(); ++i) CHECK(torch::allclose(before[i], after[i], 0.0, 0.0, /*equal_nan=*/true));
}

TEST_CASE("all three optimisers train", "[train]") {
    for (auto opt : {OptimizerKind::adam, OptimizerKind::sgd, OptimizerKind::adadelta}) {
        INFO(to_string(opt));
        TrainConfig c;
        c.epochs = 3;
        c.batch_size = 16;
        c.device = "cpu";
        c.optimizer = opt;
        c.lr = opt == OptimizerKind::adam ? 0.01 : opt == OptimizerKind::sgd ? 0.5 : 1.0;
        Trainer t(reverse_data(), small_model(), c);
        REQUIRE(t.run() == StopReason::finished);
        const auto& h = t.history().batch_loss.points();
        double first = 0, last = 0;
        for (size_t i = 0; i < 5; ++i) {
            first += h[i].second;
            last += h[h.size() - 1 - i].second;
        }
        CHECK(last < first);
    }
}

TEST_CASE("teacher forcing below 1 trains too", "[train]") {
    TrainConfig c;
    c.epochs = 2;
    c.device = "cpu";
    c.teacher_forcing = 0.5;
    Trainer t(reverse_data(), small_model(), c);
    CHECK(t.run() == StopReason::finished);
}

TEST_CASE("configuration errors name the value", "[train]") {
    TrainConfig c;
    c.lr = -1;
    CHECK_THROWS_WITH(c.validate(), Catch::Contains("learning rate"));
    c = TrainConfig{};
    c.teacher_forcing = 1.5;
    CHECK_THROWS_AS(c.validate(), ConfigError);
    CHECK_THROWS_WITH(optimizer_from_string("rmsprop"), Catch::Contains("adadelta"));
    auto back = TrainConfig::from_json(TrainConfig{}.to_json());
    CHECK(back.to_json() == TrainConfig{}.to_json());
}
