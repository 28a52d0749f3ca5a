// MainWindow: starting, pausing, continuing and stopping training, and
// showing its progress (progress bar, status bar, curves, errors).
#include <QAction>
#include <QProgressBar>
#include <QLabel>
#include <QStatusBar>
#include <cmath>

#include "ui/CorpusPanel.hpp"
#include "ui/Format.hpp"
#include "ui/HeatmapWidget.hpp"
#include "ui/LossChart.hpp"
#include "ui/MainWindow.hpp"
#include "ui/ProbePanel.hpp"
#include "ui/SettingsPanel.hpp"
#include "ui/TranslatePanel.hpp"

namespace attnviz::ui {

void MainWindow::connectController() {
    connect(m_controller, &TrainingController::stateChanged, this, &MainWindow::onStateChanged);
    connect(m_controller, &TrainingController::started, this, [this](const QString& label) {
        if (!m_continuing) m_chart->startRun(label);
        m_progress->setValue(0);
        m_progress->setFormat(tr("Preparing data and model…"));
        m_rateLabel->setText(tr("– tok/s"));
    });
    connect(m_controller, &TrainingController::deviceReady, this,
            [this](const QString& d) { m_deviceLabel->setText(tr("device: %1").arg(d)); });
    connect(m_controller, &TrainingController::batchLosses, m_chart, &LossChart::addBatchLosses);
    connect(m_controller, &TrainingController::progress, this, &MainWindow::onProgress);
    connect(m_controller, &TrainingController::epochFinished, this, &MainWindow::onEpoch);
    connect(m_controller, &TrainingController::snapshotReady, this, &MainWindow::setModel);
    connect(m_controller, &TrainingController::probeReady, m_probe, &ProbePanel::addSnapshot);
    connect(m_controller, &TrainingController::finished, this, &MainWindow::onFinished);
    connect(m_controller, &TrainingController::saveFinished, this, [this](bool ok, const QString& path, const QString& error) {
        if (!ok) {
            showError(tr("Saving failed"), error);
            return;
        }
        m_checkpointPath = path;
        addRecentFile(path);
        statusBar()->showMessage(tr("Saved %1").arg(path), 8000);
    });
}

void MainWindow::startTraining() {
    if (!m_settings->isValid()) {
        showError(tr("Invalid settings"), m_settings->validationError());
        return;
    }
    TrainConfig train = m_settings->trainConfig();
    train.snapshot_every = m_probe->refreshEvery();
    m_controller->setProbeSentence(m_probe->sentence());
    m_probe->clearSnapshots();
    m_continuing = false;
    m_continueFromCheckpoint = false;
    QString error;
    m_plannedEpochs = train.epochs;
    if (!m_controller->start(m_corpus->corpus(), m_settings->modelConfig(), train, &error))
        showError(tr("Cannot start training"), error);
}

void MainWindow::continueTraining() {
    TrainConfig train = m_settings->trainConfig();
    train.snapshot_every = m_probe->refreshEvery();
    m_controller->setProbeSentence(m_probe->sentence());
    QString error;
    bool ok = false;
    m_continuing = true;
    if (m_continueFromCheckpoint && m_checkpoint) {
        train.epochs = m_checkpoint->history.epochs_done + m_settings->trainConfig().epochs;
        ok = m_controller->startFromCheckpoint(m_checkpoint, m_corpus->corpus(), train, &error);
    } else if (const TrainHistory* h = m_controller->history()) {
        train.epochs = h->epochs_done + m_settings->trainConfig().epochs;
        ok = m_controller->continueRun(train, &error);
    } else {
        error = tr("Train a model or open a checkpoint first.");
    }
    m_plannedEpochs = train.epochs;
    if (!ok) {
        m_continuing = false;
        showError(tr("Cannot continue training"), error);
    }
}

void MainWindow::onStateChanged(TrainingController::State state) {
    using S = TrainingController::State;
    const QString names[] = {tr("Idle"), tr("Starting…"), tr("Training"), tr("Pausing…"), tr("Paused"), tr("Stopping…")};
    m_stateLabel->setText(names[int(state)]);
    const bool busy = state != S::Idle;
    m_corpus->setEnabled(!busy);
    m_settings->setEnabled(!busy);
    if (state == S::Paused) m_progress->setFormat(m_progress->format() + tr(" — paused"));
    updateActions();
}

void MainWindow::updateActions() {
    using S = TrainingController::State;
    const S s = m_controller->state();
    const bool idle = s == S::Idle;
    m_trainAct->setEnabled(idle && m_settings->isValid() && m_corpus->corpus());
    // Pause and Resume share a place (and F6); a hidden QAction also reports itself disabled,
    // so visibility is decided from the state, not from isEnabled().
    const bool canResume = s == S::Paused || s == S::Pausing;
    m_pauseAct->setVisible(!canResume);
    m_resumeAct->setVisible(canResume);
    m_pauseAct->setEnabled(s == S::Running || s == S::Starting);
    m_resumeAct->setEnabled(canResume);
    m_stopAct->setEnabled(!idle && s != S::Stopping);
    m_continueAct->setEnabled(idle && (m_controller->hasTrainer() || (m_continueFromCheckpoint && m_checkpoint)));
    const bool haveModel = m_controller->hasTrainer() || m_model != nullptr || m_checkpoint != nullptr;
    m_saveAct->setEnabled(haveModel && s != S::Stopping);
    m_saveAsAct->setEnabled(m_saveAct->isEnabled());
    m_openCheckpointAct->setEnabled(idle);
    m_openCorpusAct->setEnabled(idle);
    m_exportHeatmapAct->setEnabled(!currentHeatmap()->heatmapData().empty());
}

void MainWindow::onProgress(const BatchReport& r) {
    const int totalEpochs = std::max(1, m_plannedEpochs);
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
    statusBar()->showMessage(tr("Epoch %1: train loss %2, validation loss %3, BLEU %4, exact match %5%")
                                 .arg(r.epoch)
                                 .arg(formatLoss(r.train_loss), formatLoss(r.val_loss))
                                 .arg(r.val_bleu, 0, 'f', 1)
                                 .arg(100 * r.val_accuracy, 0, 'f', 1),
                             15000);
}

void MainWindow::onFinished(StopReason reason, const QString& message) {
    m_continuing = false;
    m_continueFromCheckpoint = false;
    m_checkpointPath.clear();  // the weights changed: Save asks where
    switch (reason) {
    case StopReason::finished:
        m_progress->setValue(1000);
        m_progress->setFormat(tr("Finished — translate a sentence in the Translate tab"));
        statusBar()->showMessage(tr("Training finished."), 10000);
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
