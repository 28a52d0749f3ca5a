#include "ui/Translator.hpp"

#include <QCoreApplication>
#include <QPointer>
#include <atomic>

#include "ui/Format.hpp"

namespace attnviz::ui {

Translator::Translator(QObject* parent)
    : QObject(parent), m_worker(new QObject()), m_latest(std::make_shared<std::atomic<quint64>>(0)) {
    m_thread.setObjectName(QStringLiteral("attnviz-translate"));
    m_worker->moveToThread(&m_thread);
    connect(&m_thread, &QThread::finished, m_worker, &QObject::deleteLater);
    m_thread.start();
}

Translator::~Translator() {
    m_thread.quit();
    m_thread.wait();  // one sentence at most is in flight: this is short
}

quint64 Translator::request(ModelHandlePtr model, const QString& sentence, const DecodeOptions& options) {
    const quint64 id = ++m_nextId;
    m_latest->store(id);
    ++m_pending;
    QPointer<Translator> self(this);
    auto latest = m_latest;
    const std::string text = ss(sentence);
    QMetaObject::invokeMethod(m_worker, [self, latest, id, model, text, options] {
        if (latest->load() != id) {  // superseded before it started: skip the work
            QMetaObject::invokeMethod(qApp, [self] { if (self) --self->m_pending; }, Qt::QueuedConnection);
            return;
        }
        std::shared_ptr<const Translation> result;
        QString error;
        try {
            if (!model || !model->valid()) throw std::runtime_error("there is no model yet: train one or open a checkpoint");
            auto out = translate(*model->model, *model->srcVocab, *model->tgtVocab, model->level, {text}, options);
            if (out.empty()) throw std::runtime_error("the translator returned nothing");
            result = std::make_shared<const Translation>(std::move(out.front()));
        } catch (const std::exception& e) {
            error = qs(e.what());
        }
        QMetaObject::invokeMethod(qApp, [self, latest, id, result, error, model] {
            if (!self) return;
            --self->m_pending;
            if (latest->load() != id) return;  // a newer request will answer
            if (result) Q_EMIT self->translated(id, result, model);
            else Q_EMIT self->failed(id, error);
        }, Qt::QueuedConnection);
    }, Qt::QueuedConnection);
    return id;
}

}  // namespace attnviz::ui
