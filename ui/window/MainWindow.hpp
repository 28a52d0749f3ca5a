#pragma once
// The main window: setup dock (corpus, model and training settings), tabs for
// the live curves, translate & inspect, and the live probe; shared QActions in
// menus, toolbar and shortcuts; QSettings for choices, recent files and layout.
#include <QMainWindow>
#include <QMessageBox>
#include <functional>
#include <memory>

#include "core/decode/translation_model.hpp"
#include "ui/common/ColorMap.hpp"
#include "ui/training/TrainingController.hpp"

QT_BEGIN_NAMESPACE
class QAction;
class QActionGroup;
class QDockWidget;
class QLabel;
class QMenu;
class QProgressBar;
class QTabWidget;
class QToolBar;
QT_END_NAMESPACE

namespace attnviz::ui {

class AgreementPanel;
class CorpusPanel;
class FineTuneLanguages;
class HeadsPanel;
class HeatmapWidget;
class LossChart;
class ProbePanel;
class ComparePanel;
class SettingsPanel;
class TranslatePanel;
class WebPageWriter;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    enum Tab { CurvesTab = 0, TranslateTab = 1, ProbeTab = 2, CompareTab = 3, HeadsTab = 4 };

    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    CorpusPanel* corpusPanel() const { return m_corpus; }
    SettingsPanel* settingsPanel() const { return m_settings; }
    /// The Setup dock's fine-tune languages (a multilingual pretrained model's pair; the Translate tab's lists).
    FineTuneLanguages* fineTuneLanguages() const { return m_tuneLanguages; }
    TrainingController* controller() const { return m_controller; }
    LossChart* lossChart() const { return m_chart; }
    TranslatePanel* translatePanel() const { return m_translate; }
    ProbePanel* probePanel() const { return m_probe; }
    ComparePanel* comparePanel() const { return m_compare; }
    /// The Heads tab: which heads matter (ui/analysis/HeadsPanel.hpp).
    HeadsPanel* headsPanel() const { return m_heads; }
    QTabWidget* tabs() const { return m_tabs; }
    QProgressBar* progressBar() const { return m_progress; }
    /// The heatmap of the visible tab (probe tab: the probe's; otherwise the translation's).
    HeatmapWidget* currentHeatmap() const;
    /// Every heatmap the view settings (colour map, scale, values, strips) apply to.
    QList<HeatmapWidget*> heatmaps() const;
    /// The model the Translate tab translates with (the latest snapshot or the opened checkpoint).
    TranslationModelPtr currentModel() const;

    QAction* trainAction() const { return m_trainAct; }
    QAction* pauseAction() const { return m_pauseAct; }
    QAction* resumeAction() const { return m_resumeAct; }
    QAction* stopAction() const { return m_stopAct; }
    QAction* continueAction() const { return m_continueAct; }
    QAction* saveAction() const { return m_saveAct; }
    QAction* openCheckpointAction() const { return m_openCheckpointAct; }
    /// File → Open model folder…: a Hugging Face model folder (Marian, M2M100/NLLB).
    QAction* openModelFolderAction() const { return m_openModelFolderAct; }
    /// File → Open from the Hugging Face Hub… and File → Models… (ui/window/HubDialogs.hpp).
    QAction* openHubAction() const { return m_openHubAct; }
    QAction* modelsAction() const { return m_modelsAct; }
    QAction* exportHeatmapAction() const { return m_exportHeatmapAct; }

    /// The last error shown to the user (dialog or status bar).
    QString lastError() const { return m_lastError; }
    /// Off: errors go to the status bar only (tests, screenshot runs).
    void setErrorDialogsEnabled(bool enabled) { m_errorDialogs = enabled; }

    /// Asks what to do with an unsaved model: Save, Discard or Cancel. The default
    /// shows a QMessageBox; tests and scripted runs answer without a modal dialog.
    using UnsavedPrompt = std::function<QMessageBox::StandardButton()>;
    void setUnsavedPrompt(UnsavedPrompt prompt) { m_unsavedPrompt = std::move(prompt); }
    /// Asked before a checkpoint of the old format (version 1) is converted to newPath and
    /// opened: true converts. The default shows a question with Upgrade / Cancel.
    using LegacyPrompt = std::function<bool(const QString& oldPath, const QString& newPath)>;
    void setLegacyPrompt(LegacyPrompt prompt) { m_legacyPrompt = std::move(prompt); }
    /// Where to save when there is no known path (empty: cancelled). The default shows a file dialog.
    void setSavePathProvider(std::function<QString()> provider) { m_savePath = std::move(provider); }
    /// Qt's maybeSave(): before an unsaved model is replaced or the window closes, asks
    /// Save / Discard / Cancel. True: go ahead (saved or discarded). Save while a run is
    /// active (closing the window) stops it, and the window closes once the worker has
    /// written the file: false until then.
    bool maybeSave();

    // File operations without dialogs (the menu actions ask for the path, then call these).
    /// Makes a model the session's model (after asking about an unsaved one): a checkpoint, a
    /// d2l model file, or a Hugging Face model folder (then Train fine-tunes it on the corpus).
    bool openCheckpoint(const QString& path);
    /// Starts reading a TSV corpus in the background; the corpus panel reports the outcome.
    bool openCorpusFile(const QString& path);
    /// Starts reading two-file parallel text (line N of source translates line N of target)
    /// in the background, as openCorpusFile.
    bool openParallelFiles(const QString& sourcePath, const QString& targetPath);
    /// Opens a checkpoint, a model folder or a TSV corpus, deciding by kind, content and suffix.
    bool openFile(const QString& path);
    /// Writes the current model; while training runs the worker writes it between two
    /// batches. The outcome goes to the status bar or an error (false: failed already).
    bool saveCheckpointTo(const QString& path);
    /// Exports the visible heatmap as .png (scale x on-screen size), .svg, .csv or .json.
    bool exportHeatmapTo(const QString& path, double scale = 2.0);
    /// Starts writing the translation on screen, attributed by the four methods, as one self-contained
    /// web page (ui/analysis/WebPageWriter.hpp); the outcome goes to the status bar or an error (false: nothing to write).
    bool exportWebPageTo(const QString& path);
    WebPageWriter* webPageWriter() const { return m_webPage; }
    /// Opens the corpus agreement window (ui/analysis/AgreementPanel.hpp) for the current model and corpus.
    void showAgreement();
    /// That window (null until first opened).
    AgreementPanel* agreementPanel() const { return m_agreement; }
    /// Exports the curves as .png or .csv.
    bool exportCurvesTo(const QString& path);
    QStringList recentFiles() const;
    /// The window's size when none was saved: 90% of the screen's free area (at least 1024 × 700
    /// where the screen has that).
    QSize defaultSize() const;

public Q_SLOTS:
    void startTraining();
    void continueTraining();
    void showError(const QString& title, const QString& message);

protected:
    void closeEvent(QCloseEvent* event) override;
    /// First shown without a saved layout: the Setup dock gets a quarter of the width.
    void showEvent(QShowEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
    void createActions();
    /// File → Export as web page and View → Corpus agreement (ui/window/MainWindowExplain.cpp).
    void createExplainActions();
    void createMenus();
    void createToolBars();
    QWidget* createSetupDock();
    void createStatusBar();
    void connectController();
    void updateActions();
    void onStateChanged(TrainingController::State state);
    void onStarted(const QString& runLabel, bool continuing);
    void onPrepared(const SessionInfo& info);
    void onSaved(bool ok, const QString& path, const QString& error);
    void onProgress(const BatchReport& report);
    void onEpoch(const EpochReport& report, qint64 step);
    void onFinished(StopReason reason, const QString& message);
    void onCorpusChanged();
    void setModel(TranslationModelPtr model);
    void setColorMap(ColorMap::Kind kind);
    void setColorScale(ColorMap::Scale scale);
    void addRecentFile(const QString& path);
    void rebuildRecentMenu();
    void saveCheckpointDialog(bool forceAsk);
    QMessageBox::StandardButton askToSave();
    bool askToUpgrade(const QString& oldPath, const QString& newPath);
    QString askSavePath();
    void openCheckpointDialog();
    /// Asks for a Hugging Face model folder (config.json, weights, tokenizer files) and opens it.
    void openModelFolderDialog();
    /// File → Open from the Hugging Face Hub…: downloads a model into the cache, then opens it.
    void openHubDialog();
    /// File → Models…: the cached models; opens or deletes a revision.
    void openModelsDialog();
    void openCorpusDialog();
    /// Asks for the source file, then the target file, of parallel text.
    void openParallelDialog();
    void exportHeatmapDialog();
    void exportCurvesDialog();
    void exportWebPageDialog();
    void loadSettings();
    void saveSettings() const;
    void showAbout();

    CorpusPanel* m_corpus;
    SettingsPanel* m_settings;
    FineTuneLanguages* m_tuneLanguages = nullptr;
    TrainingController* m_controller;
    LossChart* m_chart;
    TranslatePanel* m_translate;
    ProbePanel* m_probe;
    ComparePanel* m_compare;
    HeadsPanel* m_heads;
    QTabWidget* m_tabs;
    QProgressBar* m_progress;
    QLabel* m_stateLabel;
    QLabel* m_deviceLabel;
    QLabel* m_rateLabel;
    QLabel* m_elapsedLabel;
    QToolBar* m_mainToolBar;
    QMenu* m_recentMenu = nullptr;
    QDockWidget* m_setupDock = nullptr;
    bool m_stateRestored = false;  ///< loadSettings() restored the docks' layout
    bool m_dockSized = false;      ///< the first show has sized the dock (or kept the restored layout)

    QAction* m_openCorpusAct;
    QAction* m_openParallelAct;
    QAction* m_openCheckpointAct;
    QAction* m_openModelFolderAct;
    QAction* m_openHubAct = nullptr;
    QAction* m_modelsAct = nullptr;
    QAction* m_saveAct;
    QAction* m_saveAsAct;
    QAction* m_exportHeatmapAct;
    QAction* m_exportCurvesAct;
    QAction* m_exportWebAct;
    WebPageWriter* m_webPage;
    QAction* m_agreementAct;
    AgreementPanel* m_agreement = nullptr;
    QAction* m_quitAct;
    QAction* m_trainAct;
    QAction* m_pauseAct;
    QAction* m_resumeAct;
    QAction* m_stopAct;
    QAction* m_continueAct;
    QAction* m_defaultsAct;
    QActionGroup* m_colorMapGroup;
    QActionGroup* m_colorScaleGroup;
    QAction* m_numbersAct;
    QAction* m_stripsAct;
    QAction* m_zoomInAct;
    QAction* m_zoomOutAct;
    QAction* m_zoomResetAct;
    QAction* m_aboutAct;

    UnsavedPrompt m_unsavedPrompt;
    LegacyPrompt m_legacyPrompt;
    std::function<QString()> m_savePath;
    QString m_closeAfterSaving;  ///< the window closes once this file is written
    QString m_lastError;
    bool m_errorDialogs = true;
};

}  // namespace attnviz::ui
