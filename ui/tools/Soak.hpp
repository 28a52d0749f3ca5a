#pragma once
// A soak run (tools/soak.sh): the app trains on a corpus for a given time while
// a 5 ms precise timer measures how late the GUI thread serves it, as a user
// would feel it; one JSON line per 10 s window goes to a log. Started by the
// hidden `attnviz --soak SECONDS --soak-log FILE CORPUS` (offscreen).
#include <QApplication>
#include <QString>
#include <atomic>
#include <vector>

namespace attnviz::ui {

class MainWindow;

struct SoakOptions {
    QString corpus;          ///< TSV corpus to train on
    QString log;             ///< JSON lines: {"kind":"window",...} per window, {"kind":"summary",...} last
    int seconds = 1800;      ///< how long to train
    int windowSeconds = 10;  ///< one log line per this many seconds
};

/// Every tick's lateness of a soak in 10 µs bins up to 250 ms (the last bin
/// holds all beyond), with the exact maximum and count over 16 ms. Its memory
/// is fixed when made (100 KB), so the soak's own record does not grow the
/// resident memory it measures (a vector of every tick's lateness grew by ~3 MB
/// in 30 minutes, 0.4% of the GUI's RSS).
class LatenessHistogram {
public:
    LatenessHistogram();
    void add(double ms);
    quint64 count() const { return m_count; }
    quint64 over16() const { return m_over16; }
    double max() const { return m_max; }
    /// The lateness below which a fraction q of the ticks lie, to 10 µs (a bin's
    /// middle, at most the maximum); 0 without ticks.
    double quantile(double q) const;

private:
    std::vector<quint32> m_bins;
    quint64 m_count = 0, m_over16 = 0;
    double m_max = 0;
};

/// The app's QApplication: it can time every event the GUI thread handles, so that a
/// soak run tells a late timer caused by the app's own work (a long event) from one
/// caused by the system (the thread was ready but not running). Timing is off unless
/// a soak turns it on; then each top-level event costs two clock reads.
class TimedApplication : public QApplication {
    Q_OBJECT
public:
    TimedApplication(int& argc, char** argv);
    bool notify(QObject* receiver, QEvent* event) override;
    void setTiming(bool on) { m_timing.store(on, std::memory_order_relaxed); }
    /// What one event cost the GUI thread.
    struct EventCost {
        double wallMs = 0;    ///< by the clock
        double cpuMs = 0;     ///< the thread's CPU time (user + system)
        long blocked = 0;     ///< times it went to sleep (a lock, a page being mapped, I/O)
        long preempted = 0;   ///< times the scheduler gave its core to another thread
    };
    /// The longest event handled since the last call (which event to which object in
    /// `what`), then starts over.
    EventCost takeLongest(QString* what);
    /// The most CPU time the GUI thread spent on one event since the last call (ms), then
    /// starts over. Wall time well above CPU time means the thread was waiting for a core
    /// (other threads, other processes, the hypervisor), not working.
    double takeLongestCpu();
    /// Events that took longer than 16 ms while timing was on: by the wall clock, and by
    /// the GUI thread's CPU time (the app's own work).
    int over16() const { return m_over16; }
    int cpuOver16() const { return m_cpuOver16; }
    double longestOverall() const { return m_longestOverall; }
    double longestCpuOverall() const { return m_longestCpuOverall; }
    /// The event being handled now is the soak's own measuring (its heap figures): not
    /// counted among the app's events.
    void discardCurrentEvent() { m_discard = true; }

private:
    std::atomic<bool> m_timing{false};  ///< read by every thread that delivers events
    int m_depth = 0;
    EventCost m_longest;
    double m_longestOverall = 0;
    double m_longestCpu = 0, m_longestCpuOverall = 0;
    QString m_longestWhat;
    int m_over16 = 0, m_cpuOver16 = 0;
    bool m_discard = false;  ///< GUI thread only
};

/// Runs the soak on a shown window; returns the process exit code (0: trained the whole time).
int runSoak(MainWindow& window, const SoakOptions& options);

/// The calling thread's CPU time and how often it slept or was preempted so far (getrusage):
/// with the wall clock, it tells work from waiting.
TimedApplication::EventCost threadUsage();

}  // namespace attnviz::ui
