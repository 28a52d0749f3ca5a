#include "ui/translate/Translator.hpp"

#include "ui/common/Background.hpp"
#include "ui/common/Format.hpp"

namespace attnviz::ui {

Translator::Translator(QObject* parent) : QObject(parent), m_jobs(new LatestOnly(this)) {}

bool Translator::busy() const { return m_jobs->busy(); }

quint64 Translator::request(TranslationModelPtr model, const QString& sentence, const DecodeOptions& options) {
    const std::string text = ss(sentence);
    return run(std::move(model), [text, options](const TranslationModel& m) { return m.translate({text}, options); });
}

quint64 Translator::requestForced(TranslationModelPtr model, const QString& sentence, const QString& target,
                                  ForceMode mode, const DecodeOptions& options) {
    const std::pair<std::string, std::string> pair{ss(sentence), ss(target)};
    return run(std::move(model), [pair, mode, options](const TranslationModel& m) { return m.force({pair}, mode, options); });
}

quint64 Translator::run(TranslationModelPtr model, Job job) {
    return m_jobs->run<std::shared_ptr<const Translation>>(
        [model, job = std::move(job)] {
            if (!model) throw std::runtime_error("there is no model yet: train one or open a checkpoint");
            auto out = job(*model);
            if (out.empty()) throw std::runtime_error("the translator returned nothing");
            return std::make_shared<const Translation>(std::move(out.front()));
        },
        [this, model](std::shared_ptr<const Translation> result) { Q_EMIT translated(m_jobs->newest(), result, model); },
        [this](const QString& message) { Q_EMIT failed(m_jobs->newest(), message); });
}

}  // namespace attnviz::ui
