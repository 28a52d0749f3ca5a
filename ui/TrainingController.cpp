#include "ui/TrainingController.hpp"

#include <QTimer>
#include <chrono>

#include "ui/Format.hpp"
#include "ui/TrainingJob.hpp"

namespace attnviz::ui {
namespace {
constexpr int kFlushIntervalMs = 50;  // at most ~20 GUI updates a second
}  // namespace

TrainingController::TrainingController(QObject* parent) : QObject(parent) {
    m_timer = new QTimer(this);
    m_timer->setInterval(kFlushIntervalMs);
    connect(m_timer, &QTimer::timeout, this, &TrainingController::poll);
}

TrainingController::~TrainingController() {
    blockSignals(true);  // receivers may already be half destroyed
    shutdown(2000);
}

int TrainingController::detachedWorkers() { return g_detachedWorkers.load(); }

bool TrainingController::workerAlive() const { return m_thread.joinable(); }

bool TrainingController::hasTrainer() const {
    return m_job && !isActive() && m_job->trainer != nullptr;
}

const TrainHistory* TrainingController::history() const {
    return hasTrainer() ? &m_job->trainer->history() : nullptr;
}

bool TrainingController::start(std::shared_ptr<const Corpus> corpus, const ModelConfig& model, const TrainConfig& train,
                               QString* error) {
    auto job = std::make_shared<TrainingJob>();
    job->corpus = std::move(corpus);
    job->model = model;
    job->train = train;
    return launch(std::move(job), error);
}

bool TrainingController::startFromCheckpoint(std::shared_ptr<const Checkpoint> checkpoint,
                                             std::shared_ptr<const Corpus> corpus, const TrainConfig& train,
                                             QString* error) {
    auto job = std::make_shared<TrainingJob>();
    job->checkpoint = std::move(checkpoint);
    job->corpus = std::move(corpus);
    job->model = job->checkpoint->model_config;
    job->train = train;
    return launch(std::move(job), error);
}

bool TrainingController::continueRun(const TrainConfig& train, QString* error) {
    if (!hasTrainer()) {
        if (error) *error = tr("There is no finished run to continue.");
        return false;
    }
    auto job = std::make_shared<TrainingJob>();
    job->existing = m_job->trainer;
    job->corpus = m_job->corpus;
    job->model = m_job->model;
    job->train = train;
    return launch(std::move(job), error);
}

bool TrainingController::launch(std::shared_ptr<TrainingJob> job, QString* error) {
    if (isActive()) {
        if (error) *error = tr("Training is already running.");
        return false;
    }
    if (!job->existing && (!job->corpus || job->corpus->pairs.empty())) {
        if (error) *error = tr("The corpus has no sentence pairs.");
        return false;
    }
    joinWorker();
    const bool continuing = job->existing != nullptr;
    if (!continuing) {
        m_latest.reset();
        m_srcVocab.reset();
        m_tgtVocab.reset();
        m_runLabel = tr("run %1 · %2 %3").arg(++m_runs).arg(qs(to_string(job->model.scoring)), qs(to_string(job->model.cell)));
    }
    job->probe = ss(m_probe);
    m_job = job;
    m_flushes = 0;
    m_thread = std::thread(runTrainingJob, job);
    setState(State::Starting);
    m_timer->start();
    Q_EMIT started(m_runLabel);
    return true;
}

void TrainingController::pause() {
    if (!m_job || !(m_state == State::Running || m_state == State::Starting)) return;
    {
        std::lock_guard<std::mutex> lock(m_job->mutex);
        m_job->pauseRequested = true;
        if (m_job->trainer) m_job->trainer->pause();
    }
    setState(State::Pausing);
}

void TrainingController::resume() {
    if (!m_job || !(m_state == State::Paused || m_state == State::Pausing)) return;
    {
        std::lock_guard<std::mutex> lock(m_job->mutex);
        m_job->pauseRequested = false;
        if (m_job->trainer) m_job->trainer->resume();
    }
    setState(State::Running);
}

void TrainingController::stop() {
    if (!m_job || !isActive()) return;
    {
        std::lock_guard<std::mutex> lock(m_job->mutex);
        m_job->stopRequested = true;
        if (m_job->trainer) m_job->trainer->stop();
    }
    setState(State::Stopping);
}

bool TrainingController::shutdown(int timeoutMs) {
    if (!m_thread.joinable()) return true;
    stop();
    {
        std::unique_lock<std::mutex> lock(m_job->mutex);
        if (!m_job->doneCv.wait_for(lock, std::chrono::milliseconds(timeoutMs), [this] { return m_job->done; })) {
            // The worker still holds its own reference to the job; let it finish alone
            // (decided under the lock, so the worker's count-down cannot be missed).
            m_job->detached = true;
            ++g_detachedWorkers;
            lock.unlock();
            m_thread.detach();
            m_timer->stop();
            setState(State::Idle);
            return false;
        }
    }
    poll();  // delivers the final signals and joins
    return true;
}

void TrainingController::joinWorker() {
    if (m_thread.joinable()) m_thread.join();
}

void TrainingController::setProbeSentence(const QString& sentence) {
    m_probe = sentence.trimmed();
    if (!m_job) return;
    std::lock_guard<std::mutex> lock(m_job->mutex);
    m_job->probe = ss(m_probe);
}

bool TrainingController::saveCheckpoint(const QString& path, QString* error) {
    if (!m_job || !m_job->trainer) {
        if (error) *error = tr("There is no trained model to save yet.");
        return false;
    }
    if (m_state == State::Running || m_state == State::Pausing || m_state == State::Starting ||
        m_state == State::Stopping) {
        std::lock_guard<std::mutex> lock(m_job->mutex);
        m_job->pendingSave = ss(path);  // the worker writes it after the current batch
        return true;
    }
    // Idle, or paused for sure (the worker is blocked between batches): write here.
    try {
        save_checkpoint(*m_job->trainer, ss(path));
    } catch (const std::exception& e) {
        if (error) *error = qs(e.what());
        Q_EMIT saveFinished(false, path, qs(e.what()));
        return false;
    }
    Q_EMIT saveFinished(true, path, QString());
    return true;
}

void TrainingController::setState(State state) {
    if (state == m_state) return;
    m_state = state;
    Q_EMIT stateChanged(state);
}

void TrainingController::poll() {
    if (!m_job) return;
    std::shared_ptr<TrainingJob> job = m_job;
    // Swap everything out under the lock; emit after releasing it.
    std::vector<std::pair<int64_t, double>> points;
    std::optional<BatchReport> last;
    std::vector<std::pair<EpochReport, int64_t>> epochs;
    std::vector<ProbeSnapshot> probes;
    std::vector<bool> paused;
    std::vector<TrainingJob::SaveResult> saves;
    std::string device;
    bool deviceNew, snapshotNew, done;
    int snapshotEpoch;
    int64_t snapshotStep;
    std::shared_ptr<Trainer> trainer;
    {
        std::lock_guard<std::mutex> lock(job->mutex);
        points.swap(job->points);
        last.swap(job->lastBatch);
        epochs.swap(job->epochs);
        probes.swap(job->probes);
        paused.swap(job->pausedEvents);
        saves.swap(job->saves);
        deviceNew = std::exchange(job->deviceNew, false);
        device = job->device;
        snapshotNew = std::exchange(job->snapshotNew, false);
        snapshotEpoch = job->snapshotEpoch;
        snapshotStep = job->snapshotStep;
        done = job->done;
        trainer = job->trainer;
    }
    ++m_flushes;
    if (deviceNew) {
        m_device = qs(device);
        Q_EMIT deviceReady(m_device);
        if (m_state == State::Starting) setState(State::Running);
        if (trainer && !m_srcVocab) {
            // The trainer's data never changes while it runs: share its vocabularies once.
            m_srcVocab = std::make_shared<const Vocab>(trainer->data().src_vocab);
            m_tgtVocab = std::make_shared<const Vocab>(trainer->data().tgt_vocab);
        }
    }
    if (!points.empty()) Q_EMIT batchLosses(points);
    if (last) Q_EMIT progress(*last);
    for (const auto& [report, step] : epochs) Q_EMIT epochFinished(report, step);
    for (bool p : paused) {
        if (p && (m_state == State::Pausing || m_state == State::Running)) setState(State::Paused);
        if (!p && m_state == State::Paused) setState(State::Running);
    }
    if (snapshotNew && trainer) {
        auto handle = std::make_shared<ModelHandle>();
        handle->model = trainer->snapshot();
        handle->srcVocab = m_srcVocab;
        handle->tgtVocab = m_tgtVocab;
        handle->level = trainer->data().level;
        handle->config = trainer->model_config();
        handle->corpusName = trainer->data().name;
        handle->epoch = snapshotEpoch;
        handle->globalStep = snapshotStep;
        if (handle->valid()) {
            m_latest = handle;
            Q_EMIT snapshotReady(m_latest);
        }
    }
    for (const auto& p : probes) Q_EMIT probeReady(p);
    for (const auto& s : saves) Q_EMIT saveFinished(s.ok, qs(s.path), qs(s.error));
    if (done) {
        m_timer->stop();
        joinWorker();  // the worker has returned from runJob: this does not block
        StopReason reason;
        QString message;
        {
            std::lock_guard<std::mutex> lock(job->mutex);
            reason = job->reason;
            message = qs(job->message);
        }
        setState(State::Idle);
        Q_EMIT finished(reason, message);
    }
}

}  // namespace attnviz::ui
