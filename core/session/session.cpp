// TrainingSession: one worker thread, one state, one place where runs start,
// pause, stop, save and publish. See the threading note in session.hpp.
#include "core/session/session.hpp"
#include "core/session/session_internal.hpp"

#include <pthread.h>

#include <sstream>

#include "core/model/device.hpp"
#include "core/io/error.hpp"
#include "core/train/precision.hpp"
#include "core/train/train.hpp"

namespace attnviz {

std::string to_string(SessionState s) {
    switch (s) {
    case SessionState::idle: return "idle";
    case SessionState::preparing: return "preparing";
    case SessionState::running: return "running";
    case SessionState::paused: return "paused";
    case SessionState::stopping: return "stopping";
    }
    return "?";
}

std::string SessionInfo::describe_data() const {
    std::ostringstream s;
    s << corpus_name << ": " << train_pairs << " training + " << val_pairs << " validation pairs, vocabularies "
      << src_vocab << " / " << tgt_vocab << " tokens (" << level_noun(level) << ")";
    if (skipped_lines > 0) s << ", " << skipped_lines << " bad lines skipped";
    return s.str();
}

TrainingSession::TrainingSession(SessionObserver* observer) : m_shared(std::make_shared<Shared>()) {
    m_shared->observer = observer;
}

TrainingSession::~TrainingSession() {
    stop();
    if (m_thread.joinable()) m_thread.join();
}

void TrainingSession::start(std::shared_ptr<const Corpus> corpus, const ModelConfig& model, const TrainConfig& train) {
    if (!corpus || corpus->pairs.empty()) throw ConfigError("the corpus has no sentence pairs");
    model.validate();
    launch(
        [corpus, model, train](Shared& s) {
            auto trainer = std::make_unique<Trainer>(prepare_data(*corpus, train), model, train);
            std::lock_guard<std::mutex> lock(s.mutex);
            s.corpus = corpus;
            s.opened.reset();
            return trainer;
        },
        train, true);
}

void TrainingSession::start(std::shared_ptr<const TrainingData> data, const ModelConfig& model,
                            const TrainConfig& train) {
    if (!data || data->train.empty()) throw ConfigError("there are no training pairs");
    model.validate();
    launch(
        [data, model, train](Shared& s) {
            auto trainer = std::make_unique<Trainer>(*data, model, train);
            std::lock_guard<std::mutex> lock(s.mutex);
            s.corpus.reset();
            s.opened.reset();
            return trainer;
        },
        train, true);
}

void TrainingSession::start_from(std::shared_ptr<const Checkpoint> checkpoint, std::shared_ptr<const Corpus> corpus,
                                 const TrainConfig& train) {
    if (!checkpoint || !checkpoint->model) throw ConfigError("there is no checkpoint to resume");
    if (!corpus || corpus->pairs.empty()) throw ConfigError("the corpus has no sentence pairs");
    // A pretrained model cuts any corpus with its own tokenizer (core/data/training_data.hpp).
    if (corpus->level != checkpoint->model->level() && !checkpoint->model->tokenizer().pretrained())
        throw ConfigError("the checkpoint works on " + level_noun(checkpoint->model->level()) +
                          " but the corpus is tokenised differently");
    launch(
        [checkpoint, corpus, train](Shared& s) {
            // The model's own tokenizer (subword: its SentencePiece model) splits the corpus.
            auto data = prepare_data(*corpus, train, checkpoint->model->tokenizer_ptr());
            auto trainer = std::make_unique<Trainer>(*checkpoint, std::move(data), train);
            std::lock_guard<std::mutex> lock(s.mutex);
            s.corpus = corpus;
            s.opened.reset();
            return trainer;
        },
        train, true);
}

void TrainingSession::continue_training(const TrainConfig& train, std::shared_ptr<const Corpus> corpus) {
    std::shared_ptr<const Checkpoint> opened;
    {
        std::unique_lock<std::mutex> lock(m_shared->mutex);
        m_shared->wait_finishing(lock);
        if (m_shared->worker_alive) throw ConfigError("training is already running");
        opened = m_shared->opened;
        if (!opened && !m_shared->trainer) throw ConfigError("there is no model to continue: train one or open a checkpoint");
    }
    if (opened) return start_from(opened, corpus, train);
    launch(
        [train](Shared& s) {
            std::lock_guard<std::mutex> lock(s.mutex);
            s.trainer->set_train_config(train);  // may throw: nothing has moved yet
            s.running = s.trainer.get();         // model() keeps answering while it moves
            return std::move(s.trainer);
        },
        train, false);
}

void TrainingSession::open(std::shared_ptr<const Checkpoint> checkpoint) {
    if (!checkpoint || !checkpoint->model) throw ConfigError("there is no checkpoint to open");
    std::unique_lock<std::mutex> lock(m_shared->mutex);
    m_shared->wait_finishing(lock);
    if (m_shared->worker_alive) throw ConfigError("training is running: stop it before opening a checkpoint");
    m_shared->opened = std::move(checkpoint);
    m_shared->trainer.reset();
    m_shared->info.reset();
    m_shared->unsaved = false;
}

void TrainingSession::launch(Builder build, const TrainConfig& train, bool fresh) {
    train.validate();
    resolve_device(train.device);  // an unknown or absent device is an error now, not in the worker
    {
        std::unique_lock<std::mutex> lock(m_shared->mutex);
        m_shared->wait_finishing(lock);
        if (m_shared->worker_alive) throw ConfigError("training is already running");
        m_shared->worker_alive = true;
        m_shared->state = SessionState::preparing;  // from here on: never idle while the worker lives, until it ends
        m_shared->pause_requested = m_shared->stop_requested = false;
        m_shared->reason = StopReason::finished;
        m_shared->message.clear();
        m_shared->refused = false;
        if (fresh) {  // a new model replaces the last one (the GUI has asked about saving it)
            m_shared->trainer.reset();  // (an opened checkpoint stays until the new model is built)
            m_shared->info.reset();
            m_shared->unsaved = false;
        }
    }
    if (m_thread.joinable()) m_thread.join();  // the last worker has finished its work
    m_thread = std::thread(&TrainingSession::work, m_shared, std::move(build));
}

void TrainingSession::work(std::shared_ptr<Shared> shared, Builder build) {
    pthread_setname_np(pthread_self(), "attnviz-train");
    Shared& s = *shared;
    if (s.observer) s.observer->on_state(SessionState::preparing);
    StopReason reason = StopReason::error;
    std::string message;
    bool refused = false;
    std::unique_ptr<Trainer> trainer;
    try {
        trainer = build(s);
        SessionInfo info;
        const TrainingData& d = trainer->data();
        info.corpus_name = d.name;
        info.level = d.level;
        info.train_pairs = d.train.size();
        info.val_pairs = d.val.size();
        info.src_vocab = d.src_vocab.size();
        info.tgt_vocab = d.tgt_vocab.size();
        info.skipped_lines = d.skipped_lines;
        info.parameters = count_parameters(*trainer->model());
        info.device = describe_device(trainer->device());
        if (trainer->train_config().precision == Precision::bf16)
            info.device += trainer->device().is_cpu() && !cpu_has_bf16_hardware()
                               ? ", bf16 mixed precision (this CPU has no bf16 hardware: slower than fp32)"
                               : ", bf16 mixed precision";
        info.epochs_before = trainer->history().epochs_done;
        info.epochs_planned = trainer->train_config().epochs;
        info.model = trainer->model_config();
        info.train = trainer->train_config();
        if (s.observer) s.observer->on_prepared(info);
        SessionRelay relay(s, *trainer);
        trainer->set_between_batches([&relay] { relay.serve_saves(); });
        {
            std::unique_lock<std::mutex> lock(s.mutex);
            s.info = info;
            s.running = trainer.get();
            if (s.pause_requested) trainer->pause();
            if (s.stop_requested) trainer->stop();
            if (s.state == SessionState::preparing) s.set_state(lock, SessionState::running);
        }
        trainer->run(&relay);
        reason = relay.reason();
        message = relay.message();
        trainer->set_between_batches(nullptr);
        relay.publish(trainer->snapshot(), trainer->history().epochs_done, trainer->history().global_step);
        // Saves asked for until the very end are written; only then does the worker end.
        for (;;) {
            relay.serve_saves();
            std::unique_lock<std::mutex> lock(s.mutex);
            if (!s.pending_saves.empty()) continue;
            s.running = nullptr;
            s.trainer = std::move(trainer);
            break;
        }
    } catch (const std::exception& e) {
        reason = StopReason::error;
        message = short_message(e);
        refused = !trainer && dynamic_cast<const ConfigError*>(&e) != nullptr;
    }
    std::deque<std::string> unserved;  // only when preparing failed: there is nothing to save
    {
        std::unique_lock<std::mutex> lock(s.mutex);
        s.running = nullptr;
        if (trainer) s.trainer = std::move(trainer);  // e.g. continuing failed: the model is not lost
        unserved.swap(s.pending_saves);
        s.reason = reason;
        s.message = message;
        s.refused = refused;
        s.state = SessionState::idle;
    }
    // The observer hears the end before wait() returns, so whoever waited sees everything.
    if (s.observer) {
        for (const auto& path : unserved) s.observer->on_saved({path, false, "there was no model to save: " + message});
        s.observer->on_state(SessionState::idle);
        s.observer->on_finished(reason, message);
    }
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        s.worker_alive = false;
    }
    s.done_cv.notify_all();
}

void TrainingSession::pause() {
    std::unique_lock<std::mutex> lock(m_shared->mutex);
    const auto st = m_shared->state;
    if (st != SessionState::running && st != SessionState::preparing) return;
    m_shared->pause_requested = true;
    if (m_shared->running) m_shared->running->pause();
    m_shared->set_state(lock, SessionState::paused);
}

void TrainingSession::resume() {
    std::unique_lock<std::mutex> lock(m_shared->mutex);
    if (m_shared->state != SessionState::paused) return;
    m_shared->pause_requested = false;
    if (m_shared->running) m_shared->running->resume();
    m_shared->set_state(lock, m_shared->running ? SessionState::running : SessionState::preparing);
}

void TrainingSession::stop() {
    std::unique_lock<std::mutex> lock(m_shared->mutex);
    const auto st = m_shared->state;
    if (!m_shared->worker_alive || st == SessionState::stopping || st == SessionState::idle) return;
    m_shared->stop_requested = true;
    if (m_shared->running) m_shared->running->stop();
    m_shared->set_state(lock, SessionState::stopping);
}

void TrainingSession::set_probe(const std::string& sentence) {
    std::lock_guard<std::mutex> lock(m_shared->mutex);
    m_shared->probe = sentence;
}

StopReason TrainingSession::wait() {
    std::unique_lock<std::mutex> lock(m_shared->mutex);
    m_shared->done_cv.wait(lock, [&] { return !m_shared->worker_alive; });
    return m_shared->reason;
}

bool TrainingSession::wait_for(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(m_shared->mutex);
    return m_shared->done_cv.wait_for(lock, timeout, [&] { return !m_shared->worker_alive; });
}

SessionState TrainingSession::state() const {
    std::lock_guard<std::mutex> lock(m_shared->mutex);
    return m_shared->state;
}

bool TrainingSession::has_model() const {
    std::lock_guard<std::mutex> lock(m_shared->mutex);
    return m_shared->trainer || m_shared->running || m_shared->opened;
}

bool TrainingSession::unsaved() const {
    std::lock_guard<std::mutex> lock(m_shared->mutex);
    return m_shared->unsaved;
}

TranslationModelPtr TrainingSession::model() const {
    std::lock_guard<std::mutex> lock(m_shared->mutex);
    return m_shared->current_model();
}

TrainHistory TrainingSession::history() const {
    std::lock_guard<std::mutex> lock(m_shared->mutex);
    if (!m_shared->worker_alive && m_shared->trainer) return m_shared->trainer->history();
    auto model = m_shared->current_model();  // while training: the last snapshot's
    return model ? model->history() : TrainHistory{};
}

std::optional<SessionInfo> TrainingSession::info() const {
    std::lock_guard<std::mutex> lock(m_shared->mutex);
    return m_shared->info;
}

StopReason TrainingSession::stop_reason() const {
    std::lock_guard<std::mutex> lock(m_shared->mutex);
    return m_shared->reason;
}

std::string TrainingSession::message() const {
    std::lock_guard<std::mutex> lock(m_shared->mutex);
    return m_shared->message;
}

bool TrainingSession::refused() const {
    std::lock_guard<std::mutex> lock(m_shared->mutex);
    return m_shared->refused;
}

void TrainingSession::save(const std::string& path) {
    Checkpoint checkpoint;
    {
        std::unique_lock<std::mutex> lock(m_shared->mutex);
        m_shared->wait_finishing(lock);
        if (m_shared->worker_alive) {
            m_shared->pending_saves.push_back(path);  // the worker writes it between two batches
            if (m_shared->running) m_shared->running->wake();
            return;
        }
        if (m_shared->trainer) checkpoint = m_shared->trainer->checkpoint();
        else if (m_shared->opened) checkpoint = *m_shared->opened;
        else throw ConfigError("there is no model to save yet: train one or open a checkpoint");
    }
    const SaveResult r = save_now(checkpoint, path);
    if (r.ok) {
        std::lock_guard<std::mutex> lock(m_shared->mutex);
        m_shared->unsaved = false;
    }
    if (m_shared->observer) m_shared->observer->on_saved(r);
    if (!r.ok) throw FileError(r.error);
}

}  // namespace attnviz
