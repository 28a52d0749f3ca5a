// MainWindow: files (checkpoints, corpora, exports), recent files, drag and
// drop, and the QSettings that bring the window back as the user left it.
#include <QAction>
#include <QActionGroup>
#include <QDir>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QInputDialog>
#include <QMenu>
#include <QMimeData>
#include <QPushButton>
#include <QSettings>
#include <QStatusBar>
#include <QTabWidget>
#include <QTimer>
#include <algorithm>

#include "core/persist/model_file.hpp"
#include "core/persist/checkpoint.hpp"
#include "core/persist/checkpoint_legacy.hpp"
#include "core/config/pretrained_config.hpp"
#include "ui/analysis/HeadsPanel.hpp"
#include "ui/training/CorpusPanel.hpp"
#include "ui/common/Format.hpp"
#include "ui/heatmap/HeatmapExport.hpp"
#include "ui/heatmap/HeatmapWidget.hpp"
#include "ui/heatmap/ModelView.hpp"
#include "ui/training/LossChart.hpp"
#include "ui/window/HubDialogs.hpp"
#include "ui/window/MainWindow.hpp"
#include "ui/training/ProbePanel.hpp"
#include "ui/training/SettingsPanel.hpp"
#include "ui/translate/TranslatePanel.hpp"

namespace attnviz::ui {
namespace {

constexpr int kMaxRecent = 8;

bool looksLikeCheckpoint(const QString& path) {
    const QString suffix = QFileInfo(path).suffix().toLower();
    if (suffix == QLatin1String("attnviz") || suffix == QLatin1String("pt") || suffix == QLatin1String("ckpt")) return true;
    try {
        return detect_model_file(ss(path)) != ModelFileKind::unknown;
    } catch (const std::exception&) {
        return false;  // not a readable regular file: opening it as a corpus says why
    }
}

/// Where an old-format checkpoint is converted to: beside it, "NAME-v2.ckpt".
QString upgradedPath(const QString& path) {
    const QFileInfo info(path);
    return info.dir().filePath(info.completeBaseName() + QStringLiteral("-v2.ckpt"));
}

QString dirOf(const QString& key) {
    return QSettings().value(key, QDir::homePath()).toString();
}

}  // namespace

bool MainWindow::openCheckpoint(const QString& requested) {
    QString path = requested;
    if (m_controller->isActive()) {
        showError(tr("Training is running"), tr("Stop training before opening a checkpoint."));
        return false;
    }
    if (!maybeSave()) return false;
    QString error;
    bool legacy = false;
    try {
        legacy = detect_model_file(ss(path)) == ModelFileKind::legacy_checkpoint;
    } catch (const std::exception&) {
    }
    if (legacy) {  // version 1: its loader trusts the file, so convert it only when the user says so
        const QString upgraded = upgradedPath(path);
        try {
            check_legacy_checkpoint(ss(path));  // a damaged file is an error, not a question
        } catch (const std::exception& e) {
            showError(tr("Cannot open checkpoint"), qs(e.what()));
            return false;
        }
        if (!m_legacyPrompt(path, upgraded)) return false;
        try {
            upgrade_checkpoint(ss(path), ss(upgraded));
        } catch (const std::exception& e) {
            showError(tr("Cannot upgrade checkpoint"), qs(e.what()));
            return false;
        }
        path = upgraded;
    }
    const bool folder = QFileInfo(path).isDir();
    if (!m_controller->open(path, &error)) {
        showError(folder ? tr("Cannot open model folder") : tr("Cannot open checkpoint"), error);
        return false;
    }
    const TranslationModelPtr model = m_controller->latestModel();
    m_settings->setModelConfig(model->config());
    QString message;
    if (model->config().is_pretrained() && model->history().epochs_done == 0) {
        // A pretrained model as it was published: Train fine-tunes it on the corpus panel's corpus
        // (attnviz-cli train --init-from), with the form's settings at fine-tuning's learning rate and batch.
        TrainConfig tune = m_settings->trainConfig();
        tune.lr = 5e-5;
        tune.batch_size = 16;
        m_settings->setTrainConfig(tune);
        const PretrainedSpec& spec = *model->config().pretrained;
        message = tr("Opened %1: pretrained %2. Press Train to fine-tune it on the corpus panel's corpus")
                      .arg(path, qs(spec.model.describe()));
        // Generation settings generate() applies and attnviz does not: said first (the status line
        // shows the start of a long message), not dropped silently.
        if (!spec.generation.ignored.empty()) {
            QStringList names;
            for (const auto& n : spec.generation.ignored) names << qs(n);
            message = tr("Its generation settings name %1, which attnviz does not apply: transformers may choose "
                         "other tokens. ")
                          .arg(names.join(QStringLiteral(", "))) +
                      message;
        }
    } else {
        m_settings->setTrainConfig(model->trained_with());  // Continue adds this many epochs; Train starts afresh
        // Put the corpus it was trained on back when it is a built-in task. A file's
        // name is all the checkpoint knows of it: when the panel holds another corpus,
        // say that Continue would train on that one.
        message =
            tr("Opened %1: %2 epochs on %3").arg(path).arg(model->history().epochs_done).arg(qs(model->corpus_name()));
        try {
            m_corpus->selectTask(task_from_name(model->corpus_name()));
        } catch (const std::exception&) {
            const auto shown = m_corpus->corpus();
            if (!shown || shown->name != model->corpus_name())
                message += tr(". Continue trains on the corpus panel's %1: open %2 there to continue on it")
                               .arg(shown ? qs(shown->name) : tr("corpus"), qs(model->corpus_name()));
        }
    }
    m_chart->setHistory(model->history(), QFileInfo(path).fileName());
    m_heads->setHistory(model->history());  // the heads' curves over the validations it was trained with
    m_translate->modelView()->setHeadStats(
        model->history().epochs.empty() ? std::vector<HeadStats>{} : headStatsFromSnapshots(model->history().epochs.back().heads));
    setModel(model);
    // Decoding starts from what the model's generation config asks of generate() (its beams).
    if (model->config().is_pretrained())
        m_translate->setBeamWidth(int(std::clamp<int64_t>(model->decode_defaults().beam_size, 1, 32)));
    m_probe->clearSnapshots();
    addRecentFile(path);
    statusBar()->showMessage(message, 30000);
    m_tabs->setCurrentIndex(TranslateTab);
    if (!m_translate->lineEdit()->text().isEmpty()) m_translate->translateInput();
    updateActions();
    return true;
}

bool MainWindow::openCorpusFile(const QString& path) {
    if (m_controller->isActive()) {
        showError(tr("Training is running"), tr("Stop training before changing the corpus."));
        return false;
    }
    m_corpus->loadFile(path);  // corpusChanged() or loadFailed() follows
    statusBar()->showMessage(tr("Reading %1…").arg(path));
    return true;
}

bool MainWindow::openParallelFiles(const QString& sourcePath, const QString& targetPath) {
    if (m_controller->isActive()) {
        showError(tr("Training is running"), tr("Stop training before changing the corpus."));
        return false;
    }
    m_corpus->loadParallel(sourcePath, targetPath);  // corpusChanged() or loadFailed() follows
    statusBar()->showMessage(tr("Reading %1 and %2…").arg(sourcePath, targetPath));
    return true;
}

bool MainWindow::openFile(const QString& path) {
    if (!QFileInfo(path).isReadable()) {
        showError(tr("Cannot open file"), tr("%1 does not exist or cannot be read.").arg(path));
        return false;
    }
    // A folder can only be a model (Hugging Face's layout); the core says what it lacks otherwise.
    if (QFileInfo(path).isDir()) return openCheckpoint(path);
    return looksLikeCheckpoint(path) ? openCheckpoint(path) : openCorpusFile(path);
}

bool MainWindow::saveCheckpointTo(const QString& path) {
    // A model opened from its folder (or a hub snapshot) reads that folder's files: a checkpoint
    // written over one of them, or into the folder, would break the model others open from it
    // (the CLI refuses the same, check_file_flags).
    const QString opened = m_controller->checkpointPath();
    if (!opened.isEmpty() && QFileInfo(opened).isDir() &&
        model_sources(opened.toStdString()).holds(resolve_existing_prefix(path.toStdString()))) {
        showError(tr("Saving failed"),
                  tr("%1 is inside the model folder %2 this model was opened from: a checkpoint there could "
                     "replace the folder's own files. Choose a place outside the folder.")
                      .arg(QDir::toNativeSeparators(path), QDir::toNativeSeparators(opened)));
        return false;
    }
    return m_controller->save(path);  // onSaved() reports the outcome
}

void MainWindow::onSaved(bool ok, const QString& path, const QString& error) {
    if (!ok) {
        m_closeAfterSaving.clear();
        showError(tr("Saving failed"), error);
        return;
    }
    addRecentFile(path);
    statusBar()->showMessage(tr("Saved %1").arg(path), 8000);
    if (!m_closeAfterSaving.isEmpty() && path == m_closeAfterSaving) {
        m_closeAfterSaving.clear();
        QTimer::singleShot(0, this, &QWidget::close);  // what the user asked for before the save
    }
}

bool MainWindow::maybeSave() {
    if (!m_controller->unsaved()) return true;
    const QMessageBox::StandardButton answer = m_unsavedPrompt();
    if (answer == QMessageBox::Discard) return true;
    if (answer != QMessageBox::Save) return false;  // Cancel, or the box was closed
    QString path = m_controller->checkpointPath();
    if (path.isEmpty()) path = m_savePath();
    if (path.isEmpty()) return false;
    const bool running = m_controller->isActive();  // only when closing: Train and Open need an idle session
    if (running) {
        // Stop first so that the weights stop changing; the worker writes the file before it ends.
        m_closeAfterSaving = path;
        m_controller->stop();
    }
    if (!saveCheckpointTo(path)) return false;
    if (running) statusBar()->showMessage(tr("Saving %1: the window closes once it is written…").arg(path));
    return !running;
}

bool MainWindow::askToUpgrade(const QString& oldPath, const QString& newPath) {
    QMessageBox box(QMessageBox::Question, tr("Old checkpoint format"),
                    tr("%1 was written by an older attnviz. Its weights are stored in a format whose reader trusts "
                       "the file, so a damaged or crafted file could crash attnviz: open it only if you trust where "
                       "it came from.\n\nUpgrade converts it to the current format as %2 (the old file stays as it "
                       "is) and opens that.")
                        .arg(QFileInfo(oldPath).fileName(), newPath),
                    QMessageBox::Cancel, this);
    QPushButton* upgrade = box.addButton(tr("Upgrade"), QMessageBox::AcceptRole);
    box.setDefaultButton(QMessageBox::Cancel);
    box.exec();
    return box.clickedButton() == upgrade;
}

QMessageBox::StandardButton MainWindow::askToSave() {
    return QMessageBox::warning(this, tr("Unsaved model"),
                                tr("The model has changed since it was last saved.\nDo you want to save it?"),
                                QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel, QMessageBox::Save);
}

QString MainWindow::askSavePath() {
    const QString suggestion = dirOf(QStringLiteral("dirs/checkpoint")) + QLatin1Char('/') +
                               m_corpus->sourceKey().section(QLatin1Char(':'), 1).section(QLatin1Char('/'), -1) +
                               QStringLiteral(".attnviz");
    QString path = QFileDialog::getSaveFileName(this, tr("Save checkpoint"), suggestion, checkpointFileFilter());
    if (path.isEmpty()) return path;
    if (QFileInfo(path).suffix().isEmpty()) path += QStringLiteral(".attnviz");
    QSettings().setValue(QStringLiteral("dirs/checkpoint"), QFileInfo(path).absolutePath());
    return path;
}

bool MainWindow::exportHeatmapTo(const QString& path, double scale) {
    HeatmapExportSource source;
    source.widget = currentHeatmap();
    std::shared_ptr<const Translation> translation;
    TranslationModelPtr model;
    if (m_tabs->currentIndex() == ProbeTab) {
        if (const ProbeResult* s = m_probe->currentSnapshot()) translation = s->translation;
        model = currentModel();
    } else {
        // Subword pieces merged into words when asked; a Transformer's chosen map.
        translation = m_translate->exportTranslation(&source.hypothesis);
        model = m_translate->translationModel();
        source.decodeSettings = m_translate->decodeOptions().to_json();
        // The weights the maps came from, as the CLI's attention file says it (decode.precision).
        source.decodeSettings.emplace("precision", precision_name(m_translate->translationPrecision()));
    }
    source.translation = translation.get();
    if (model) source.modelSettings = model->config().to_json();
    if (source.widget->heatmapData().empty()) {
        showError(tr("Nothing to export"), tr("Translate a sentence first: there is no heatmap on screen."));
        return false;
    }
    QString error;
    if (!exportHeatmap(source, path, scale, &error)) {
        showError(tr("Export failed"), error);
        return false;
    }
    statusBar()->showMessage(tr("Exported %1").arg(path), 8000);
    return true;
}

bool MainWindow::exportCurvesTo(const QString& path) {
    QString error;
    const bool csv = QFileInfo(path).suffix().compare(QLatin1String("csv"), Qt::CaseInsensitive) == 0;
    const bool ok = csv ? m_chart->exportCsv(path, &error) : m_chart->exportPng(path, &error);
    if (!ok) {
        showError(tr("Export failed"), error);
        return false;
    }
    // With the curves, each head's importance and confidence over the validations (Head statistics).
    if (csv && m_heads->hasHistory()) {
        const QFileInfo info(path);
        const QString heads = info.dir().filePath(info.completeBaseName() + QStringLiteral("-heads.csv"));
        if (!m_heads->exportHistoryCsv(heads, &error)) {
            showError(tr("Export failed"), error);
            return false;
        }
        statusBar()->showMessage(tr("Exported %1 and %2").arg(path, heads), 8000);
        return true;
    }
    statusBar()->showMessage(tr("Exported %1").arg(path), 8000);
    return true;
}

void MainWindow::openCheckpointDialog() {
    const QString path = QFileDialog::getOpenFileName(
        this, tr("Open checkpoint"), dirOf(QStringLiteral("dirs/checkpoint")),
        tr("Models (*.attnviz *.pt *.ckpt *.safetensors);;d2l PyTorch model (*.safetensors);;") + checkpointFileFilter());
    if (path.isEmpty()) return;
    QSettings().setValue(QStringLiteral("dirs/checkpoint"), QFileInfo(path).absolutePath());
    openCheckpoint(path);
}

void MainWindow::openModelFolderDialog() {
    const QString path = QFileDialog::getExistingDirectory(
        this, tr("Open a Hugging Face model folder (config.json, weights, tokenizer files)"),
        dirOf(QStringLiteral("dirs/modelFolder")));
    if (path.isEmpty()) return;
    QSettings().setValue(QStringLiteral("dirs/modelFolder"), QFileInfo(path).absolutePath());
    openCheckpoint(path);
}

void MainWindow::openHubDialog() {
    auto* dialog = new HubDownloadDialog(this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    connect(dialog, &HubDownloadDialog::modelReady, this, [this](const QString& snapshot) { openCheckpoint(snapshot); });
    dialog->open();  // window-modal, not a nested event loop: the download runs on the background pool
}

void MainWindow::openModelsDialog() {
    auto* dialog = new ModelsDialog(this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    connect(dialog, &ModelsDialog::openRequested, this, [this](const QString& snapshot) { openCheckpoint(snapshot); });
    dialog->open();
}

void MainWindow::openCorpusDialog() {
    const QString path = QFileDialog::getOpenFileName(
        this, tr("Open corpus"), dirOf(QStringLiteral("dirs/corpus")),
        tr("Tab-separated pairs: Tatoeba, Tatoeba-Challenge (*.tsv *.txt);;All files (*)"));
    if (path.isEmpty()) return;
    QSettings().setValue(QStringLiteral("dirs/corpus"), QFileInfo(path).absolutePath());
    openCorpusFile(path);
}

void MainWindow::openParallelDialog() {
    const QString filter = tr("Text, one sentence per line (*.txt *.en *.fr *.de *.src *.trg *.tgt);;All files (*)");
    const QString source = QFileDialog::getOpenFileName(this, tr("Parallel text: the source side (1 of 2)"),
                                                        dirOf(QStringLiteral("dirs/corpus")), filter);
    if (source.isEmpty()) return;
    const QString target = QFileDialog::getOpenFileName(
        this, tr("Parallel text: the target side of %1 (2 of 2)").arg(QFileInfo(source).fileName()),
        QFileInfo(source).absolutePath(), filter);
    if (target.isEmpty()) return;
    QSettings().setValue(QStringLiteral("dirs/corpus"), QFileInfo(source).absolutePath());
    openParallelFiles(source, target);
}

void MainWindow::saveCheckpointDialog(bool forceAsk) {
    QString path = forceAsk ? QString() : m_controller->checkpointPath();
    // A pretrained model opened from its folder (or a hub snapshot) has no checkpoint file yet:
    // Save asks for one instead of writing over the folder's path (issue 48, item 7).
    if (!path.isEmpty() && QFileInfo(path).isDir()) path.clear();
    if (path.isEmpty()) path = m_savePath();
    if (!path.isEmpty()) saveCheckpointTo(path);
}

void MainWindow::exportHeatmapDialog() {
    QString selected;
    QString path = QFileDialog::getSaveFileName(this, tr("Export heatmap"),
                                                dirOf(QStringLiteral("dirs/export")) + QStringLiteral("/attention.png"),
                                                heatmapFileFilter(), &selected);
    if (path.isEmpty()) return;
    if (QFileInfo(path).suffix().isEmpty()) path += QLatin1Char('.') + selected.section(QLatin1String("*."), 1).left(3).toLower();
    QSettings().setValue(QStringLiteral("dirs/export"), QFileInfo(path).absolutePath());
    double scale = 1.0;
    if (heatmapFormatFor(path) == HeatmapFormat::Png) {
        const QStringList scales = {tr("1× (96 dpi)"), tr("2× (192 dpi)"), tr("3× (288 dpi)"), tr("4× (384 dpi)")};
        bool ok = false;
        const QString choice = QInputDialog::getItem(this, tr("PNG resolution"), tr("Scale of the on-screen size:"), scales,
                                                     QSettings().value(QStringLiteral("export/pngScale"), 1).toInt(), false, &ok);
        if (!ok) return;
        const int index = int(scales.indexOf(choice));
        QSettings().setValue(QStringLiteral("export/pngScale"), index);
        scale = index + 1;
    }
    exportHeatmapTo(path, scale);
}

void MainWindow::exportCurvesDialog() {
    QString path = QFileDialog::getSaveFileName(this, tr("Export curves"),
                                                dirOf(QStringLiteral("dirs/export")) + QStringLiteral("/curves.png"),
                                                tr("PNG image (*.png);;CSV table (*.csv)"));
    if (path.isEmpty()) return;
    QSettings().setValue(QStringLiteral("dirs/export"), QFileInfo(path).absolutePath());
    exportCurvesTo(path);
}

QStringList MainWindow::recentFiles() const {
    return QSettings().value(QStringLiteral("recentFiles")).toStringList();
}

void MainWindow::addRecentFile(const QString& path) {
    QStringList files = recentFiles();
    const QString absolute = QDir::cleanPath(QFileInfo(path).absoluteFilePath());  // a folder without its last '/'
    files.removeAll(absolute);
    files.prepend(absolute);
    while (files.size() > kMaxRecent) files.removeLast();
    QSettings().setValue(QStringLiteral("recentFiles"), files);
    rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu() {
    m_recentMenu->clear();
    const QStringList files = recentFiles();
    for (int i = 0; i < files.size(); ++i) {
        const QString path = files[i];
        QAction* a = m_recentMenu->addAction(QStringLiteral("&%1 %2").arg(i + 1).arg(QFileInfo(path).fileName()), this,
                                             [this, path] { openFile(path); });
        a->setStatusTip(path);
    }
    m_recentMenu->setEnabled(!files.isEmpty());
    if (!files.isEmpty()) {
        m_recentMenu->addSeparator();
        m_recentMenu->addAction(tr("Clear list"), this, [this] {
            QSettings().remove(QStringLiteral("recentFiles"));
            rebuildRecentMenu();
        });
    }
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
    if (event->mimeData()->hasUrls() && !event->mimeData()->urls().isEmpty() && event->mimeData()->urls().front().isLocalFile())
        event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event) {
    const QList<QUrl> urls = event->mimeData()->urls();
    if (urls.isEmpty() || !urls.front().isLocalFile()) return;
    event->acceptProposedAction();
    openFile(urls.front().toLocalFile());
}

void MainWindow::loadSettings() {
    QSettings s;
    restoreGeometry(s.value(QStringLiteral("window/geometry")).toByteArray());
    m_stateRestored = restoreState(s.value(QStringLiteral("window/state")).toByteArray());
    m_settings->loadSettings(s);
    if (s.contains(QStringLiteral("corpus/pairs"))) m_corpus->setNumPairs(s.value(QStringLiteral("corpus/pairs")).toInt());
    const QString source = s.value(QStringLiteral("corpus/source")).toString();
    if (!source.isEmpty() && source != m_corpus->sourceKey()) m_corpus->restore(source);  // errors: loadFailed()
    setColorMap(ColorMap::fromName(s.value(QStringLiteral("view/colorMap")).toString()));
    setColorScale(ColorMap::scaleFromName(s.value(QStringLiteral("view/colorScale")).toString()));
    m_numbersAct->setChecked(s.value(QStringLiteral("view/numbers"), false).toBool());
    m_stripsAct->setChecked(s.value(QStringLiteral("view/strips"), true).toBool());
    m_chart->setSmoothing(s.value(QStringLiteral("view/smoothing"), m_chart->smoothing()).toDouble());
    m_chart->setLogScale(s.value(QStringLiteral("view/logScale"), false).toBool());
    m_translate->setBeamWidth(s.value(QStringLiteral("translate/beam"), 1).toInt());
    m_probe->setRefreshEvery(s.value(QStringLiteral("probe/every"), m_probe->refreshEvery()).toInt());
    const QString probe = s.value(QStringLiteral("probe/sentence")).toString();
    if (!probe.isEmpty()) m_probe->setSentence(probe);
    m_translate->restoreLayout(s);  // the splitters as the user left them
    m_tabs->setCurrentIndex(s.value(QStringLiteral("window/tab"), 0).toInt());
    rebuildRecentMenu();
}

void MainWindow::saveSettings() const {
    QSettings s;
    s.setValue(QStringLiteral("window/geometry"), saveGeometry());
    s.setValue(QStringLiteral("window/state"), saveState());
    s.setValue(QStringLiteral("window/tab"), m_tabs->currentIndex());
    m_translate->saveLayout(s);
    m_settings->saveSettings(s);
    s.setValue(QStringLiteral("corpus/source"), m_corpus->sourceKey());
    s.setValue(QStringLiteral("corpus/pairs"), m_corpus->numPairs());
    s.setValue(QStringLiteral("view/colorMap"), ColorMap::name(m_translate->heatmap()->colorMap()));
    s.setValue(QStringLiteral("view/colorScale"), ColorMap::scaleName(m_translate->heatmap()->colorScale()));
    s.setValue(QStringLiteral("view/numbers"), m_numbersAct->isChecked());
    s.setValue(QStringLiteral("view/strips"), m_stripsAct->isChecked());
    s.setValue(QStringLiteral("view/smoothing"), m_chart->smoothing());
    s.setValue(QStringLiteral("view/logScale"), m_chart->logScale());
    s.setValue(QStringLiteral("translate/beam"), int(m_translate->decodeOptions().beam_size));
    s.setValue(QStringLiteral("probe/every"), m_probe->refreshEvery());
    s.setValue(QStringLiteral("probe/sentence"), m_probe->sentence());
    s.sync();
}

}  // namespace attnviz::ui
