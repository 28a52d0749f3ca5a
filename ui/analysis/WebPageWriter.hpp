#pragma once
// File → Export as web page: the current translation attributed by the four
// methods off the GUI thread (core/analysis/attribution.hpp), then written as
// one self-contained page (core/analysis/web_page.hpp: inline CSS, script and
// data, no address of any kind), atomically.
#include <QObject>
#include <QString>
#include <memory>

#include "core/decode/translation_model.hpp"

namespace attnviz::ui {

class LatestOnly;

class WebPageWriter : public QObject {
    Q_OBJECT
public:
    explicit WebPageWriter(QObject* parent = nullptr);
    /// Starts writing hypothesis `hypothesis` of `translation` (made by `model`) to `path`; a newer
    /// call supersedes one not finished. Answers with written() or failed().
    void write(TranslationModelPtr model, std::shared_ptr<const Translation> translation, int hypothesis,
               const QString& path);
    bool busy() const;

Q_SIGNALS:
    void written(const QString& path);
    void failed(const QString& message);

private:
    LatestOnly* m_jobs;
};

}  // namespace attnviz::ui
