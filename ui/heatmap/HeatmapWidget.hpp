#pragma once
// The attention heatmap: one row per output token (decoding step), one column
// per source token, painted by hand so the same code draws the screen, the
// PNG and the SVG export (ui/heatmap/HeatmapPaint.cpp). Thin strips beside the rows and
// under the columns show one number per step or per source token (the
// probability of the token, the entropy of the step, the coverage of a source
// word). Hover shows the exact values; clicking a row selects that decoding
// step for the step inspector.
#include <QFont>
#include <QRect>
#include <QStringList>
#include <QWidget>
#include <vector>

#include "ui/common/ColorMap.hpp"

namespace attnviz {
struct Translation;
}

QT_BEGIN_NAMESPACE
class QScrollArea;
QT_END_NAMESPACE

namespace attnviz::ui {

/// `content` (a heatmap, a grid of them) in a scroll area that resizes it, on the base colour:
/// how every view shows a heatmap larger than its pane.
QScrollArea* scrolled(QWidget* content, QWidget* parent);

/// One number per row (a strip beside the rows) or per column (a strip under the columns).
struct HeatmapStrip {
    QString name;               ///< short head drawn at the strip ("P", "H", "max", "cov")
    QString description;        ///< what it measures, for the tooltip
    std::vector<float> values;  ///< one per row or per column
    float maximum = 1.0f;       ///< the value painted with the colour map's top colour (0 is its bottom)
    int decimals = 2;           ///< digits in the tooltip
};

/// A candidate next token and its probability (the step inspector's top-k list).
struct Candidate {
    QString token;
    float prob = 0.0f;
};

/// What a heatmap shows; weights[row][col], rows = output tokens.
struct HeatmapData {
    QStringList source;                          ///< column labels
    QStringList output;                          ///< row labels
    std::vector<std::vector<float>> weights;     ///< rows x columns, each row sums to 1
    std::vector<std::vector<float>> rawScores;   ///< optional, same shape: shown in the tooltip
    std::vector<float> contextNorm;              ///< optional, per row: L2 norm of the context vector
    QStringList sourceNotes;                     ///< optional per-column note (e.g. the unknown word)
    QString title;                               ///< drawn above the grid (empty: none)
    std::vector<HeatmapStrip> rowStrips;         ///< beside the rows, left to right
    std::vector<HeatmapStrip> columnStrips;      ///< under the columns, top to bottom
    std::vector<std::vector<Candidate>> topK;    ///< optional, per row: the most probable tokens, best first
    std::vector<float> stepLogProb;              ///< optional, per row: log-probability of the row's token
    std::vector<long long> rank;                 ///< optional, per row: its rank among all tokens (0 = top choice)
    int forcedRows = 0;                          ///< leading rows whose tokens were given, not chosen (forced decoding)
    int highlightRow = -1;                       ///< a row marked in red (forced decoding: the first divergence)
    QString highlightNote;                       ///< why it is marked, for the tooltip
    /// > 0: the weights are signed differences in [-signedRange, signedRange], painted with the
    /// diverging map (blue below 0, white at 0, red above) whatever the colour map.
    float signedRange = 0.0f;
    /// The attention map shown when the model records several (a Transformer's: "cross · layer 1 ·
    /// head 2", ui/heatmap/MapChoice.hpp) and what one step of it computes, for the step inspector; empty: the
    /// model's one map (the RNN's).
    QString mapName, mapExplanation;
    /// What a cell's value is, for the tooltip (empty: "weight", or "difference" for signed data).
    QString valueName;

    int rows() const { return int(output.size()); }
    int columns() const { return int(source.size()); }
    bool empty() const { return output.isEmpty() || source.isEmpty(); }
    /// From hypothesis `hypothesis` of a translation (empty when there is none or no attention), with
    /// its strips: P (probability of each output token, when recorded), H (entropy of each step, as a
    /// share of its maximum ln n), max (the largest weight), and cov (coverage of each source token).
    /// forcedRows, highlightRow and topK come along when the decoding recorded them.
    static HeatmapData fromTranslation(const Translation& t, size_t hypothesis = 0);
    /// Text of the tooltip for value `index` of a strip.
    QString stripToolTip(const HeatmapStrip& strip, int index, bool row) const;
};

class HeatmapWidget : public QWidget {
    Q_OBJECT
public:
    explicit HeatmapWidget(QWidget* parent = nullptr);

    const HeatmapData& heatmapData() const { return m_data; }
    int rows() const { return m_data.rows(); }
    int columns() const { return m_data.columns(); }

    ColorMap::Kind colorMap() const { return m_colorMap.kind(); }
    ColorMap::Scale colorScale() const { return m_colorMap.scale(); }
    bool showStrips() const { return m_showStrips; }
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
    /// The same with the title elided ("…") to titleWidth pixels when it is wider (the screen: a
    /// widget narrower than its title shows the whole title as the title's tooltip).
    void paintContent(QPainter& painter, int titleWidth) const;
    /// The title is wider than the widget shows it: it is elided on screen (never in an export).
    bool titleElided() const;
    /// (row, column) under a point in widget coordinates, or (-1, -1).
    QPoint cellAt(const QPoint& pos) const;
    /// Rectangle of a cell in content coordinates.
    QRect cellRect(int row, int column) const;
    /// The tooltip text for a cell.
    QString cellToolTip(int row, int column) const;
    /// The tooltip text for whatever is at a point in widget coordinates (cell, strip or label), or "".
    QString toolTipAt(const QPoint& pos) const;

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

public Q_SLOTS:
    void setHeatmapData(const attnviz::ui::HeatmapData& data);
    void clear(const QString& placeholder = QString());
    void setColorMap(attnviz::ui::ColorMap::Kind kind);
    void setColorScale(attnviz::ui::ColorMap::Scale scale);
    void setShowStrips(bool show);
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
    struct Layout {
        QFont font, titleFont, numberFont, stripFont;
        int cell = 0;
        int titleHeight = 0;
        bool rotated = false;
        QRect grid;          // the cells, in content coordinates
        QRect rowStrips;     // the strips beside the rows (empty: none)
        QRect columnStrips;  // the strips under the columns (empty: none)
        int strip = 0;       // thickness of one strip
        QRect colorBar;      // the colour bar
        QSize size;          // the whole picture
        int bodyWidth = 0;   // its width without the title's (a long title may be cut on screen)
    };
    Layout layout() const;
    Layout layout(double zoom) const;
    void fitToSize(const QSize& available);
    void contentChanged();
    /// The picture at the smallest fitted zoom, without the title's width.
    QSize smallestSize() const;
    QPoint contentOffset(const Layout& l) const;
    void paintStrips(QPainter& p, const Layout& l) const;
    void paintColorBar(QPainter& p, const Layout& l) const;

    HeatmapData m_data;
    ColorMap m_colorMap;
    bool m_showNumbers = false;
    bool m_showStrips = true;
    double m_zoom = 1.0;
    bool m_autoFit = true;  ///< zoom follows the widget's size until the user zooms by hand
    int m_selectedRow = -1;
    QPoint m_hoverCell{-1, -1};
    QString m_placeholder;
    QSize m_geometryHint;  ///< the size hint the layouts were last told about
};

}  // namespace attnviz::ui
