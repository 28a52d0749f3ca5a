#pragma once
// Internal to the session (core/session*.cpp): the state a TrainingSession
// shares with its worker thread, and the observer that relays a Trainer's
// reports, serves saves between batches and translates the probe.
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>

#include "core/session/session.hpp"
#include "core/train/tensorboard_log.hpp"
#include "core/train/train.hpp"

namespace attnviz {

/// Everything the worker and the callers share; guarded by `mutex` unless noted.
struct TrainingSession::Shared {
    SessionObserver* observer = nullptr;  ///< fixed at construction
    mutable std::mutex mutex;
    std::condition_variable done_cv;
    bool worker_alive = false;            ///< a worker runs (state != idle)
    SessionState state = SessionState::idle;
    bool pause_requested = false, stop_requested = false;
    /// The trainer of the last run, owned here while no worker runs; the worker
    /// owns it while it runs and callers reach it only through `running`.
    std::unique_ptr<Trainer> trainer;
    Trainer* running = nullptr;           ///< the worker's trainer: only its thread-safe pause/resume/stop/wake
    std::shared_ptr<const Checkpoint> opened;  ///< an opened checkpoint (no trainer yet)
    std::shared_ptr<const Corpus> corpus;      ///< the corpus of the last run
    std::optional<SessionInfo> info;
    std::deque<std::string> pending_saves;
    std::string probe;
    bool unsaved = false;
    StopReason reason = StopReason::finished;
    std::string message;
    bool refused = false;  ///< TrainingSession::refused()

    /// The last published model: asked of the trainer rather than held here, so
    /// that a snapshot nobody else holds can be refreshed in place (Trainer::publish_snapshot).
    TranslationModelPtr current_model() const {
        if (running) return running->snapshot();
        if (trainer) return trainer->snapshot();
        return opened ? opened->model : nullptr;
    }

    /// A worker whose state is idle already is only telling its observer goodbye
    /// (see work()); callers that need it gone wait here for that moment to pass.
    void wait_finishing(std::unique_lock<std::mutex>& lock) {
        done_cv.wait(lock, [&] { return !(worker_alive && state == SessionState::idle); });
    }

    void set_state(std::unique_lock<std::mutex>& lock, SessionState s) {
        state = s;
        lock.unlock();
        if (observer) observer->on_state(s);
        lock.lock();
    }
};


/// Writes a checkpoint on the calling thread; the result says how it went.
SaveResult save_now(const Checkpoint& c, const std::string& path);
/// An exception's message without LibTorch's backtrace.
std::string short_message(const std::exception& e);

/// Forwards the trainer's reports to the session observer, serves saves between
/// batches, translates the probe at each snapshot and keeps the TensorBoard log
/// (TrainConfig::tensorboard). Runs on the worker.
class SessionRelay : public TrainObserver {
public:
    /// Opens the TensorBoard log when the trainer's configuration asks for one.
    SessionRelay(TrainingSession::Shared& s, Trainer& t);
    void on_batch(const BatchReport& r) override;
    void on_epoch(const EpochReport& r) override;
    void on_validation(const ValidationSample& s) override;
    void on_snapshot(int epoch, int64_t step) override { publish(m_t.snapshot(), epoch, step); }
    void on_finished(StopReason reason, const std::string& message) override;
    StopReason reason() const { return m_reason; }
    const std::string& message() const { return m_message; }
    /// Makes `model` the session's current model, tells the observer, translates the probe.
    void publish(const TranslationModelPtr& model, int epoch, int64_t step);
    /// Writes the saves asked for so far (between two batches, or after the run).
    void serve_saves();

private:
    TrainingSession::Shared& m_s;
    Trainer& m_t;
    std::unique_ptr<TensorBoardLog> m_tensorboard;  ///< null: off
    StopReason m_reason = StopReason::error;
    std::string m_message = "training ended unexpectedly";
};

}  // namespace attnviz
