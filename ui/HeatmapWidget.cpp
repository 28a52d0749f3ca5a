#include "ui/HeatmapWidget.hpp"

#include <QFontMetrics>
#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>

#include "core/decode.hpp"
#include "ui/Format.hpp"

namespace attnviz::ui {
namespace {

constexpr int kMargin = 10;
constexpr int kBaseCell = 34;
constexpr double kMinZoom = 0.25, kMaxZoom = 6.0;
constexpr double kMinFit = 0.6, kMaxFit = 2.2;  // auto-fit keeps cells readable and not huge
const QColor kUnkColor(0xc0, 0x39, 0x2b);
const QColor kEosColor(0x70, 0x70, 0x70);

bool isUnk(const QString& t) { return t == QLatin1String("<unk>"); }
bool isSpecial(const QString& t) { return t.startsWith(QLatin1Char('<')) && t.endsWith(QLatin1Char('>')) && t.size() > 2; }

QFont labelFont(const QFont& base, const QString& token, int pixelSize) {
    QFont f = base;
    f.setPixelSize(pixelSize);
    if (isUnk(token)) f.setBold(true);
    else if (isSpecial(token)) f.setItalic(true);
    return f;
}

QColor labelColor(const QString& token) {
    if (isUnk(token)) return kUnkColor;
    if (isSpecial(token)) return kEosColor;
    return Qt::black;
}

}  // namespace

HeatmapData HeatmapData::fromTranslation(const Translation& t, size_t hypothesis) {
    HeatmapData d;
    if (hypothesis >= t.hypotheses.size() || !t.attention_available) return d;
    const Hypothesis& h = t.hypotheses[hypothesis];
    const size_t rows = std::min(h.tokens.size(), h.attention.size());
    d.source = toQStringList(t.src_tokens);
    for (size_t r = 0; r < rows; ++r) {
        d.output << qs(h.tokens[r]);
        std::vector<float> w = h.attention[r];
        w.resize(t.src_tokens.size(), 0.0f);
        d.weights.push_back(std::move(w));
        if (r < h.raw_scores.size()) {
            std::vector<float> s = h.raw_scores[r];
            s.resize(t.src_tokens.size(), -INFINITY);
            d.rawScores.push_back(std::move(s));
        }
    }
    if (d.rawScores.size() != d.weights.size()) d.rawScores.clear();
    d.contextNorm.assign(h.context_norm.begin(), h.context_norm.begin() + std::min(rows, h.context_norm.size()));
    if (d.contextNorm.size() != rows) d.contextNorm.clear();
    // Name the unknown words behind the <unk> columns when they line up one to one.
    const int unkCount = int(std::count(t.src_tokens.begin(), t.src_tokens.end(), std::string("<unk>")));
    if (unkCount > 0 && unkCount == int(t.unknown.size())) {
        int next = 0;
        for (const auto& tok : t.src_tokens)
            d.sourceNotes << (tok == "<unk>" ? QObject::tr("unknown word “%1”").arg(qs(t.unknown[next++])) : QString());
    }
    return d;
}

struct HeatmapWidget::Layout {
    QFont font, titleFont, numberFont;
    int cell = kBaseCell;
    int titleHeight = 0;
    bool rotated = false;
    QRect grid;       // the cells, in content coordinates
    QRect colorBar;   // the colour bar
    QSize size;       // the whole picture
};

HeatmapWidget::HeatmapWidget(QWidget* parent) : QWidget(parent) {
    setMouseTracking(true);
    setFocusPolicy(Qt::ClickFocus);
    setAttribute(Qt::WA_OpaquePaintEvent);
    m_placeholder = tr("Translate a sentence to see where the decoder looks.");
}

HeatmapWidget::Layout HeatmapWidget::layout() const { return layout(m_zoom); }

HeatmapWidget::Layout HeatmapWidget::layout(double zoom) const {
    Layout l;
    l.cell = std::clamp(int(std::lround(kBaseCell * zoom)), 8, 240);
    const int px = std::clamp(int(std::lround(l.cell * 0.4)), 8, 22);
    l.font = font();
    l.font.setPixelSize(px);
    l.titleFont = l.font;
    l.titleFont.setPixelSize(std::max(px, 12));
    l.titleFont.setBold(true);
    l.numberFont = l.font;
    l.numberFont.setPixelSize(std::clamp(int(std::lround(l.cell * 0.3)), 7, 16));

    // One QFontMetrics per style, not per label: layout() runs on every paint, hover and fit step.
    const QFontMetrics plainFm(l.font), unkFm(labelFont(l.font, QStringLiteral("<unk>"), px)),
        specialFm(labelFont(l.font, QStringLiteral("<eos>"), px));
    auto width = [&](const QString& t) {
        const QFontMetrics& m = isUnk(t) ? unkFm : isSpecial(t) ? specialFm : plainFm;
        return m.horizontalAdvance(displayToken(t));
    };
    int rowLabelWidth = 0, srcLabelWidth = 0;
    for (const QString& t : m_data.output) rowLabelWidth = std::max(rowLabelWidth, width(t));
    // The selected row's label is bold: leave room for it.
    rowLabelWidth = int(rowLabelWidth * 1.1) + 2;
    for (const QString& t : m_data.source) srcLabelWidth = std::max(srcLabelWidth, width(t));
    const QFontMetrics fm(l.font);
    l.rotated = srcLabelWidth > l.cell - 4;
    const int labelBand = (l.rotated ? srcLabelWidth : fm.height()) + 10;
    l.titleHeight = m_data.title.isEmpty() ? 0 : QFontMetrics(l.titleFont).height() + 8;

    const QPoint gridTopLeft(kMargin + rowLabelWidth + 12, kMargin + l.titleHeight + labelBand);
    l.grid = QRect(gridTopLeft, QSize(m_data.columns() * l.cell, m_data.rows() * l.cell));
    const int barHeight = std::max(l.grid.height(), 120);
    l.colorBar = QRect(l.grid.right() + 1 + 18, l.grid.top(), 14, barHeight);
    const int tickWidth = fm.horizontalAdvance(QStringLiteral("1.00")) + 8;
    const int titleWidth = m_data.title.isEmpty() ? 0 : QFontMetrics(l.titleFont).horizontalAdvance(m_data.title) + 2 * kMargin;
    l.size = QSize(std::max(l.colorBar.right() + 1 + tickWidth + kMargin, titleWidth),
                   std::max(l.grid.bottom(), l.colorBar.bottom()) + 1 + kMargin + fm.height() / 2);
    return l;
}

QSize HeatmapWidget::contentSize() const {
    if (m_data.empty()) return QSize(320, 160);
    return layout().size;
}

QSize HeatmapWidget::sizeHint() const { return contentSize(); }
QSize HeatmapWidget::minimumSizeHint() const { return QSize(200, 120); }

QRect HeatmapWidget::cellRect(int row, int column) const {
    const Layout l = layout();
    return QRect(l.grid.left() + column * l.cell, l.grid.top() + row * l.cell, l.cell, l.cell);
}

void HeatmapWidget::paintContent(QPainter& p) const {
    const Layout l = layout();
    const QRect all(QPoint(0, 0), m_data.empty() ? QSize(320, 160) : l.size);
    p.save();
    p.fillRect(all, Qt::white);
    if (m_data.empty()) {
        QFont f = font();
        f.setPixelSize(13);
        p.setFont(f);
        p.setPen(QColor(0x55, 0x55, 0x55));
        p.drawText(all.adjusted(kMargin, kMargin, -kMargin, -kMargin), Qt::AlignCenter | Qt::TextWordWrap, m_placeholder);
        p.restore();
        return;
    }
    p.setRenderHint(QPainter::Antialiasing, false);
    p.setRenderHint(QPainter::TextAntialiasing, true);
    const QFontMetrics fm(l.font);

    if (!m_data.title.isEmpty()) {
        p.setFont(l.titleFont);
        p.setPen(Qt::black);
        p.drawText(QRect(kMargin, kMargin, all.width() - 2 * kMargin, l.titleHeight), Qt::AlignLeft | Qt::AlignVCenter,
                   m_data.title);
    }

    // Cells, and optionally their values.
    const bool numbers = m_showNumbers && l.cell >= 18;
    const QFontMetrics nfm(l.numberFont);
    const bool shortNumbers = nfm.horizontalAdvance(QStringLiteral("0.00")) > l.cell - 3;
    for (int r = 0; r < m_data.rows(); ++r) {
        for (int c = 0; c < m_data.columns(); ++c) {
            const double w = m_data.weights[r][c];
            const QRect cr(l.grid.left() + c * l.cell, l.grid.top() + r * l.cell, l.cell, l.cell);
            p.fillRect(cr, m_colorMap.color(w));
            if (numbers) {
                QString text = QString::number(w, 'f', 2);
                if (shortNumbers && text.startsWith(QLatin1String("0."))) text = text.mid(1);
                p.setFont(l.numberFont);
                p.setPen(m_colorMap.textColor(w));
                p.drawText(cr, Qt::AlignCenter, text);
            }
        }
    }

    // <unk> source columns get a dashed outline so they stand out in any colour map.
    for (int c = 0; c < m_data.columns(); ++c) {
        if (!isUnk(m_data.source[c])) continue;
        QPen pen(kUnkColor, 2, Qt::DashLine);
        p.setPen(pen);
        p.setBrush(Qt::NoBrush);
        p.drawRect(QRect(l.grid.left() + c * l.cell, l.grid.top(), l.cell, l.grid.height()).adjusted(1, 1, -1, -1));
    }

    // Row labels (output tokens), right-aligned beside the rows.
    for (int r = 0; r < m_data.rows(); ++r) {
        const QString& t = m_data.output[r];
        QFont f = labelFont(l.font, t, l.font.pixelSize());
        if (r == m_selectedRow) f.setBold(true);
        const QRect lr(kMargin, l.grid.top() + r * l.cell, l.grid.left() - kMargin - 6, l.cell);
        if (r == m_selectedRow) p.fillRect(lr.adjusted(-4, 1, 4, -1), QColor(0xff, 0xe0, 0x8a));
        p.setFont(f);
        p.setPen(labelColor(t));
        p.drawText(lr, Qt::AlignRight | Qt::AlignVCenter, displayToken(t));
    }

    // Column labels (source tokens) above the grid, vertical when they do not fit.
    for (int c = 0; c < m_data.columns(); ++c) {
        const QString& t = m_data.source[c];
        const QFont f = labelFont(l.font, t, l.font.pixelSize());
        p.setFont(f);
        p.setPen(labelColor(t));
        const int cx = l.grid.left() + c * l.cell + l.cell / 2;
        if (l.rotated) {
            const QFontMetrics lfm(f);
            p.save();
            p.translate(cx + (lfm.ascent() - lfm.descent()) / 2, l.grid.top() - 6);
            p.rotate(-90);
            p.drawText(QPoint(0, 0), displayToken(t));
            p.restore();
        } else {
            p.drawText(QRect(cx - l.cell, l.grid.top() - fm.height() - 6, 2 * l.cell, fm.height()),
                       Qt::AlignHCenter | Qt::AlignBottom, displayToken(t));
        }
    }

    // Grid frame, hover and selection.
    p.setBrush(Qt::NoBrush);
    p.setPen(QPen(QColor(0x40, 0x40, 0x40), 1));
    p.drawRect(l.grid.adjusted(0, 0, -1, -1));
    if (m_hoverCell.x() >= 0 && m_hoverCell.x() < m_data.rows() && m_hoverCell.y() < m_data.columns()) {
        p.setPen(QPen(Qt::white, 1));
        p.drawRect(QRect(l.grid.left() + m_hoverCell.y() * l.cell, l.grid.top() + m_hoverCell.x() * l.cell, l.cell - 1,
                         l.cell - 1));
    }
    if (m_selectedRow >= 0 && m_selectedRow < m_data.rows()) {
        const QRect row(l.grid.left(), l.grid.top() + m_selectedRow * l.cell, l.grid.width(), l.cell);
        p.setPen(QPen(Qt::black, 2));
        p.drawRect(row.adjusted(1, 1, -1, -1));
        p.setPen(QPen(Qt::white, 1));
        p.drawRect(row.adjusted(3, 3, -3, -3));
    }

    // Colour bar with ticks.
    const int slices = 64;
    for (int i = 0; i < slices; ++i) {
        const int y0 = l.colorBar.top() + l.colorBar.height() * i / slices;
        const int y1 = l.colorBar.top() + l.colorBar.height() * (i + 1) / slices;
        p.fillRect(QRect(l.colorBar.left(), y0, l.colorBar.width(), y1 - y0), m_colorMap.color(1.0 - (i + 0.5) / slices));
    }
    p.setPen(QPen(QColor(0x40, 0x40, 0x40), 1));
    p.drawRect(l.colorBar.adjusted(0, 0, -1, -1));
    p.setFont(l.font);
    for (int i = 0; i <= 4; ++i) {
        const double v = i / 4.0;
        const int y = l.colorBar.bottom() - int(std::lround(v * (l.colorBar.height() - 1)));
        p.drawLine(l.colorBar.right() + 1, y, l.colorBar.right() + 4, y);
        p.drawText(QRect(l.colorBar.right() + 6, y - fm.height() / 2, 60, fm.height()), Qt::AlignLeft | Qt::AlignVCenter,
                   QString::number(v, 'f', 2));
    }
    p.restore();
}

QPoint HeatmapWidget::cellAt(const QPoint& pos) const {
    if (m_data.empty()) return {-1, -1};
    const Layout l = layout();
    const QPoint offset((width() > l.size.width()) ? (width() - l.size.width()) / 2 : 0, 0);
    const QPoint q = pos - offset;
    // The row label belongs to its row too, so clicking a token selects it.
    if (q.y() < l.grid.top() || q.y() > l.grid.bottom() || q.x() < kMargin || q.x() > l.grid.right()) return {-1, -1};
    const int row = (q.y() - l.grid.top()) / l.cell;
    const int col = q.x() >= l.grid.left() ? (q.x() - l.grid.left()) / l.cell : -1;
    if (row >= m_data.rows()) return {-1, -1};
    return {row, col};
}

QString HeatmapWidget::cellToolTip(int row, int column) const {
    if (row < 0 || row >= m_data.rows() || column < 0 || column >= m_data.columns()) return {};
    QString text = tr("<b>%1</b> ← <b>%2</b><br>weight %3")
                       .arg(displayToken(m_data.output[row]).toHtmlEscaped(),
                            displayToken(m_data.source[column]).toHtmlEscaped())
                       .arg(m_data.weights[row][column], 0, 'f', 4);
    if (!m_data.rawScores.empty()) {
        const float s = m_data.rawScores[row][column];
        text += tr("<br>raw score %1").arg(std::isfinite(s) ? QString::number(s, 'f', 4) : QStringLiteral("−∞"));
    }
    text += tr("<br>step %1, source position %2").arg(row + 1).arg(column + 1);
    if (column < m_data.sourceNotes.size() && !m_data.sourceNotes[column].isEmpty())
        text += QStringLiteral("<br><i>%1</i>").arg(m_data.sourceNotes[column].toHtmlEscaped());
    return text;
}

void HeatmapWidget::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.fillRect(rect(), Qt::white);
    const QSize cs = contentSize();
    p.translate(width() > cs.width() ? (width() - cs.width()) / 2 : 0, 0);
    paintContent(p);
}

void HeatmapWidget::mousePressEvent(QMouseEvent* event) {
    const QPoint cell = cellAt(event->position().toPoint());
    if (event->button() == Qt::LeftButton && cell.x() >= 0) setSelectedRow(cell.x());
    QWidget::mousePressEvent(event);
}

void HeatmapWidget::mouseMoveEvent(QMouseEvent* event) {
    const QPoint cell = cellAt(event->position().toPoint());
    const QPoint hover = cell.y() >= 0 ? cell : QPoint(-1, -1);
    if (hover != m_hoverCell) {
        m_hoverCell = hover;
        update();
        if (hover.x() >= 0) QToolTip::showText(event->globalPosition().toPoint(), cellToolTip(hover.x(), hover.y()), this);
        else QToolTip::hideText();
    }
    QWidget::mouseMoveEvent(event);
}

void HeatmapWidget::leaveEvent(QEvent* event) {
    m_hoverCell = {-1, -1};
    update();
    QWidget::leaveEvent(event);
}

void HeatmapWidget::wheelEvent(QWheelEvent* event) {
    if (event->modifiers() & Qt::ControlModifier) {
        if (event->angleDelta().y() > 0) zoomIn();
        else if (event->angleDelta().y() < 0) zoomOut();
        event->accept();
        return;
    }
    event->ignore();  // let the scroll area scroll
}

void HeatmapWidget::keyPressEvent(QKeyEvent* event) {
    if (event->key() == Qt::Key_Down && m_selectedRow + 1 < rows()) setSelectedRow(m_selectedRow + 1);
    else if (event->key() == Qt::Key_Up && m_selectedRow > 0) setSelectedRow(m_selectedRow - 1);
    else QWidget::keyPressEvent(event);
}

bool HeatmapWidget::event(QEvent* event) {
    if (event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
        const QPoint cell = cellAt(help->pos());
        if (cell.x() >= 0 && cell.y() >= 0) QToolTip::showText(help->globalPos(), cellToolTip(cell.x(), cell.y()), this);
        else QToolTip::hideText();
        return true;
    }
    return QWidget::event(event);
}

void HeatmapWidget::setHeatmapData(const HeatmapData& data) {
    m_data = data;
    m_hoverCell = {-1, -1};
    if (m_selectedRow >= m_data.rows()) m_selectedRow = -1;
    contentChanged();
}

void HeatmapWidget::clear(const QString& placeholder) {
    m_data = HeatmapData();
    if (!placeholder.isEmpty()) m_placeholder = placeholder;
    m_selectedRow = -1;
    m_hoverCell = {-1, -1};
    contentChanged();
}

void HeatmapWidget::setColorMap(ColorMap::Kind kind) {
    if (kind == m_colorMap.kind()) return;
    m_colorMap = ColorMap(kind);
    update();
}

void HeatmapWidget::setShowNumbers(bool show) {
    if (show == m_showNumbers) return;
    m_showNumbers = show;
    update();
}

void HeatmapWidget::setZoom(double zoom) {
    m_autoFit = false;
    zoom = std::clamp(zoom, kMinZoom, kMaxZoom);
    if (std::abs(zoom - m_zoom) < 1e-9) return;
    m_zoom = zoom;
    contentChanged();
    Q_EMIT zoomChanged(m_zoom);
}

void HeatmapWidget::zoomIn() { setZoom(m_zoom * 1.25); }
void HeatmapWidget::zoomOut() { setZoom(m_zoom / 1.25); }
void HeatmapWidget::resetZoom() { setZoom(1.0); }

void HeatmapWidget::fitToWindow() {
    m_autoFit = true;
    contentChanged();
}

void HeatmapWidget::resizeEvent(QResizeEvent* event) {
    QWidget::resizeEvent(event);
    if (m_autoFit) fitToSize(size());
}

void HeatmapWidget::fitToSize(const QSize& available) {
    if (m_data.empty()) return;
    // The largest zoom whose picture fits (the size grows monotonically with the zoom).
    double lo = kMinFit, hi = kMaxFit;
    auto fits = [&](double z) {
        const QSize s = layout(z).size;
        return s.width() <= available.width() && s.height() <= available.height();
    };
    if (fits(hi)) lo = hi;
    else
        for (int i = 0; i < 10; ++i) {
            const double mid = (lo + hi) / 2;
            (fits(mid) ? lo : hi) = mid;
        }
    if (std::abs(lo - m_zoom) > 0.01) {
        m_zoom = lo;
        update();
        Q_EMIT zoomChanged(m_zoom);
    }
}

void HeatmapWidget::setSelectedRow(int row) {
    if (row < -1 || row >= rows()) row = -1;
    if (row == m_selectedRow) return;
    m_selectedRow = row;
    update();
    Q_EMIT rowSelected(row);
}

void HeatmapWidget::contentChanged() {
    if (m_autoFit && !m_data.empty()) {
        // The scroll area may shrink the widget down to the smallest readable zoom; beyond that it scrolls.
        setMinimumSize(layout(kMinFit).size);
        fitToSize(size());
    } else {
        setMinimumSize(contentSize());
    }
    updateGeometry();
    update();
}

}  // namespace attnviz::ui
