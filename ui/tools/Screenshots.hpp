#pragma once
// A scripted session for README screenshots: train briefly on the default
// built-in task, translate an example, and write PNGs of the main views.
#include <QString>
#include <QStringList>
#include <functional>

namespace attnviz::ui {

class MainWindow;

/// Spins the event loop (sleeping between checks) until pred() or timeoutMs; true when pred() held.
bool waitUntil(const std::function<bool()>& pred, int timeoutMs);

struct ScreenshotOptions {
    QString directory;        ///< where the PNGs go (created if missing)
    int trainSeconds = 120;   ///< each training run stops after this long at most
    int minEpochs = 3;        ///< ... or once it has trained this many epochs
    double targetAccuracy = 0.9;  ///< ... and reached this validation exact match
    bool compare = true;      ///< also train the no-attention baseline and capture both runs' curves
    bool subwords = true;     ///< also train a subword model on the task: its heatmap as pieces and merged into words
    QString sentence;         ///< sentence to translate; empty = the task's first example
};

/// Runs the script on a shown window; returns the files written (empty with *error on failure).
QStringList takeScreenshots(MainWindow& window, const ScreenshotOptions& options, QString* error);

}  // namespace attnviz::ui
