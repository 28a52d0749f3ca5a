#include "ui/common/Format.hpp"

#include <QFontMetrics>
#include <QLabel>
#include <QObject>

#include <cmath>

namespace attnviz::ui {

QStringList toQStringList(const std::vector<std::string>& v) {
    QStringList out;
    out.reserve(int(v.size()));
    for (const auto& s : v) out << QString::fromStdString(s);
    return out;
}

QString displayToken(const QString& token) {
    return token == QLatin1String(" ") ? QStringLiteral("␣") : token;
}

QString formatDuration(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0) return QStringLiteral("–");
    const long total = std::lround(seconds);
    const long h = total / 3600, m = (total / 60) % 60, s = total % 60;
    if (h > 0) return QStringLiteral("%1:%2:%3").arg(h).arg(m, 2, 10, QLatin1Char('0')).arg(s, 2, 10, QLatin1Char('0'));
    return QStringLiteral("%1:%2").arg(m).arg(s, 2, 10, QLatin1Char('0'));
}

QString formatRate(double perSecond) {
    if (!std::isfinite(perSecond) || perSecond <= 0) return QStringLiteral("–");
    if (perSecond >= 1e6) return QStringLiteral("%1M").arg(perSecond / 1e6, 0, 'f', 2);
    if (perSecond >= 1e3) return QStringLiteral("%1k").arg(perSecond / 1e3, 0, 'f', 1);
    return QString::number(perSecond, 'f', 0);
}

QString formatLoss(double value) {
    if (!std::isfinite(value)) return QStringLiteral("–");
    return QString::number(value, 'g', 4);
}

QString checkpointFileFilter() {
    return QObject::tr("attnviz checkpoint (*.attnviz *.pt *.ckpt);;All files (*)");
}

void fixLabelSize(QLabel* label, const QString& widest) {
    const QMargins m = label->contentsMargins();
    const int width = label->fontMetrics().horizontalAdvance(widest) + m.left() + m.right() + 2 * label->margin() + 4;
    label->setFixedSize(width, label->sizeHint().height());
}

}  // namespace attnviz::ui
