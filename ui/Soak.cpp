#include "ui/Soak.hpp"

#include <QElapsedTimer>
#include <QMetaEnum>
#include <QThread>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTabWidget>
#include <QTimer>
#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/process_memory.hpp"
#include "ui/CorpusPanel.hpp"
#include "ui/MainWindow.hpp"
#include "ui/ProbePanel.hpp"
#include "ui/Screenshots.hpp"
#include "ui/SettingsPanel.hpp"
#include "ui/TrainingController.hpp"

namespace attnviz::ui {

TimedApplication::TimedApplication(int& argc, char** argv) : QApplication(argc, argv) {}

bool TimedApplication::notify(QObject* receiver, QEvent* event) {
    // Only the GUI thread's top-level events: a nested one is part of its parent's time.
    if (!m_timing.load(std::memory_order_relaxed) || QThread::currentThread() != thread() || m_depth > 0)
        return QApplication::notify(receiver, event);
    const QEvent::Type type = event->type();  // the event may be gone after delivery
    const char* className = receiver->metaObject()->className();
    const QString objectName = receiver->objectName();
    ++m_depth;
    QElapsedTimer t;
    t.start();
    const bool handled = QApplication::notify(receiver, event);
    const double ms = t.nsecsElapsed() / 1e6;
    --m_depth;
    if (m_discard) {
        m_discard = false;
        return handled;
    }
    if (ms > 16.0) ++m_over16;
    m_longestOverall = std::max(m_longestOverall, ms);
    if (ms > m_longest) {
        m_longest = ms;
        const char* typeName = QMetaEnum::fromType<QEvent::Type>().valueToKey(type);
        m_longestWhat = QStringLiteral("%1 to %2%3")
                            .arg(typeName ? QString::fromLatin1(typeName) : QString::number(int(type)),
                                 QString::fromLatin1(className),
                                 objectName.isEmpty() ? QString() : QStringLiteral(" '%1'").arg(objectName));
    }
    return handled;
}

double TimedApplication::takeLongest(QString* what) {
    const double ms = m_longest;
    if (what) *what = m_longestWhat;
    m_longest = 0;
    m_longestWhat.clear();
    return ms;
}

int runSoak(MainWindow& w, const SoakOptions& options) {
    QFile log(options.log);
    if (!log.open(QIODevice::WriteOnly | QIODevice::Truncate | QIODevice::Text)) {
        std::fprintf(stderr, "attnviz: --soak-log: cannot write %s\n", qPrintable(options.log));
        return 1;
    }
    auto write = [&](const QJsonObject& o) {
        log.write(QJsonDocument(o).toJson(QJsonDocument::Compact) + "\n");
        log.flush();
    };
    w.setErrorDialogsEnabled(false);
    w.setUnsavedPrompt([] { return QMessageBox::Discard; });
    w.resize(1400, 900);
    w.show();
    if (!w.openCorpusFile(options.corpus) ||
        !waitUntil([&] { return !w.corpusPanel()->busy(); }, 600000) || !w.corpusPanel()->corpus()) {
        std::fprintf(stderr, "attnviz: --soak: cannot read %s: %s\n", qPrintable(options.corpus),
                     qPrintable(w.lastError()));
        return 1;
    }
    TrainConfig t = w.settingsPanel()->trainConfig();
    t.epochs = 100000;  // the clock ends the run, not the epochs
    t.patience = 0;     // nor early stopping (the GUI's default stops after 3 epochs without progress)
    w.settingsPanel()->setTrainConfig(t);
    w.probePanel()->setRefreshEvery(3);  // the probe heatmap repaints often, as a user watching it sees
    w.tabs()->setCurrentIndex(MainWindow::ProbeTab);
    TrainingController* c = w.controller();
    qint64 batches = 0;
    QObject::connect(c, &TrainingController::progress, [&](const BatchReport& r) { batches = r.global_step; });
    w.startTraining();
    if (!c->isActive()) {
        std::fprintf(stderr, "attnviz: --soak: training did not start: %s\n", qPrintable(w.lastError()));
        return 1;
    }

    // The measurement: a precise 5 ms timer; lateness = time between ticks - 5 ms.
    QElapsedTimer clock;
    clock.start();
    std::vector<double> window, all;
    qint64 last = -1, windowStart = 0;
    int windows = 0;
    // What the GUI thread itself spends: the longest event it handled in each window.
    // A late tick with no long event was the scheduler's (the thread was ready but not
    // running); a late tick beside a long event was the app's own work.
    auto* app = qobject_cast<TimedApplication*>(QCoreApplication::instance());
    if (app) {
        app->setTiming(true);
        app->takeLongest(nullptr);
    }
    QTimer ticker;
    ticker.setObjectName(QStringLiteral("soakTicker"));
    ticker.setTimerType(Qt::PreciseTimer);
    ticker.setInterval(5);
    QObject::connect(&ticker, &QTimer::timeout, [&] {
        const qint64 now = clock.nsecsElapsed();
        if (last >= 0) window.push_back(std::max(0.0, (now - last) / 1e6 - 5.0));
        last = now;
        if (now - windowStart < qint64(options.windowSeconds) * 1000000000 || window.empty()) return;
        std::sort(window.begin(), window.end());
        QString busyWhat;
        const double busyMax = app ? app->takeLongest(&busyWhat) : 0.0;
        // Where the resident memory goes: in use or held free. glibc walks every free
        // block for it, 10-16 ms with a fragmented heap: the soak's own work, so neither
        // the next tick's lateness nor the app's longest event counts it (soak_ms says it).
        const HeapStats heap = heap_stats();
        const double soakMs = (clock.nsecsElapsed() - now) / 1e6;
        if (app) app->discardCurrentEvent();
        write(QJsonObject{{QStringLiteral("kind"), QStringLiteral("window")},
                          {QStringLiteral("t"), double(now) / 1e9},
                          {QStringLiteral("ticks"), double(window.size())},
                          {QStringLiteral("median_ms"), window[window.size() / 2]},
                          {QStringLiteral("p99_ms"), window[window.size() * 99 / 100]},
                          {QStringLiteral("max_ms"), window.back()},
                          {QStringLiteral("batches"), double(batches)},
                          {QStringLiteral("heap_in_use_mb"), heap.in_use_mb},
                          {QStringLiteral("heap_free_mb"), heap.free_mb},
                          {QStringLiteral("heap_mapped_mb"), heap.mapped_mb},
                          {QStringLiteral("busy_max_ms"), busyMax},
                          {QStringLiteral("busy_event"), busyWhat},
                          {QStringLiteral("soak_ms"), soakMs}});
        all.insert(all.end(), window.begin(), window.end());
        window.clear();
        windowStart = now;
        ++windows;
        last = clock.nsecsElapsed();  // the next tick's lateness starts after the measuring
    });
    ticker.start();
    const bool ended = waitUntil([&] { return !c->isActive(); }, options.seconds * 1000);
    ticker.stop();
    if (app) app->setTiming(false);
    c->stop();
    waitUntil([&] { return !c->isActive(); }, 60000);
    std::sort(all.begin(), all.end());
    QJsonObject summary{{QStringLiteral("kind"), QStringLiteral("summary")},
                        {QStringLiteral("seconds"), clock.elapsed() / 1000.0},
                        {QStringLiteral("windows"), windows},
                        {QStringLiteral("batches"), double(batches)},
                        {QStringLiteral("ended_early"), ended},
                        {QStringLiteral("last_error"), w.lastError()},
                        {QStringLiteral("busy_max_ms"), app ? app->longestOverall() : 0.0},
                        {QStringLiteral("busy_over_16ms"), app ? app->over16() : 0}};
    if (!all.empty()) {
        summary[QStringLiteral("ticks")] = double(all.size());
        summary[QStringLiteral("median_ms")] = all[all.size() / 2];
        summary[QStringLiteral("p99_ms")] = all[all.size() * 99 / 100];
        summary[QStringLiteral("max_ms")] = all.back();
        summary[QStringLiteral("over_16ms")] =
            double(all.end() - std::upper_bound(all.begin(), all.end(), 16.0));
    }
    write(summary);
    return ended ? 1 : 0;  // training must run the whole time
}

}  // namespace attnviz::ui
