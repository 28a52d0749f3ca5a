#pragma once
// The attention heatmap: one row per output token (decoding step), one column
// per source token, painted by hand so the same code draws the screen, the
// PNG and the SVG export. Hover shows the exact weight; clicking a row selects
// that decoding step for the step inspector.
#include <QStringList>
#include <QWidget>
#include <vector>

#include "ui/ColorMap.hpp"

namespace attnviz {
struct Translation;
}

namespace attnviz::ui {

/// What a heatmap shows; weights[row][col], rows = output tokens.
struct HeatmapData {
    QStringList source;                          ///< column labels
    QStringList output;                          ///< row labels
    std::vector<std::vector<float>> weights;     ///< rows x columns, each row sums to 1
    std::vector<std::vector<float>> rawScores;   ///< optional, same shape: shown in the tooltip
    std::vector<float> contextNorm;              ///< optional, per row: L2 norm of the context vector
    QStringList sourceNotes;                     ///< optional per-column note (e.g. the unknown word)
    QString title;                               ///< drawn above the grid (empty: none)

    int rows() const { return int(output.size()); }
    int columns() const { return int(source.size()); }
    bool empty() const { return output.isEmpty() || source.isEmpty(); }
    /// From hypothesis `hypothesis` of a translation (empty when there is none or no attention).
    static HeatmapData fromTranslation(const Translation& t, size_t hypothesis = 0);
};

class HeatmapWidget : public QWidget {
    Q_OBJECT
public:
    explicit HeatmapWidget(QWidget* parent = nullptr);

    const HeatmapData& heatmapData() const { return m_data; }
    int rows() const { return m_data.rows(); }
    int columns() const { return m_data.columns(); }

    ColorMap::Kind colorMap() const { return m_colorMap.kind(); }
    bool showNumbers() const { return m_showNumbers; }
    double zoom() const { return m_zoom; }
    /// True while the zoom follows the available space (until zoomed by hand; fitToWindow() restores it).
    bool autoFit() const { return m_autoFit; }
    int selectedRow() const { return m_selectedRow; }
    /// Text shown instead of a grid when there is no data.
    QString placeholder() const { return m_placeholder; }

    /// Size of the whole picture (labels, grid, colour bar) at the current zoom.
    QSize contentSize() const;
    /// Paints the whole picture with its top-left corner at (0, 0); used by
    /// paintEvent and by the PNG/SVG export, so both show the same thing.
    void paintContent(QPainter& painter) const;
    /// (row, column) under a point in widget coordinates, or (-1, -1).
    QPoint cellAt(const QPoint& pos) const;
    /// Rectangle of a cell in content coordinates.
    QRect cellRect(int row, int column) const;
    /// The tooltip text for a cell.
    QString cellToolTip(int row, int column) const;

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

public Q_SLOTS:
    void setHeatmapData(const attnviz::ui::HeatmapData& data);
    void clear(const QString& placeholder = QString());
    void setColorMap(attnviz::ui::ColorMap::Kind kind);
    void setShowNumbers(bool show);
    void setZoom(double zoom);
    void zoomIn();
    void zoomOut();
    void resetZoom();    ///< zoom 1 (fixed)
    void fitToWindow();  ///< zoom to fill the visible area, and keep doing so on resize
    void setSelectedRow(int row);

Q_SIGNALS:
    void rowSelected(int row);
    void zoomChanged(double zoom);

protected:
    void paintEvent(QPaintEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void leaveEvent(QEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;
    bool event(QEvent* event) override;

private:
    struct Layout;
    Layout layout() const;
    Layout layout(double zoom) const;
    void fitToSize(const QSize& available);
    void contentChanged();

    HeatmapData m_data;
    ColorMap m_colorMap;
    bool m_showNumbers = false;
    double m_zoom = 1.0;
    bool m_autoFit = true;  ///< zoom follows the widget's size until the user zooms by hand
    int m_selectedRow = -1;
    QPoint m_hoverCell{-1, -1};
    QString m_placeholder;
};

}  // namespace attnviz::ui
