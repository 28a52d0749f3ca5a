#include "ui/window/MainWindow.hpp"

#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QCloseEvent>
#include <QGuiApplication>
#include <QComboBox>
#include <QDockWidget>
#include <QGroupBox>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QScreen>
#include <QScrollArea>
#include <QShowEvent>
#include <QStatusBar>
#include <QTabWidget>
#include <QTextDocumentFragment>
#include <QToolBar>
#include <QToolButton>
#include <QVBoxLayout>
#include <cmath>

#include "core/model/cuda_runtime.hpp"
#include "core/model/device.hpp"
#include "core/model/mkl_dispatch.hpp"
#include "ui/analysis/AttributionView.hpp"
#include "ui/analysis/HeadsGrid.hpp"
#include "ui/analysis/HeadsPanel.hpp"
#include "ui/compare/ComparePanel.hpp"
#include "ui/training/CorpusPanel.hpp"
#include "ui/common/Format.hpp"
#include "ui/heatmap/HeatmapWidget.hpp"
#include "ui/heatmap/MapSelector.hpp"
#include "ui/heatmap/ModelView.hpp"
#include "ui/training/LossChart.hpp"
#include "ui/training/ProbePanel.hpp"
#include "ui/training/SettingsPanel.hpp"
#include "ui/translate/StepInspector.hpp"
#include "ui/training/FineTuneLanguages.hpp"
#include "ui/translate/TranslatePanel.hpp"

namespace attnviz::ui {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
    setWindowTitle(tr("attnviz — attention, step by step"));
    setWindowIcon(QIcon(QStringLiteral(":/icons/attnviz.svg")));
    setObjectName(QStringLiteral("MainWindow"));
    setAcceptDrops(true);

    m_controller = new TrainingController(this);
    m_corpus = new CorpusPanel();
    m_settings = new SettingsPanel();
    m_chart = new LossChart();
    m_translate = new TranslatePanel();
    m_probe = new ProbePanel();
    m_compare = new ComparePanel();
    m_heads = new HeadsPanel();

    m_tabs = new QTabWidget();
    m_tabs->addTab(m_chart, tr("&Curves"));
    m_tabs->addTab(m_translate, tr("&Translate && inspect"));
    m_tabs->addTab(m_probe, tr("Live &probe"));
    m_tabs->addTab(m_compare, tr("C&ompare models"));
    m_tabs->addTab(m_heads, tr("H&eads"));
    // Measured heads carry their importance and confidence into the model view's thumbnails.
    connect(m_heads, &HeadsPanel::headsMeasured, this, [this] { m_translate->modelView()->setHeadStats(m_heads->heads()); });
    m_tabs->setTabToolTip(HeadsTab, tr("Which heads matter: importance, confidence and roles of every head, live while "
                                       "training; pruning curves"));
    m_progress = new QProgressBar();
    m_progress->setRange(0, 1000);
    m_progress->setValue(0);
    m_progress->setTextVisible(true);
    m_progress->setFormat(tr("Press Train (F5) to start"));
    auto* central = new QWidget();
    auto* layout = new QVBoxLayout(central);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addWidget(m_tabs, 1);
    layout->addWidget(m_progress);
    setCentralWidget(central);

    createActions();
    createExplainActions();
    createMenus();
    createToolBars();
    auto* dock = new QDockWidget(tr("Setup"), this);
    dock->setObjectName(QStringLiteral("setupDock"));
    dock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable);
    dock->setWidget(createSetupDock());
    addDockWidget(Qt::LeftDockWidgetArea, dock);
    createStatusBar();
    connectController();

    m_unsavedPrompt = [this] { return askToSave(); };
    m_savePath = [this] { return askSavePath(); };
    m_legacyPrompt = [this](const QString& oldPath, const QString& newPath) { return askToUpgrade(oldPath, newPath); };

    connect(m_corpus, &CorpusPanel::corpusChanged, this, &MainWindow::onCorpusChanged);
    connect(m_corpus, &CorpusPanel::loadFailed, this,
            [this](const QString& message) { showError(tr("Cannot open corpus"), message); });
    connect(m_corpus, &CorpusPanel::busyChanged, this, &MainWindow::updateActions);
    connect(m_corpus, &CorpusPanel::openFileRequested, this, &MainWindow::openCorpusDialog);
    connect(m_corpus, &CorpusPanel::openParallelRequested, this, &MainWindow::openParallelDialog);
    connect(m_corpus, &CorpusPanel::loadCancelled, this,
            [this] { statusBar()->showMessage(tr("Reading the corpus was cancelled: the previous one stays"), 8000); });
    connect(m_settings, &SettingsPanel::settingsChanged, this, [this] {
        m_corpus->setDataSettings(m_settings->trainConfig());  // the summary follows the data settings
        updateActions();
    });
    connect(m_translate, &TranslatePanel::translationFailed, this,
            [this](const QString& message) { statusBar()->showMessage(message, 8000); });
    connect(m_translate, &TranslatePanel::statusMessage, this,
            [this](const QString& message) { statusBar()->showMessage(message, 10000); });
    connect(m_probe, &ProbePanel::sentenceChanged, m_controller, &TrainingController::setProbeSentence);
    connect(m_tabs, &QTabWidget::currentChanged, this, &MainWindow::updateActions);
    connect(m_translate, &TranslatePanel::translationReady, this, &MainWindow::updateActions);
    // The probe and compare-models show the attention map chosen in the translate view (a Transformer's).
    const auto followMap = [this] {
        m_probe->setMapChoice(m_translate->mapSelector()->choice());
        m_compare->setMapChoice(m_translate->mapSelector()->choice());
    };
    connect(m_translate, &TranslatePanel::mapChoiceChanged, this, followMap);
    followMap();

    m_setupDock = dock;
    resize(defaultSize());  // a saved geometry (loadSettings) replaces it
    loadSettings();
    m_corpus->setDataSettings(m_settings->trainConfig());
    onCorpusChanged();
    updateActions();
}

MainWindow::~MainWindow() = default;

void MainWindow::showEvent(QShowEvent* event) {
    QMainWindow::showEvent(event);
    if (m_dockSized) return;
    m_dockSized = true;
    if (m_stateRestored) return;
    // The Setup dock at a quarter of the window, not its form's comfortable width (at 1280 px that
    // took 470 px from the views), never narrower than its fields can be.
    const int dockWidth =
        std::max(m_setupDock->minimumSizeHint().width(), std::min(m_setupDock->sizeHint().width(), width() / 4));
    resizeDocks({m_setupDock}, {dockWidth}, Qt::Horizontal);
}

QSize MainWindow::defaultSize() const {
    // 90% of the screen's free area, so that a laptop's 1280 × 800 and a 1920 × 1080 monitor both
    // give the heatmap room; not below 1024 × 700 where the screen has that, never above it.
    const QScreen* s = screen() ? screen() : QGuiApplication::primaryScreen();
    if (!s) return QSize(1280, 800);
    const QSize free = s->availableGeometry().size();
    const QSize wanted(int(free.width() * 0.9), int(free.height() * 0.9));
    return wanted.expandedTo(QSize(1024, 700)).boundedTo(free);
}

QWidget* MainWindow::createSetupDock() {
    auto* box = new QGroupBox(tr("Corpus"));
    auto* boxLayout = new QVBoxLayout(box);
    boxLayout->setContentsMargins(4, 4, 4, 4);
    boxLayout->addWidget(m_corpus);
    auto* inner = new QWidget();
    auto* layout = new QVBoxLayout(inner);
    layout->addWidget(box);
    // A multilingual pretrained model's pair to fine-tune on: the Translate tab's lists, shown here too.
    m_tuneLanguages = new FineTuneLanguages(m_translate->sourceLanguageBox(), m_translate->targetLanguageBox());
    // Heads measures a multilingual model on the pair Train tunes it on: the Translate tab's.
    m_heads->setLanguages([this] { return std::pair(m_tuneLanguages->sourceLanguage(), m_tuneLanguages->targetLanguage()); });
    layout->addWidget(m_tuneLanguages);
    layout->addWidget(m_settings);
    layout->addStretch(1);
    auto* scroll = new QScrollArea();
    scroll->setWidget(inner);
    scroll->setWidgetResizable(true);
    scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    // A list's minimum is its longest entry by default ("Pretrained (Hugging Face)", a long task's
    // name): a few characters instead, the rest elided, so that the dock can be a quarter of a laptop's
    // window (issue 41: at 1280 px its 460 px minimum cut the heatmap's title).
    for (QComboBox* box : inner->findChildren<QComboBox*>()) {
        box->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
        box->setMinimumContentsLength(10);
    }
    // As narrow as the fields can be (the form's labels and editors at their minimum), not their comfortable width.
    scroll->setMinimumWidth(inner->minimumSizeHint().width() + 24);
    return scroll;
}

void MainWindow::createActions() {
    auto make = [this](const QString& text, const QString& icon, const QKeySequence& key, const QString& tip) {
        auto* a = new QAction(icon.isEmpty() ? QIcon() : QIcon(QStringLiteral(":/icons/%1.svg").arg(icon)), text, this);
        if (!key.isEmpty()) a->setShortcut(key);
        a->setStatusTip(tip);
        a->setToolTip(key.isEmpty() ? tip : QStringLiteral("%1 (%2)").arg(tip, key.toString(QKeySequence::NativeText)));
        return a;
    };
    m_openCorpusAct = make(tr("Open &corpus…"), QStringLiteral("open-corpus"), QKeySequence(tr("Ctrl+Shift+O")),
                           tr("Open a TSV file as the corpus: Tatoeba or Tatoeba-Challenge (detected)"));
    m_openParallelAct = make(tr("Open &parallel text…"), QString(), QKeySequence(),
                             tr("Open two files as the corpus, one sentence per line: the source side, then the target side"));
    m_openCheckpointAct = make(tr("&Open model…"), QStringLiteral("open"), QKeySequence::Open,
                               tr("Open a model file: an attnviz checkpoint (model, vocabularies and curves) or a d2l "
                                  "PyTorch model"));
    m_openModelFolderAct = make(tr("Open model &folder…"), QString(), QKeySequence(tr("Ctrl+Shift+M")),
                                tr("Open a pretrained Hugging Face model folder (Marian opus-mt, M2M100, NLLB): "
                                   "translate with it, see every head, fine-tune it on the corpus"));
    m_openHubAct = make(tr("Open from the Hugging &Face Hub…"), QString(), QKeySequence(),
                        tr("Download a pretrained translation model from the Hugging Face Hub into the shared cache "
                           "and open it"));
    m_modelsAct = make(tr("&Models…"), QString(), QKeySequence(),
                       tr("The models of the Hugging Face cache: open or delete a revision"));
    m_saveAct = make(tr("&Save checkpoint"), QStringLiteral("save"), QKeySequence::Save, tr("Save the model and its curves"));
    m_saveAsAct = make(tr("Save checkpoint &as…"), QStringLiteral("save"), QKeySequence::SaveAs,
                       tr("Save the model to a new file"));
    m_exportHeatmapAct = make(tr("&Export heatmap…"), QStringLiteral("export"), QKeySequence(tr("Ctrl+E")),
                              tr("Export the visible heatmap as PNG, SVG, CSV or JSON"));
    m_exportCurvesAct = make(tr("Export c&urves…"), QStringLiteral("curves"), QKeySequence(tr("Ctrl+Shift+E")),
                             tr("Export the training curves as PNG or CSV"));
    m_quitAct = make(tr("&Quit"), QString(), QKeySequence::Quit, tr("Quit attnviz"));
    m_trainAct = make(tr("&Train"), QStringLiteral("train"), QKeySequence(Qt::Key_F5),
                      tr("Train a new model with these settings"));
    m_pauseAct = make(tr("&Pause"), QStringLiteral("pause"), QKeySequence(Qt::Key_F6), tr("Pause training"));
    m_resumeAct = make(tr("&Resume"), QStringLiteral("resume"), QKeySequence(Qt::Key_F6), tr("Resume training"));
    m_stopAct = make(tr("&Stop"), QStringLiteral("stop"), QKeySequence(Qt::SHIFT | Qt::Key_F5), tr("Stop training"));
    m_continueAct = make(tr("&Continue training"), QStringLiteral("continue"), QKeySequence(Qt::CTRL | Qt::Key_F5),
                         tr("Train the current model for more epochs"));
    m_defaultsAct = make(tr("Restore &default settings"), QString(), QKeySequence(), tr("Back to the small default model"));

    m_colorMapGroup = new QActionGroup(this);
    for (const QString& name : ColorMap::names()) {
        auto* a = m_colorMapGroup->addAction(name);
        a->setCheckable(true);
        a->setData(int(ColorMap::fromName(name)));
        a->setChecked(name == ColorMap::name(ColorMap::Viridis));
    }
    m_colorScaleGroup = new QActionGroup(this);
    for (const QString& name : ColorMap::scaleNames()) {
        const ColorMap::Scale scale = ColorMap::scaleFromName(name);
        auto* a = m_colorScaleGroup->addAction(scale == ColorMap::Linear ? tr("Linear scale")
                                               : scale == ColorMap::Sqrt ? tr("Square-root scale (small weights stand out)")
                                                                         : tr("Log scale (0.001 to 1)"));
        a->setCheckable(true);
        a->setData(int(scale));
        a->setChecked(scale == ColorMap::Linear);
    }
    m_numbersAct = make(tr("Show &values in cells"), QString(), QKeySequence(tr("Ctrl+Shift+V")),
                        tr("Print each weight in its cell"));
    m_numbersAct->setCheckable(true);
    m_stripsAct = make(tr("Show &statistics strips"), QString(), QKeySequence(),
                       tr("Beside the rows: probability of each output token (P), entropy (H) and largest weight "
                          "(max) of each step; under the columns: coverage of each source token (cov)"));
    m_stripsAct->setCheckable(true);
    m_stripsAct->setChecked(true);
    m_stripsAct->setIconText(tr("Strips"));
    m_zoomInAct = make(tr("Zoom &in"), QStringLiteral("zoom-in"), QKeySequence::ZoomIn, tr("Larger heatmap cells"));
    m_zoomOutAct = make(tr("Zoom &out"), QStringLiteral("zoom-out"), QKeySequence::ZoomOut, tr("Smaller heatmap cells"));
    m_zoomResetAct = make(tr("&Fit to window"), QString(), QKeySequence(tr("Ctrl+0")),
                          tr("Size the heatmap to the visible area"));
    // Short labels for the buttons above the heatmaps (menus keep the full text).
    m_zoomInAct->setIconText(tr("Zoom in"));
    m_zoomOutAct->setIconText(tr("Zoom out"));
    m_zoomResetAct->setIconText(tr("Fit"));
    m_numbersAct->setIconText(tr("Values"));
    m_aboutAct = make(tr("&About attnviz"), QString(), QKeySequence(), tr("About attnviz"));

    connect(m_openCorpusAct, &QAction::triggered, this, &MainWindow::openCorpusDialog);
    connect(m_openParallelAct, &QAction::triggered, this, &MainWindow::openParallelDialog);
    connect(m_openCheckpointAct, &QAction::triggered, this, &MainWindow::openCheckpointDialog);
    connect(m_openModelFolderAct, &QAction::triggered, this, &MainWindow::openModelFolderDialog);
    connect(m_openHubAct, &QAction::triggered, this, &MainWindow::openHubDialog);
    connect(m_modelsAct, &QAction::triggered, this, &MainWindow::openModelsDialog);
    connect(m_saveAct, &QAction::triggered, this, [this] { saveCheckpointDialog(false); });
    connect(m_saveAsAct, &QAction::triggered, this, [this] { saveCheckpointDialog(true); });
    connect(m_exportHeatmapAct, &QAction::triggered, this, &MainWindow::exportHeatmapDialog);
    connect(m_exportCurvesAct, &QAction::triggered, this, &MainWindow::exportCurvesDialog);
    connect(m_quitAct, &QAction::triggered, this, &QWidget::close);
    connect(m_trainAct, &QAction::triggered, this, &MainWindow::startTraining);
    connect(m_pauseAct, &QAction::triggered, m_controller, &TrainingController::pause);
    connect(m_resumeAct, &QAction::triggered, m_controller, &TrainingController::resume);
    connect(m_stopAct, &QAction::triggered, m_controller, &TrainingController::stop);
    connect(m_continueAct, &QAction::triggered, this, &MainWindow::continueTraining);
    connect(m_defaultsAct, &QAction::triggered, m_settings, &SettingsPanel::restoreDefaults);
    connect(m_colorMapGroup, &QActionGroup::triggered, this,
            [this](QAction* a) { setColorMap(static_cast<ColorMap::Kind>(a->data().toInt())); });
    connect(m_colorScaleGroup, &QActionGroup::triggered, this,
            [this](QAction* a) { setColorScale(static_cast<ColorMap::Scale>(a->data().toInt())); });
    connect(m_numbersAct, &QAction::toggled, this, [this](bool on) {
        for (HeatmapWidget* h : heatmaps()) h->setShowNumbers(on);
    });
    connect(m_stripsAct, &QAction::toggled, this, [this](bool on) {
        for (HeatmapWidget* h : heatmaps()) h->setShowStrips(on);
    });
    connect(m_zoomInAct, &QAction::triggered, this, [this] { currentHeatmap()->zoomIn(); });
    connect(m_zoomOutAct, &QAction::triggered, this, [this] { currentHeatmap()->zoomOut(); });
    connect(m_zoomResetAct, &QAction::triggered, this, [this] { currentHeatmap()->fitToWindow(); });
    connect(m_aboutAct, &QAction::triggered, this, &MainWindow::showAbout);
    // A kept run stays comparable: its model joins the Compare tab's choices.
    connect(m_chart, &LossChart::runKept, this, [this](const QString& label) {
        if (TranslationModelPtr model = currentModel()) m_compare->addModel(label, std::move(model));
    });
    connect(m_compare, &ComparePanel::compareFailed, this,
            [this](const QString& message) { statusBar()->showMessage(message, 10000); });
}

void MainWindow::createMenus() {
    QMenu* file = menuBar()->addMenu(tr("&File"));
    file->addAction(m_openCorpusAct);
    file->addAction(m_openParallelAct);
    file->addAction(m_openCheckpointAct);
    file->addAction(m_openModelFolderAct);
    file->addAction(m_openHubAct);
    file->addAction(m_modelsAct);
    m_recentMenu = file->addMenu(tr("Open &recent"));
    file->addSeparator();
    file->addAction(m_saveAct);
    file->addAction(m_saveAsAct);
    file->addSeparator();
    file->addAction(m_exportHeatmapAct);
    file->addAction(m_exportCurvesAct);
    file->addAction(m_exportWebAct);
    file->addSeparator();
    file->addAction(m_quitAct);

    QMenu* train = menuBar()->addMenu(tr("&Training"));
    for (QAction* a : {m_trainAct, m_pauseAct, m_resumeAct, m_stopAct, m_continueAct}) train->addAction(a);
    train->addSeparator();
    train->addAction(m_chart->keepRunAction());
    train->addAction(m_chart->clearRunsAction());
    train->addSeparator();
    train->addAction(m_defaultsAct);

    QMenu* view = menuBar()->addMenu(tr("&View"));
    QMenu* maps = view->addMenu(tr("&Colour map"));
    maps->addActions(m_colorMapGroup->actions());
    maps->addSeparator();
    maps->addActions(m_colorScaleGroup->actions());
    view->addAction(m_numbersAct);
    view->addAction(m_stripsAct);
    view->addSeparator();
    view->addAction(m_zoomInAct);
    view->addAction(m_zoomOutAct);
    view->addAction(m_zoomResetAct);
    view->addSeparator();
    view->addAction(m_chart->logScaleAction());
    view->addSeparator();
    view->addAction(m_agreementAct);

    QMenu* help = menuBar()->addMenu(tr("&Help"));
    help->addAction(m_aboutAct);
}

void MainWindow::createToolBars() {
    m_mainToolBar = addToolBar(tr("Main"));
    m_mainToolBar->setObjectName(QStringLiteral("mainToolBar"));
    m_mainToolBar->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    m_mainToolBar->addAction(m_openCorpusAct);
    m_mainToolBar->addAction(m_openCheckpointAct);
    m_mainToolBar->addAction(m_saveAct);
    m_mainToolBar->addSeparator();
    for (QAction* a : {m_trainAct, m_pauseAct, m_resumeAct, m_stopAct}) m_mainToolBar->addAction(a);
    m_mainToolBar->addSeparator();
    m_mainToolBar->addAction(m_exportHeatmapAct);
    m_mainToolBar->addAction(m_exportCurvesAct);

    // Each heatmap gets the same view actions above it.
    for (QToolBar* bar : {m_translate->heatmapToolBar(), m_probe->heatmapToolBar(), m_compare->heatmapToolBar()}) {
        auto* maps = new QToolButton(bar);
        maps->setText(tr("Colour map"));
        maps->setPopupMode(QToolButton::InstantPopup);
        auto* menu = new QMenu(maps);
        menu->addActions(m_colorMapGroup->actions());
        menu->addSeparator();
        menu->addActions(m_colorScaleGroup->actions());
        maps->setMenu(menu);
        bar->addWidget(maps);
        bar->addAction(m_numbersAct);
        bar->addAction(m_stripsAct);
        bar->addSeparator();
        bar->addAction(m_zoomOutAct);
        bar->addAction(m_zoomInAct);
        bar->addAction(m_zoomResetAct);
        bar->addSeparator();
        bar->addAction(m_exportHeatmapAct);
    }
}

void MainWindow::createStatusBar() {
    m_stateLabel = new QLabel(tr("Idle"));
    m_deviceLabel = new QLabel(cuda_available() ? tr("device: auto (CUDA available)") : tr("device: auto (CPU)"));
    m_rateLabel = new QLabel(tr("– tok/s"));
    m_elapsedLabel = new QLabel(tr("elapsed –"));
    // The rate and the clock change with every progress report: fixed sizes keep the window's layout still.
    fixLabelSize(m_rateLabel, tr("%1 target tok/s").arg(QStringLiteral("999.9k")));
    fixLabelSize(m_elapsedLabel, tr("elapsed %1").arg(QStringLiteral("99:59:59")));
    m_rateLabel->setAlignment(Qt::AlignRight | Qt::AlignVCenter);
    for (QLabel* l : {m_stateLabel, m_deviceLabel, m_rateLabel, m_elapsedLabel}) statusBar()->addPermanentWidget(l);
    statusBar()->showMessage(tr("Ready: press Train (F5) to train on the built-in task."), 10000);
}

HeatmapWidget* MainWindow::currentHeatmap() const {
    switch (m_tabs->currentIndex()) {
    case ProbeTab: return m_probe->heatmap();
    case CompareTab: return m_compare->difference();
    default: return m_translate->heatmap();
    }
}

TranslationModelPtr MainWindow::currentModel() const { return m_translate->model(); }

void MainWindow::setModel(TranslationModelPtr model) {
    m_compare->setCurrentModel(model);
    m_heads->setModel(model);
    m_translate->setModel(std::move(model));
    updateActions();
}

void MainWindow::onCorpusChanged() {
    m_heads->setCorpus(m_corpus->corpus());
    const QStringList examples = m_corpus->examples();
    m_translate->setExamples(examples);
    // Keep a probe the user typed; otherwise probe with the new corpus' first example.
    const QString probe = m_probe->sentence();
    static const QStringList taskExamples = [] {
        QStringList all;
        for (TaskKind k : all_tasks()) all << toQStringList(task_examples(k));
        return all;
    }();
    if ((probe.isEmpty() || taskExamples.contains(probe)) && !examples.isEmpty()) m_probe->setSentence(examples.front());
    if ((m_compare->sentence().isEmpty() || taskExamples.contains(m_compare->sentence())) && !examples.isEmpty())
        m_compare->setSentence(examples.front());
    if (m_corpus->corpus() && !m_corpus->isTask()) {
        addRecentFile(m_corpus->filePath());
        // The panel's summary is rich text: its lines joined, read as HTML, so that an entity
        // such as "&lt;TAB&gt;" shows as "<TAB>" in the plain-text status bar.
        const QString summary = m_corpus->summaryText().replace(QLatin1String("<br>"), QStringLiteral(" · "));
        statusBar()->showMessage(QTextDocumentFragment::fromHtml(summary).toPlainText(), 10000);
    }
    updateActions();
}

QList<HeatmapWidget*> MainWindow::heatmaps() const {
    return {m_translate->heatmap(), m_translate->forcedHeatmap(), m_translate->nodeHeatmap(), m_probe->heatmap(),
            m_compare->heatmapA(),   m_compare->heatmapB(),       m_compare->difference(),
            m_translate->attributionView()->heatmap()};
}

void MainWindow::setColorMap(ColorMap::Kind kind) {
    for (HeatmapWidget* h : heatmaps()) h->setColorMap(kind);
    m_heads->grid()->setColorMap(kind);
    m_translate->inspector()->setColorMap(kind);
    m_translate->modelView()->setColorMap(kind);
    for (QAction* a : m_colorMapGroup->actions())
        if (a->data().toInt() == int(kind)) a->setChecked(true);
}

void MainWindow::setColorScale(ColorMap::Scale scale) {
    for (HeatmapWidget* h : heatmaps()) h->setColorScale(scale);
    m_translate->modelView()->setColorScale(scale);
    for (QAction* a : m_colorScaleGroup->actions())
        if (a->data().toInt() == int(scale)) a->setChecked(true);
}

void MainWindow::showError(const QString& title, const QString& message) {
    m_lastError = message;
    statusBar()->showMessage(title + QStringLiteral(": ") + message, 15000);
    if (!m_errorDialogs) return;
    // Non-modal: the event loop (and a running training) carries on behind it.
    auto* box = new QMessageBox(QMessageBox::Warning, title, message, QMessageBox::Ok, this);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();
}

void MainWindow::closeEvent(QCloseEvent* event) {
    if (!maybeSave()) {
        event->ignore();
        return;
    }
    saveSettings();
    if (m_controller->isActive()) {
        statusBar()->showMessage(tr("Stopping training…"));
        m_controller->shutdown(2000);
    }
    event->accept();
}

void MainWindow::showAbout() {
    const std::string mkl = mkl_code_path();
    QMessageBox::about(this, tr("About attnviz"),
                       tr("<h3>attnviz %1</h3><p>Train RNN encoder–decoders with attention (Bahdanau et al.), watch the "
                          "loss fall, and inspect, step by step, where the decoder looks.</p>"
                          "<p>LibTorch %2 · Qt %3</p><p>CUDA: %4</p><p>MKL code path: %5</p>")
                           .arg(QStringLiteral(ATTNVIZ_VERSION), qs(libtorch_version()), QString::fromLatin1(qVersion()),
                                qs(load_cuda_runtime().status).toHtmlEscaped(),
                                mkl.empty() ? tr("none (no MKL)") : qs(mkl)));
}

}  // namespace attnviz::ui
