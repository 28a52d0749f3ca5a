// The heatmap's picture: layout and painting, shared by the screen and the
// PNG/SVG export (HeatmapWidget::paintContent).
#include <QFontMetrics>
#include <QPainter>
#include <algorithm>
#include <cmath>
#include <limits>

#include "ui/common/Format.hpp"
#include "ui/heatmap/HeatmapStyle.hpp"
#include "ui/heatmap/HeatmapWidget.hpp"

namespace attnviz::ui {
using namespace heatmap_style;

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
    l.stripFont = l.font;
    l.stripFont.setPixelSize(std::clamp(int(std::lround(l.cell * 0.3)), 8, 13));

    // One QFontMetrics per style, not per label: layout() runs on every paint, hover and fit step.
    const QFontMetrics plainFm(l.font), unkFm(labelFont(l.font, QStringLiteral("<unk>"), px)),
        specialFm(labelFont(l.font, QStringLiteral("<eos>"), px)), stripFm(l.stripFont);
    auto width = [&](const QString& t) {
        const QFontMetrics& m = isUnk(t) ? unkFm : isSpecial(t) ? specialFm : plainFm;
        return m.horizontalAdvance(displayToken(t));
    };
    int rowLabelWidth = 0, srcLabelWidth = 0;
    for (const QString& t : m_data.output) rowLabelWidth = std::max(rowLabelWidth, width(t));
    // The selected row's label is bold: leave room for it.
    rowLabelWidth = int(rowLabelWidth * 1.1) + 2;
    for (const QString& t : m_data.source) srcLabelWidth = std::max(srcLabelWidth, width(t));
    const bool strips = m_showStrips && !m_data.empty();
    if (strips)
        for (const HeatmapStrip& s : m_data.columnStrips) rowLabelWidth = std::max(rowLabelWidth, stripFm.horizontalAdvance(s.name));
    const QFontMetrics fm(l.font);
    l.rotated = srcLabelWidth > l.cell - 4;
    const int labelBand = (l.rotated ? srcLabelWidth : fm.height()) + 10;
    l.titleHeight = m_data.title.isEmpty() ? 0 : QFontMetrics(l.titleFont).height() + 8;

    const QPoint gridTopLeft(kMargin + rowLabelWidth + 12, kMargin + l.titleHeight + labelBand);
    l.grid = QRect(gridTopLeft, QSize(m_data.columns() * l.cell, m_data.rows() * l.cell));
    int right = l.grid.right() + 1;
    l.strip = std::clamp(int(std::lround(l.cell * 0.5)), 6, 28);
    for (const HeatmapStrip& s : m_data.rowStrips) l.strip = std::max(l.strip, std::min(28, stripFm.horizontalAdvance(s.name) + 2));
    if (strips && !m_data.rowStrips.empty()) {
        l.rowStrips = QRect(right + kStripGap, l.grid.top(), int(m_data.rowStrips.size()) * (l.strip + 2), l.grid.height());
        right = l.rowStrips.right() + 1;
    }
    int bottom = l.grid.bottom() + 1;
    if (strips && !m_data.columnStrips.empty()) {
        l.columnStrips = QRect(l.grid.left(), bottom + kStripGap, l.grid.width(),
                               int(m_data.columnStrips.size()) * (std::min(l.strip, l.cell) + 2));
        bottom = l.columnStrips.bottom() + 1;
    }
    const int barHeight = std::max(l.grid.height(), 120);
    l.colorBar = QRect(right + 18, l.grid.top(), 14, barHeight);
    const int tickWidth = fm.horizontalAdvance(QStringLiteral("0.001")) + 8;
    const int titleWidth = m_data.title.isEmpty() ? 0 : QFontMetrics(l.titleFont).horizontalAdvance(m_data.title) + 2 * kMargin;
    l.bodyWidth = l.colorBar.right() + 1 + tickWidth + kMargin;
    l.size = QSize(std::max(l.bodyWidth, titleWidth),
                   std::max(bottom - 1, l.colorBar.bottom()) + 1 + kMargin + fm.height() / 2);
    return l;
}

QSize HeatmapWidget::contentSize() const {
    if (m_data.empty()) return QSize(320, 160);
    return layout().size;
}

QSize HeatmapWidget::sizeHint() const {
    // Fitting to the space it is given, it asks for the least it can be read at.
    return m_autoFit && !m_data.empty() ? smallestSize() : contentSize();
}
QSize HeatmapWidget::minimumSizeHint() const { return QSize(200, 120); }

QRect HeatmapWidget::cellRect(int row, int column) const {
    const Layout l = layout();
    return QRect(l.grid.left() + column * l.cell, l.grid.top() + row * l.cell, l.cell, l.cell);
}

void HeatmapWidget::paintContent(QPainter& p) const { paintContent(p, std::numeric_limits<int>::max()); }

void HeatmapWidget::paintContent(QPainter& p, int titleWidth) const {
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
        const int room = std::min(all.width() - 2 * kMargin, titleWidth);
        p.drawText(QRect(kMargin, kMargin, room, l.titleHeight), Qt::AlignLeft | Qt::AlignVCenter,
                   QFontMetrics(l.titleFont).elidedText(m_data.title, Qt::ElideRight, room));
    }

    // Cells, and optionally their values.
    const bool numbers = m_showNumbers && l.cell >= 18;
    const bool signedData = m_data.signedRange > 0;
    const QFontMetrics nfm(l.numberFont);
    const bool shortNumbers = nfm.horizontalAdvance(QStringLiteral("0.00")) > l.cell - 3;
    for (int r = 0; r < m_data.rows(); ++r) {
        for (int c = 0; c < m_data.columns(); ++c) {
            const double w = m_data.weights[r][c];
            const QRect cr(l.grid.left() + c * l.cell, l.grid.top() + r * l.cell, l.cell, l.cell);
            p.fillRect(cr, signedData ? m_colorMap.signedColor(w, m_data.signedRange) : m_colorMap.color(w));
            if (numbers) {
                QString text = QString::number(w, 'f', 2);
                if (shortNumbers && text.startsWith(QLatin1String("0."))) text = text.mid(1);
                if (shortNumbers && text.startsWith(QLatin1String("-0."))) text = QStringLiteral("-") + text.mid(2);
                p.setFont(l.numberFont);
                p.setPen(signedData ? (std::abs(w) > 0.7 * m_data.signedRange ? Qt::white : Qt::black) : m_colorMap.textColor(w));
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

    // Row labels (output tokens), right-aligned beside the rows; the highlighted row in red.
    for (int r = 0; r < m_data.rows(); ++r) {
        const QString& t = m_data.output[r];
        QFont f = labelFont(l.font, t, l.font.pixelSize());
        if (r == m_selectedRow || r == m_data.highlightRow) f.setBold(true);
        const QRect lr(kMargin, l.grid.top() + r * l.cell, l.grid.left() - kMargin - 6, l.cell);
        if (r == m_selectedRow) p.fillRect(lr.adjusted(-4, 1, 4, -1), QColor(0xff, 0xe0, 0x8a));
        p.setFont(f);
        p.setPen(r == m_data.highlightRow ? kHighlightColor : labelColor(t));
        p.drawText(lr, Qt::AlignRight | Qt::AlignVCenter, displayToken(t));
    }
    // Forced decoding: a blue bar beside the rows whose tokens were given, not chosen.
    if (m_data.forcedRows > 0)
        p.fillRect(QRect(kMargin - 6, l.grid.top(), 3, m_data.forcedRows * l.cell), kForcedColor);

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

    // Grid frame, hover, the highlighted row and the selection.
    p.setBrush(Qt::NoBrush);
    p.setPen(QPen(QColor(0x40, 0x40, 0x40), 1));
    p.drawRect(l.grid.adjusted(0, 0, -1, -1));
    if (m_hoverCell.x() >= 0 && m_hoverCell.x() < m_data.rows() && m_hoverCell.y() < m_data.columns()) {
        p.setPen(QPen(Qt::white, 1));
        p.drawRect(QRect(l.grid.left() + m_hoverCell.y() * l.cell, l.grid.top() + m_hoverCell.x() * l.cell, l.cell - 1,
                         l.cell - 1));
    }
    if (m_data.highlightRow >= 0 && m_data.highlightRow < m_data.rows()) {
        const QRect row(l.grid.left(), l.grid.top() + m_data.highlightRow * l.cell, l.grid.width(), l.cell);
        p.setPen(QPen(kHighlightColor, 2, Qt::DashLine));
        p.drawRect(row.adjusted(1, 1, -1, -1));
    }
    if (m_selectedRow >= 0 && m_selectedRow < m_data.rows()) {
        const QRect row(l.grid.left(), l.grid.top() + m_selectedRow * l.cell, l.grid.width(), l.cell);
        p.setPen(QPen(Qt::black, 2));
        p.drawRect(row.adjusted(1, 1, -1, -1));
        p.setPen(QPen(Qt::white, 1));
        p.drawRect(row.adjusted(3, 3, -3, -3));
    }
    paintStrips(p, l);
    paintColorBar(p, l);
    p.restore();
}

// Each strip value is painted with the colour map (linear: it is not a weight) on a
// cell of the strip; the head names it.
void HeatmapWidget::paintStrips(QPainter& p, const Layout& l) const {
    const ColorMap linear(m_colorMap.kind());
    const QFontMetrics sfm(l.stripFont);
    p.setFont(l.stripFont);
    auto paintValue = [&](const HeatmapStrip& s, size_t i, const QRect& r) {
        const double v = i < s.values.size() && s.maximum > 0 ? double(s.values[i]) / double(s.maximum) : 0.0;
        p.fillRect(r, linear.color(v));
    };
    if (!l.rowStrips.isEmpty())
        for (size_t k = 0; k < m_data.rowStrips.size(); ++k) {
            const HeatmapStrip& s = m_data.rowStrips[k];
            const int x = l.rowStrips.left() + int(k) * (l.strip + 2);
            for (int r = 0; r < m_data.rows(); ++r) paintValue(s, size_t(r), QRect(x, l.grid.top() + r * l.cell, l.strip, l.cell));
            p.setPen(QPen(QColor(0x80, 0x80, 0x80), 1));
            p.drawRect(QRect(x, l.grid.top(), l.strip, l.grid.height()).adjusted(0, 0, -1, -1));
            p.setPen(QColor(0x40, 0x40, 0x40));
            p.drawText(QRect(x - 8, l.grid.top() - sfm.height() - 2, l.strip + 16, sfm.height()), Qt::AlignCenter, s.name);
        }
    if (!l.columnStrips.isEmpty()) {
        const int h = std::min(l.strip, l.cell);
        for (size_t k = 0; k < m_data.columnStrips.size(); ++k) {
            const HeatmapStrip& s = m_data.columnStrips[k];
            const int y = l.columnStrips.top() + int(k) * (h + 2);
            for (int c = 0; c < m_data.columns(); ++c) paintValue(s, size_t(c), QRect(l.grid.left() + c * l.cell, y, l.cell, h));
            p.setPen(QPen(QColor(0x80, 0x80, 0x80), 1));
            p.drawRect(QRect(l.grid.left(), y, l.grid.width(), h).adjusted(0, 0, -1, -1));
            p.setPen(QColor(0x40, 0x40, 0x40));
            p.drawText(QRect(kMargin, y, l.grid.left() - kMargin - 6, h), Qt::AlignRight | Qt::AlignVCenter, s.name);
        }
    }
}

// The colour bar, with ticks where the scale puts them (signed data: -range, 0, +range).
void HeatmapWidget::paintColorBar(QPainter& p, const Layout& l) const {
    const QFontMetrics fm(l.font);
    const double range = m_data.signedRange;
    const int slices = 64;
    for (int i = 0; i < slices; ++i) {
        const int y0 = l.colorBar.top() + l.colorBar.height() * i / slices;
        const int y1 = l.colorBar.top() + l.colorBar.height() * (i + 1) / slices;
        const double position = 1.0 - (i + 0.5) / slices;
        const QColor c = range > 0 ? m_colorMap.signedColor((2 * position - 1) * range, range)
                                   : m_colorMap.entry(int(position * 256));
        p.fillRect(QRect(l.colorBar.left(), y0, l.colorBar.width(), y1 - y0), c);
    }
    p.setPen(QPen(QColor(0x40, 0x40, 0x40), 1));
    p.drawRect(l.colorBar.adjusted(0, 0, -1, -1));
    p.setFont(l.font);
    auto tick = [&](double position, const QString& text) {
        const int y = l.colorBar.bottom() - int(std::lround(position * (l.colorBar.height() - 1)));
        p.drawLine(l.colorBar.right() + 1, y, l.colorBar.right() + 4, y);
        p.drawText(QRect(l.colorBar.right() + 6, y - fm.height() / 2, 60, fm.height()), Qt::AlignLeft | Qt::AlignVCenter, text);
    };
    if (range > 0) {
        for (double v : {-range, -range / 2, 0.0, range / 2, range})
            tick(0.5 + 0.5 * v / range, (v > 0 ? QStringLiteral("+") : QString()) + QString::number(v, 'f', 2));
        return;
    }
    for (double v : m_colorMap.ticks())
        tick(m_colorMap.position(v), v < 0.01 && v > 0 ? QString::number(v, 'g', 1) : QString::number(v, 'f', 2));
}

}  // namespace attnviz::ui
