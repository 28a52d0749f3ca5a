#include "ui/analysis/WebPageWriter.hpp"

#include "core/analysis/attribution.hpp"
#include "core/analysis/web_page.hpp"
#include "core/config/model_description.hpp"
#include "core/io/atomic_file.hpp"
#include "ui/common/Background.hpp"

namespace attnviz::ui {

WebPageWriter::WebPageWriter(QObject* parent) : QObject(parent), m_jobs(new LatestOnly(this)) {}

bool WebPageWriter::busy() const { return m_jobs->busy(); }

void WebPageWriter::write(TranslationModelPtr model, std::shared_ptr<const Translation> translation, int hypothesis,
                          const QString& path) {
    std::function<bool()> work = [model = std::move(model), translation = std::move(translation),
                                  hypothesis = size_t(hypothesis), file = path.toStdString()] {
        const SentenceAttribution sentence = attribute(*model, *translation, AttributionOptions{}, hypothesis);
        WebPageOptions page;
        page.model = model->corpus_name() + ": " + describe_model(model->config()) + ", weights after epoch " +
                     std::to_string(model->history().epochs_done);
        write_file_atomic(file, web_page({sentence}, page, {translation->hypotheses.at(hypothesis).attention}));
        return true;
    };
    m_jobs->run<bool>(
        std::move(work), [this, path](bool) { Q_EMIT written(path); },
        [this](const QString& message) { Q_EMIT failed(message); });
}

}  // namespace attnviz::ui
