#pragma once
// Background work in ui/, done one way: QtConcurrent::run on the app's own
// thread pool (backgroundPool()), and a QFutureWatcher that hands the result
// back on the GUI thread. (Training is the exception: its thread belongs to the core's
// TrainingSession.) A LatestOnly channel numbers its requests: a request that
// a newer one superseded before it started is skipped, and only the newest
// request's answer is delivered -- typing fast or turning a spin box cannot
// queue up work or bring back a stale result.
//
// No job outlives the channel that started it: the destructor cancels every
// request and waits for the ones already running. Work that can take long
// should therefore watch a stop flag of its own (the corpus reader does), so
// that closing a panel or quitting does not wait for it to finish. Without
// this, a job still running when the process exits races the destruction of
// static objects it uses (LibTorch's, ICU's, the parameter registry).
#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <QThread>
#include <QThreadPool>
#include <QtConcurrent/QtConcurrentRun>
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "core/io/message.hpp"

namespace attnviz::ui {

/// Lowers the calling thread's scheduling priority (nice 5) once: background work and
/// training yield to the GUI thread when the cores are busy, so the window stays responsive
/// on a machine whose cores the work would fill (what a thread creates after this, LibTorch's
/// OpenMP threads included, inherits it). Idle cores still run the work at full speed.
inline void yieldToGuiThread() {
#ifdef __linux__
    thread_local bool lowered = false;
    if (lowered) return;
    lowered = true;
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 5);
#endif
}

/// The pool background work runs on: not Qt's global one. Qt 6.4 splits the GUI
/// thread's larger blended fills (96 rows or more of a translucent colour or a
/// gradient, as Fusion's scroll bars draw) across QThreadPool::globalInstance()
/// and waits for them,
/// so a long job of ours there (a corpus being read, a beam search) held every such
/// paint until it finished: a frozen window.
inline QThreadPool* backgroundPool() {
    static QThreadPool* pool = [] {
        auto* p = new QThreadPool();  // kept to the end of the process, never destroyed during exit
        p->setObjectName(QStringLiteral("attnvizBackground"));
        p->setMaxThreadCount(std::max(2, QThread::idealThreadCount()));
        return p;
    }();
    return pool;
}

class LatestOnly : public QObject {
public:
    using QObject::QObject;
    /// Cancels every request and waits for the work already running (see the top of this file).
    ~LatestOnly() override {
        cancel();
        wait();
    }

    /// Runs work() off the GUI thread. Then, on this object's thread and only when no
    /// newer request was made meanwhile (and this object still exists), calls done
    /// with its result, or failed with the message of what it threw.
    template <typename T>
    quint64 run(std::function<T()> work, std::function<void(T)> done, std::function<void(const QString&)> failed);

    /// Drops every request in flight: none of them will be delivered.
    void cancel() {
        m_answered = ++m_next;
        m_latest->store(m_next);
    }
    /// The newest request has not been answered yet.
    bool busy() const { return m_answered != m_next; }
    /// The id run() gave the newest request: inside done/failed, the request being answered.
    quint64 newest() const { return m_next; }
    /// Blocks until no work started by this channel is running or queued.
    void wait() {
        std::unique_lock<std::mutex> lock(m_pending->mutex);
        m_pending->idle.wait(lock, [&] { return m_pending->jobs == 0; });
    }

private:
    template <typename T>
    struct Outcome {
        std::optional<T> value;
        QString error;
    };

    /// Jobs handed to the thread pool and not yet returned; the destructor waits until there are none.
    struct Pending {
        std::mutex mutex;
        std::condition_variable idle;
        int jobs = 0;
    };

    quint64 m_next = 0;      ///< id of the newest request
    quint64 m_answered = 0;  ///< id of the newest request delivered or cancelled
    std::shared_ptr<std::atomic<quint64>> m_latest = std::make_shared<std::atomic<quint64>>(0);
    std::shared_ptr<Pending> m_pending = std::make_shared<Pending>();
};

template <typename T>
quint64 LatestOnly::run(std::function<T()> work, std::function<void(T)> done, std::function<void(const QString&)> failed) {
    const quint64 id = ++m_next;
    m_latest->store(id);
    auto* watcher = new QFutureWatcher<Outcome<T>>(this);
    connect(watcher, &QFutureWatcherBase::finished, this,
            [this, watcher, id, done = std::move(done), failed = std::move(failed)] {
                watcher->deleteLater();
                if (id != m_next) return;  // a newer request will answer
                m_answered = id;
                Outcome<T> outcome = watcher->result();
                if (outcome.value) done(std::move(*outcome.value));
                else failed(outcome.error);
            });
    {
        std::lock_guard<std::mutex> lock(m_pending->mutex);
        ++m_pending->jobs;
    }
    watcher->setFuture(QtConcurrent::run(backgroundPool(), [latest = m_latest, pending = m_pending, id, work = std::move(work)]() mutable -> Outcome<T> {
        struct Done {  // counts the job out however it ends, after the work's own objects are gone
            Pending& p;
            ~Done() {
                std::lock_guard<std::mutex> lock(p.mutex);
                if (--p.jobs == 0) p.idle.notify_all();
            }
        } done_guard{*pending};
        const auto job = std::move(work);  // destroyed (with what it captured) before done_guard
        Outcome<T> outcome;
        if (latest->load() != id) return outcome;  // superseded before it started: skip the work
        yieldToGuiThread();
        try {
            outcome.value = job();
        } catch (const std::exception& e) {
            // LibTorch appends a C++ stack trace: the first part is the message.
            outcome.error = QString::fromStdString(without_stack_trace(e.what()));
        }
        return outcome;
    }));
    return id;
}

}  // namespace attnviz::ui
