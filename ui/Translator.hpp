#pragma once
// Translates off the GUI thread. Requests carry a model handle (a published
// snapshot or a loaded checkpoint, never the weights being trained); only the
// newest request's answer is delivered, so typing fast cannot queue up work.
#include <QObject>
#include <QThread>
#include <memory>

#include "ui/ModelHandle.hpp"

namespace attnviz::ui {

class Translator : public QObject {
    Q_OBJECT
public:
    explicit Translator(QObject* parent = nullptr);
    ~Translator() override;

    /// Queues a translation; returns its id. Answers arrive as translated()/failed().
    quint64 request(ModelHandlePtr model, const QString& sentence, const DecodeOptions& options);
    bool busy() const { return m_pending > 0; }

Q_SIGNALS:
    void translated(quint64 id, std::shared_ptr<const attnviz::Translation> result, attnviz::ui::ModelHandlePtr model);
    void failed(quint64 id, const QString& message);

private:
    QThread m_thread;
    QObject* m_worker;  // lives in m_thread
    quint64 m_nextId = 0;
    std::shared_ptr<std::atomic<quint64>> m_latest;
    int m_pending = 0;
};

}  // namespace attnviz::ui
