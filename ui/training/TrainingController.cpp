#include "ui/training/TrainingController.hpp"

#include <QDateTime>
#include <QDir>
#include <QTimer>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "core/config/pretrained_config.hpp"
#include "core/persist/checkpoint.hpp"
#include "core/persist/d2l_interop.hpp"
#include "core/persist/model_file.hpp"
#include "core/io/error.hpp"
#include "core/text/pretrained_tokenizer.hpp"
#include "ui/common/Background.hpp"
#include "ui/common/Format.hpp"

namespace attnviz::ui {
namespace {

constexpr int kFlushIntervalMs = 50;  // at most ~20 GUI updates a second
std::atomic<int> g_detachedWorkers{0};

TrainingController::State shown(SessionState s) {
    using S = TrainingController::State;
    switch (s) {
    case SessionState::idle: return S::Idle;
    case SessionState::preparing: return S::Preparing;
    case SessionState::running: return S::Running;
    case SessionState::paused: return S::Paused;
    case SessionState::stopping: return S::Stopping;
    }
    return S::Idle;
}

}  // namespace

/// The session's observer. It is called on the worker thread (and for saves on
/// the thread that asked) and only appends to these buffers under the mutex;
/// the controller swaps them out on the GUI thread. It never calls into Qt.
class SessionBuffer : public SessionObserver {
public:
    struct Batch {
        std::optional<SessionInfo> info;
        std::vector<std::pair<int64_t, double>> points;
        std::optional<BatchReport> lastBatch;
        std::vector<std::pair<EpochReport, int64_t>> epochs;
        TranslationModelPtr snapshot;  ///< only the newest since the last drain
        std::vector<ProbeResult> probes;
        std::vector<SaveResult> saves;
        std::vector<std::string> warnings;
        std::optional<std::pair<StopReason, std::string>> finished;
    };

    Batch drain() {
        Batch out;
        std::lock_guard<std::mutex> lock(m_mutex);
        std::swap(out, m_pending);
        return out;
    }

    void on_prepared(const SessionInfo& info) override {
        // Training yields to the GUI when the cores are busy: a lower priority for the
        // worker (and the LibTorch threads it starts) keeps the window responsive.
        yieldToGuiThread();
        std::lock_guard<std::mutex> lock(m_mutex);
        m_pending.info = info;
    }
    void on_batch(const BatchReport& r) override {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_pending.points.emplace_back(r.global_step, r.loss);
        m_pending.lastBatch = r;
        m_lastStep = r.global_step;
    }
    void on_epoch(const EpochReport& r) override {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_pending.epochs.emplace_back(r, m_lastStep);
    }
    void on_snapshot(const TranslationModelPtr& model) override {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_pending.snapshot = model;
    }
    void on_probe(const ProbeResult& probe) override {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_pending.probes.push_back(probe);
    }
    void on_saved(const SaveResult& result) override {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_pending.saves.push_back(result);
    }
    void on_warning(const std::string& message) override {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_pending.warnings.push_back(message);
    }
    void on_finished(StopReason reason, const std::string& message) override {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_pending.finished.emplace(reason, message);
    }

private:
    std::mutex m_mutex;
    Batch m_pending;
    int64_t m_lastStep = 0;  ///< global step of the last batch (the epoch reports' step)
};

TrainingController::TrainingController(QObject* parent) : QObject(parent) {
    m_timer = new QTimer(this);
    m_timer->setObjectName(QStringLiteral("trainingPoll"));  // names the poll in event timings (soak)
    m_timer->setInterval(kFlushIntervalMs);
    connect(m_timer, &QTimer::timeout, this, &TrainingController::poll);
    newSession();
}

TrainingController::~TrainingController() {
    blockSignals(true);  // receivers may already be half destroyed
    shutdown(2000);
}

void TrainingController::newSession() {
    m_session.reset();
    m_buffer = std::make_shared<SessionBuffer>();
    m_session = std::make_unique<TrainingSession>(m_buffer.get());
}

int TrainingController::detachedWorkers() { return g_detachedWorkers.load(); }

bool TrainingController::workerAlive() const { return !m_session->wait_for(std::chrono::milliseconds(0)); }
bool TrainingController::hasModel() const { return m_session->has_model(); }
bool TrainingController::unsaved() const { return m_session->unsaved(); }
TrainHistory TrainingController::history() const { return m_session->history(); }

QString TrainingController::tensorboardRunFolder(const QString& root, const ModelConfig& model) const {
    // As PyTorch's SummaryWriter names its runs: the start time, then what tells the runs apart.
    const QString name = QStringLiteral("%1_run%2_%3_%4")
                             .arg(QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss")))
                             .arg(m_runs + 1)
                             .arg(qs(to_string(model.arch)),
                                  qs(model.arch == ModelArch::rnn ? to_string(model.scoring) : std::string("heads") +
                                                                        std::to_string(model.num_heads)));
    return QDir(root).filePath(name);
}

bool TrainingController::start(std::shared_ptr<const Corpus> corpus, const ModelConfig& model, const TrainConfig& train,
                               QString* error) {
    const QString label = tr("run %1 · %2 %3").arg(m_runs + 1).arg(qs(to_string(model.scoring)), qs(to_string(model.cell)));
    // The TensorBoard folder is where the runs go: each fresh run logs in a folder of its own
    // (one folder would mix the runs' curves into one), which Continue keeps logging in.
    TrainConfig t = train;
    const QString root = qs(train.tensorboard);
    const QString folder = root.isEmpty() ? QString() : tensorboardRunFolder(root, model);
    t.tensorboard = ss(folder);
    if (!launch(label, error, [&] { m_session->start(std::move(corpus), model, t); })) return false;
    m_tensorboardRoot = root;
    m_tensorboardRun = folder;
    ++m_runs;
    return true;
}

bool TrainingController::fineTune(std::shared_ptr<const Corpus> corpus, const TrainConfig& train, QString* error,
                                  const QString& sourceLang, const QString& targetLang) {
    if (!m_initial) {
        if (error) *error = tr("There is no pretrained model to fine-tune: open a Hugging Face model folder first.");
        return false;
    }
    const TranslationModelPtr from = m_initial;
    QString label = tr("run %1 · fine-tune %2").arg(m_runs + 1).arg(qs(from->corpus_name()));
    // The pair chosen: the model's tokenizer with it as its own languages (tokenizer_config.json's
    // src_lang and tgt_lang, app/cli_train.cpp's --source-lang / --target-lang): the pairs are tuned
    // with their codes, and the tuned model translates into that language untold.
    TokenizerPtr tokenizer = from->tokenizer_ptr();
    if (!sourceLang.isEmpty() || !targetLang.isEmpty()) {
        try {
            tokenizer = from->tokenizer().with_default_languages(ss(sourceLang), ss(targetLang));
        } catch (const std::exception& e) {
            if (error) *error = qs(e.what());
            return false;
        }
        const auto* pt = tokenizer->pretrained().get();
        label += QStringLiteral(" (%1 → %2)").arg(qs(pt->default_source_language()), qs(pt->default_target_language()));
    }
    TrainConfig t = train;
    // Pairs the model cannot read are left out: the validation decodes up to twice the longest
    // reference plus two (core/train/train.cpp), and a Marian model stops at its position table
    // (max_position_embeddings), so no side may be longer than (positions - 2) / 2 pieces.
    const int64_t positions = from->config().pretrained ? from->config().pretrained->model.max_positions : 0;
    const int64_t longest = (positions - 2) / 2;
    if (longest > 0 && (t.max_length == 0 || t.max_length > longest)) t.max_length = longest;
    const QString root = qs(train.tensorboard);
    const QString folder = root.isEmpty() ? QString() : tensorboardRunFolder(root, from->config());
    t.tensorboard = ss(folder);
    // Its weights, vocabularies and tokenizer; a fresh optimiser and history (app/cli_train.cpp's --init-from).
    auto fresh = std::make_shared<Checkpoint>();
    fresh->model = std::make_shared<const TranslationModel>(from->network(), from->src_vocab_ptr(), from->tgt_vocab_ptr(),
                                                            tokenizer, TrainConfig{}, TrainHistory{},
                                                            from->corpus_name());
    std::shared_ptr<const Checkpoint> start = std::move(fresh);
    if (!launch(label, error, [&] { m_session->start_from(start, std::move(corpus), t); })) return false;
    m_tensorboardRoot = root;
    m_tensorboardRun = folder;
    ++m_runs;
    return true;
}

bool TrainingController::continueTraining(const TrainConfig& train, std::shared_ptr<const Corpus> corpus,
                                          QString* error) {
    // The run's own TensorBoard folder goes on; an opened checkpoint (or another folder set) starts one.
    TrainConfig t = train;
    const QString root = qs(train.tensorboard);
    QString folder;
    if (!root.isEmpty() && root == m_tensorboardRoot && !m_tensorboardRun.isEmpty()) {
        folder = m_tensorboardRun;
    } else if (!root.isEmpty()) {
        const TranslationModelPtr model = m_session->model();
        folder = tensorboardRunFolder(root, model ? model->config() : ModelConfig{});
    }
    t.tensorboard = ss(folder);
    if (!launch(QString(), error, [&] { m_session->continue_training(t, std::move(corpus)); })) return false;
    m_tensorboardRoot = root;
    m_tensorboardRun = folder;
    return true;
}

bool TrainingController::launch(const QString& label, QString* error, const std::function<void()>& begin) {
    if (isActive()) {
        if (error) *error = tr("Training is already running.");
        return false;
    }
    try {
        begin();  // the session checks the settings and starts its worker
    } catch (const std::exception& e) {
        if (error) *error = qs(e.what());
        return false;
    }
    const bool continuing = label.isEmpty();
    if (!continuing) {
        m_latest.reset();
        m_runLabel = label;
    }
    m_path.clear();  // the weights change: Save asks where, unless this run is saved somewhere
    m_plannedEpochs = 0;
    m_flushes = 0;
    setState(State::Preparing);  // the session is preparing; poll() follows its state from here on
    m_timer->start();
    Q_EMIT started(m_runLabel, continuing);
    return true;
}

bool TrainingController::open(const QString& path, QString* error) {
    if (isActive()) {
        if (error) *error = tr("Stop training before opening a checkpoint.");
        return false;
    }
    try {
        auto checkpoint = std::make_shared<const Checkpoint>(open_model_file(ss(path)));  // or a d2l model
        m_session->open(checkpoint);
        m_latest = checkpoint->model;
        m_initial = m_latest->config().is_pretrained() ? m_latest : nullptr;
    } catch (const std::exception& e) {
        if (error) *error = qs(e.what());
        return false;
    }
    m_path = path;
    m_tensorboardRun.clear();  // continuing the opened model is a run of its own
    return true;
}

void TrainingController::pause() {
    m_session->pause();
    refreshState();
}

void TrainingController::resume() {
    m_session->resume();
    refreshState();
}

void TrainingController::stop() {
    m_session->stop();
    refreshState();
}

bool TrainingController::shutdown(int timeoutMs) {
    if (!isActive()) return true;
    stop();
    if (m_session->wait_for(std::chrono::milliseconds(timeoutMs))) {
        poll();  // the worker reported its end before it ended: the state shown becomes Idle
        return true;
    }
    // The worker missed the budget: leave it to finish alone. A thread of its own waits
    // for it and then destroys the session and the buffer it reports to.
    ++g_detachedWorkers;
    std::thread([session = std::move(m_session), buffer = m_buffer]() mutable {
        session.reset();
        buffer.reset();
        --g_detachedWorkers;
    }).detach();
    newSession();
    m_timer->stop();
    setState(State::Idle);
    return false;
}

bool TrainingController::save(const QString& path) {
    bool ok = true;
    try {
        m_session->save(ss(path));  // queued for the worker while one exists
    } catch (const FileError&) {
        ok = false;  // an idle save that failed: on_saved has the message
    } catch (const std::exception& e) {
        Q_EMIT saveFinished(false, path, qs(e.what()));  // nothing to save: nothing was reported
        return false;
    }
    poll();  // an idle save was written on this thread: report it now
    return ok;
}

void TrainingController::setProbeSentence(const QString& sentence) {
    m_probe = sentence.trimmed();
    m_session->set_probe(ss(m_probe));
}

void TrainingController::setState(State state) {
    if (state == m_state) return;
    m_state = state;
    Q_EMIT stateChanged(state);
}

void TrainingController::refreshState() {
    // Idle is shown once the run's end has been drained (poll()), not when the session
    // gets there: until then its last signals are still on their way.
    const State s = shown(m_session->state());
    if (s != State::Idle) setState(s);
}

void TrainingController::poll() {
    SessionBuffer::Batch b = m_buffer->drain();
    ++m_flushes;
    if (b.info) {
        m_device = qs(b.info->device);
        m_plannedEpochs = b.info->epochs_planned;
        Q_EMIT prepared(*b.info);
    }
    if (!b.points.empty()) Q_EMIT batchLosses(b.points);
    if (b.lastBatch) Q_EMIT progress(*b.lastBatch);
    for (const auto& [report, step] : b.epochs) Q_EMIT epochFinished(report, step);
    if (b.snapshot) {
        m_latest = b.snapshot;
        Q_EMIT snapshotReady(m_latest);
    }
    for (const auto& p : b.probes) Q_EMIT probeReady(p);
    for (const auto& w : b.warnings) Q_EMIT warning(qs(w));
    for (const auto& s : b.saves) {
        if (s.ok) m_path = qs(s.path);
        Q_EMIT saveFinished(s.ok, qs(s.path), qs(s.error));
    }
    if (b.finished) {
        m_timer->stop();
        setState(State::Idle);
        Q_EMIT finished(b.finished->first, qs(b.finished->second));
    } else {
        refreshState();
    }
}

}  // namespace attnviz::ui
