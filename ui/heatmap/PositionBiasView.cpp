#include "ui/heatmap/PositionBiasView.hpp"

#include <QHelpEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>
#include <algorithm>
#include <cmath>

namespace attnviz::ui {

PositionBiasView::PositionBiasView(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("positionBiasView"));
    setMouseTracking(true);
    setToolTip(tr("T5's relative position bias: what each head adds to a score before the softmax, by how far "
                  "the key lies after the query (negative: before it). Every layer adds the same."));
}

void PositionBiasView::setCurves(std::vector<PositionBiasCurve> curves) {
    m_curves = std::move(curves);
    update();
}

void PositionBiasView::setChoice(AttentionKind kind, int head) {
    m_kind = kind;
    m_head = head;
    update();
}

bool PositionBiasView::hasCurves() const {
    return std::any_of(m_curves.begin(), m_curves.end(), [this](const PositionBiasCurve& c) { return c.kind == m_kind; });
}

std::vector<float> PositionBiasView::chosenCurve() const {
    std::vector<float> mean;
    int n = 0;
    for (const auto& c : m_curves) {
        if (c.kind != m_kind) continue;
        if (c.head == m_head) return c.bias;
        if (mean.empty()) mean.assign(c.bias.size(), 0.0f);
        for (size_t i = 0; i < c.bias.size() && i < mean.size(); ++i) mean[i] += c.bias[i];
        ++n;
    }
    for (auto& v : mean) v /= float(std::max(n, 1));
    return mean;
}

QRect PositionBiasView::plotRect() const {
    const int text = fontMetrics().height();
    return rect().adjusted(text * 3, text + 6, -8, -(text + 8));
}

void PositionBiasView::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    p.fillRect(rect(), palette().base());
    const QColor ink = palette().text().color();
    if (!hasCurves()) {
        p.setPen(palette().placeholderText().color());
        p.drawText(rect(), Qt::AlignCenter, tr("No relative position bias (T5's encoder and decoder self-attention have one)."));
        return;
    }
    float lo = 0, hi = 0;
    size_t points = 0;
    for (const auto& c : m_curves)
        if (c.kind == m_kind)
            for (const float v : c.bias) {
                lo = std::min(lo, v);
                hi = std::max(hi, v);
                points = std::max(points, c.bias.size());
            }
    if (hi - lo < 1e-6f) hi = lo + 1;
    const QRect r = plotRect();
    const int span = int(points / 2);
    auto x = [&](size_t i) { return r.left() + (points > 1 ? double(i) * r.width() / double(points - 1) : 0.0); };
    auto y = [&](float v) { return r.bottom() - double(v - lo) * r.height() / double(hi - lo); };
    const QString head = m_head >= 0 ? tr("head %1").arg(m_head) : tr("mean of the heads");
    p.setPen(ink);
    p.drawText(QRect(0, 0, width(), fontMetrics().height() + 4), Qt::AlignHCenter | Qt::AlignVCenter,
               tr("%1 position bias · %2").arg(m_kind == AttentionKind::decoder_self ? tr("decoder self") : tr("encoder self"), head));
    // The axes: zero bias and distance 0.
    p.setPen(QPen(palette().mid().color(), 1, Qt::DashLine));
    p.drawLine(QPointF(r.left(), y(0)), QPointF(r.right(), y(0)));
    p.drawLine(QPointF(x(size_t(span)), r.top()), QPointF(x(size_t(span)), r.bottom()));
    p.setPen(ink);
    const auto label = [&](const QString& s, QPointF at, Qt::Alignment a) {
        const int w = fontMetrics().horizontalAdvance(s) + 4, h = fontMetrics().height();
        QRectF box(at.x() - (a & Qt::AlignRight ? w : a & Qt::AlignHCenter ? w / 2.0 : 0), at.y() - h / 2.0, w, h);
        p.drawText(box, a | Qt::AlignVCenter, s);
    };
    label(QString::number(-span), QPointF(r.left(), r.bottom() + fontMetrics().height() * 0.8), Qt::AlignLeft);
    label(QStringLiteral("0"), QPointF(x(size_t(span)), r.bottom() + fontMetrics().height() * 0.8), Qt::AlignHCenter);
    label(QStringLiteral("+%1").arg(span), QPointF(r.right(), r.bottom() + fontMetrics().height() * 0.8), Qt::AlignRight);
    label(QString::number(double(hi), 'f', 2), QPointF(r.left() - 4, r.top()), Qt::AlignRight);
    label(QString::number(double(lo), 'f', 2), QPointF(r.left() - 4, r.bottom()), Qt::AlignRight);
    const auto path = [&](const std::vector<float>& bias) {
        QPainterPath line;
        for (size_t i = 0; i < bias.size(); ++i) {
            const QPointF pt(x(i), y(bias[i]));
            if (i == 0) line.moveTo(pt);
            else line.lineTo(pt);
        }
        return line;
    };
    QColor faint = ink;
    faint.setAlphaF(0.25);
    p.setPen(QPen(faint, 1));
    for (const auto& c : m_curves)
        if (c.kind == m_kind && c.head != m_head) p.drawPath(path(c.bias));
    p.setPen(QPen(palette().highlight().color(), 2.2));
    p.drawPath(path(chosenCurve()));
}

bool PositionBiasView::event(QEvent* e) {
    if (e->type() == QEvent::ToolTip && hasCurves()) {
        const auto* help = static_cast<QHelpEvent*>(e);
        const QRect r = plotRect();
        const auto curve = chosenCurve();
        if (r.contains(help->pos()) && curve.size() > 1) {
            const auto i = size_t(std::lround(double(help->pos().x() - r.left()) * double(curve.size() - 1) / r.width()));
            const int distance = int(i) - int(curve.size() / 2);
            QToolTip::showText(help->globalPos(),
                               tr("distance %1 (key %2 the query): bias %3")
                                   .arg(distance)
                                   .arg(distance >= 0 ? tr("after") : tr("before"))
                                   .arg(double(curve[std::min(i, curve.size() - 1)]), 0, 'f', 4),
                               this);
            return true;
        }
    }
    return QWidget::event(e);
}

}  // namespace attnviz::ui
