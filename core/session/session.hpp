#pragma once
// TrainingSession: the training lifecycle, written once. Start a fresh model,
// resume a checkpoint, continue the current model; pause, resume, stop; save
// at any time; publish snapshots (TranslationModel) for translating while it
// trains; translate a probe sentence at each snapshot. The CLI and the GUI are
// thin adapters over it.
//
// Threading: the session owns one worker thread, which prepares the data,
// builds or restores the model and trains. Every public member may be called
// from any thread (the GUI's or the CLI's) and returns without waiting for the
// worker, except wait()/wait_for() and save() on an idle session. The observer
// is called on the worker thread (on_state and on_saved also on the thread
// whose call changed the state or saved): it must be quick and must not call
// back into the session (the GUI adapter only appends to a buffer).
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "core/persist/checkpoint.hpp"
#include "core/data/data.hpp"
#include "core/config/history.hpp"
#include "core/train/train.hpp"
#include "core/decode/translation_model.hpp"

namespace attnviz {

/// Where the session is. There is exactly one state at a time, owned by the session.
enum class SessionState {
    idle,       ///< no worker: nothing started yet, or the last run ended
    preparing,  ///< the worker is reading the data and building the model
    running,    ///< training
    paused,     ///< the worker waits between two batches (saves are still served)
    stopping    ///< stop() was asked; the worker ends after the current batch
};
std::string to_string(SessionState s);  ///< "idle", "preparing", "running", "paused", "stopping"

/// What a run works on, reported once the data and the model are ready.
struct SessionInfo {
    std::string corpus_name;       ///< task name or file path
    TokenLevel level = TokenLevel::word;
    size_t train_pairs = 0;        ///< after filtering and the split
    size_t val_pairs = 0;
    size_t src_vocab = 0;          ///< vocabulary sizes, special tokens included
    size_t tgt_vocab = 0;
    size_t skipped_lines = 0;      ///< bad corpus lines skipped while reading
    int64_t parameters = 0;        ///< trainable parameters
    std::string device;            ///< e.g. "CPU (2 threads)" or "CUDA 0: NVIDIA H100"
    int epochs_before = 0;         ///< epochs the model had when this run started
    int epochs_planned = 0;        ///< the epoch this run stops at (TrainConfig::epochs)
    ModelConfig model;             ///< the model's shape (vocabulary sizes filled in)
    TrainConfig train;             ///< the settings of this run
    /// "toy-french: 1800 training + 200 validation pairs, vocabularies 41 / 47 tokens (words)"
    std::string describe_data() const;
};

/// The probe sentence translated by one snapshot.
struct ProbeResult {
    int epoch = 0;                 ///< epochs done when the snapshot was taken
    int64_t global_step = 0;       ///< batches done when the snapshot was taken
    std::shared_ptr<const Translation> translation;
};

/// The outcome of a save() that the worker carried out.
struct SaveResult {
    std::string path;
    bool ok = false;
    std::string error;             ///< the FileError's message when !ok
};

/// Receives a session's progress on the worker thread (see the threading note above).
class SessionObserver {
public:
    virtual ~SessionObserver() = default;
    virtual void on_state(SessionState state) {}
    virtual void on_prepared(const SessionInfo& info) {}
    virtual void on_batch(const BatchReport& report) {}
    virtual void on_epoch(const EpochReport& report) {}
    /// A new model was published (after every epoch, every snapshot_every batches, and at the end).
    virtual void on_snapshot(const TranslationModelPtr& model) {}
    virtual void on_probe(const ProbeResult& probe) {}
    virtual void on_saved(const SaveResult& result) {}
    /// Something went wrong that does not stop training, said once (e.g. the TensorBoard
    /// folder cannot be written: "TensorBoard: cannot create ...; training goes on without it").
    virtual void on_warning(const std::string& message) {}
    /// The run ended; message says why in words ("training finished", the error).
    virtual void on_finished(StopReason reason, const std::string& message) {}
};

class TrainingSession {
public:
    /// observer may be null; it must outlive the session.
    explicit TrainingSession(SessionObserver* observer = nullptr);
    /// Stops the worker and waits for it.
    ~TrainingSession();
    TrainingSession(const TrainingSession&) = delete;
    TrainingSession& operator=(const TrainingSession&) = delete;

    // --- starting: each returns at once; the worker prepares, builds and trains.
    // Each throws ConfigError when a run is active or a setting is invalid.

    /// A fresh model of shape `model` on `corpus` (the data is split, filtered
    /// and given vocabularies per `train`).
    void start(std::shared_ptr<const Corpus> corpus, const ModelConfig& model, const TrainConfig& train);
    /// The same on data already split and given vocabularies (e.g. one split shared by several runs).
    void start(std::shared_ptr<const TrainingData> data, const ModelConfig& model, const TrainConfig& train);
    /// Continues a checkpoint on `corpus` (its vocabularies, weights, optimiser
    /// state and history are kept; train.epochs is the total to reach).
    void start_from(std::shared_ptr<const Checkpoint> checkpoint, std::shared_ptr<const Corpus> corpus,
                    const TrainConfig& train);
    /// Trains the current model further (after a run ended, or an opened
    /// checkpoint on `corpus`): train.epochs is the total to reach.
    void continue_training(const TrainConfig& train, std::shared_ptr<const Corpus> corpus = nullptr);
    /// Makes a loaded checkpoint the session's model (idle only): it is what
    /// model() returns, save() writes and continue_training() trains further.
    void open(std::shared_ptr<const Checkpoint> checkpoint);

    // --- controlling a run (no effect when nothing runs)
    void pause();
    void resume();
    void stop();
    /// Sentence translated by each snapshot and reported through on_probe (empty: none).
    void set_probe(const std::string& sentence);

    /// Blocks until the worker has ended; returns why it ended (finished when nothing ran).
    StopReason wait();
    /// Waits at most `timeout`; true when no worker runs any more.
    bool wait_for(std::chrono::milliseconds timeout);

    // --- state (any thread)
    SessionState state() const;
    bool active() const { return state() != SessionState::idle; }
    /// A model exists (trained, stopped or restored): save() and continue_training() work when idle.
    bool has_model() const;
    /// The model changed since it was last saved or loaded (what a close/open prompt asks about).
    bool unsaved() const;
    /// The last published model (null before the first snapshot).
    TranslationModelPtr model() const;
    /// A copy of the training history so far.
    TrainHistory history() const;
    /// What the current or last run works on (empty before on_prepared).
    std::optional<SessionInfo> info() const;
    /// Why the last run ended and its message (finished, "" before any).
    StopReason stop_reason() const;
    std::string message() const;
    /// The last run never began: preparing it threw a ConfigError (its data or settings refused, e.g.
    /// a pair too long for the memory bound, naming its line). stop_reason() is then error; the CLI
    /// exits 2 for it, as for any refused input.
    bool refused() const;

    /// Writes the current weights, optimiser state and history as a checkpoint
    /// (atomically). While a worker runs (paused included) the worker writes it
    /// between two batches and on_saved reports: save() returns at once. When
    /// idle it writes now, reports through on_saved too, and throws FileError
    /// on failure. Throws ConfigError when there is no model yet.
    void save(const std::string& path);

private:
    friend class SessionRelay;
    struct Shared;
    using Builder = std::function<std::unique_ptr<Trainer>(Shared&)>;
    void launch(Builder build, const TrainConfig& train, bool fresh);
    static void work(std::shared_ptr<Shared> shared, Builder build);

    std::shared_ptr<Shared> m_shared;  ///< state shared with the worker (it outlives neither)
    std::thread m_thread;
};

}  // namespace attnviz
