#include "ui/tools/Soak.hpp"

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
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

#include "core/io/process_memory.hpp"
#include "ui/training/CorpusPanel.hpp"
#include "ui/window/MainWindow.hpp"
#include "ui/training/ProbePanel.hpp"
#include "ui/tools/Screenshots.hpp"
#include "ui/training/SettingsPanel.hpp"
#include "ui/training/TrainingController.hpp"

namespace attnviz::ui {

LatenessHistogram::LatenessHistogram() : m_bins(25000, 0) {}

void LatenessHistogram::add(double ms) {
    const auto bin = static_cast<size_t>(std::max(0.0, ms) * 100.0);
    ++m_bins[std::min(bin, m_bins.size() - 1)];
    ++m_count;
    if (ms > 16.0) ++m_over16;
    m_max = std::max(m_max, ms);
}

double LatenessHistogram::quantile(double q) const {
    if (m_count == 0) return 0.0;
    const auto rank = std::min<quint64>(static_cast<quint64>(q * double(m_count)), m_count - 1);
    quint64 seen = 0;
    for (size_t i = 0; i < m_bins.size(); ++i) {
        seen += m_bins[i];
        if (seen > rank) return i + 1 == m_bins.size() ? m_max : std::min((double(i) + 0.5) / 100.0, m_max);
    }
    return m_max;
}

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
    const EventCost before = threadUsage();
    const bool handled = QApplication::notify(receiver, event);
    const EventCost after = threadUsage();
    EventCost cost{t.nsecsElapsed() / 1e6, after.cpuMs - before.cpuMs, after.blocked - before.blocked,
                   after.preempted - before.preempted};
    --m_depth;
    if (m_discard) {
        m_discard = false;
        return handled;
    }
    if (cost.wallMs > 16.0) ++m_over16;
    if (cost.cpuMs > 16.0) ++m_cpuOver16;
    m_longestOverall = std::max(m_longestOverall, cost.wallMs);
    m_longestCpuOverall = std::max(m_longestCpuOverall, cost.cpuMs);
    m_longestCpu = std::max(m_longestCpu, cost.cpuMs);
    if (cost.wallMs > m_longest.wallMs) {
        m_longest = cost;
        const char* typeName = QMetaEnum::fromType<QEvent::Type>().valueToKey(type);
        m_longestWhat = QStringLiteral("%1 to %2%3")
                            .arg(typeName ? QString::fromLatin1(typeName) : QString::number(int(type)),
                                 QString::fromLatin1(className),
                                 objectName.isEmpty() ? QString() : QStringLiteral(" '%1'").arg(objectName));
    }
    return handled;
}

double TimedApplication::takeLongestCpu() {
    const double ms = m_longestCpu;
    m_longestCpu = 0;
    return ms;
}

namespace {
/// Time the hypervisor ran something else on this machine's CPUs, summed over them
/// (ms, /proc/stat's "steal"; 0 where it is not reported).
double stealMs() {
    QFile f(QStringLiteral("/proc/stat"));
    if (!f.open(QIODevice::ReadOnly | QIODevice::Text)) return 0;
    const QList<QByteArray> fields = f.readLine().simplified().split(' ');
    if (fields.size() < 9 || fields[0] != "cpu") return 0;
    const long hz = sysconf(_SC_CLK_TCK);
    return hz > 0 ? fields[8].toDouble() * 1000.0 / double(hz) : 0.0;
}
}  // namespace

TimedApplication::EventCost threadUsage() {
    TimedApplication::EventCost u;
    rusage r{};
    if (getrusage(RUSAGE_THREAD, &r) != 0) return u;
    u.cpuMs = (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e3 + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e3;
    u.blocked = r.ru_nvcsw;
    u.preempted = r.ru_nivcsw;
    return u;
}

TimedApplication::EventCost TimedApplication::takeLongest(QString* what) {
    const EventCost longest = m_longest;
    if (what) *what = m_longestWhat;
    m_longest = EventCost();
    m_longestWhat.clear();
    return longest;
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
    std::vector<double> window;
    window.reserve(size_t(options.windowSeconds) * 250);  // 200 ticks a second and room
    LatenessHistogram all;
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
    // Whose a late tick is: the GUI thread's CPU time between two ticks says whether it was
    // working (more than a frame's 16 ms of work: the app's) or waiting for a core while
    // other threads, processes or the hypervisor had it (steal: the hypervisor's share).
    TimedApplication::EventCost usageLast = threadUsage();
    int lateApp = 0, lateWaiting = 0, latePreempted = 0, lateAppAll = 0, lateWaitingAll = 0, latePreemptedAll = 0;
    double workMax = 0;  // the most CPU time between two ticks in the window (ms)
    const double steal0 = stealMs();
    double stealLast = steal0;
    QObject::connect(&ticker, &QTimer::timeout, [&] {
        const qint64 now = clock.nsecsElapsed();
        const TimedApplication::EventCost usage = threadUsage();
        if (last >= 0) {
            const double late = std::max(0.0, (now - last) / 1e6 - 5.0);
            const double work = usage.cpuMs - usageLast.cpuMs;
            workMax = std::max(workMax, work);
            window.push_back(late);
            if (late > 16.0) {
                ++(work > 16.0 ? lateApp : lateWaiting);
                if (work <= 16.0 && usage.preempted > usageLast.preempted) ++latePreempted;
            }
        }
        last = now;
        usageLast = usage;
        if (now - windowStart < qint64(options.windowSeconds) * 1000000000 || window.empty()) return;
        std::sort(window.begin(), window.end());
        QString busyWhat;
        const TimedApplication::EventCost busy = app ? app->takeLongest(&busyWhat) : TimedApplication::EventCost();
        const double cpuMax = app ? app->takeLongestCpu() : 0.0;
        const double steal = stealMs();
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
                          {QStringLiteral("busy_max_ms"), busy.wallMs},
                          {QStringLiteral("busy_event"), busyWhat},
                          {QStringLiteral("busy_cpu_ms"), busy.cpuMs},
                          {QStringLiteral("busy_blocked"), double(busy.blocked)},
                          {QStringLiteral("busy_preempted"), double(busy.preempted)},
                          {QStringLiteral("event_cpu_max_ms"), cpuMax},
                          {QStringLiteral("work_between_ticks_max_ms"), workMax},
                          {QStringLiteral("late_app"), lateApp},
                          {QStringLiteral("late_waiting"), lateWaiting},
                          {QStringLiteral("late_preempted"), latePreempted},
                          {QStringLiteral("steal_ms"), steal - stealLast},
                          {QStringLiteral("soak_ms"), soakMs}});
        for (double late : window) all.add(late);
        window.clear();
        lateAppAll += lateApp;
        lateWaitingAll += lateWaiting;
        latePreemptedAll += latePreempted;
        lateApp = lateWaiting = latePreempted = 0;
        workMax = 0;
        stealLast = steal;
        windowStart = now;
        ++windows;
        last = clock.nsecsElapsed();  // the next tick's lateness starts after the measuring
        usageLast = threadUsage();
    });
    ticker.start();
    const bool ended = waitUntil([&] { return !c->isActive(); }, options.seconds * 1000);
    ticker.stop();
    if (app) app->setTiming(false);
    c->stop();
    waitUntil([&] { return !c->isActive(); }, 60000);
    QJsonObject summary{{QStringLiteral("kind"), QStringLiteral("summary")},
                        {QStringLiteral("seconds"), clock.elapsed() / 1000.0},
                        {QStringLiteral("windows"), windows},
                        {QStringLiteral("batches"), double(batches)},
                        {QStringLiteral("ended_early"), ended},
                        {QStringLiteral("last_error"), w.lastError()},
                        {QStringLiteral("busy_max_ms"), app ? app->longestOverall() : 0.0},
                        {QStringLiteral("busy_over_16ms"), app ? app->over16() : 0},
                        {QStringLiteral("event_cpu_max_ms"), app ? app->longestCpuOverall() : 0.0},
                        {QStringLiteral("event_cpu_over_16ms"), app ? app->cpuOver16() : 0},
                        {QStringLiteral("over_16ms_app"), lateAppAll},
                        {QStringLiteral("over_16ms_waiting"), lateWaitingAll},
                        {QStringLiteral("over_16ms_preempted"), latePreemptedAll},
                        {QStringLiteral("steal_ms"), stealMs() - steal0}};
    if (all.count() > 0) {
        summary[QStringLiteral("ticks")] = double(all.count());
        summary[QStringLiteral("median_ms")] = all.quantile(0.5);
        summary[QStringLiteral("p99_ms")] = all.quantile(0.99);
        summary[QStringLiteral("max_ms")] = all.max();
        summary[QStringLiteral("over_16ms")] = double(all.over16());
    }
    write(summary);
    return ended ? 1 : 0;  // training must run the whole time
}

}  // namespace attnviz::ui
