#pragma once
// BertViz's model view for one translation: a grid of thumbnails, one per layer
// (rows) and head (columns) of the chosen kind of attention, each labelled with
// kind, layer and head, a column of the mean over each layer's heads, and for
// self-attention the rollout through the layers (Abnar & Zuidema 2020). The
// thumbnails are drawn once into cached images (a new translation, kind or
// colour map or thumbnail size), so painting the grid is only copying them. Clicking a thumbnail
// chooses that map (mapClicked); the picture exports as one PNG or SVG.
#include <QImage>
#include <QWidget>
#include <memory>
#include <vector>

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

protected:
    void paintEvent(QPaintEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
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
    int m_thumb = 112;  ///< a thumbnail's box (its longer side)
};

}  // namespace attnviz::ui
