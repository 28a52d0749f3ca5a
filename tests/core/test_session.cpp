// TrainingSession: the one training lifecycle the CLI and the GUI use, and the
// training controls it runs (early stopping, keep-best, learning-rate schedules).
#include "catch_torch.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <thread>

#include "core/model/device.hpp"
#include "core/io/error.hpp"
#include "core/session/session.hpp"
#include "core/data/tasks.hpp"
#include "test_support.hpp"

using namespace attnviz;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

std::shared_ptr<const Corpus> reverse_corpus(size_t pairs = 200) {
    TaskOptions t;
    t.num_pairs = pairs;
    t.max_len = 5;
    return std::make_shared<const Corpus>(task_corpus(TaskKind::reverse, t));
}

ModelConfig small_model() {
    ModelConfig m;
    m.embed_size = 8;
    m.hidden_size = 16;
    return m;
}

TrainConfig quick(int epochs) {
    TrainConfig c;
    c.epochs = epochs;
    c.batch_size = 32;
    c.device = "cpu";
    c.eval_sample = 0;
    return c;
}

fs::path temp_dir() {
    auto d = fs::temp_directory_path() / ("attnviz-session-" + std::to_string(::getpid()) + "-" +
                                          std::to_string(std::rand()));
    fs::create_directories(d);
    return d;
}

/// Records what the session reports (from whichever thread calls it).
struct Recorder : SessionObserver {
    std::mutex mutex;
    std::vector<SessionState> states;
    std::vector<EpochReport> epochs;
    std::vector<SaveResult> saves;
    std::vector<std::thread::id> save_threads;
    std::vector<ProbeResult> probes;
    std::atomic<int64_t> steps{0};
    std::atomic<int> snapshots{0};
    std::optional<SessionInfo> info;
    StopReason reason = StopReason::error;
    std::string message;
    void on_state(SessionState s) override {
        std::lock_guard<std::mutex> lock(mutex);
        states.push_back(s);
    }
    void on_prepared(const SessionInfo& i) override {
        std::lock_guard<std::mutex> lock(mutex);
        info = i;
    }
    void on_batch(const BatchReport& b) override { steps = b.global_step; }
    void on_epoch(const EpochReport& e) override {
        std::lock_guard<std::mutex> lock(mutex);
        epochs.push_back(e);
    }
    void on_snapshot(const TranslationModelPtr&) override { ++snapshots; }
    void on_probe(const ProbeResult& p) override {
        std::lock_guard<std::mutex> lock(mutex);
        probes.push_back(p);
    }
    void on_saved(const SaveResult& r) override {
        std::lock_guard<std::mutex> lock(mutex);
        saves.push_back(r);
        save_threads.push_back(std::this_thread::get_id());
    }
    void on_finished(StopReason r, const std::string& m) override {
        std::lock_guard<std::mutex> lock(mutex);
        reason = r;
        message = m;
    }
};

bool wait_until(const std::function<bool()>& ok, std::chrono::milliseconds limit = 20s) {
    const auto t0 = std::chrono::steady_clock::now();
    while (!ok()) {
        if (std::chrono::steady_clock::now() - t0 > limit) return false;
        std::this_thread::sleep_for(5ms);
    }
    return true;
}

/// Reverse-task training pairs, and validation pairs whose targets are the
/// sources of other pairs: the better the model learns to reverse, the worse
/// its validation loss gets, so the validation loss reliably stops improving.
std::shared_ptr<const TrainingData> plateau_data() {
    TrainConfig c;
    c.val_fraction = 0.0;
    auto data = std::make_shared<TrainingData>(prepare_data(*reverse_corpus(300), c));
    for (size_t i = 0; i < 60; ++i) {
        SentencePair p = data->train[i];
        p.tgt = data->train[(i + 7) % data->train.size()].src;
        data->val.push_back(p);
    }
    return data;
}

}  // namespace

TEST_CASE("session: a run ends idle with a model that translates and saves", "[session]") {
    Recorder r;
    TrainingSession s(&r);
    CHECK(s.state() == SessionState::idle);
    CHECK_FALSE(s.has_model());
    CHECK_FALSE(s.unsaved());
    CHECK_THROWS_AS(s.save("/tmp/nothing.attnviz"), ConfigError);
    s.set_probe("a b c");
    s.start(reverse_corpus(), small_model(), quick(2));
    CHECK(s.wait() == StopReason::finished);
    CHECK(s.state() == SessionState::idle);
    CHECK(r.reason == StopReason::finished);
    CHECK(r.states.front() == SessionState::preparing);
    CHECK(r.states.back() == SessionState::idle);
    REQUIRE(r.info);
    CHECK(r.info->train_pairs + r.info->val_pairs == 200);
    CHECK(r.info->epochs_planned == 2);
    CHECK(r.probes.size() >= 2);  // one per epoch at least, each translated by its snapshot
    CHECK(r.probes.back().translation->input == "a b c");
    REQUIRE(s.model());
    CHECK(s.model()->history().epochs_done == 2);
    CHECK(s.history().epochs.size() == 2);
    CHECK(s.has_model());
    CHECK(s.unsaved());
    CHECK_FALSE(s.model()->translate({"a b"}).front().empty());

    auto dir = temp_dir();
    const auto path = (dir / "m.attnviz").string();
    s.save(path);  // idle: written now, on this thread
    CHECK_FALSE(s.unsaved());
    REQUIRE(r.saves.size() == 1);
    CHECK(r.saves[0].ok);
    CHECK(r.save_threads[0] == std::this_thread::get_id());
    auto c = load_checkpoint(path);
    CHECK(c.model->history().epochs_done == 2);
    CHECK_FALSE(c.optimizer_state.empty());
    CHECK_THROWS_AS(s.save((dir / "missing-dir" / "m.attnviz").string()), FileError);
    testing::remove_tree(dir);
}

TEST_CASE("session: pause is shown at once, a save while paused is written by the worker", "[session]") {
    Recorder r;
    TrainingSession s(&r);
    TrainConfig c = quick(1000);
    c.batch_size = 8;
    s.start(reverse_corpus(), small_model(), c);
    CHECK_THROWS_AS(s.start(reverse_corpus(), small_model(), c), ConfigError);  // one run at a time
    REQUIRE(wait_until([&] { return r.steps >= 3; }));
    s.pause();
    CHECK(s.state() == SessionState::paused);  // the session's state, not a stale event
    std::this_thread::sleep_for(200ms);
    const int64_t at_pause = r.steps;
    auto dir = temp_dir();
    const auto path = (dir / "paused.attnviz").string();
    s.save(path);  // a worker exists: it writes between batches, although paused
    REQUIRE(wait_until([&] {
        std::lock_guard<std::mutex> lock(r.mutex);
        return !r.saves.empty();
    }));
    CHECK(r.saves[0].ok);
    CHECK(r.save_threads[0] != std::this_thread::get_id());
    CHECK(load_checkpoint(path).model->history().global_step == at_pause);
    CHECK(r.steps == at_pause);  // saving did not resume training
    CHECK(s.state() == SessionState::paused);
    s.resume();
    CHECK(s.state() == SessionState::running);
    REQUIRE(wait_until([&] { return r.steps > at_pause + 2; }));
    CHECK(s.state() == SessionState::running);
    s.stop();
    CHECK(s.state() == SessionState::stopping);
    CHECK(s.wait() == StopReason::stopped);
    CHECK(s.state() == SessionState::idle);
    testing::remove_tree(dir);
}

TEST_CASE("session: continue a finished run, open a checkpoint and continue it", "[session]") {
    auto corpus = reverse_corpus(150);
    auto dir = temp_dir();
    const auto path = (dir / "two.attnviz").string();
    int64_t steps_after_two = 0;
    {
        TrainingSession s;
        CHECK_THROWS_AS(s.continue_training(quick(3)), ConfigError);  // nothing to continue yet
        s.start(corpus, small_model(), quick(2));
        REQUIRE(s.wait() == StopReason::finished);
        steps_after_two = s.history().global_step;
        s.save(path);
        s.continue_training(quick(4));
        REQUIRE(s.wait() == StopReason::finished);
        CHECK(s.history().epochs_done == 4);
        CHECK(s.history().global_step == 2 * steps_after_two);
        CHECK(s.model()->history().epochs_done == 4);
    }
    TrainingSession s;
    auto checkpoint = std::make_shared<const Checkpoint>(load_checkpoint(path));
    s.open(checkpoint);
    CHECK(s.model() == checkpoint->model);
    CHECK(s.has_model());
    CHECK_FALSE(s.unsaved());
    const auto copy = (dir / "copy.attnviz").string();
    s.save(copy);  // the opened checkpoint, as it is
    CHECK(load_checkpoint(copy).model->history().global_step == steps_after_two);
    CHECK_THROWS_AS(s.continue_training(quick(3)), ConfigError);  // an opened checkpoint needs a corpus
    s.continue_training(quick(3), corpus);
    REQUIRE(s.wait() == StopReason::finished);
    CHECK(s.history().epochs_done == 3);
    CHECK(s.history().global_step == steps_after_two * 3 / 2);
    CHECK(s.unsaved());
    testing::remove_tree(dir);
}

TEST_CASE("session: bad input is an error, not a crash, the destructor stops a run", "[session]") {
    Recorder r;
    TrainingSession s(&r);
    CHECK_THROWS_AS(s.start(std::make_shared<const Corpus>(), small_model(), quick(1)), ConfigError);
    TrainConfig bad = quick(1);
    bad.lr = -1;
    CHECK_THROWS_AS(s.start(reverse_corpus(), small_model(), bad), ConfigError);
    TrainConfig none_fit = quick(1);
    none_fit.max_length = 1;  // every reverse pair is longer: preparing fails on the worker
    s.start(reverse_corpus(), small_model(), none_fit);
    CHECK(s.wait() == StopReason::error);
    CHECK_THAT(s.message(), Catch::Contains("max length"));
    CHECK(s.state() == SessionState::idle);
    CHECK_FALSE(s.has_model());

    const auto t0 = std::chrono::steady_clock::now();
    {
        TrainingSession running;
        running.start(reverse_corpus(), small_model(), quick(1000));
        std::this_thread::sleep_for(300ms);
    }  // destroyed while training
    CHECK(std::chrono::steady_clock::now() - t0 < 10s);
}

TEST_CASE("session: snapshots translate on another thread while training goes on", "[session]") {
    TrainingSession s;
    TrainConfig c = quick(1000);
    c.batch_size = 8;
    c.snapshot_every = 2;
    s.start(reverse_corpus(), small_model(), c);
    REQUIRE(wait_until([&] { return s.model() != nullptr; }));
    std::atomic<int> translated{0};
    // Many reads across snapshots published every 2 batches: a snapshot is never missing
    // (a reader once got none between the old one's reset and the new one, and crashed).
    std::atomic<int> missing{0};
    std::thread reader([&] {
        for (int i = 0; i < 60; ++i) {
            auto model = s.model();  // immutable: safe to use while the worker trains
            if (!model) {
                ++missing;
                continue;
            }
            if (!model->translate({"a b c", "c b"}).front().empty()) ++translated;
        }
    });
    reader.join();
    s.stop();
    s.wait();
    CHECK(missing == 0);
    CHECK(translated == 60);
}

TEST_CASE("early stopping ends a run whose validation loss stops improving", "[session][controls]") {
    Recorder r;
    TrainingSession s(&r);
    TrainConfig c = quick(60);
    c.patience = 2;
    c.lr = 0.02;
    s.start(plateau_data(), small_model(), c);
    REQUIRE(s.wait() == StopReason::early_stop);
    CHECK_THAT(s.message(), Catch::Contains("not improved for 2 epochs"));
    const TrainHistory h = s.history();
    REQUIRE(h.best_epoch > 0);
    CHECK(h.epochs_done < 60);
    CHECK(h.epochs_done == h.best_epoch + 2);
    for (const auto& e : h.epochs) CHECK(e.val_loss >= h.best_val_loss());
    // Patience 0 is off: the same data runs every epoch.
    TrainingSession off;
    c.patience = 0;
    c.epochs = h.epochs_done + 2;
    off.start(plateau_data(), small_model(), c);
    CHECK(off.wait() == StopReason::finished);
    CHECK(off.history().epochs_done == c.epochs);
    CHECK(off.history().best_epoch == h.best_epoch);  // the same run up to there
}

TEST_CASE("keep-best: the kept and saved model is the best epoch's", "[session][controls]") {
    auto data = plateau_data();
    TrainConfig c = quick(8);
    c.lr = 0.02;
    c.keep_best = true;
    TrainingSession s;
    s.start(data, small_model(), c);
    REQUIRE(s.wait() == StopReason::finished);
    const TrainHistory h = s.history();
    REQUIRE(h.best_epoch > 0);
    REQUIRE(h.best_epoch < h.epochs_done);  // the loss got worse after the best epoch
    CHECK_THAT(s.message(), Catch::Contains("kept the weights of epoch " + std::to_string(h.best_epoch)));
    auto dir = temp_dir();
    const auto path = (dir / "best.attnviz").string();
    s.save(path);
    // The saved weights give the best epoch's validation loss, not the last one's.
    auto saved = std::make_shared<const Checkpoint>(load_checkpoint(path));
    CHECK(saved->model->history().best_epoch == h.best_epoch);
    Trainer check(*saved, *data, c);
    const double val = check.evaluate(data->val, 0).val_loss;
    CHECK(val == Approx(h.best_val_loss()).epsilon(1e-5));
    CHECK(val != Approx(h.epochs.back().val_loss).epsilon(1e-5));
    testing::remove_tree(dir);
}

TEST_CASE("learning-rate schedules: step decay and reduce on plateau", "[session][controls]") {
    SECTION("step: times the factor every lr_step epochs") {
        TrainConfig c = quick(5);
        c.lr = 0.01;
        c.lr_schedule = LrSchedule::step;
        c.lr_step = 2;
        c.lr_factor = 0.5;
        TrainingSession s;
        s.start(reverse_corpus(120), small_model(), c);
        REQUIRE(s.wait() == StopReason::finished);
        const auto h = s.history();
        REQUIRE(h.epochs.size() == 5);
        const double expected[] = {0.01, 0.01, 0.005, 0.005, 0.0025};
        for (size_t i = 0; i < 5; ++i) CHECK(h.epochs[i].lr == Approx(expected[i]));
    }
    SECTION("plateau: times the factor after lr_patience epochs without a new best") {
        TrainConfig c = quick(12);
        c.lr = 0.02;
        c.lr_schedule = LrSchedule::plateau;
        c.lr_patience = 1;
        c.lr_factor = 0.1;
        TrainingSession s;
        s.start(plateau_data(), small_model(), c);
        REQUIRE(s.wait() == StopReason::finished);
        const auto h = s.history();
        bool reduced = false;
        double best = INFINITY;
        int bad = 0;
        for (size_t i = 0; i + 1 < h.epochs.size(); ++i) {
            const auto& e = h.epochs[i];
            bad = e.val_loss < best ? 0 : bad + 1;
            best = std::min(best, e.val_loss);
            const bool drop = h.epochs[i + 1].lr < e.lr;
            CHECK(drop == (bad > c.lr_patience));  // exactly when the patience ran out
            if (drop) {
                reduced = true;
                CHECK(h.epochs[i + 1].lr == Approx(e.lr * 0.1));
                bad = 0;
            }
        }
        CHECK(reduced);
    }
    SECTION("none keeps the rate") {
        TrainingSession s;
        s.start(reverse_corpus(120), small_model(), quick(3));
        REQUIRE(s.wait() == StopReason::finished);
        for (const auto& e : s.history().epochs) CHECK(e.lr == Approx(TrainConfig{}.lr));
    }
}

TEST_CASE("a CPU device is described with its threads, one in the singular", "[session]") {
    {
        attnviz::testing::ThreadCount one(1);
        CHECK(describe_device(torch::kCPU) == "cpu (1 thread)");
    }
    attnviz::testing::ThreadCount two(2);
    CHECK(describe_device(torch::kCPU) == "cpu (2 threads)");
}
