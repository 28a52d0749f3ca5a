#pragma once
// The Qt adapter over attnviz::TrainingSession (core/session/session.hpp), which owns
// the training lifecycle and its worker thread. The session's observer only
// appends to a mutex-protected buffer on the worker; a 50 ms timer on the GUI
// thread drains it and emits signals, so however fast training goes the GUI
// sees at most ~20 updates a second and never waits on the worker. The state
// shown is the session's own; start, continue, open, pause, resume, stop and
// save are forwarded to it.
#include <QObject>
#include <QString>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "core/session/session.hpp"

QT_BEGIN_NAMESPACE
class QTimer;
QT_END_NAMESPACE

namespace attnviz::ui {

class SessionBuffer;

class TrainingController : public QObject {
    Q_OBJECT
public:
    /// The session's states (SessionState), as the GUI shows them.
    enum class State { Idle, Preparing, Running, Paused, Stopping };
    Q_ENUM(State)

    explicit TrainingController(QObject* parent = nullptr);
    ~TrainingController() override;

    /// Trains a fresh model (data preparation and model construction run on the
    /// worker too). False with *error when a run is active or a setting is refused.
    /// train.tensorboard, when set, is the folder of the runs: this run logs in a
    /// subfolder of its own (tensorboardRun()), which continueTraining() keeps.
    bool start(std::shared_ptr<const Corpus> corpus, const ModelConfig& model, const TrainConfig& train,
               QString* error = nullptr);
    /// Fine-tunes the pretrained model opened last (initialModel()) on `corpus`: its weights, vocabularies
    /// and tokenizer with a fresh optimiser and history, as attnviz-cli train --init-from does (the corpus
    /// is cut by the model's tokenizer; the first validation point is the model's own loss).
    /// `sourceLang` / `targetLang`: a multilingual model's pair to fine-tune on (--source-lang /
    /// --target-lang; "": its tokenizer_config.json's), which the tuned model keeps as its own languages.
    bool fineTune(std::shared_ptr<const Corpus> corpus, const TrainConfig& train, QString* error = nullptr,
                  const QString& sourceLang = {}, const QString& targetLang = {});
    /// The pretrained model (a Hugging Face folder, or a checkpoint of one) opened last, which Train
    /// fine-tunes; null when the model opened last is none.
    TranslationModelPtr initialModel() const { return m_initial; }
    /// Trains the current model further -- the last run's, or an opened checkpoint's on
    /// `corpus` -- up to train.epochs in total.
    bool continueTraining(const TrainConfig& train, std::shared_ptr<const Corpus> corpus, QString* error = nullptr);
    /// Reads a checkpoint and makes it the session's model (what Save writes and
    /// Continue trains). False with *error when it cannot be read or a run is active.
    bool open(const QString& path, QString* error = nullptr);

    void pause();
    void resume();
    void stop();
    /// Asks the worker to stop and waits at most timeoutMs (window closing).
    /// True when the worker has ended; otherwise it is left to finish on its own.
    bool shutdown(int timeoutMs = 2000);

    /// Asks the session to write a checkpoint. While a worker exists (paused too)
    /// the worker writes it between two batches; otherwise it is written now. Every
    /// request ends in exactly one saveFinished(); false when it has failed already.
    bool save(const QString& path);
    /// Where Save writes without asking: the file opened or last saved to (a run starting clears it).
    QString checkpointPath() const { return m_path; }
    /// The folder the current run logs to TensorBoard in ("" when it does not).
    QString tensorboardRun() const { return m_tensorboardRun; }

    State state() const { return m_state; }
    bool isActive() const { return m_state != State::Idle; }
    /// The session's worker thread is still running (for tests of clean shutdown).
    bool workerAlive() const;
    /// A model exists (trained, stopped or opened): it can be saved and continued.
    bool hasModel() const;
    /// The model changed since it was last saved or opened.
    bool unsaved() const;
    TrainHistory history() const;
    /// The epoch the current run stops at (0 before it is prepared).
    int plannedEpochs() const { return m_plannedEpochs; }
    QString deviceDescription() const { return m_device; }
    QString runLabel() const { return m_runLabel; }
    /// Latest published model of the current/last run, or the opened checkpoint's (null before any).
    TranslationModelPtr latestModel() const { return m_latest; }

    /// Probe sentence translated at each snapshot (empty: no probe).
    void setProbeSentence(const QString& sentence);
    QString probeSentence() const { return m_probe; }

    /// Number of signal batches emitted since start (coalescing check in tests).
    int flushCount() const { return m_flushes; }
    /// Workers still running after a shutdown() timed out (the process should exit without joining them).
    static int detachedWorkers();

Q_SIGNALS:
    void stateChanged(attnviz::ui::TrainingController::State state);
    /// A run began: a fresh one (a new curve) or a continuation of the current model.
    void started(const QString& runLabel, bool continuing);
    /// The worker has prepared the data and built or restored the model.
    void prepared(const attnviz::SessionInfo& info);
    void batchLosses(const std::vector<std::pair<int64_t, double>>& points);
    void progress(const attnviz::BatchReport& last);
    void epochFinished(const attnviz::EpochReport& report, qint64 globalStep);
    void snapshotReady(attnviz::TranslationModelPtr model);
    void probeReady(const attnviz::ProbeResult& probe);
    void finished(attnviz::StopReason reason, const QString& message);
    void saveFinished(bool ok, const QString& path, const QString& error);
    /// Something went wrong that does not stop training (e.g. the TensorBoard folder cannot be written).
    void warning(const QString& message);

private:
    bool launch(const QString& label, QString* error, const std::function<void()>& begin);
    void poll();
    void refreshState();
    void setState(State state);
    void newSession();
    /// ROOT/<start time>_run<N>_<arch>_<scoring or heads>.
    QString tensorboardRunFolder(const QString& root, const ModelConfig& model) const;

    // Declared in this order so that the session (and its worker) goes before the buffer it reports to.
    std::shared_ptr<SessionBuffer> m_buffer;
    std::unique_ptr<TrainingSession> m_session;
    QTimer* m_timer;
    State m_state = State::Idle;
    QString m_device, m_runLabel, m_probe, m_path;
    QString m_tensorboardRoot, m_tensorboardRun;  ///< the TensorBoard folder set, and the run's folder in it
    TranslationModelPtr m_latest;
    TranslationModelPtr m_initial;  ///< what fineTune() starts from (a pretrained model opened)
    int m_plannedEpochs = 0;
    int m_flushes = 0;
    int m_runs = 0;
};

}  // namespace attnviz::ui
