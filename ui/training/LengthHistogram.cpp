#include "ui/training/LengthHistogram.hpp"

#include <QPainter>
#include <algorithm>
#include <cmath>

namespace attnviz::ui {

LengthHistogram::LengthHistogram(QWidget* parent) : QWidget(parent) {
    setMinimumHeight(90);
    setToolTip(tr("Sentence lengths in tokens: source (blue) and target (orange)"));
}

void LengthHistogram::setCounts(const std::vector<size_t>& source, const std::vector<size_t>& target) {
    m_src = source;
    m_tgt = target;
    m_tgt.resize(m_src.size(), 0);
    update();
}

QSize LengthHistogram::sizeHint() const { return QSize(240, 110); }

void LengthHistogram::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.fillRect(rect(), palette().base());
    const int bins = int(m_src.size());
    int first = -1, last = 0;
    size_t peak = 1;
    for (int i = 0; i < bins; ++i) {
        if (m_src[i] || m_tgt[i]) last = i, first = first < 0 ? i : first;
        peak = std::max({peak, m_src[i], m_tgt[i]});
    }
    first = std::max(0, first - 1);
    const QFontMetrics fm(font());
    const QRect plot = rect().adjusted(4, 4, -4, -fm.height() - 4);
    if (last == 0) {
        p.setPen(palette().color(QPalette::PlaceholderText));
        p.drawText(rect(), Qt::AlignCenter, tr("no corpus"));
        return;
    }
    const double slot = double(plot.width()) / (last - first + 1);
    const QColor colors[] = {QColor(0x1f77b4), QColor(0xff7f0e)};
    for (int i = first; i <= last; ++i) {
        for (int side = 0; side < 2; ++side) {
            const size_t v = side == 0 ? m_src[i] : m_tgt[i];
            const double h = double(v) / double(peak) * plot.height();
            p.fillRect(QRectF(plot.left() + (i - first) * slot + slot * 0.05 + side * slot * 0.45, plot.bottom() - h,
                              slot * 0.45, h),
                       colors[side]);
        }
    }
    p.setPen(palette().color(QPalette::Text));
    p.drawLine(plot.bottomLeft(), plot.bottomRight());
    const int lastBin = bins - 1;
    const int step = std::max(1, int(std::ceil(fm.horizontalAdvance(QStringLiteral("%1+").arg(lastBin)) / slot)));
    for (int i = first; i <= last; i += step)
        p.drawText(QRectF(plot.left() + (i - first) * slot - slot, plot.bottom() + 2, 3 * slot, fm.height()), Qt::AlignHCenter,
                   i == lastBin ? QStringLiteral("%1+").arg(lastBin) : QString::number(i));
}

}  // namespace attnviz::ui
