#include "ui/translate/Translator.hpp"

#include "ui/common/Background.hpp"
#include "ui/common/Format.hpp"

namespace attnviz::ui {

Translator::Translator(QObject* parent) : QObject(parent), m_jobs(new LatestOnly(this)) {}

bool Translator::busy() const { return m_jobs->busy(); }

Translator::ModelSource Translator::given(TranslationModelPtr model) {
    return [model = std::move(model)] { return model; };
}

quint64 Translator::request(TranslationModelPtr model, const QString& sentence, const DecodeOptions& options) {
    return request(given(std::move(model)), sentence, options);
}

quint64 Translator::requestForced(TranslationModelPtr model, const QString& sentence, const QString& target,
                                  ForceMode mode, const DecodeOptions& options) {
    return requestForced(given(std::move(model)), sentence, target, mode, options);
}

quint64 Translator::request(ModelSource model, const QString& sentence, const DecodeOptions& options) {
    const std::string text = ss(sentence);
    return run(std::move(model), [text, options](const TranslationModel& m) { return m.translate({text}, options); });
}

quint64 Translator::requestForced(ModelSource model, const QString& sentence, const QString& target, ForceMode mode,
                                  const DecodeOptions& options) {
    const std::pair<std::string, std::string> pair{ss(sentence), ss(target)};
    return run(std::move(model), [pair, mode, options](const TranslationModel& m) { return m.force({pair}, mode, options); });
}

quint64 Translator::run(ModelSource source, Job job) {
    // The model the job ran with goes back with its result (the answer is delivered on this thread).
    using Answer = std::pair<std::shared_ptr<const Translation>, TranslationModelPtr>;
    return m_jobs->run<Answer>(
        [source = std::move(source), job = std::move(job)] {
            TranslationModelPtr model = source ? source() : nullptr;
            if (!model) throw std::runtime_error("there is no model yet: train one or open a checkpoint");
            auto out = job(*model);
            if (out.empty()) throw std::runtime_error("the translator returned nothing");
            return Answer{std::make_shared<const Translation>(std::move(out.front())), std::move(model)};
        },
        [this](Answer answer) { Q_EMIT translated(m_jobs->newest(), answer.first, answer.second); },
        [this](const QString& message) { Q_EMIT failed(m_jobs->newest(), message); });
}

}  // namespace attnviz::ui
