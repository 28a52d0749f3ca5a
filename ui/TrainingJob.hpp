#pragma once
// The state a training worker shares with its TrainingController, and the
// worker's body. Internal to ui/: the worker only appends to these buffers
// under the mutex and never calls into Qt; the controller drains them on a timer.
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ui/TrainingController.hpp"

namespace attnviz::ui {

/// Detached workers still running (see TrainingController::shutdown()).
extern std::atomic<int> g_detachedWorkers;

/// What the worker and the GUI thread share. The worker only appends under
/// `mutex`; the GUI thread swaps the buffers out on its timer.
struct TrainingJob {
    // Inputs, fixed before the worker starts.
    std::shared_ptr<const Corpus> corpus;
    ModelConfig model;
    TrainConfig train;
    std::shared_ptr<const Checkpoint> checkpoint;   // resume from this
    std::shared_ptr<Trainer> existing;              // continue this trainer

    std::mutex mutex;
    std::condition_variable doneCv;
    std::shared_ptr<Trainer> trainer;               // set once constructed
    bool pauseRequested = false, stopRequested = false;
    std::string probe;
    std::string pendingSave;

    // Outputs, drained by the GUI thread.
    std::string device;
    bool deviceNew = false;
    std::vector<std::pair<int64_t, double>> points;
    std::optional<BatchReport> lastBatch;
    std::vector<std::pair<EpochReport, int64_t>> epochs;
    bool snapshotNew = false;
    int snapshotEpoch = 0;
    int64_t snapshotStep = 0;
    std::vector<ProbeSnapshot> probes;
    std::vector<bool> pausedEvents;
    struct SaveResult {
        bool ok;
        std::string path, error;
    };
    std::vector<SaveResult> saves;
    StopReason reason = StopReason::finished;
    std::string message;
    bool done = false;
    bool detached = false;  // the GUI gave up waiting (window closed): count down g_detached when done
    int64_t lastStep = 0;  // worker-side: global step of the last batch
};

/// The worker thread's body: prepares data, builds (or resumes) the trainer, runs it.
void runTrainingJob(std::shared_ptr<TrainingJob> job);

}  // namespace attnviz::ui
