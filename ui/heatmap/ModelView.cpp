#include "ui/heatmap/ModelView.hpp"

#include <QContextMenuEvent>
#include <QHelpEvent>
#include <QMenu>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>
#include <cmath>

#include "ui/common/Format.hpp"
#include "ui/heatmap/HeatmapExport.hpp"

namespace attnviz::ui {
namespace {
constexpr int kMinThumb = 48, kMaxThumb = 180;  // a thumbnail's box (its longer side), by the width there is
constexpr int kGap = 12;      // between panels
constexpr int kMargin = 8;
constexpr int kBiasStrip = 9;  // the height of a thumbnail's position-bias strip (T5)
const QColor kMaskRed(0xb0, 0x00, 0x20);
const QColor kImportanceGreen(0x2e, 0x7d, 0x32);
bool sameHead(const AttentionMapId& id, const MapChoice& c) {
    return c.head >= 0 && id.kind == c.kind && id.layer == c.layer && id.head == c.head;
}
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
    arrangeColumns();
    fitThumbnails();
    renderThumbnails();
    updateGeometry();
    update();
}

void ModelView::arrangeColumns() {
    for (int row = 0; row <= m_layers; ++row) {
        std::vector<Panel*> heads;
        for (Panel& p : m_panels)
            if (p.row == row && p.choice.head >= 0) heads.push_back(&p);
        std::stable_sort(heads.begin(), heads.end(), [](const Panel* a, const Panel* b) { return a->choice.head < b->choice.head; });
        if (m_sortByImportance)
            std::stable_sort(heads.begin(), heads.end(), [this](const Panel* a, const Panel* b) {
                const HeadStats* x = statsOf(a->choice);
                const HeadStats* y = statsOf(b->choice);
                if (!x || !y) return x && !y;  // measured heads first
                return x->importance > y->importance;
            });
        for (size_t i = 0; i < heads.size(); ++i) heads[i]->column = int(i);
    }
    // Heads first, then the layer's mean, row by row (unsorted: panel i of the heads is layer i / H, head i % H).
    std::stable_sort(m_panels.begin(), m_panels.end(),
                     [](const Panel& a, const Panel& b) { return std::pair(a.row, a.column) < std::pair(b.row, b.column); });
}

const HeadStats* ModelView::statsOf(const MapChoice& choice) const {
    for (const HeadStats& s : m_stats)
        if (sameHead(s.id, choice)) return &s;
    return nullptr;
}

bool ModelView::isMasked(const MapChoice& choice) const {
    return std::any_of(m_masked.begin(), m_masked.end(), [&](const AttentionMapId& id) { return sameHead(id, choice); });
}

int ModelView::statsLineHeight() const {
    const bool any = std::any_of(m_stats.begin(), m_stats.end(), [this](const HeadStats& s) { return s.id.kind == m_kind; });
    return any ? QFontMetrics(font()).height() + 2 : 0;
}

void ModelView::setHeadStats(std::vector<HeadStats> stats) {
    m_stats = std::move(stats);
    arrangeColumns();
    updateGeometry();
    update();
}

void ModelView::setPositionBias(std::vector<PositionBiasCurve> curves) {
    m_bias = std::move(curves);
    updateGeometry();
    update();
}

std::vector<float> ModelView::biasOf(const MapChoice& c) const {
    if (c.kind == AttentionKind::cross || c.head == MapChoice::kRollout) return {};
    std::vector<float> sum;
    int n = 0;
    for (const PositionBiasCurve& curve : m_bias) {
        if (curve.kind != c.kind || (c.head >= 0 && curve.head != c.head) || curve.bias.empty()) continue;
        if (sum.empty()) sum.assign(curve.bias.size(), 0.0f);
        if (curve.bias.size() != sum.size()) continue;
        for (size_t d = 0; d < sum.size(); ++d) sum[d] += curve.bias[d];
        ++n;
    }
    if (n == 0) return {};
    for (float& v : sum) v /= float(n);
    // The decoder's bias is causal: a query never sees a later key, so only distances -span..0 are drawn.
    if (c.kind == AttentionKind::decoder_self) sum.resize(sum.size() / 2 + 1);
    return sum;
}

std::vector<float> ModelView::panelBias(int i) const { return biasOf(m_panels.at(size_t(i)).choice); }

float ModelView::biasScale() const {
    float scale = 0.0f;
    for (const PositionBiasCurve& curve : m_bias)
        if (curve.kind == m_kind)
            for (float v : curve.bias) scale = std::max(scale, std::abs(v));
    return scale;
}

int ModelView::biasStripHeight() const {
    if (m_kind == AttentionKind::cross) return 0;
    const bool any = std::any_of(m_bias.begin(), m_bias.end(), [this](const PositionBiasCurve& c) { return c.kind == m_kind; });
    return any ? kBiasStrip + 3 : 0;
}

QRect ModelView::contentBiasStrip(const Panel& p) const {
    if (biasStripHeight() == 0 || biasOf(p.choice).empty()) return QRect();
    // As wide as the thumbnail's picture (centred in its box), just under the box.
    const QRect r = contentPanelRect(p);
    const int width = p.image.isNull() ? m_thumb : std::min(m_thumb, p.image.width());
    return QRect(r.left() + (m_thumb - width) / 2, r.top() + QFontMetrics(font()).height() + 4 + m_thumb + 3, width, kBiasStrip);
}

QRect ModelView::biasStripRect(int i) const {
    const QRect strip = contentBiasStrip(m_panels.at(size_t(i)));
    return strip.isNull() ? strip : strip.translated(offset());
}

void ModelView::setMaskedHeads(std::vector<AttentionMapId> masked) {
    m_masked = std::move(masked);
    update();
}

void ModelView::setSortByImportance(bool on) {
    if (on == m_sortByImportance) return;
    m_sortByImportance = on;
    arrangeColumns();
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
                 2 * kMargin + title + rows * (m_thumb + fm.height() + 4 + biasStripHeight() + statsLineHeight()) +
                     (rows - 1) * kGap);
}

QRect ModelView::contentPanelRect(const Panel& p) const {
    const QFontMetrics fm(font());
    const int title = m_title.isEmpty() ? 0 : fm.height() + kGap;
    const int h = m_thumb + fm.height() + 4 + biasStripHeight() + statsLineHeight();
    return QRect(kMargin + p.column * (m_thumb + kGap), kMargin + title + p.row * (h + kGap), m_thumb, h);
}

QRect ModelView::contentMaskBox(const Panel& p) const {
    if (p.choice.head < 0) return QRect();
    const QRect r = contentPanelRect(p);
    const int side = std::max(10, QFontMetrics(font()).height() - 2);
    return QRect(r.right() - side + 1, r.top() + 1, side, side);
}

QRect ModelView::maskBoxRect(int i) const {
    const QRect box = contentMaskBox(m_panels.at(size_t(i)));
    return box.isNull() ? box : box.translated(offset());
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
        const bool masked = isMasked(panel.choice);
        const HeadStats* stats = statsOf(panel.choice);
        const QRect maskBox = contentMaskBox(panel);
        QFont f = font();
        f.setBold(chosen);
        f.setStrikeOut(masked);
        p.setFont(f);
        p.setPen(masked ? kMaskRed : palette().color(QPalette::Text));
        const int labelWidth = r.width() - (maskBox.isNull() ? 0 : maskBox.width() + 2);
        p.drawText(QRect(r.left(), r.top(), labelWidth, fm.height()), Qt::AlignHCenter | Qt::AlignVCenter,
                   QFontMetrics(f).elidedText(panel.label, Qt::ElideRight, labelWidth));
        if (!maskBox.isNull()) {  // the mask switch: empty when the head is on, a red cross when it is off
            p.setPen(QPen(masked ? kMaskRed : palette().color(QPalette::Mid), 1));
            p.setBrush(masked ? QBrush(kMaskRed) : QBrush(palette().color(QPalette::Base)));
            p.drawRect(maskBox.adjusted(0, 0, -1, -1));
            if (masked) {
                p.setPen(QPen(Qt::white, 2));
                p.drawLine(maskBox.topLeft() + QPoint(3, 3), maskBox.bottomRight() - QPoint(3, 3));
                p.drawLine(maskBox.topRight() + QPoint(-3, 3), maskBox.bottomLeft() + QPoint(3, -3));
            }
        }
        p.setFont(font());
        const QRect box(r.left(), r.top() + fm.height() + 4, m_thumb, m_thumb);
        if (!panel.image.isNull()) {
            const QPoint at(box.left() + (m_thumb - panel.image.width()) / 2, box.top() + (m_thumb - panel.image.height()) / 2);
            const QRect picture(at, panel.image.size());
            p.setOpacity(masked ? 0.25 : 1.0);
            p.drawImage(at, panel.image);
            p.setOpacity(1.0);
            // The border: as heavy as the head's importance (1..4 px) when measured.
            const double importance = stats ? std::clamp(stats->importance, 0.0, 1.0) : 0.0;
            p.setPen(stats ? QPen(kImportanceGreen, 1 + int(std::lround(3 * importance))) : QPen(palette().color(QPalette::Mid), 1));
            p.setBrush(Qt::NoBrush);
            p.drawRect(picture.adjusted(0, 0, -1, -1));
            if (masked) {
                p.setPen(QPen(kMaskRed, 2));
                p.drawLine(picture.topLeft(), picture.bottomRight());
                p.drawLine(picture.topRight(), picture.bottomLeft());
                p.drawText(picture, Qt::AlignCenter, tr("masked"));
            }
        }
        if (const QRect strip = contentBiasStrip(panel); !strip.isNull()) {
            // T5's position bias by distance: one column of pixels per step of distance, red where the
            // head raises a score, blue where it lowers it (one scale for the kind's heads), a tick at 0.
            // Inside a one-pixel border; a pixel column covering several distances shows their mean.
            const std::vector<float> bias = biasOf(panel.choice);
            const float scale = std::max(biasScale(), 1e-6f);
            const int n = int(bias.size());
            const QRect inner = strip.adjusted(1, 1, -1, -1);
            const int w = std::max(1, inner.width());
            for (int x = 0; x < w; ++x) {
                const int from = std::min(n - 1, x * n / w), to = std::max(from + 1, std::min(n, (x + 1) * n / w));
                float sum = 0.0f;
                for (int d = from; d < to; ++d) sum += bias[size_t(d)];
                const float v = std::clamp(sum / float(to - from) / scale, -1.0f, 1.0f);
                const int fade = int(std::lround(255 * (1.0f - std::abs(v))));
                p.setPen(v >= 0 ? QColor(255, fade, fade) : QColor(fade, fade, 255));
                p.drawLine(inner.left() + x, inner.top(), inner.left() + x, inner.bottom());
            }
            const int span = panel.choice.kind == AttentionKind::decoder_self ? n - 1 : n / 2;  // distance 0's index
            const int zero = inner.left() + (2 * span + 1) * w / (2 * n);
            p.setPen(QPen(palette().color(QPalette::Text), 1));
            p.drawLine(zero, strip.bottom() - 2, zero, strip.bottom());
            p.setPen(QPen(palette().color(QPalette::Mid), 1));
            p.setBrush(Qt::NoBrush);
            p.drawRect(strip.adjusted(0, 0, -1, -1));
        }
        if (stats) {  // the statistics line under the thumbnail
            const QString line = tr("I %1 · C %2").arg(stats->importance, 0, 'f', 2).arg(stats->confidence, 0, 'f', 2);
            p.setPen(palette().color(QPalette::Text));
            p.drawText(QRect(r.left(), box.bottom() + 3 + biasStripHeight(), r.width(), fm.height()),
                       Qt::AlignHCenter | Qt::AlignVCenter,
                       fm.elidedText(line, Qt::ElideRight, r.width()));
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
    const QPoint pos = event->position().toPoint();
    const int i = panelAt(pos);
    if (event->button() != Qt::LeftButton || i < 0) return QWidget::mousePressEvent(event);
    const MapChoice c = panelChoice(i);
    if (maskBoxRect(i).contains(pos)) {
        Q_EMIT maskToggled(AttentionMapId{c.kind, c.layer, c.head});
        return;
    }
    setSelected(c);
    Q_EMIT mapClicked(c);
}

void ModelView::contextMenuEvent(QContextMenuEvent* event) {
    const int i = panelAt(event->pos());
    if (i < 0 || panelChoice(i).head < 0) return QWidget::contextMenuEvent(event);
    const MapChoice c = panelChoice(i);
    QMenu menu(this);
    QAction* open = menu.addAction(tr("Open large"));
    QAction* mask = menu.addAction(isMasked(c) ? tr("Unmask this head") : tr("Mask this head"));
    QAction* chosen = menu.exec(event->globalPos());
    if (chosen == mask) Q_EMIT maskToggled(AttentionMapId{c.kind, c.layer, c.head});
    if (chosen == open) {
        setSelected(c);
        Q_EMIT mapClicked(c);
    }
}

QString ModelView::panelToolTip(int i) const {
    const MapChoice c = panelChoice(i);
    QString text = QStringLiteral("<b>%1</b>").arg(describeChoice(c, m_layers).toHtmlEscaped());
    if (const HeadStats* s = statsOf(c)) {
        text += tr("<br>importance %1 · confidence %2 · entropy %3 nats")
                    .arg(s->importance, 0, 'f', 3)
                    .arg(s->confidence, 0, 'f', 3)
                    .arg(s->entropy, 0, 'f', 2);
        const auto roles = head_roles(*s);
        if (!roles.empty()) {
            QStringList words;
            for (const auto& r : roles) words << qs(r).toHtmlEscaped();
            text += tr("<br>roles: %1").arg(words.join(QStringLiteral(", ")));
        }
    }
    if (const std::vector<float> bias = biasOf(c); bias.size() >= 3) {
        // The strip in words: what the head adds at distances -1, 0, +1 and where it adds most.
        const int span = c.kind == AttentionKind::decoder_self ? int(bias.size()) - 1 : int(bias.size()) / 2;
        auto at = [&](int d) { return bias[size_t(span + d)]; };
        const auto most = std::max_element(bias.begin(), bias.end());
        text += tr("<br>position bias (added before the softmax): %1 at distance −1, %2 at 0")
                    .arg(double(at(-1)), 0, 'f', 2)
                    .arg(double(at(0)), 0, 'f', 2);
        if (c.kind != AttentionKind::decoder_self) text += tr(", %1 at +1").arg(double(at(1)), 0, 'f', 2);
        text += tr("; most, %1, at distance %2").arg(double(*most), 0, 'f', 2).arg(int(most - bias.begin()) - span);
    }
    if (isMasked(c)) text += tr("<br><span style='color:#b00020'>masked: the translation runs without this head</span>");
    text += c.head >= 0 ? tr("<br>Click to open it large; click the box in its corner (or right-click) to %1 it.")
                              .arg(isMasked(c) ? tr("unmask") : tr("mask"))
                        : tr("<br>Click to open it large in the heatmap.");
    return text;
}

bool ModelView::event(QEvent* e) {
    if (e->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(e);
        const int i = panelAt(help->pos());
        if (i >= 0)
            QToolTip::showText(help->globalPos(), panelToolTip(i), this);
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
