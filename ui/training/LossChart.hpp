#pragma once
// Live training curves (Qt Charts): per-batch loss, raw and smoothed
// (TensorBoard's debiased EMA), validation loss per epoch, and validation
// BLEU / exact-match accuracy on a second axis. Finished runs can be kept and
// overlaid, each in its own colour; the curves export as PNG and CSV.
#include <QColor>
#include <QList>
#include <QPointF>
#include <QString>
#include <QWidget>
#include <vector>

#include "core/train/train.hpp"

QT_BEGIN_NAMESPACE
class QAction;
class QLabel;
class QSlider;
class QTimer;
class QChart;
class QChartView;
class QLineSeries;
class QScatterSeries;
class QAbstractAxis;
class QValueAxis;
QT_END_NAMESPACE

namespace attnviz::ui {

class LossChart : public QWidget {
    Q_OBJECT
public:
    explicit LossChart(QWidget* parent = nullptr);
    ~LossChart() override;

    /// Begins a fresh current run (the previous current run is dropped unless kept).
    void startRun(const QString& label);
    /// Appends (global step, loss) points to the current run.
    void addBatchLosses(const std::vector<std::pair<int64_t, double>>& points);
    /// Adds an epoch summary to the current run, plotted at global step `step`.
    void addEpoch(const EpochReport& report, int64_t step);
    /// Replaces the current run by a recorded history (e.g. from a checkpoint).
    void setHistory(const TrainHistory& history, const QString& label);

    QString currentRunLabel() const;
    int pointCount() const;       ///< batch-loss points in the current run (each pointStride() batches)
    int64_t pointStride() const;  ///< batches per batch-loss point in the current run (1 until the bound is reached)
    int epochCount() const;       ///< epoch points in the current run
    int keptRunCount() const;
    double smoothing() const { return m_smoothing; }
    bool logScale() const { return m_logScale; }
    /// Last smoothed value of the current run (NaN when empty).
    double lastSmoothed() const;
    /// Y range of the loss axis (for tests).
    std::pair<double, double> lossAxisRange() const;

    QAction* logScaleAction() const { return m_logAction; }
    QAction* keepRunAction() const { return m_keepAction; }
    QAction* clearRunsAction() const { return m_clearAction; }
    /// The chart's view. Batch losses reach the drawn series at most every
    /// kSeriesRefreshMs while the chart is shown, and when it is shown again
    /// after being hidden; refreshNow() brings them up to date at once.
    QWidget* chartView() const;
    /// Pushes pending batch losses into the drawn series and rescales the axes.
    void refreshNow();
    /// Whether batch losses wait to be drawn (for tests).
    bool refreshPending() const { return m_seriesStale; }

    bool exportPng(const QString& path, QString* error) const;
    bool exportCsv(const QString& path, QString* error) const;
    /// The CSV text: run,series,step,epoch,value.
    QString toCsv() const;

public Q_SLOTS:
    void setSmoothing(double weight);  ///< 0 (raw) .. 0.99
    void setLogScale(bool on);
    void keepRun();
    void clearKeptRuns();

Q_SIGNALS:
    /// The current run was kept (keepRun), under this label.
    void runKept(const QString& label);
    void smoothingChanged(double weight);

private:
    struct Run;
    Run& current();
    void attachRun(Run& run, bool kept);
    void appendEpoch(Run& run, const EpochReport& report, int64_t step);
    void detachRun(Run& run);
    void styleRun(Run& run, bool kept);
    void restyleAll();
    void rebuildSmoothed(Run& run);
    void rebuildRaw(Run& run);
    void rebuildYAxis();
    void updateRanges();
    /// The loss axis' range as drawn (without a refresh first).
    std::pair<double, double> drawnLossRange() const;
    /// Marks the batch series stale: drawn by the refresh timer if shown, else on show.
    void scheduleRefresh();
    void showEvent(QShowEvent* event) override;
    void showHover(const QString& series, const QPointF& point, bool state);

    QChart* m_chart;
    QChartView* m_view;
    QValueAxis* m_xAxis;
    QAbstractAxis* m_yAxis = nullptr;
    QValueAxis* m_metricAxis;
    QSlider* m_smoothSlider;
    QLabel* m_smoothLabel;
    QLabel* m_styleNote;
    QAction* m_logAction;
    QAction* m_keepAction;
    QAction* m_clearAction;
    std::vector<Run*> m_runs;     // kept runs first, current run last (may be absent)
    double m_smoothing = 0.8;
    bool m_logScale = false;
    int m_runCounter = 0;
    bool m_forceRescale = true;  ///< next updateRanges() sets the axes even if the data still fits
    bool m_seriesStale = false;  ///< batch losses added since the series were last drawn
    QTimer* m_refreshTimer;      ///< single shot: draws stale series while the chart is shown
};

}  // namespace attnviz::ui
