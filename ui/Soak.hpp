#pragma once
// A soak run (tools/soak.sh): the app trains on a corpus for a given time while
// a 5 ms precise timer measures how late the GUI thread serves it, as a user
// would feel it; one JSON line per 10 s window goes to a log. Started by the
// hidden `attnviz --soak SECONDS --soak-log FILE CORPUS` (offscreen).
#include <QString>

namespace attnviz::ui {

class MainWindow;

struct SoakOptions {
    QString corpus;          ///< TSV corpus to train on
    QString log;             ///< JSON lines: {"kind":"window",...} per window, {"kind":"summary",...} last
    int seconds = 1800;      ///< how long to train
    int windowSeconds = 10;  ///< one log line per this many seconds
};

/// Runs the soak on a shown window; returns the process exit code (0: trained the whole time).
int runSoak(MainWindow& window, const SoakOptions& options);

}  // namespace attnviz::ui
