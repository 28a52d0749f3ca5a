#pragma once
// The main window: setup dock (corpus, model and training settings), tabs for
// the live curves, translate & inspect, and the live probe; shared QActions in
// menus, toolbar and shortcuts; QSettings for choices, recent files and layout.
#include <QMainWindow>
#include <memory>

#include "core/checkpoint.hpp"
#include "ui/ColorMap.hpp"
#include "ui/ModelHandle.hpp"
#include "ui/TrainingController.hpp"

QT_BEGIN_NAMESPACE
class QAction;
class QActionGroup;
class QLabel;
class QMenu;
class QProgressBar;
class QTabWidget;
class QToolBar;
QT_END_NAMESPACE

namespace attnviz::ui {

class CorpusPanel;
class HeatmapWidget;
class LossChart;
class ProbePanel;
class SettingsPanel;
class TranslatePanel;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    enum Tab { CurvesTab = 0, TranslateTab = 1, ProbeTab = 2 };

    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    CorpusPanel* corpusPanel() const { return m_corpus; }
    SettingsPanel* settingsPanel() const { return m_settings; }
    TrainingController* controller() const { return m_controller; }
    LossChart* lossChart() const { return m_chart; }
    TranslatePanel* translatePanel() const { return m_translate; }
    ProbePanel* probePanel() const { return m_probe; }
    QTabWidget* tabs() const { return m_tabs; }
    QProgressBar* progressBar() const { return m_progress; }
    /// The heatmap of the visible tab (probe tab: the probe's; otherwise the translation's).
    HeatmapWidget* currentHeatmap() const;
    ModelHandlePtr currentModel() const { return m_model; }

    QAction* trainAction() const { return m_trainAct; }
    QAction* pauseAction() const { return m_pauseAct; }
    QAction* resumeAction() const { return m_resumeAct; }
    QAction* stopAction() const { return m_stopAct; }
    QAction* continueAction() const { return m_continueAct; }
    QAction* saveAction() const { return m_saveAct; }
    QAction* openCheckpointAction() const { return m_openCheckpointAct; }
    QAction* exportHeatmapAction() const { return m_exportHeatmapAct; }

    /// The last error shown to the user (dialog or status bar).
    QString lastError() const { return m_lastError; }
    /// Off: errors go to the status bar only (tests, screenshot runs).
    void setErrorDialogsEnabled(bool enabled) { m_errorDialogs = enabled; }

    // File operations without dialogs (the menu actions ask for the path, then call these).
    bool openCheckpoint(const QString& path);
    bool openCorpusFile(const QString& path);
    /// Opens a checkpoint or a TSV corpus, deciding by content and suffix.
    bool openFile(const QString& path);
    /// Writes the current model; while training runs the worker writes it after the current batch.
    bool saveCheckpointTo(const QString& path);
    /// Exports the visible heatmap as .png (scale x on-screen size), .svg, .csv or .json.
    bool exportHeatmapTo(const QString& path, double scale = 2.0);
    /// Exports the curves as .png or .csv.
    bool exportCurvesTo(const QString& path);
    QStringList recentFiles() const;

public Q_SLOTS:
    void startTraining();
    void continueTraining();
    void showError(const QString& title, const QString& message);

protected:
    void closeEvent(QCloseEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
    void createActions();
    void createMenus();
    void createToolBars();
    QWidget* createSetupDock();
    void createStatusBar();
    void connectController();
    void updateActions();
    void onStateChanged(TrainingController::State state);
    void onProgress(const BatchReport& report);
    void onEpoch(const EpochReport& report, qint64 step);
    void onFinished(StopReason reason, const QString& message);
    void onCorpusChanged();
    void setModel(ModelHandlePtr model);
    void setColorMap(ColorMap::Kind kind);
    void addRecentFile(const QString& path);
    void rebuildRecentMenu();
    void saveCheckpointDialog(bool forceAsk);
    void openCheckpointDialog();
    void openCorpusDialog();
    void exportHeatmapDialog();
    void exportCurvesDialog();
    void loadSettings();
    void saveSettings() const;
    void showAbout();

    CorpusPanel* m_corpus;
    SettingsPanel* m_settings;
    TrainingController* m_controller;
    LossChart* m_chart;
    TranslatePanel* m_translate;
    ProbePanel* m_probe;
    QTabWidget* m_tabs;
    QProgressBar* m_progress;
    QLabel* m_stateLabel;
    QLabel* m_deviceLabel;
    QLabel* m_rateLabel;
    QLabel* m_elapsedLabel;
    QToolBar* m_mainToolBar;
    QMenu* m_recentMenu = nullptr;

    QAction* m_openCorpusAct;
    QAction* m_openCheckpointAct;
    QAction* m_saveAct;
    QAction* m_saveAsAct;
    QAction* m_exportHeatmapAct;
    QAction* m_exportCurvesAct;
    QAction* m_quitAct;
    QAction* m_trainAct;
    QAction* m_pauseAct;
    QAction* m_resumeAct;
    QAction* m_stopAct;
    QAction* m_continueAct;
    QAction* m_defaultsAct;
    QActionGroup* m_colorMapGroup;
    QAction* m_numbersAct;
    QAction* m_zoomInAct;
    QAction* m_zoomOutAct;
    QAction* m_zoomResetAct;
    QAction* m_aboutAct;

    ModelHandlePtr m_model;
    std::shared_ptr<const Checkpoint> m_checkpoint;  ///< the loaded checkpoint, if the model came from one
    QString m_checkpointPath;                         ///< where Save writes without asking
    bool m_continueFromCheckpoint = false;
    bool m_continuing = false;
    int m_plannedEpochs = 1;  ///< the running job's last epoch (for the progress bar)
    QString m_lastError;
    bool m_errorDialogs = true;
};

}  // namespace attnviz::ui
