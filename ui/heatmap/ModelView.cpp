#include "ui/heatmap/ModelView.hpp"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>

#include "ui/heatmap/HeatmapExport.hpp"

namespace attnviz::ui {
namespace {
constexpr int kMinThumb = 48, kMaxThumb = 180;  // a thumbnail's box (its longer side), by the width there is
constexpr int kGap = 12;      // between panels
constexpr int kMargin = 8;
}  // namespace

ModelView::ModelView(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("modelView"));
    setMouseTracking(true);
    setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Preferred);
    clear();
}

void ModelView::clear(const QString& placeholder) {
    m_source.reset();
    m_panels.clear();
    m_layers = m_heads = 0;
    m_title.clear();
    m_placeholder = placeholder.isEmpty() ? tr("Translate a sentence with a Transformer to see every layer and head.")
                                          : placeholder;
    updateGeometry();
    update();
}

void ModelView::setTranslation(std::shared_ptr<const Translation> t, size_t hypothesis, AttentionKind kind,
                               const QString& title) {
    if (!t || hypothesis >= t->hypotheses.size()) return clear();
    if (t == m_source && hypothesis == m_hypothesis && kind == m_kind && title == m_title && !m_panels.empty()) return;
    m_source = std::move(t);
    m_hypothesis = hypothesis;
    setRecord(m_source->hypotheses[hypothesis].attention, kind, title);
}

void ModelView::setRecord(const AttentionRecord& record, AttentionKind kind, const QString& title) {
    m_panels.clear();
    m_kind = record.layer_count(kind) > 0 ? kind : AttentionKind::cross;
    m_layers = record.layer_count(m_kind);
    m_heads = record.head_count(m_kind);
    m_title = title;
    // Short labels fit a thumbnail's width ("enc self L0 H1"); the title and the tooltip say it in full.
    const QString kindText = m_kind == AttentionKind::cross          ? tr("cross")
                             : m_kind == AttentionKind::encoder_self ? tr("enc self")
                                                                     : tr("dec self");
    for (int l = 0; l < m_layers; ++l)
        for (int h = MapChoice::kMean; h < m_heads; ++h) {
            Panel p;
            p.choice = {m_kind, l, h};
            p.label = h == MapChoice::kMean ? tr("%1 L%2 mean").arg(kindText).arg(l)
                                            : tr("%1 L%2 H%3").arg(kindText).arg(l).arg(h);
            p.row = l;
            p.column = h == MapChoice::kMean ? m_heads : h;  // the mean after the heads
            try {
                p.weights = chosenMap(record, p.choice).weights;
            } catch (const std::exception&) {
                continue;  // a head the record lacks: no panel
            }
            m_panels.push_back(std::move(p));
        }
    if (m_kind != AttentionKind::cross && m_layers > 0) {
        Panel p;
        p.choice = {m_kind, m_layers - 1, MapChoice::kRollout};
        p.label = tr("%1 rollout").arg(kindText);
        p.row = m_layers;
        p.column = m_heads;
        p.weights = record.rollout(m_kind);
        m_panels.push_back(std::move(p));
    }
    // Heads first, then the layer's mean, row by row (panel i of the heads is layer i / H, head i % H).
    std::stable_sort(m_panels.begin(), m_panels.end(),
                     [](const Panel& a, const Panel& b) { return std::pair(a.row, a.column) < std::pair(b.row, b.column); });
    fitThumbnails();
    renderThumbnails();
    updateGeometry();
    update();
}

int ModelView::columns() const {
    int cols = 0;
    for (const Panel& p : m_panels) cols = std::max(cols, p.column + 1);
    return cols;
}

bool ModelView::fitThumbnails() {
    const int cols = columns();
    if (cols == 0) return false;
    const int thumb = std::clamp((width() - 2 * kMargin - (cols - 1) * kGap) / cols, kMinThumb, kMaxThumb);
    if (thumb == m_thumb) return false;
    m_thumb = thumb;
    return true;
}

void ModelView::resizeEvent(QResizeEvent* event) {
    QWidget::resizeEvent(event);
    if (!fitThumbnails()) return;
    renderThumbnails();  // the thumbnails at their new size, once per size
    updateGeometry();
}

void ModelView::setSelected(const MapChoice& choice) {
    m_selected = choice;
    update();
}

void ModelView::setColorMap(ColorMap::Kind kind) {
    m_colorMap = ColorMap(kind, m_colorMap.scale());
    renderThumbnails();
    update();
}

void ModelView::setColorScale(ColorMap::Scale scale) {
    m_colorMap = ColorMap(m_colorMap.kind(), scale);
    renderThumbnails();
    update();
}

void ModelView::renderThumbnails() {
    for (Panel& p : m_panels) {
        const int rows = int(p.weights.size());
        int cols = 0;
        for (const auto& r : p.weights) cols = std::max(cols, int(r.size()));
        if (rows == 0 || cols == 0) {
            p.image = QImage();
            continue;
        }
        QImage cells(cols, rows, QImage::Format_RGB32);
        for (int r = 0; r < rows; ++r) {
            auto* line = reinterpret_cast<QRgb*>(cells.scanLine(r));
            for (int c = 0; c < cols; ++c)
                line[c] = m_colorMap.color(c < int(p.weights[size_t(r)].size()) ? p.weights[size_t(r)][size_t(c)] : 0.0).rgb();
        }
        // Whole pixels per cell where they fit (sharp cells), else shrunk smoothly.
        const int cell = std::max(1, m_thumb / std::max(rows, cols));
        p.image = std::max(rows, cols) <= m_thumb
                      ? cells.scaled(cols * cell, rows * cell, Qt::IgnoreAspectRatio, Qt::FastTransformation)
                      : cells.scaled(m_thumb, m_thumb, Qt::KeepAspectRatio, Qt::SmoothTransformation);
    }
    ++m_renders;
}

QSize ModelView::contentSize() const {
    if (m_panels.empty()) return QSize(300, 120);
    const QFontMetrics fm(font());
    int rows = 0, cols = 0;
    for (const Panel& p : m_panels) {
        rows = std::max(rows, p.row + 1);
        cols = std::max(cols, p.column + 1);
    }
    const int title = m_title.isEmpty() ? 0 : fm.height() + kGap;
    const int width = 2 * kMargin + cols * m_thumb + (cols - 1) * kGap;
    return QSize(std::max(width, fm.horizontalAdvance(m_title) + 2 * kMargin),
                 2 * kMargin + title + rows * (m_thumb + fm.height() + 4) + (rows - 1) * kGap);
}

QRect ModelView::contentPanelRect(const Panel& p) const {
    const QFontMetrics fm(font());
    const int title = m_title.isEmpty() ? 0 : fm.height() + kGap;
    const int h = m_thumb + fm.height() + 4;
    return QRect(kMargin + p.column * (m_thumb + kGap), kMargin + title + p.row * (h + kGap), m_thumb, h);
}

QPoint ModelView::offset() const {
    const QSize s = contentSize();
    return QPoint(std::max(0, (width() - s.width()) / 2), 0);
}

QRect ModelView::panelRect(int i) const { return contentPanelRect(m_panels.at(size_t(i))).translated(offset()); }

int ModelView::panelAt(const QPoint& pos) const {
    for (int i = 0; i < panelCount(); ++i)
        if (panelRect(i).contains(pos)) return i;
    return -1;
}

void ModelView::paintContent(QPainter& p) const {
    const QFontMetrics fm(font());
    p.setFont(font());
    p.setPen(palette().color(QPalette::Text));
    if (!m_title.isEmpty()) p.drawText(QPoint(kMargin, kMargin + fm.ascent()), m_title);
    for (const Panel& panel : m_panels) {
        const QRect r = contentPanelRect(panel);
        const bool chosen = panel.choice.kind == m_selected.kind && panel.choice.head == m_selected.head &&
                            (panel.choice.layer == m_selected.layer || panel.choice.head == MapChoice::kRollout);
        QFont f = font();
        f.setBold(chosen);
        p.setFont(f);
        p.setPen(palette().color(QPalette::Text));
        p.drawText(QRect(r.left(), r.top(), r.width(), fm.height()), Qt::AlignHCenter | Qt::AlignVCenter,
                   QFontMetrics(f).elidedText(panel.label, Qt::ElideRight, r.width()));
        const QRect box(r.left(), r.top() + fm.height() + 4, m_thumb, m_thumb);
        if (!panel.image.isNull()) {
            const QPoint at(box.left() + (m_thumb - panel.image.width()) / 2, box.top() + (m_thumb - panel.image.height()) / 2);
            p.drawImage(at, panel.image);
            p.setPen(QPen(palette().color(QPalette::Mid), 1));
            p.setBrush(Qt::NoBrush);
            p.drawRect(QRect(at, panel.image.size()).adjusted(0, 0, -1, -1));
        }
        if (chosen) {
            p.setPen(QPen(QColor(0xd3, 0x54, 0x00), 3));
            p.setBrush(Qt::NoBrush);
            p.drawRect(box.adjusted(-3, -3, 2, 2));
        }
    }
}

void ModelView::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.fillRect(rect(), palette().base());
    if (m_panels.empty()) {
        p.setPen(palette().color(QPalette::PlaceholderText));
        p.drawText(rect().adjusted(8, 8, -8, -8), Qt::AlignCenter | Qt::TextWordWrap, m_placeholder);
        return;
    }
    p.translate(offset());
    paintContent(p);
}

void ModelView::mousePressEvent(QMouseEvent* event) {
    const int i = panelAt(event->position().toPoint());
    if (event->button() != Qt::LeftButton || i < 0) return QWidget::mousePressEvent(event);
    setSelected(panelChoice(i));
    Q_EMIT mapClicked(panelChoice(i));
}

bool ModelView::event(QEvent* e) {
    if (e->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(e);
        const int i = panelAt(help->pos());
        if (i >= 0)
            QToolTip::showText(help->globalPos(),
                               tr("<b>%1</b><br>Click to open it large in the heatmap.")
                                   .arg(describeChoice(panelChoice(i), m_layers).toHtmlEscaped()),
                               this);
        else
            QToolTip::hideText();
        return true;
    }
    if (e->type() == QEvent::MouseMove) setCursor(panelAt(static_cast<QMouseEvent*>(e)->position().toPoint()) >= 0
                                                      ? Qt::PointingHandCursor : Qt::ArrowCursor);
    return QWidget::event(e);
}

bool ModelView::exportTo(const QString& path, double scale, QString* error) const {
    if (m_panels.empty()) {
        if (error) *error = tr("There is no model view to export: translate a sentence with a Transformer first.");
        return false;
    }
    return exportPicture([this](QPainter& p) { paintContent(p); }, contentSize(), path, scale, error);
}

}  // namespace attnviz::ui
