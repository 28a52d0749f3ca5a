#pragma once
// Owns the training worker thread. The worker runs attnviz::Trainer::run() and
// reports through an observer that only appends to a mutex-protected buffer;
// a 50 ms timer in the GUI thread drains that buffer and emits signals, so
// however fast the trainer is, the GUI sees at most ~20 updates a second and
// never waits on the trainer (pause/resume/stop are the trainer's thread-safe
// flags; translating uses published snapshots).
#include <QObject>
#include <QString>
#include <memory>
#include <thread>
#include <vector>

#include "core/checkpoint.hpp"
#include "ui/ModelHandle.hpp"

QT_BEGIN_NAMESPACE
class QTimer;
QT_END_NAMESPACE

namespace attnviz::ui {

struct TrainingJob;

/// One refresh of the live probe: the probe sentence translated by a snapshot.
struct ProbeSnapshot {
    int epoch = 0;
    int64_t globalStep = 0;
    std::shared_ptr<const Translation> translation;
};

class TrainingController : public QObject {
    Q_OBJECT
public:
    enum class State { Idle, Starting, Running, Pausing, Paused, Stopping };
    Q_ENUM(State)

    explicit TrainingController(QObject* parent = nullptr);
    ~TrainingController() override;

    /// Starts a fresh run on a worker thread (data preparation and model
    /// construction happen there too). False with *error when already running.
    bool start(std::shared_ptr<const Corpus> corpus, const ModelConfig& model, const TrainConfig& train,
               QString* error = nullptr);
    /// Continues a loaded checkpoint on `corpus` with `train` (epochs counts from the checkpoint's).
    bool startFromCheckpoint(std::shared_ptr<const Checkpoint> checkpoint, std::shared_ptr<const Corpus> corpus,
                             const TrainConfig& train, QString* error = nullptr);
    /// Trains the last run's trainer further (after it finished or was stopped).
    bool continueRun(const TrainConfig& train, QString* error = nullptr);

    void pause();
    void resume();
    void stop();
    /// Asks the worker to stop and waits at most timeoutMs (window closing).
    /// True when the worker has ended; otherwise it is left to finish on its own.
    bool shutdown(int timeoutMs = 2000);

    State state() const { return m_state; }
    bool isActive() const { return m_state != State::Idle; }
    /// The worker thread still exists (for tests of clean shutdown).
    bool workerAlive() const;
    /// A finished run's trainer can be continued or saved.
    bool hasTrainer() const;
    const TrainHistory* history() const;  ///< the idle trainer's history, else null
    QString deviceDescription() const { return m_device; }
    QString runLabel() const { return m_runLabel; }
    /// Latest published weights of the current/last run (null before the first snapshot).
    ModelHandlePtr latestModel() const { return m_latest; }

    /// Probe sentence translated at each snapshot (empty: no probe).
    void setProbeSentence(const QString& sentence);
    QString probeSentence() const { return m_probe; }

    /// Saves the current/last run. While training runs the worker writes it
    /// between two batches and saveFinished() reports; otherwise it is written now.
    /// Returns false with *error when there is nothing to save or writing failed.
    bool saveCheckpoint(const QString& path, QString* error = nullptr);

    /// Number of signal batches emitted since start (coalescing check in tests).
    int flushCount() const { return m_flushes; }
    /// Workers still running after a shutdown() timed out (the process should exit without joining them).
    static int detachedWorkers();

Q_SIGNALS:
    void stateChanged(attnviz::ui::TrainingController::State state);
    void started(const QString& runLabel);
    void deviceReady(const QString& description);
    void batchLosses(const std::vector<std::pair<int64_t, double>>& points);
    void progress(const attnviz::BatchReport& last);
    void epochFinished(const attnviz::EpochReport& report, qint64 globalStep);
    void snapshotReady(attnviz::ui::ModelHandlePtr model);
    void probeReady(const attnviz::ui::ProbeSnapshot& snapshot);
    void finished(attnviz::StopReason reason, const QString& message);
    void saveFinished(bool ok, const QString& path, const QString& error);

private:
    bool launch(std::shared_ptr<TrainingJob> job, QString* error);
    void poll();
    void setState(State state);
    void joinWorker();

    std::shared_ptr<TrainingJob> m_job;
    std::thread m_thread;
    QTimer* m_timer;
    State m_state = State::Idle;
    QString m_device, m_runLabel, m_probe;
    ModelHandlePtr m_latest;
    std::shared_ptr<const Vocab> m_srcVocab, m_tgtVocab;
    int m_flushes = 0;
    int m_runs = 0;
};

}  // namespace attnviz::ui
