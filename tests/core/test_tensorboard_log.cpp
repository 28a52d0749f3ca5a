// The TensorBoard log of a training session (core/train/tensorboard_log.hpp): what a run
// writes with TrainConfig::tensorboard set, read back event by event; a folder that cannot
// be written and a write that fails are said once and training goes on.
#include "catch_torch.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include "core/data/tasks.hpp"
#include "core/session/session.hpp"
#include "file_limits.hpp"
#include "tensorboard_events.hpp"
#include "test_support.hpp"

using namespace attnviz;
namespace fs = std::filesystem;

namespace {

std::shared_ptr<const Corpus> reverse_corpus() {
    TaskOptions t;
    t.num_pairs = 120;
    t.max_len = 5;
    return std::make_shared<const Corpus>(task_corpus(TaskKind::reverse, t));
}

ModelConfig small_model() {
    ModelConfig m;
    m.embed_size = 8;
    m.hidden_size = 16;
    return m;
}

TrainConfig logged(const std::string& dir, int epochs) {
    TrainConfig c;
    c.epochs = epochs;
    c.batch_size = 16;
    c.device = "cpu";
    c.eval_sample = 5;
    c.val_fraction = 0.2;
    c.tensorboard = dir;
    c.tensorboard_every = 2;
    return c;
}

struct Warnings : SessionObserver {
    std::mutex mutex;
    std::vector<std::string> messages;
    int64_t steps = 0;
    void on_warning(const std::string& m) override {
        std::lock_guard<std::mutex> lock(mutex);
        messages.push_back(m);
    }
    void on_batch(const BatchReport& b) override { steps = b.global_step; }
};

std::vector<std::string> event_files(const fs::path& dir) {
    std::vector<std::string> files;
    for (const auto& name : testing::names_in(dir.string()))
        if (name.find("tfevents") != std::string::npos) files.push_back((dir / name).string());
    return files;
}

}  // namespace

TEST_CASE("tensorboard log: a session writes scalars, three heatmaps and the translations per validation",
          "[tensorboard][session]") {
    testing::ScratchDir scratch("tensorboard");
    const fs::path dir = fs::path(scratch.path) / "runs" / "reverse";
    Warnings w;
    TrainingSession s(&w);
    s.start(reverse_corpus(), small_model(), logged(dir.string(), 2));
    REQUIRE(s.wait() == StopReason::finished);
    CHECK(w.messages.empty());
    const auto files = event_files(dir);
    REQUIRE(files.size() == 1);
    const auto events = testing::read_tb_events(files[0]);
    REQUIRE_FALSE(events.empty());
    CHECK(events[0].file_version == "brain.Event:2");

    std::map<std::string, std::vector<int64_t>> steps;  // tag -> steps, in order
    std::map<std::string, const testing::TbValue*> last;
    for (const auto& e : events)
        for (const auto& v : e.values) {
            steps[v.tag].push_back(e.step);
            last[v.tag] = &v;
        }
    const int64_t batches = w.steps;  // 96 training pairs in batches of 16: 6 an epoch
    REQUIRE(batches == 12);
    // Every second batch (tensorboard_every 2): steps 2, 4, ..., 12.
    CHECK(steps["train/loss"] == std::vector<int64_t>{2, 4, 6, 8, 10, 12});
    CHECK(steps["train/lr"].size() == 6);
    CHECK(steps["train/tokens_per_second"].size() == 6);
    CHECK(last["train/lr"]->simple == Approx(0.005f));
    // One validation per epoch, at the epoch's last step.
    for (const char* tag : {"valid/loss", "valid/bleu", "valid/accuracy", "valid/token_accuracy",
                            "valid/alignment_accuracy", "valid/aer", "valid/translations", "attention/0",
                            "attention/1", "attention/2"}) {
        INFO(tag);
        CHECK(steps[tag] == std::vector<int64_t>{6, 12});
    }
    CHECK(steps.count("attention/3") == 0);
    // The scalars are the history's.
    const TrainHistory h = s.history();
    CHECK(last["valid/loss"]->simple == Approx(h.epochs.back().val_loss));
    CHECK(last["valid/bleu"]->simple == Approx(h.epochs.back().val_bleu));
    // A heatmap: a PNG of a plausible size; the translations: a table of 5 sentences + the header.
    const auto* image = last["attention/0"];
    CHECK(image->png.substr(1, 3) == "PNG");
    CHECK(image->width >= 24);
    CHECK(image->height >= 24);
    const auto* text = last["valid/translations"];
    CHECK(text->plugin == "text");
    CHECK(text->shape == std::vector<int64_t>{6, 3});
    CHECK(text->strings.at(0) == "**source**");

    // Continuing the run: a second file in the same folder, its steps going on from 12.
    s.continue_training(logged(dir.string(), 3));
    REQUIRE(s.wait() == StopReason::finished);
    REQUIRE(event_files(dir).size() == 2);
    std::vector<int64_t> continued;
    for (const auto& f : event_files(dir))
        for (const auto& e : testing::read_tb_events(f))
            for (const auto& v : e.values)
                if (v.tag == "valid/loss") continued.push_back(e.step);
    std::sort(continued.begin(), continued.end());
    CHECK(continued == std::vector<int64_t>{6, 12, 18});
}

TEST_CASE("tensorboard log: a folder that cannot be written is said once, and training goes on",
          "[tensorboard][session]") {
    testing::ScratchDir scratch("tensorboard");
    const std::string file = scratch.path + "/not-a-folder";
    std::ofstream(file) << "x";
    Warnings w;
    TrainingSession s(&w);
    s.start(reverse_corpus(), small_model(), logged(file + "/runs", 2));
    CHECK(s.wait() == StopReason::finished);
    REQUIRE(w.messages.size() == 1);
    CHECK(w.messages[0].find("TensorBoard") != std::string::npos);
    CHECK(w.messages[0].find("not-a-folder") != std::string::npos);
    CHECK(w.messages[0].find("training goes on") != std::string::npos);
    CHECK(s.history().epochs_done == 2);
}

TEST_CASE("tensorboard log: a write that fails mid-run is said once, and training goes on",
          "[tensorboard][session]") {
    testing::ScratchDir scratch("tensorboard");
    Warnings w;
    TrainingSession s(&w);
    {
        testing::FileSizeLimit limit(600);  // the first event and a few scalars fit, the first heatmap does not
        REQUIRE(limit.ok());
        s.start(reverse_corpus(), small_model(), logged(scratch.path, 2));
        CHECK(s.wait() == StopReason::finished);
    }
    REQUIRE(w.messages.size() == 1);
    CHECK(w.messages[0].find("cannot write") != std::string::npos);
    CHECK(s.history().epochs_done == 2);
    // The file stops at the limit; nothing was appended after the failed write.
    const auto files = event_files(scratch.path);
    REQUIRE(files.size() == 1);
    CHECK(fs::file_size(files[0]) <= 600);
}
