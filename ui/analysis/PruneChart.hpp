#pragma once
// The pruning curves (issue 39; Michel et al. 2019, Fig. 3-4): BLEU or the validation loss as more
// and more heads are masked, one line per order (importance, confidence, each random seed), for
// all kinds together or one kind alone (prune_curve()). Exports PNG, SVG and CSV.
#include <QString>
#include <QWidget>
#include <vector>

#include "core/analysis/prune_curve.hpp"

QT_BEGIN_NAMESPACE
class QChart;
class QChartView;
class QComboBox;
class QLabel;
class QValueAxis;
QT_END_NAMESPACE

namespace attnviz::ui {

class PruneChart : public QWidget {
    Q_OBJECT
public:
    explicit PruneChart(QWidget* parent = nullptr);

    /// A curve's points (empty: none, the chart says how to get one).
    void setPoints(std::vector<PrunePoint> points);
    const std::vector<PrunePoint>& points() const { return m_points; }

    QChart* chart() const { return m_chart; }
    QChartView* chartView() const { return m_view; }
    /// "BLEU" or "loss".
    QComboBox* metricBox() const { return m_metric; }
    /// "all" and each kind the curve has.
    QComboBox* kindsBox() const { return m_kinds; }

    /// PNG (scale × the chart's size) or SVG by the suffix; false and *error on failure.
    bool exportTo(const QString& path, double scale, QString* error) const;
    /// prune_curve_csv(), atomically.
    bool exportCsv(const QString& path, QString* error) const;

private:
    void rebuild();

    std::vector<PrunePoint> m_points;
    QChart* m_chart;
    QChartView* m_view;
    QValueAxis* m_x;
    QValueAxis* m_y;
    QComboBox* m_metric;
    QComboBox* m_kinds;
    QLabel* m_empty;
};

}  // namespace attnviz::ui
