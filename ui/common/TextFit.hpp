#pragma once
// A short label in a narrow slot (the bars' token labels under the step inspector and what-if):
// drawn whole at up to 30% smaller type before it is shortened with "…" ("<eos>" stays whole in a
// 33 px slot at 1280 px wide).
#include <QFontMetricsF>
#include <QPainter>
#include <QRectF>
#include <QString>
#include <algorithm>

namespace attnviz::ui {

inline void drawFittedLabel(QPainter& p, const QRectF& rect, int flags, const QString& text) {
    const QFont base = p.font();
    QFont f = base;
    for (const double scale : {1.0, 0.9, 0.8, 0.7}) {
        if (base.pointSizeF() > 0) f.setPointSizeF(base.pointSizeF() * scale);
        else f.setPixelSize(std::max(1, int(base.pixelSize() * scale)));
        if (QFontMetricsF(f).horizontalAdvance(text) <= rect.width()) break;
    }
    p.setFont(f);
    p.drawText(rect, flags, QFontMetricsF(f).elidedText(text, Qt::ElideRight, rect.width()));
    p.setFont(base);
}

}  // namespace attnviz::ui
