#pragma once
// The layers × heads grid of each kind of attention (issue 39; Michel et al. 2019, Fig. 5, live):
// each cell coloured by the head's importance or confidence, with the head's history over the
// validations of training drawn as a small curve inside it. Fed by epoch reports' head snapshots
// (TrainConfig::head_stats) while a model trains or from a checkpoint's history, and by a
// measurement (head_stats()) for the current values. Exports PNG and SVG.
#include <QString>
#include <QWidget>
#include <map>
#include <tuple>
#include <vector>

#include "core/analysis/heads.hpp"
#include "core/config/history.hpp"
#include "ui/common/ColorMap.hpp"

namespace attnviz::ui {

class HeadsGrid : public QWidget {
    Q_OBJECT
public:
    enum Metric { Importance, Confidence };

    /// One head's cell: its current values and its history over validations.
    struct Cell {
        double importance = NAN;
        double confidence = NAN;
        std::vector<std::pair<int, double>> importanceHistory;  ///< (epoch, value)
        std::vector<std::pair<int, double>> confidenceHistory;  ///< (epoch, value)
        const HeadStats* measured = nullptr;                    ///< the last measurement's figures, if any
    };
    using Key = std::tuple<AttentionKind, int, int>;  ///< kind, layer, head

    explicit HeadsGrid(QWidget* parent = nullptr);

    /// Forgets every head and its history (a new training run, another model).
    void clear();
    /// Appends one validation's snapshots: a history point per head, and the current values.
    void addSnapshots(int epoch, const std::vector<HeadSnapshot>& heads);
    /// Every epoch of a history that measured heads, in order (a checkpoint opened).
    void setHistory(const TrainHistory& history);
    /// A measurement's figures become the current values (histories kept). `heads` must outlive
    /// the grid's use of it (HeadsPanel keeps the vector and calls this again when it changes).
    void setMeasured(const std::vector<HeadStats>& heads);

    Metric metric() const { return m_metric; }
    void setMetric(Metric metric);
    void setColorMap(ColorMap::Kind kind);

    /// The cell of a head (null: not shown).
    const Cell* cell(AttentionKind kind, int layer, int head) const;
    /// The number of heads shown.
    int cellCount() const { return int(m_cells.size()); }
    /// The kinds shown, in paint order.
    std::vector<AttentionKind> kinds() const;
    /// Where a head's cell is painted (widget coordinates; empty when not shown).
    QRect cellRect(AttentionKind kind, int layer, int head) const;

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;
    /// The grid's full picture: its size and how to paint it.
    QSize contentSize() const;
    void paintContent(QPainter& p) const;
    /// PNG (scale × the picture's size) or SVG by the suffix; false and *error on failure.
    bool exportTo(const QString& path, double scale, QString* error) const;

protected:
    void paintEvent(QPaintEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;
    bool event(QEvent* event) override;

private:
    struct Layout {
        AttentionKind kind = AttentionKind::cross;
        int layers = 0, heads = 0;
        QRect title, grid;
    };
    std::vector<Layout> layout() const;
    /// Tall enough for every kind's grid at the current width (a scroll area around it scrolls).
    void refreshSize();
    QString tooltipFor(const Key& key) const;
    double valueOf(const Cell& c) const { return m_metric == Importance ? c.importance : c.confidence; }

    std::map<Key, Cell> m_cells;
    Metric m_metric = Importance;
    ColorMap m_colors;
    int m_validations = 0;  ///< epochs with snapshots seen
};

}  // namespace attnviz::ui
