// The session's worker-side observer: relays reports, serves saves, translates the probe.
#include "core/session/session_internal.hpp"

#include "core/io/message.hpp"

namespace attnviz {

SaveResult save_now(const Checkpoint& c, const std::string& path) {
    SaveResult r{path, true, {}};
    try {
        save_checkpoint(c, path);
    } catch (const std::exception& e) {
        r.ok = false;
        r.error = e.what();
    }
    return r;
}

std::string short_message(const std::exception& e) { return without_stack_trace(e.what()); }

SessionRelay::SessionRelay(TrainingSession::Shared& s, Trainer& t) : m_s(s), m_t(t) {
    const TrainConfig& config = t.train_config();
    if (config.tensorboard.empty()) return;
    SessionObserver* observer = s.observer;
    m_tensorboard = std::make_unique<TensorBoardLog>(config, t.history().global_step, [observer](const std::string& m) {
        if (observer) observer->on_warning(m);
    });
}

void SessionRelay::on_batch(const BatchReport& r) {
    {
        std::lock_guard<std::mutex> lock(m_s.mutex);
        m_s.unsaved = true;
    }
    if (m_tensorboard) m_tensorboard->batch(r);
    if (m_s.observer) m_s.observer->on_batch(r);
}

void SessionRelay::on_validation(const ValidationSample& s) {
    if (m_tensorboard) m_tensorboard->validation(s);
}

void SessionRelay::on_epoch(const EpochReport& r) {
    if (m_tensorboard) m_tensorboard->epoch(r);
    if (m_s.observer) m_s.observer->on_epoch(r);
}

void SessionRelay::on_finished(StopReason reason, const std::string& message) {
    m_reason = reason;
    m_message = message;
}

void SessionRelay::publish(const TranslationModelPtr& model, int epoch, int64_t step) {
    if (!model) return;
    std::string probe;
    {
        std::lock_guard<std::mutex> lock(m_s.mutex);
        probe = m_s.probe;
    }
    if (m_s.observer) m_s.observer->on_snapshot(model);
    if (probe.empty()) return;
    try {  // translated here, on the worker, so that a GUI only draws it
        auto result = model->translate({probe});
        if (result.empty() || !m_s.observer) return;
        m_s.observer->on_probe({epoch, step, std::make_shared<const Translation>(std::move(result.front()))});
    } catch (const std::exception&) {
        // A probe that cannot be translated (e.g. invalid UTF-8) is simply not shown.
    }
}

void SessionRelay::serve_saves() {
    for (;;) {
        std::string path;
        {
            std::lock_guard<std::mutex> lock(m_s.mutex);
            if (m_s.pending_saves.empty()) return;
            path = std::move(m_s.pending_saves.front());
            m_s.pending_saves.pop_front();
        }
        SaveResult r = save_now(m_t.checkpoint(), path);
        if (r.ok) {
            std::lock_guard<std::mutex> lock(m_s.mutex);
            m_s.unsaved = false;
        }
        if (m_s.observer) m_s.observer->on_saved(r);
    }
}

}  // namespace attnviz
