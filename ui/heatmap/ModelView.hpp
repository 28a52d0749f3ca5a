#pragma once
// BertViz's model view for one translation: a grid of thumbnails, one per layer
// (rows) and head (columns) of the chosen kind of attention, each labelled with
// kind, layer and head, a column of the mean over each layer's heads, and for
// self-attention the rollout through the layers (Abnar & Zuidema 2020). The
// thumbnails are drawn once into cached images (a new translation, kind or
// colour map or thumbnail size), so painting the grid is only copying them. Clicking a thumbnail
// chooses that map (mapClicked); clicking the box in a head's corner (or right-clicking it) asks
// to mask or unmask the head (maskToggled: the owner switches it off for its translations and
// says so with setMaskedHeads(), which draws it dimmed and crossed). With head statistics
// (setHeadStats: importance and confidence, issue 39) each head carries a line of them, a border
// as heavy as its importance, its roles in the tooltip, and a layer's heads can be sorted by
// importance. A T5 model's self-attention thumbnails each carry a strip under them: what the head
// adds to a score before the softmax by the key's distance from the query (its relative position
// bias, core/model/t5_model.hpp; red raises a score, blue lowers it, white adds nothing, on one scale
// for the kind's heads; a tick at distance 0; the decoder's causal half only), the mean of the
// layer's heads under the mean. The picture exports as one PNG or SVG.
#include <QImage>
#include <QWidget>
#include <memory>
#include <vector>

#include "core/analysis/heads.hpp"
#include "core/model/t5_model.hpp"
#include "ui/common/ColorMap.hpp"
#include "ui/heatmap/MapChoice.hpp"

namespace attnviz::ui {

class ModelView : public QWidget {
    Q_OBJECT
public:
    explicit ModelView(QWidget* parent = nullptr);

    /// The thumbnails of `kind` from a record (a hypothesis' attention); `title` is drawn above them.
    void setRecord(const AttentionRecord& record, AttentionKind kind, const QString& title);
    /// setRecord() of a translation's hypothesis; the same translation, hypothesis, kind and title
    /// again keep the thumbnails drawn.
    void setTranslation(std::shared_ptr<const Translation> t, size_t hypothesis, AttentionKind kind, const QString& title);
    void clear(const QString& placeholder = QString());
    /// The panel drawn as chosen (the heatmap's map).
    void setSelected(const MapChoice& choice);
    /// Every head's statistics (a measurement, or the last validation's while training); empty: none.
    /// Heads of other kinds or sizes are ignored.
    void setHeadStats(std::vector<HeadStats> stats);
    const std::vector<HeadStats>& headStats() const { return m_stats; }
    /// The heads the shown translation ran without: drawn dimmed and crossed, their box checked.
    void setMaskedHeads(std::vector<AttentionMapId> masked);
    const std::vector<AttentionMapId>& maskedHeads() const { return m_masked; }
    /// The model's relative position bias curves (T5: position_bias_curves of every self-attention
    /// head; empty for every other family): each head's strip under its thumbnail.
    void setPositionBias(std::vector<PositionBiasCurve> curves);
    /// The values panel i's strip draws, distances -span.. (the decoder's up to 0): its head's curve,
    /// the heads' mean for a layer's mean; empty for the rollout, cross-attention and other families.
    std::vector<float> panelBias(int i) const;
    /// The strip's rectangle of panel i in widget coordinates (empty when it has none).
    QRect biasStripRect(int i) const;
    /// Each layer's heads in decreasing importance (the mean and the rollout stay last); heads
    /// without statistics keep their order.
    void setSortByImportance(bool on);
    bool sortByImportance() const { return m_sortByImportance; }

    AttentionKind kind() const { return m_kind; }
    int layers() const { return m_layers; }
    int heads() const { return m_heads; }
    int panelCount() const { return int(m_panels.size()); }
    QString panelLabel(int i) const { return m_panels.at(size_t(i)).label; }
    MapChoice panelChoice(int i) const { return m_panels.at(size_t(i)).choice; }
    /// A panel's rectangle (its label and thumbnail) in widget coordinates.
    QRect panelRect(int i) const;
    /// The panel under a point in widget coordinates, or -1.
    int panelAt(const QPoint& pos) const;
    /// The mask box of a head's panel (its label's right end), in widget coordinates; empty for a
    /// layer's mean and the rollout.
    QRect maskBoxRect(int i) const;
    /// The tooltip of panel i (rich text): the map, its statistics and roles, whether masked.
    QString panelToolTip(int i) const;
    /// How many times the thumbnails were drawn into their images (tests: painting reuses them).
    int renderCount() const { return m_renders; }

    /// The whole picture (title and grid), at (0, 0): the screen and the exports.
    QSize contentSize() const;
    void paintContent(QPainter& painter) const;
    /// PNG (at `scale`) or SVG by the suffix; false and *error on failure.
    bool exportTo(const QString& path, double scale, QString* error) const;

    QSize sizeHint() const override { return contentSize(); }
    QSize minimumSizeHint() const override { return QSize(200, 120); }

public Q_SLOTS:
    void setColorMap(attnviz::ui::ColorMap::Kind kind);
    void setColorScale(attnviz::ui::ColorMap::Scale scale);

Q_SIGNALS:
    void mapClicked(const attnviz::ui::MapChoice& choice);
    /// The user asked to mask (or unmask) one head: the box in its corner, or a right click.
    void maskToggled(const attnviz::AttentionMapId& head);

protected:
    void paintEvent(QPaintEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void contextMenuEvent(QContextMenuEvent* event) override;
    bool event(QEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;

private:
    struct Panel {
        MapChoice choice;
        QString label;
        AttentionMatrix weights;
        QImage image;  ///< the thumbnail, drawn once
        int row = 0, column = 0;
    };
    /// Each panel's column: heads by number, or by importance (sortByImportance); means and rollouts last.
    void arrangeColumns();
    const HeadStats* statsOf(const MapChoice& choice) const;
    bool isMasked(const MapChoice& choice) const;
    /// The line under the thumbnails (statistics shown) or 0.
    int statsLineHeight() const;
    /// The position-bias strip's height under the thumbnails (T5's self-attention) or 0.
    int biasStripHeight() const;
    std::vector<float> biasOf(const MapChoice& choice) const;
    QRect contentBiasStrip(const Panel& p) const;
    /// The largest |bias| of the shown kind's strips (their common colour scale).
    float biasScale() const;
    QRect contentMaskBox(const Panel& p) const;
    void renderThumbnails();
    int columns() const;
    /// Sizes the thumbnails to the width there is; true when their size changed.
    bool fitThumbnails();
    QRect contentPanelRect(const Panel& p) const;
    QPoint offset() const;

    std::shared_ptr<const Translation> m_source;  ///< what setTranslation() last drew
    size_t m_hypothesis = 0;
    std::vector<Panel> m_panels;
    AttentionKind m_kind = AttentionKind::cross;
    int m_layers = 0, m_heads = 0;
    QString m_title, m_placeholder;
    MapChoice m_selected;
    ColorMap m_colorMap;
    int m_renders = 0;
    std::vector<HeadStats> m_stats;
    std::vector<AttentionMapId> m_masked;
    std::vector<PositionBiasCurve> m_bias;
    bool m_sortByImportance = false;
    int m_thumb = 112;  ///< a thumbnail's box (its longer side)
};

}  // namespace attnviz::ui
