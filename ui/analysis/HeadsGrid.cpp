#include "ui/analysis/HeadsGrid.hpp"

#include <QHelpEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>
#include <algorithm>
#include <cmath>

#include "ui/common/Format.hpp"
#include "ui/heatmap/HeatmapExport.hpp"

namespace attnviz::ui {
namespace {
constexpr int kHeadsCellW = 58;
constexpr int kHeadsCellH = 40;
constexpr int kHeadsLabelW = 30;   ///< the row labels' column ("L0")
constexpr int kHeadsGap = 18;      ///< between two kinds' grids
constexpr int kHeadsMargin = 8;

/// Paint order: the encoder's self-attention, the decoder's, then cross-attention (the model's order).
int headsKindRank(AttentionKind k) {
    switch (k) {
    case AttentionKind::encoder_self: return 0;
    case AttentionKind::decoder_self: return 1;
    case AttentionKind::cross: return 2;
    }
    return 3;
}

QString headsKindTitle(AttentionKind k) {
    switch (k) {
    case AttentionKind::encoder_self: return QObject::tr("Encoder self-attention");
    case AttentionKind::decoder_self: return QObject::tr("Decoder self-attention");
    case AttentionKind::cross: return QObject::tr("Cross-attention");
    }
    return {};
}
}  // namespace

HeadsGrid::HeadsGrid(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("headsGrid"));
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
    setMouseTracking(true);
}

void HeadsGrid::clear() {
    m_cells.clear();
    m_validations = 0;
    refreshSize();
}

void HeadsGrid::addSnapshots(int epoch, const std::vector<HeadSnapshot>& heads) {
    if (heads.empty()) return;
    for (const HeadSnapshot& s : heads) {
        AttentionKind kind;
        try {
            kind = attention_kind_from_string(s.kind);
        } catch (const std::exception&) {
            continue;  // a kind this build does not know: not shown
        }
        Cell& c = m_cells[Key{kind, s.layer, s.head}];
        c.importance = s.importance;
        c.confidence = s.confidence;
        c.importanceHistory.emplace_back(epoch, s.importance);
        c.confidenceHistory.emplace_back(epoch, s.confidence);
    }
    ++m_validations;
    refreshSize();
}

void HeadsGrid::setHistory(const TrainHistory& history) {
    clear();
    for (const EpochReport& e : history.epochs) addSnapshots(e.epoch, e.heads);
}

void HeadsGrid::setMeasured(const std::vector<HeadStats>& heads) {
    for (auto& [key, c] : m_cells) c.measured = nullptr;
    for (const HeadStats& h : heads) {
        Cell& c = m_cells[Key{h.id.kind, h.id.layer, h.id.head}];
        c.importance = h.importance;
        c.confidence = h.confidence;
        c.measured = &h;
    }
    refreshSize();
}

void HeadsGrid::setMetric(Metric metric) {
    m_metric = metric;
    update();
}

void HeadsGrid::setColorMap(ColorMap::Kind kind) {
    m_colors = ColorMap(kind);
    update();
}

const HeadsGrid::Cell* HeadsGrid::cell(AttentionKind kind, int layer, int head) const {
    const auto it = m_cells.find(Key{kind, layer, head});
    return it == m_cells.end() ? nullptr : &it->second;
}

std::vector<AttentionKind> HeadsGrid::kinds() const {
    std::vector<AttentionKind> out;
    for (const auto& [key, c] : m_cells)
        if (std::find(out.begin(), out.end(), std::get<0>(key)) == out.end()) out.push_back(std::get<0>(key));
    std::sort(out.begin(), out.end(), [](AttentionKind a, AttentionKind b) { return headsKindRank(a) < headsKindRank(b); });
    return out;
}

std::vector<HeadsGrid::Layout> HeadsGrid::layout() const {
    const QFontMetrics fm = fontMetrics();
    const int titleH = fm.height() + 4;
    const int headerH = fm.height() + 2;
    const int available = std::max(width(), 200) - 2 * kHeadsMargin;
    std::vector<Layout> out;
    int x = kHeadsMargin, y = kHeadsMargin, rowH = 0;
    for (AttentionKind k : kinds()) {
        Layout l;
        l.kind = k;
        for (const auto& [key, c] : m_cells)
            if (std::get<0>(key) == k) {
                l.layers = std::max(l.layers, std::get<1>(key) + 1);
                l.heads = std::max(l.heads, std::get<2>(key) + 1);
            }
        const int w = std::max(kHeadsLabelW + l.heads * kHeadsCellW, fm.horizontalAdvance(headsKindTitle(k)) + 4);
        const int h = titleH + headerH + l.layers * kHeadsCellH;
        if (x > kHeadsMargin && x + w > kHeadsMargin + available) {  // wrap to the next row of grids
            x = kHeadsMargin;
            y += rowH + kHeadsGap;
            rowH = 0;
        }
        l.title = QRect(x, y, w, titleH);
        l.grid = QRect(x + kHeadsLabelW, y + titleH + headerH, l.heads * kHeadsCellW, l.layers * kHeadsCellH);
        out.push_back(l);
        x += w + kHeadsGap;
        rowH = std::max(rowH, h);
    }
    return out;
}

QRect HeadsGrid::cellRect(AttentionKind kind, int layer, int head) const {
    for (const Layout& l : layout())
        if (l.kind == kind && layer >= 0 && layer < l.layers && head >= 0 && head < l.heads)
            return QRect(l.grid.left() + head * kHeadsCellW, l.grid.top() + layer * kHeadsCellH, kHeadsCellW, kHeadsCellH);
    return {};
}

QSize HeadsGrid::contentSize() const {
    const QFontMetrics fm = fontMetrics();
    int right = 360, bottom = 0;
    for (const Layout& l : layout()) {
        right = std::max(right, std::max(l.title.right(), l.grid.right()) + kHeadsMargin);
        bottom = std::max(bottom, l.grid.bottom());
    }
    // The caption under the grids (or the empty grid's message).
    bottom += 2 * fm.height() + 3 * kHeadsMargin;
    return QSize(right + 1, std::max(bottom, 4 * fm.height()));
}

QSize HeadsGrid::sizeHint() const { return contentSize().expandedTo(QSize(420, 240)); }

QSize HeadsGrid::minimumSizeHint() const { return QSize(240, std::max(160, contentSize().height())); }

void HeadsGrid::refreshSize() {
    const int h = contentSize().height();
    if (minimumHeight() != h) setMinimumHeight(h);
    updateGeometry();
    update();
}

void HeadsGrid::resizeEvent(QResizeEvent* event) {
    QWidget::resizeEvent(event);
    const int h = contentSize().height();
    if (minimumHeight() != h) setMinimumHeight(h);
}

void HeadsGrid::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.fillRect(rect(), palette().base());
    paintContent(p);
}

void HeadsGrid::paintContent(QPainter& p) const {
    p.setRenderHint(QPainter::Antialiasing, true);
    const QFontMetrics fm = fontMetrics();
    const QColor text = palette().color(QPalette::Text);
    if (m_cells.empty()) {
        p.setPen(palette().color(QPalette::PlaceholderText));
        p.drawText(QRect(QPoint(0, 0), contentSize().expandedTo(size())).adjusted(12, 12, -12, -12),
                   Qt::AlignCenter | Qt::TextWordWrap,
                   tr("No heads yet. Press Measure heads, or train a Transformer with Head statistics above 0 "
                      "(the advanced training settings) to watch each head's importance emerge."));
        return;
    }
    const QFont base = font();
    QFont small = base;
    small.setPointSizeF(std::max(6.0, small.pointSizeF() * 0.8));
    QFont bold = base;
    bold.setBold(true);
    int bottom = 0;
    for (const Layout& l : layout()) {
        p.setPen(text);
        p.setFont(bold);
        p.drawText(l.title, Qt::AlignLeft | Qt::AlignVCenter, headsKindTitle(l.kind));
        p.setFont(small);
        for (int h = 0; h < l.heads; ++h)
            p.drawText(QRect(l.grid.left() + h * kHeadsCellW, l.grid.top() - fm.height() - 2, kHeadsCellW, fm.height()),
                       Qt::AlignCenter, tr("H%1").arg(h));
        for (int layer = 0; layer < l.layers; ++layer)
            p.drawText(QRect(l.grid.left() - kHeadsLabelW, l.grid.top() + layer * kHeadsCellH, kHeadsLabelW - 4, kHeadsCellH),
                       Qt::AlignRight | Qt::AlignVCenter, tr("L%1").arg(layer));
        for (int layer = 0; layer < l.layers; ++layer)
            for (int h = 0; h < l.heads; ++h) {
                const QRect r(l.grid.left() + h * kHeadsCellW, l.grid.top() + layer * kHeadsCellH, kHeadsCellW, kHeadsCellH);
                const Cell* c = cell(l.kind, layer, h);
                if (!c) {
                    p.fillRect(r.adjusted(1, 1, -1, -1), palette().color(QPalette::AlternateBase));
                    continue;
                }
                const double v = valueOf(*c);
                const bool known = std::isfinite(v);
                const QColor fill = known ? m_colors.color(std::clamp(v, 0.0, 1.0)) : palette().color(QPalette::AlternateBase);
                const QColor ink = known ? m_colors.textColor(std::clamp(v, 0.0, 1.0)) : text;
                p.fillRect(r.adjusted(1, 1, -1, -1), fill);
                p.setPen(ink);
                p.drawText(r.adjusted(4, 1, -3, 0), Qt::AlignLeft | Qt::AlignTop,
                           known ? QString::number(v, 'f', 2) : QStringLiteral("–"));
                // The head's history over validations (Michel's Fig. 5): 0..1 from the cell's foot
                // to just under its number.
                const auto& history = m_metric == Importance ? c->importanceHistory : c->confidenceHistory;
                const QRectF plot(r.left() + 4, r.top() + fm.height() - 1, r.width() - 8, r.height() - fm.height() - 3);
                std::vector<QPointF> points;
                const size_t n = history.size();
                for (size_t i = 0; i < n; ++i) {
                    if (!std::isfinite(history[i].second)) continue;
                    const double x = n == 1 ? plot.center().x() : plot.left() + plot.width() * double(i) / double(n - 1);
                    const double y = plot.bottom() - plot.height() * std::clamp(history[i].second, 0.0, 1.0);
                    points.emplace_back(x, y);
                }
                if (!points.empty()) {
                    QPen pen(ink, 1.4);
                    p.setPen(pen);
                    if (points.size() == 1) {
                        p.setBrush(ink);
                        p.drawEllipse(points.front(), 1.8, 1.8);
                        p.setBrush(Qt::NoBrush);
                    } else {
                        QPainterPath path(points.front());
                        for (size_t i = 1; i < points.size(); ++i) path.lineTo(points[i]);
                        p.drawPath(path);
                    }
                }
                // A measured head with a role gets a mark in its corner: P positional, R rare words, S sink.
                if (c->measured) {
                    QString roles;
                    if (c->measured->positional && c->measured->positional->positional()) roles += QLatin1Char('P');
                    if (std::isfinite(c->measured->rare_share) && c->measured->rare_share >= 0.5) roles += QLatin1Char('R');
                    if (std::isfinite(c->measured->sink_share) && c->measured->sink_share >= 0.5) roles += QLatin1Char('S');
                    if (!roles.isEmpty()) {
                        p.setPen(ink);
                        p.drawText(r.adjusted(2, 1, -4, 0), Qt::AlignRight | Qt::AlignTop, roles);
                    }
                }
            }
        p.setPen(QPen(palette().color(QPalette::Mid), 1));
        p.setBrush(Qt::NoBrush);
        p.drawRect(l.grid);
        bottom = std::max(bottom, l.grid.bottom());
    }
    p.setFont(small);
    p.setPen(text);
    const QString caption =
        (m_metric == Importance ? tr("Colour: importance (Michel et al.: E|∂L/∂ξ|, normalised per layer)")
                                : tr("Colour: confidence (Voita et al.: mean largest weight)")) +
        (m_validations == 1 ? tr(" · curve: its history over 1 validation (0 to 1)")
                            : tr(" · curve: its history over %1 validations (0 to 1)").arg(m_validations)) +
        tr(" · P positional, R rare words, S sink");
    p.drawText(QRect(kHeadsMargin, bottom + kHeadsMargin, std::max(contentSize().width(), width()) - 2 * kHeadsMargin,
                     2 * fm.height() + 4),
               Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap, caption);
}

QString HeadsGrid::tooltipFor(const Key& key) const {
    const auto it = m_cells.find(key);
    if (it == m_cells.end()) return {};
    const Cell& c = it->second;
    const auto number = [](double v) { return std::isfinite(v) ? QString::number(v, 'f', 3) : QStringLiteral("–"); };
    QString tip = tr("<b>%1, layer %2, head %3</b><br>importance %4 · confidence %5")
                      .arg(qs(to_string(std::get<0>(key))))
                      .arg(std::get<1>(key))
                      .arg(std::get<2>(key))
                      .arg(number(c.importance), number(c.confidence));
    if (!c.importanceHistory.empty())
        tip += tr("<br>history: %1 validations, importance %2 → %3")
                   .arg(c.importanceHistory.size())
                   .arg(number(c.importanceHistory.front().second), number(c.importanceHistory.back().second));
    if (c.measured) {
        const HeadStats& h = *c.measured;
        if (h.positional && h.positional->positional())
            tip += tr("<br>positional head: offset %1 in %2% of queries")
                       .arg(h.positional->offset > 0 ? QStringLiteral("+%1").arg(h.positional->offset)
                                                     : QString::number(h.positional->offset))
                       .arg(100 * h.positional->share, 0, 'f', 0);
        if (std::isfinite(h.rare_share) && h.rare_share >= 0.5)
            tip += tr("<br>rare-word head: its maximum on the rarest source token %1% of the time")
                       .arg(100 * h.rare_share, 0, 'f', 0);
        if (std::isfinite(h.sink_share) && h.sink_share >= 0.5)
            tip += tr("<br>sink head: %1% of its weight on &lt;eos&gt; and punctuation").arg(100 * h.sink_share, 0, 'f', 0);
    }
    return tip;
}

bool HeadsGrid::event(QEvent* e) {
    if (e->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(e);
        for (const Layout& l : layout()) {
            if (!l.grid.contains(help->pos())) continue;
            const int head = (help->pos().x() - l.grid.left()) / kHeadsCellW;
            const int layer = (help->pos().y() - l.grid.top()) / kHeadsCellH;
            const QString tip = tooltipFor(Key{l.kind, layer, head});
            if (!tip.isEmpty()) {
                QToolTip::showText(help->globalPos(), QStringLiteral("<p style='white-space:pre'>%1</p>").arg(tip), this);
                return true;
            }
        }
        QToolTip::hideText();
        e->ignore();
        return true;
    }
    return QWidget::event(e);
}

bool HeadsGrid::exportTo(const QString& path, double scale, QString* error) const {
    if (m_cells.empty()) {
        if (error) *error = tr("There are no heads to export: measure them or train with Head statistics first.");
        return false;
    }
    return exportPicture([this](QPainter& p) { paintContent(p); }, contentSize(), path, scale, error);
}

}  // namespace attnviz::ui
