#include "ui/TrainingController.hpp"

#include <QTimer>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/device.hpp"
#include "ui/Format.hpp"

namespace attnviz::ui {
namespace {
std::atomic<int> g_detached{0};  // detached workers still running
constexpr int kFlushIntervalMs = 50;  // at most ~20 GUI updates a second
}  // namespace

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

namespace {

void serveSave(TrainingJob& job, Trainer& trainer) {
    std::string path;
    {
        std::lock_guard<std::mutex> lock(job.mutex);
        path.swap(job.pendingSave);
    }
    if (path.empty()) return;
    TrainingJob::SaveResult result{true, path, {}};
    try {
        save_checkpoint(trainer, path);
    } catch (const std::exception& e) {
        result.ok = false;
        result.error = e.what();
    }
    std::lock_guard<std::mutex> lock(job.mutex);
    job.saves.push_back(std::move(result));
}

/// Runs on the training thread: records, never calls into Qt.
class BufferingObserver : public TrainObserver {
public:
    BufferingObserver(TrainingJob& job, Trainer& trainer) : m_job(job), m_trainer(trainer) {}

    void on_batch(const BatchReport& r) override {
        {
            std::lock_guard<std::mutex> lock(m_job.mutex);
            m_job.points.emplace_back(r.global_step, r.loss);
            m_job.lastBatch = r;
            m_job.lastStep = r.global_step;
        }
        serveSave(m_job, m_trainer);  // between two batches the weights are consistent
    }
    void on_epoch(const EpochReport& r) override {
        std::lock_guard<std::mutex> lock(m_job.mutex);
        m_job.epochs.emplace_back(r, m_job.lastStep);
    }
    void on_snapshot(int epoch, int64_t step) override {
        std::string probe;
        {
            std::lock_guard<std::mutex> lock(m_job.mutex);
            m_job.snapshotNew = true;
            m_job.snapshotEpoch = epoch;
            m_job.snapshotStep = step;
            probe = m_job.probe;
        }
        if (probe.empty()) return;
        // The probe is translated here, on the worker, so the GUI only draws it.
        auto snapshot = m_trainer.snapshot();
        if (!snapshot) return;
        try {
            const auto& d = m_trainer.data();
            auto result = translate(*snapshot, d.src_vocab, d.tgt_vocab, d.level, {probe});
            if (result.empty()) return;
            ProbeSnapshot p{epoch, step, std::make_shared<const Translation>(std::move(result.front()))};
            std::lock_guard<std::mutex> lock(m_job.mutex);
            m_job.probes.push_back(std::move(p));
        } catch (const std::exception&) {
            // A probe that cannot be translated (e.g. invalid UTF-8) is simply not shown.
        }
    }
    void on_paused(bool paused) override {
        std::lock_guard<std::mutex> lock(m_job.mutex);
        m_job.pausedEvents.push_back(paused);
    }
    void on_finished(StopReason reason, const std::string& message) override {
        std::lock_guard<std::mutex> lock(m_job.mutex);
        m_job.reason = reason;
        m_job.message = message;
    }

private:
    TrainingJob& m_job;
    Trainer& m_trainer;
};

void runJob(std::shared_ptr<TrainingJob> job) {
    pthread_setname_np(pthread_self(), "attnviz-train");
    // Training yields to the GUI when the cores are busy: a lower priority for this thread
    // (and the LibTorch threads it starts) keeps the window responsive on a small machine.
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 5);
    std::shared_ptr<Trainer> trainer;
    try {
        if (job->existing) {
            trainer = job->existing;
            trainer->set_train_config(job->train);
        } else {
            TrainingData data = prepare_data(*job->corpus, job->train);
            if (job->checkpoint) trainer = resume_trainer(*job->checkpoint, std::move(data), job->train);
            else trainer = std::make_shared<Trainer>(std::move(data), job->model, job->train);
        }
        const std::string device = describe_device(trainer->device());
        {
            std::lock_guard<std::mutex> lock(job->mutex);
            job->trainer = trainer;
            job->device = device;
            job->deviceNew = true;
            if (job->pauseRequested) trainer->pause();
            if (job->stopRequested) trainer->stop();
        }
        BufferingObserver observer(*job, *trainer);
        const StopReason reason = trainer->run(&observer);
        if (reason == StopReason::finished || reason == StopReason::stopped) {
            // The last weights (a stopped epoch's too) become what Translate and Save use.
            trainer->publish_snapshot();
            observer.on_snapshot(trainer->history().epochs_done, trainer->history().global_step);  // + the probe
        }
        serveSave(*job, *trainer);
    } catch (const std::exception& e) {
        std::string msg = e.what();
        if (auto pos = msg.find("\nException raised from"); pos != std::string::npos) msg.resize(pos);
        std::lock_guard<std::mutex> lock(job->mutex);
        job->reason = StopReason::error;
        job->message = msg;
    }
    {
        std::lock_guard<std::mutex> lock(job->mutex);
        job->done = true;
        if (job->detached) --g_detached;
        if (!job->pendingSave.empty()) {
            job->saves.push_back({false, job->pendingSave, "training ended before the checkpoint could be written"});
            job->pendingSave.clear();
        }
    }
    job->doneCv.notify_all();
}

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

int TrainingController::detachedWorkers() { return g_detached.load(); }

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
    m_thread = std::thread(runJob, job);
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
            ++g_detached;
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
