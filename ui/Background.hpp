#pragma once
// Background work in ui/, done one way: QtConcurrent::run on Qt's global
// thread pool, and a QFutureWatcher that hands the result back on the GUI
// thread. (Training is the exception: its thread belongs to the core's
// TrainingSession.) A LatestOnly channel numbers its requests: a request that
// a newer one superseded before it started is skipped, and only the newest
// request's answer is delivered -- typing fast or turning a spin box cannot
// queue up work or bring back a stale result.
#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <QtConcurrent/QtConcurrentRun>
#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <optional>

namespace attnviz::ui {

class LatestOnly : public QObject {
public:
    using QObject::QObject;

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

private:
    template <typename T>
    struct Outcome {
        std::optional<T> value;
        QString error;
    };

    quint64 m_next = 0;      ///< id of the newest request
    quint64 m_answered = 0;  ///< id of the newest request delivered or cancelled
    std::shared_ptr<std::atomic<quint64>> m_latest = std::make_shared<std::atomic<quint64>>(0);
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
    watcher->setFuture(QtConcurrent::run([latest = m_latest, id, work = std::move(work)]() -> Outcome<T> {
        Outcome<T> outcome;
        if (latest->load() != id) return outcome;  // superseded before it started: skip the work
        try {
            outcome.value = work();
        } catch (const std::exception& e) {
            QString message = QString::fromStdString(e.what());
            // LibTorch appends a C++ stack trace: the first part is the message.
            const auto trace = message.indexOf(QLatin1String("\nException raised from"));
            outcome.error = trace >= 0 ? message.left(trace) : message;
        }
        return outcome;
    }));
    return id;
}

}  // namespace attnviz::ui
