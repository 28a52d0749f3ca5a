#pragma once
// LossChart's record of one run (private to the LossChart implementation files).
#include <QList>
#include <QPointF>
#include <QtCharts/QLineSeries>
#include <vector>

#include "core/config/bounded_curve.hpp"
#include "core/config/history.hpp"
#include "ui/training/LossChart.hpp"

namespace attnviz::ui {

struct LossChart::Run {
    QString label;
    QColor color;
    bool kept = false;
    /// Batch losses, each point the mean of raw.stride() batches (the last one's step): the
    /// same bounded curve as the checkpoint's (TrainHistory::batch_loss); and the smoothed
    /// loss at those steps, halved beside it.
    BoundedCurve raw{TrainHistory::max_batch_points};
    std::vector<QPointF> smoothed;
    QList<QPointF> rawShown, smoothShown;  // what the series hold (every rawStride-th point)
    double emaLast = 0;
    int64_t emaCount = 0;   ///< batches the moving average has seen
    int rawStride = 1;
    struct Epoch {
        int64_t step;
        EpochReport report;
    };
    std::vector<Epoch> epochs;
    QLineSeries* rawSeries = nullptr;
    QLineSeries* smoothSeries = nullptr;
    QLineSeries* valSeries = nullptr;
    QLineSeries* bleuSeries = nullptr;
    QLineSeries* accSeries = nullptr;
    QLineSeries* alignSeries = nullptr;  ///< alignment accuracy % (built-in tasks: their true alignments)
    QLineSeries* aerSeries = nullptr;    ///< alignment error rate %
    std::vector<QLineSeries*> all() const {
        return {rawSeries, smoothSeries, valSeries, bleuSeries, accSeries, alignSeries, aerSeries};
    }
    /// The per-epoch series (points drawn), all but the loss axis' on the metric axis.
    std::vector<QLineSeries*> epochSeries() const { return {valSeries, bleuSeries, accSeries, alignSeries, aerSeries}; }
};

}  // namespace attnviz::ui
