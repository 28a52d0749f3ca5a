// "Is attention an explanation?" in the main window: File → Export as web page (ui/analysis/WebPageWriter.hpp
// does the work off the GUI thread) and View → Corpus agreement (ui/analysis/AgreementPanel.hpp).
#include <QAction>
#include <QDir>
#include <QFileDialog>
#include <QPushButton>
#include <QTabWidget>
#include <QFileInfo>
#include <QSettings>
#include <QStatusBar>

#include "ui/analysis/AgreementPanel.hpp"
#include "ui/training/CorpusPanel.hpp"
#include "ui/window/MainWindow.hpp"
#include "ui/translate/TranslatePanel.hpp"
#include "ui/analysis/WebPageWriter.hpp"

namespace attnviz::ui {

void MainWindow::createExplainActions() {
    auto make = [this](const QString& text, const QString& tip) {
        auto* a = new QAction(text, this);
        a->setStatusTip(tip);
        a->setToolTip(tip);
        return a;
    };
    m_exportWebAct = make(tr("Export as &web page…"),
                          tr("One self-contained HTML file of the translation: attention, attributions, top-k"));
    m_agreementAct = make(tr("Corpus &agreement…"),
                          tr("Is attention an explanation here? Attention against attribution over the corpus"));
    connect(m_exportWebAct, &QAction::triggered, this, &MainWindow::exportWebPageDialog);
    connect(m_agreementAct, &QAction::triggered, this, &MainWindow::showAgreement);
    m_webPage = new WebPageWriter(this);
    connect(m_webPage, &WebPageWriter::written, this,
            [this](const QString& path) { statusBar()->showMessage(tr("Wrote the web page %1").arg(path), 8000); });
    connect(m_webPage, &WebPageWriter::failed, this,
            [this](const QString& message) { showError(tr("Export failed"), message); });
}

bool MainWindow::exportWebPageTo(const QString& path) {
    const std::shared_ptr<const Translation> translation = m_translate->translation();
    const TranslationModelPtr model = m_translate->translationModel();
    if (!translation || translation->empty() || !model || !translation->attention_available) {
        showError(tr("Nothing to export"), tr("Translate a sentence with a model that attends first: the page shows "
                                              "its attention and attributions."));
        return false;
    }
    m_webPage->write(model, translation, m_translate->selectedHypothesis(), path);
    statusBar()->showMessage(tr("Attributing and writing %1…").arg(path));
    return true;
}

void MainWindow::exportWebPageDialog() {
    QSettings settings;
    QString path = QFileDialog::getSaveFileName(this, tr("Export as web page"),
                                                settings.value(QStringLiteral("dirs/export"), QDir::homePath()).toString() +
                                                    QStringLiteral("/translation.html"),
                                                tr("Web page, self-contained (*.html)"));
    if (path.isEmpty()) return;
    if (QFileInfo(path).suffix().isEmpty()) path += QStringLiteral(".html");
    settings.setValue(QStringLiteral("dirs/export"), QFileInfo(path).absolutePath());
    exportWebPageTo(path);
}

void MainWindow::showAgreement() {
    if (!m_agreement) {
        m_agreement = new AgreementPanel(this);
        m_agreement->setWindowFlag(Qt::Window);
        m_agreement->resize(1000, 700);
        // A run uses the model and corpus of the moment it starts.
        connect(m_agreement->startButton(), &QPushButton::pressed, this, [this] {
            m_agreement->setModel(currentModel());
            m_agreement->setCorpus(m_corpus->corpus());
        });
        connect(m_agreement, &AgreementPanel::sentenceActivated, this, [this](const QString& sentence) {
            m_tabs->setCurrentIndex(TranslateTab);
            m_translate->translateText(sentence);
            activateWindow();
        });
    }
    m_agreement->setModel(currentModel());
    m_agreement->setCorpus(m_corpus->corpus());
    m_agreement->show();
    m_agreement->raise();
}

}  // namespace attnviz::ui
