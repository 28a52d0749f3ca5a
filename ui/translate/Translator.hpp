#pragma once
// Translates off the GUI thread (the ui's one background mechanism,
// ui/common/Background.hpp). Requests carry a TranslationModel (a published snapshot
// or an opened checkpoint, never the weights being trained: it is immutable
// and safe to share), or a ModelSource that gives one on the worker thread
// (a converted copy for int8/bf16 is made there: ui/translate/PrecisionCopy.hpp);
// only the newest request's answer is delivered, so typing fast cannot queue up work.
#include <QObject>
#include <functional>
#include <memory>

#include "core/decode/translation_model.hpp"

namespace attnviz::ui {

class LatestOnly;

class Translator : public QObject {
    Q_OBJECT
public:
    /// Gives the model a request runs with, called on the worker thread before it translates
    /// (it may take long: a conversion); what it throws fails the request.
    using ModelSource = std::function<TranslationModelPtr()>;

    explicit Translator(QObject* parent = nullptr);

    /// Queues a translation; returns its id. Answers arrive as translated()/failed(); translated()'s
    /// model is the one the translation ran with.
    quint64 request(TranslationModelPtr model, const QString& sentence, const DecodeOptions& options);
    quint64 request(ModelSource model, const QString& sentence, const DecodeOptions& options);
    /// Queues forced decoding of `target` for `sentence` (TranslationModel::force); answers as request()'s.
    quint64 requestForced(TranslationModelPtr model, const QString& sentence, const QString& target, ForceMode mode,
                          const DecodeOptions& options);
    quint64 requestForced(ModelSource model, const QString& sentence, const QString& target, ForceMode mode,
                          const DecodeOptions& options);
    /// The newest request has not been answered yet.
    bool busy() const;

Q_SIGNALS:
    void translated(quint64 id, std::shared_ptr<const attnviz::Translation> result, attnviz::TranslationModelPtr model);
    void failed(quint64 id, const QString& message);

private:
    using Job = std::function<std::vector<Translation>(const TranslationModel&)>;
    quint64 run(ModelSource model, Job job);
    static ModelSource given(TranslationModelPtr model);
    LatestOnly* m_jobs;
};

}  // namespace attnviz::ui
