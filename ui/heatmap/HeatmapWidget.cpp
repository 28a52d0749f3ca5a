#include "ui/heatmap/HeatmapWidget.hpp"

#include <QFontMetrics>
#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QScrollArea>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>

#include "ui/common/Format.hpp"
#include "ui/heatmap/HeatmapStyle.hpp"

namespace attnviz::ui {

QScrollArea* scrolled(QWidget* content, QWidget* parent) {
    auto* scroll = new QScrollArea(parent);
    scroll->setWidget(content);
    scroll->setWidgetResizable(true);
    scroll->setBackgroundRole(QPalette::Base);
    return scroll;
}

using namespace heatmap_style;

HeatmapWidget::HeatmapWidget(QWidget* parent) : QWidget(parent) {
    setMouseTracking(true);
    setFocusPolicy(Qt::ClickFocus);
    setAttribute(Qt::WA_OpaquePaintEvent);
    m_placeholder = tr("Translate a sentence to see where the decoder looks.");
}

QPoint HeatmapWidget::contentOffset(const Layout& l) const {
    return QPoint(width() > l.size.width() ? (width() - l.size.width()) / 2 : 0, 0);
}

QPoint HeatmapWidget::cellAt(const QPoint& pos) const {
    if (m_data.empty()) return {-1, -1};
    const Layout l = layout();
    const QPoint q = pos - contentOffset(l);
    // The row label belongs to its row too, so clicking a token selects it.
    if (q.y() < l.grid.top() || q.y() > l.grid.bottom() || q.x() < kMargin || q.x() > l.grid.right()) return {-1, -1};
    const int row = (q.y() - l.grid.top()) / l.cell;
    const int col = q.x() >= l.grid.left() ? (q.x() - l.grid.left()) / l.cell : -1;
    if (row >= m_data.rows()) return {-1, -1};
    return {row, col};
}

QString HeatmapWidget::toolTipAt(const QPoint& pos) const {
    if (m_data.empty()) return {};
    const Layout l = layout();
    const QPoint q = pos - contentOffset(l);
    if (q.y() >= kMargin && q.y() < kMargin + l.titleHeight && titleElided()) return m_data.title;  // the whole title
    if (l.rowStrips.contains(q)) {
        const size_t k = size_t((q.x() - l.rowStrips.left()) / (l.strip + 2));
        const int row = (q.y() - l.grid.top()) / l.cell;
        return k < m_data.rowStrips.size() ? m_data.stripToolTip(m_data.rowStrips[k], row, true) : QString();
    }
    if (l.columnStrips.contains(q)) {
        const size_t k = size_t((q.y() - l.columnStrips.top()) / (std::min(l.strip, l.cell) + 2));
        const int column = (q.x() - l.grid.left()) / l.cell;
        return k < m_data.columnStrips.size() ? m_data.stripToolTip(m_data.columnStrips[k], column, false) : QString();
    }
    const QPoint cell = cellAt(pos);
    if (cell.x() < 0) return {};
    if (cell.y() >= 0) return cellToolTip(cell.x(), cell.y());
    // A row label: the highlighted row says why.
    if (cell.x() == m_data.highlightRow && !m_data.highlightNote.isEmpty())
        return QStringLiteral("<span style='color:#b00020'>%1</span>").arg(m_data.highlightNote.toHtmlEscaped());
    if (cell.x() < m_data.forcedRows) return tr("given (forced), not chosen by the model");
    return {};
}

QString HeatmapWidget::cellToolTip(int row, int column) const {
    if (row < 0 || row >= m_data.rows() || column < 0 || column >= m_data.columns()) return {};
    const QString name = !m_data.valueName.isEmpty() ? m_data.valueName.toHtmlEscaped()
                         : m_data.signedRange > 0     ? tr("difference")
                                                      : tr("weight");
    QString text = QStringLiteral("<b>%1</b> ← <b>%2</b><br>%3 %4")
                       .arg(displayToken(m_data.output[row]).toHtmlEscaped(),
                            displayToken(m_data.source[column]).toHtmlEscaped(), name)
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
    // The title within the widget (its tooltip holds it whole when it does not fit).
    paintContent(p, width() - 2 * kMargin);
}

bool HeatmapWidget::titleElided() const {
    if (m_data.empty() || m_data.title.isEmpty()) return false;
    const Layout l = layout();
    const int room = std::min(l.size.width(), width()) - 2 * kMargin;
    return QFontMetrics(l.titleFont).horizontalAdvance(m_data.title) > room;
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
        const QString text = toolTipAt(help->pos());
        if (!text.isEmpty()) QToolTip::showText(help->globalPos(), text, this);
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
    m_colorMap = ColorMap(kind, m_colorMap.scale());
    update();
}

void HeatmapWidget::setColorScale(ColorMap::Scale scale) {
    if (scale == m_colorMap.scale()) return;
    m_colorMap = ColorMap(m_colorMap.kind(), scale);
    update();
}

void HeatmapWidget::setShowStrips(bool show) {
    if (show == m_showStrips) return;
    m_showStrips = show;
    contentChanged();
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
    // The geometry the layouts see changes only when the picture's shape does: a minimum or a
    // size hint that followed the title ("batch N: ...") or the fitted zoom would re-lay out and
    // repaint the whole panel around the heatmap at every probe refresh.
    // The hint is also the minimum (what sizeHint() returns), computed once.
    QSize hint;
    if (m_autoFit && !m_data.empty()) {
        // The scroll area may shrink the widget down to the smallest readable zoom; beyond that it
        // scrolls. Not the title's width: a long title is cut on screen (never in an export).
        hint = smallestSize();
        setMinimumSize(hint);
        fitToSize(size());
    } else {
        hint = contentSize();
        setMinimumSize(hint);
    }
    if (hint != m_geometryHint) {
        m_geometryHint = hint;
        updateGeometry();
    }
    update();
}

QSize HeatmapWidget::smallestSize() const {
    const Layout l = layout(kMinFit);
    return QSize(l.bodyWidth, l.size.height());
}

}  // namespace attnviz::ui
