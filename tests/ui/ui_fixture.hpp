#pragma once
// What the offscreen GUI tests share: the application (offscreen, settings in a
// private temporary directory), waiting for a condition while the event loop
// runs, and a window set up to train a tiny model in seconds.
// Include after Catch2 (its REQUIRE is used here), which comes after the
// Qt/LibTorch headers (see test_ui.cpp).
#include <QApplication>
#include <QElapsedTimer>
#include <QFile>
#include <QMessageBox>
#include <QSettings>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>
#include <algorithm>
#include <functional>
#include <memory>
#include <vector>

#include "ui/training/CorpusPanel.hpp"
#include "ui/window/MainWindow.hpp"
#include "ui/training/ProbePanel.hpp"
#include "ui/tools/Screenshots.hpp"
#include "ui/tools/Soak.hpp"
#include "ui/training/SettingsPanel.hpp"
#include "ui/training/TrainingController.hpp"
#include "ui/heatmap/MapSelector.hpp"
#include "ui/translate/TranslatePanel.hpp"

namespace ui_testing {
using namespace attnviz;
using namespace attnviz::ui;


/// One QApplication per process (ctest runs each test case in its own process),
/// offscreen, with settings in a private temporary directory: the app's own
/// TimedApplication, as attnviz runs it.
inline QApplication& app() {
    static QTemporaryDir settingsDir;
    static int argc = 1;
    static char arg0[] = "attnviz_tests_ui";
    static char* argv[] = {arg0, nullptr};
    static QApplication* instance = [] {
        if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
        QSettings::setDefaultFormat(QSettings::IniFormat);
        QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, settingsDir.path());
        auto* a = new TimedApplication(argc, argv);
        QApplication::setOrganizationName(QStringLiteral("attnviz-tests"));
        QApplication::setApplicationName(QStringLiteral("attnviz-tests"));
        return a;
    }();
    return *instance;
}

/// A window set up to train a tiny model on a small toy-french corpus in seconds.
/// The unsaved-model prompt and the save dialog are answered by `answer` and
/// `savePath` (and counted), so nothing modal ever blocks a test.
struct Fixture {
    std::unique_ptr<MainWindow> window;
    int prompts = 0;        ///< times the unsaved-model prompt was shown
    int pathsAsked = 0;     ///< times the save dialog was shown
    QMessageBox::StandardButton answer = QMessageBox::Discard;
    QString savePath;       ///< what the save dialog returns (empty: cancelled)
    int legacyPrompts = 0;  ///< times the old-checkpoint-format question was shown
    bool upgradeLegacy = false;  ///< its answer (true: Upgrade)
    Fixture(int epochs = 3, int64_t maxBatches = 0, int pairs = 400) {
        app();
        QSettings().clear();
        window = std::make_unique<MainWindow>();
        window->setErrorDialogsEnabled(false);
        window->setUnsavedPrompt([this] {
            ++prompts;
            return answer;
        });
        window->setSavePathProvider([this] {
            ++pathsAsked;
            return savePath;
        });
        window->setLegacyPrompt([this](const QString&, const QString&) {
            ++legacyPrompts;
            return upgradeLegacy;
        });
        window->corpusPanel()->selectTask(TaskKind::toy_french);
        window->corpusPanel()->setNumPairs(pairs);
        ModelConfig m = SettingsPanel::defaultModelConfig();
        m.embed_size = 16;
        m.hidden_size = 32;
        TrainConfig t = SettingsPanel::defaultTrainConfig();
        t.min_delta = 0;  // patience as before: the long runs of the stall and layout tests must not stop early
        t.epochs = epochs;
        t.batch_size = 32;
        t.max_batches = maxBatches;
        t.eval_sample = 40;
        t.device = "cpu";
        window->settingsPanel()->setModelConfig(m);
        window->settingsPanel()->setTrainConfig(t);
        window->probePanel()->setRefreshEvery(5);
        window->resize(1280, 820);  // the size the tests were written at (the offscreen screen is 800 × 600)
        window->show();
        REQUIRE(waitCorpus());
    }
    MainWindow& w() { return *window; }
    TrainingController& controller() { return *window->controller(); }
    bool waitIdle(int ms = 30000) { return waitUntil([&] { return !controller().isActive(); }, ms); }
    /// The corpus panel's background work (reading, summarising) is done.
    bool waitCorpus(int ms = 30000) { return waitUntil([&] { return !w().corpusPanel()->busy(); }, ms); }
    /// Trains to the end and waits for it.
    void train() {
        REQUIRE(waitCorpus());
        w().trainAction()->trigger();
        REQUIRE(controller().isActive());
        REQUIRE(waitIdle());
    }
    /// Translates and waits for the answer.
    void translate(const QString& sentence) {
        QSignalSpy ready(w().translatePanel(), &TranslatePanel::translationReady);
        w().translatePanel()->translateText(sentence);
        REQUIRE(waitUntil([&] { return ready.count() > 0; }, 60000));  // generous: a state, not a speed
    }
};

/// Shows each kind of attention in turn in the Map row, as a user switching kinds, `ms` after each
/// (the timing benchmarks); returns how many it showed.
inline int showEachKind(TranslatePanel* panel, int ms = 100) {
    int shown = 0;
    for (AttentionKind kind : {AttentionKind::encoder_self, AttentionKind::decoder_self, AttentionKind::cross}) {
        MapChoice c;
        c.kind = kind;
        panel->mapSelector()->setChoice(c);
        QTest::qWait(ms);
        ++shown;
    }
    return shown;
}

/// What a user feels as a stall: a 5 ms precise timer on the GUI thread, how late each tick
/// came (ms beyond the 5) and how much CPU time the GUI thread spent between two ticks (its
/// own work, as opposed to waiting for a core). start() clears what an earlier run recorded.
struct TickMeter {
    std::vector<double> lateness;  ///< per tick, ms late
    std::vector<double> work;      ///< per tick, the GUI thread's CPU ms since the tick before
    TickMeter() {
        m_timer.setTimerType(Qt::PreciseTimer);
        m_timer.setInterval(5);
        QObject::connect(&m_timer, &QTimer::timeout, [this] {
            const qint64 now = m_clock.nsecsElapsed();
            const TimedApplication::EventCost usage = threadUsage();
            if (m_last >= 0) {
                lateness.push_back(std::max(0.0, double(now - m_last) / 1e6 - 5.0));
                work.push_back(usage.cpuMs - m_usage.cpuMs);
            }
            m_last = now;
            m_usage = usage;
        });
    }
    void start() {
        lateness.clear();
        work.clear();
        m_last = -1;
        m_clock.start();
        m_timer.start();
    }
    void stop() { m_timer.stop(); }
    /// The lateness below which a fraction q of the ticks lie (0 without ticks).
    double quantile(double q) const {
        if (lateness.empty()) return 0;
        std::vector<double> sorted = lateness;
        std::sort(sorted.begin(), sorted.end());
        return sorted[std::min(sorted.size() - 1, size_t(q * double(sorted.size())))];
    }
    double worst() const { return lateness.empty() ? 0 : *std::max_element(lateness.begin(), lateness.end()); }

private:
    QTimer m_timer;
    QElapsedTimer m_clock;
    qint64 m_last = -1;
    TimedApplication::EventCost m_usage;
};

inline QString tempPath(const QTemporaryDir& dir, const char* name) { return dir.filePath(QString::fromLatin1(name)); }

inline std::string readFile(const QString& path) {
    QFile f(path);
    REQUIRE(f.open(QIODevice::ReadOnly));
    return f.readAll().toStdString();
}


}  // namespace ui_testing
