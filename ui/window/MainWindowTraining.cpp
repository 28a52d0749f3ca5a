// MainWindow: starting, pausing, continuing and stopping training, and
// showing its progress (progress bar, status bar, curves, errors).
#include <QAction>
#include <QProgressBar>
#include <QLabel>
#include <QStatusBar>
#include <cmath>

#include "ui/analysis/HeadsPanel.hpp"
#include "ui/training/CorpusPanel.hpp"
#include "ui/training/FineTuneLanguages.hpp"
#include "ui/common/Format.hpp"
#include "ui/heatmap/HeatmapWidget.hpp"
#include "ui/heatmap/ModelView.hpp"
#include "ui/training/LossChart.hpp"
#include "ui/window/MainWindow.hpp"
#include "ui/training/ProbePanel.hpp"
#include "ui/training/SettingsPanel.hpp"
#include "ui/translate/TranslatePanel.hpp"

namespace attnviz::ui {
namespace {
/// The core's lower-case message as a sentence for the status bar.
QString sentence(QString text) {
    if (!text.isEmpty()) text[0] = text[0].toUpper();
    return text.endsWith(QLatin1Char('.')) ? text : text + QLatin1Char('.');
}
}  // namespace

void MainWindow::connectController() {
    connect(m_controller, &TrainingController::stateChanged, this, &MainWindow::onStateChanged);
    connect(m_controller, &TrainingController::started, this, &MainWindow::onStarted);
    connect(m_controller, &TrainingController::prepared, this, &MainWindow::onPrepared);
    connect(m_controller, &TrainingController::batchLosses, m_chart, &LossChart::addBatchLosses);
    connect(m_controller, &TrainingController::progress, this, &MainWindow::onProgress);
    connect(m_controller, &TrainingController::epochFinished, this, &MainWindow::onEpoch);
    connect(m_controller, &TrainingController::snapshotReady, this, &MainWindow::setModel);
    connect(m_controller, &TrainingController::probeReady, m_probe, &ProbePanel::addSnapshot);
    connect(m_controller, &TrainingController::finished, this, &MainWindow::onFinished);
    connect(m_controller, &TrainingController::saveFinished, this, &MainWindow::onSaved);
    connect(m_controller, &TrainingController::warning, this,
            [this](const QString& message) { showError(tr("Training goes on"), sentence(message)); });
}

void MainWindow::startTraining() {
    if (!m_settings->isValid()) {
        showError(tr("Invalid settings"), m_settings->validationError());
        return;
    }
    if (m_corpus->loading() || !m_corpus->corpus()) {
        showError(tr("Cannot start training"), tr("The corpus is still being read: try again in a moment."));
        return;
    }
    if (!maybeSave()) return;
    TrainConfig train = m_settings->trainConfig();
    train.snapshot_every = m_probe->refreshEvery();
    m_controller->setProbeSentence(m_probe->sentence());
    QString error;
    // A pretrained model is not built from settings: Train fine-tunes the one opened (its weights,
    // tokenizer and shape) on the corpus, as attnviz-cli train --init-from does.
    const bool fineTune = m_settings->modelConfig().is_pretrained();
    if (fineTune && !m_controller->initialModel()) {
        showError(tr("Cannot start training"),
                  tr("A pretrained model is fine-tuned, not built from settings: open a Hugging Face model folder first "
                     "(File → Open model folder…), or choose another architecture."));
        return;
    }
    // A multilingual model is tuned on the pair chosen (Setup → Fine-tune languages, the Translate tab's
    // lists), as attnviz-cli train --init-from DIR --source-lang X --target-lang Y; refused without a target.
    QString sourceLang, targetLang;
    if (fineTune && FineTuneLanguages::multilingual(m_controller->initialModel().get())) {
        m_tuneLanguages->setModel(m_controller->initialModel(), true);
        if (const QString problem = m_tuneLanguages->problem(); !problem.isEmpty()) {
            showError(tr("Cannot start training"), problem);
            return;
        }
        sourceLang = m_tuneLanguages->sourceLanguage();
        targetLang = m_tuneLanguages->targetLanguage();
    }
    if (!(fineTune ? m_controller->fineTune(m_corpus->corpus(), train, &error, sourceLang, targetLang)
                   : m_controller->start(m_corpus->corpus(), m_settings->modelConfig(), train, &error))) {
        showError(tr("Cannot start training"), error);
        return;
    }
    m_probe->clearSnapshots();
}

void MainWindow::continueTraining() {
    TrainConfig train = m_settings->trainConfig();
    train.snapshot_every = m_probe->refreshEvery();
    train.epochs += m_controller->history().epochs_done;  // the settings' epochs are more epochs
    m_controller->setProbeSentence(m_probe->sentence());
    QString error;
    if (!m_controller->continueTraining(train, m_corpus->corpus(), &error))
        showError(tr("Cannot continue training"), error);
}

void MainWindow::onStarted(const QString& runLabel, bool continuing) {
    if (!continuing) {
        m_chart->startRun(runLabel);
        m_heads->clearHistory();  // the grid's curves follow this run's validations
        m_translate->modelView()->setHeadStats({});
    }
    m_progress->setValue(0);
    m_progress->setFormat(tr("Preparing data and model…"));
    m_rateLabel->setText(tr("– tok/s"));
}

void MainWindow::onPrepared(const SessionInfo& info) {
    m_deviceLabel->setText(tr("device: %1").arg(qs(info.device)));
    statusBar()->showMessage(qs(info.describe_data()), 10000);
}

void MainWindow::onStateChanged(TrainingController::State state) {
    using S = TrainingController::State;
    const QString names[] = {tr("Idle"), tr("Preparing…"), tr("Training"), tr("Paused"), tr("Stopping…")};
    m_stateLabel->setText(names[int(state)]);
    const bool busy = state != S::Idle;
    m_corpus->setEnabled(!busy);
    m_settings->setEnabled(!busy);
    m_tuneLanguages->setEnabled(!busy);  // the run's pair is fixed (the Translate tab's lists stay free)
    if (state == S::Paused) m_progress->setFormat(m_progress->format() + tr(" — paused"));
    updateActions();
}

void MainWindow::updateActions() {
    using S = TrainingController::State;
    const S s = m_controller->state();
    const bool idle = s == S::Idle;
    m_trainAct->setEnabled(idle && m_settings->isValid() && m_corpus->corpus() && !m_corpus->loading());
    // Pause and Resume share a place (and F6); a hidden QAction also reports itself disabled,
    // so visibility is decided from the state, not from isEnabled().
    const bool canResume = s == S::Paused;
    m_pauseAct->setVisible(!canResume);
    m_resumeAct->setVisible(canResume);
    m_pauseAct->setEnabled(s == S::Running || s == S::Preparing);
    m_resumeAct->setEnabled(canResume);
    m_stopAct->setEnabled(!idle && s != S::Stopping);
    const bool haveModel = m_controller->hasModel();
    m_continueAct->setEnabled(idle && haveModel);
    m_saveAct->setEnabled(haveModel && s != S::Stopping);
    m_saveAsAct->setEnabled(m_saveAct->isEnabled());
    m_openCheckpointAct->setEnabled(idle);
    m_openModelFolderAct->setEnabled(idle);
    m_openHubAct->setEnabled(idle);  // it opens the model it downloads: not while training
    m_openCorpusAct->setEnabled(idle);
    m_exportHeatmapAct->setEnabled(!currentHeatmap()->heatmapData().empty());
    // The pair Train fine-tunes on, shown while the settings say Pretrained and the model has languages.
    if (m_tuneLanguages) m_tuneLanguages->setModel(m_controller->initialModel(), m_settings->modelConfig().is_pretrained());
}

void MainWindow::onProgress(const BatchReport& r) {
    const int totalEpochs = std::max(1, m_controller->plannedEpochs());
    const double done = r.batches_per_epoch > 0
                            ? ((r.epoch - 1) + double(r.batch) / r.batches_per_epoch) / std::max(totalEpochs, r.epoch)
                            : 0;
    m_progress->setValue(int(std::lround(std::clamp(done, 0.0, 1.0) * 1000)));
    m_progress->setFormat(tr("Epoch %1/%2 · batch %3/%4 · loss %5 · ETA %6")
                              .arg(r.epoch)
                              .arg(std::max(totalEpochs, r.epoch))
                              .arg(r.batch)
                              .arg(r.batches_per_epoch)
                              .arg(formatLoss(r.loss), formatDuration(r.eta)));
    m_rateLabel->setText(tr("%1 target tok/s").arg(formatRate(r.tokens_per_second)));
    m_elapsedLabel->setText(tr("elapsed %1").arg(formatDuration(r.elapsed)));
}

void MainWindow::onEpoch(const EpochReport& r, qint64 step) {
    m_chart->addEpoch(r, step);
    m_heads->addEpoch(r);  // the heads grid's history (TrainConfig::head_stats): Michel's Fig. 5, live
    if (!r.heads.empty()) m_translate->modelView()->setHeadStats(headStatsFromSnapshots(r.heads));
    statusBar()->showMessage(tr("Epoch %1: train loss %2, validation loss %3, BLEU %4, exact match %5%")
                                 .arg(r.epoch)
                                 .arg(formatLoss(r.train_loss), formatLoss(r.val_loss))
                                 .arg(r.val_bleu, 0, 'f', 1)
                                 .arg(100 * r.val_accuracy, 0, 'f', 1),
                             15000);
}

void MainWindow::onFinished(StopReason reason, const QString& message) {
    switch (reason) {
    case StopReason::finished:
        m_progress->setValue(1000);
        m_progress->setFormat(tr("Finished — translate a sentence in the Translate tab"));
        statusBar()->showMessage(sentence(message.isEmpty() ? tr("training finished") : message), 10000);
        break;
    case StopReason::early_stop:
        m_progress->setValue(1000);
        m_progress->setFormat(tr("Stopped early — the validation loss stopped improving"));
        statusBar()->showMessage(sentence(message), 15000);
        break;
    case StopReason::stopped:
        m_progress->setFormat(m_progress->format() + tr(" — stopped"));
        statusBar()->showMessage(tr("Training stopped; the last published weights are kept."), 10000);
        break;
    case StopReason::diverged:
        m_progress->setFormat(tr("Diverged — see the message"));
        showError(tr("Training diverged"), message);
        break;
    case StopReason::error:
        m_progress->setFormat(tr("Failed — see the message"));
        showError(tr("Training failed"), message);
        break;
    }
    updateActions();
}

}  // namespace attnviz::ui
