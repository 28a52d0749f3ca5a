#pragma once
// One decoding step under the microscope (seed 004's steps 1-4): for output
// token t, the raw score of every source token, the softmax weights that turn
// them into a distribution, and the norm of the context vector they produce.
#include <QWidget>

#include "ui/ColorMap.hpp"
#include "ui/HeatmapWidget.hpp"

class QLabel;
class QTableWidget;

namespace attnviz::ui {

/// Vertical bars of the weights of one step, the token under each bar.
class WeightBars : public QWidget {
    Q_OBJECT
public:
    explicit WeightBars(QWidget* parent = nullptr);
    void setValues(const QStringList& labels, const std::vector<float>& weights);
    void setColorMap(ColorMap::Kind kind);
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    QStringList m_labels;
    std::vector<float> m_weights;
    ColorMap m_colorMap;
};

class StepInspector : public QWidget {
    Q_OBJECT
public:
    explicit StepInspector(QWidget* parent = nullptr);

    /// Shows row `step` of data (-1 or out of range: nothing selected).
    void setStep(const HeatmapData& data, int step);
    int step() const { return m_step; }
    /// Number of rows in the table (one per source token).
    int tableRows() const;
    /// Weight shown in the table for source token `column`.
    double weightAt(int column) const;

public Q_SLOTS:
    void setColorMap(attnviz::ui::ColorMap::Kind kind);
    void clear();

private:
    QLabel* m_title;
    QLabel* m_context;
    WeightBars* m_bars;
    QTableWidget* m_table;
    int m_step = -1;
};

}  // namespace attnviz::ui
