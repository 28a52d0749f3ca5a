#include "ui/translate/BeamTreeView.hpp"

#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>
#include <algorithm>
#include <cmath>
#include <functional>

#include "ui/common/Format.hpp"

namespace attnviz::ui {
namespace {
constexpr int kMargin = 8, kRow = 24, kGap = 18;
const QColor kKept(0x1f, 0x77, 0xb4), kPruned(0x9a, 0x9a, 0x9a), kFinished(0x2c, 0xa0, 0x2c), kBest(0xff, 0x7f, 0x0e);

QString scoreText(double v) { return std::isfinite(v) ? QString::number(v, 'f', 2) : QStringLiteral("−∞"); }
}  // namespace

BeamTreeView::BeamTreeView(QWidget* parent) : QWidget(parent) {
    setFocusPolicy(Qt::ClickFocus);
    setBackgroundRole(QPalette::Base);
    setAutoFillBackground(true);
}

void BeamTreeView::setTree(std::shared_ptr<const BeamTree> tree) {
    m_tree = std::move(tree);
    m_selected = -1;
    relayout();
    update();
}

// A dendrogram: leaves take consecutive rows in depth-first order (children by
// rank), a parent sits at the middle of its first and last child.
void BeamTreeView::relayout() {
    m_boxes.clear();
    m_onBestPath.clear();
    if (!m_tree || m_tree->nodes.empty()) {
        m_size = QSize(200, 80);
        setMinimumSize(m_size);
        updateGeometry();
        return;
    }
    const BeamTree& t = *m_tree;
    const QFontMetrics fm(font());
    int tokenWidth = fm.horizontalAdvance(QStringLiteral("<bos>"));
    for (const BeamNode& n : t.nodes) tokenWidth = std::max(tokenWidth, fm.horizontalAdvance(displayToken(qs(n.token))));
    const int boxWidth = std::min(tokenWidth, 160) + fm.horizontalAdvance(QStringLiteral(" −00.00")) + 12;
    const int column = boxWidth + kGap;
    std::vector<double> y(t.nodes.size(), 0.0);
    int nextRow = 0;
    std::vector<std::vector<int64_t>> kids(t.nodes.size());
    std::vector<int64_t> roots;
    for (const BeamNode& n : t.nodes) (n.parent < 0 ? roots : kids[size_t(n.parent)]).push_back(n.id);
    std::function<double(int64_t)> place = [&](int64_t id) {
        const auto& c = kids[size_t(id)];
        if (c.empty()) return y[size_t(id)] = nextRow++;
        double first = 0, last = 0;
        for (size_t i = 0; i < c.size(); ++i) {
            const double v = place(c[i]);
            if (i == 0) first = v;
            last = v;
        }
        return y[size_t(id)] = (first + last) / 2;
    };
    double rootFirst = 0, rootLast = 0;
    for (size_t i = 0; i < roots.size(); ++i) {
        const double v = place(roots[i]);
        if (i == 0) rootFirst = v;
        rootLast = v;
    }
    auto box = [&](int col, double row) {
        return QRect(kMargin + col * column, kMargin + int(std::lround(row * kRow)), boxWidth, kRow - 4);
    };
    m_root = box(0, (rootFirst + rootLast) / 2);
    for (const BeamNode& n : t.nodes) m_boxes.push_back(box(int(n.step) + 1, y[size_t(n.id)]));
    m_onBestPath.assign(t.nodes.size(), false);
    if (!t.finished.empty())
        for (int64_t id : t.path(t.finished.front())) m_onBestPath[size_t(id)] = true;
    m_size = QSize(kMargin * 2 + int(t.steps() + 1) * column, kMargin * 2 + std::max(1, nextRow) * kRow);
    setMinimumSize(m_size);
    updateGeometry();
}

QSize BeamTreeView::sizeHint() const { return m_size; }

QRect BeamTreeView::nodeRect(qint64 id) const {
    return id >= 0 && id < qint64(m_boxes.size()) ? m_boxes[size_t(id)] : QRect();
}

qint64 BeamTreeView::nodeAt(const QPoint& pos) const {
    for (size_t i = 0; i < m_boxes.size(); ++i)
        if (m_boxes[i].contains(pos)) return qint64(i);
    return -1;
}

QString BeamTreeView::nodeToolTip(qint64 id) const {
    if (!m_tree || id < 0 || id >= qint64(m_tree->nodes.size())) return {};
    const BeamNode& n = m_tree->nodes[size_t(id)];
    const Hypothesis h = m_tree->partial_hypothesis(id);
    return tr("<b>%1</b> — %2%3<br>step %4, candidate %5 of its step; token rank %6 at its parent<br>"
              "p(token) %7 · log P %8 · score %9<br><i>%10</i>")
        .arg(displayToken(qs(n.token)).toHtmlEscaped(), qs(to_string(n.status)),
             n.forced ? tr(" (given: prefix)") : QString())
        .arg(n.step + 1)
        .arg(n.rank + 1)
        .arg(n.token_rank + 1)
        .arg(std::exp(double(n.token_log_prob)), 0, 'f', 3)
        .arg(n.log_prob, 0, 'f', 3)
        .arg(n.score, 0, 'f', 3)
        .arg(qs(h.text).toHtmlEscaped());
}

void BeamTreeView::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.fillRect(rect(), palette().base());
    if (!m_tree || m_tree->nodes.empty()) {
        p.setPen(palette().color(QPalette::PlaceholderText));
        p.drawText(rect(), Qt::AlignCenter | Qt::TextWordWrap,
                   tr("Translate with a beam wider than 1 to see the search tree."));
        return;
    }
    p.setRenderHint(QPainter::Antialiasing, true);
    const BeamTree& t = *m_tree;
    const std::vector<int64_t> selectedPath = m_selected >= 0 ? t.path(m_selected) : std::vector<int64_t>{};
    auto onSelectedPath = [&](int64_t id) { return std::find(selectedPath.begin(), selectedPath.end(), id) != selectedPath.end(); };
    // Edges first, under the boxes.
    for (const BeamNode& n : t.nodes) {
        const QRect from = n.parent < 0 ? m_root : m_boxes[size_t(n.parent)], to = m_boxes[size_t(n.id)];
        const bool best = m_onBestPath[size_t(n.id)];
        QColor c = best ? kBest : n.status == BeamNode::Status::pruned ? kPruned.lighter(130) : kKept.lighter(140);
        p.setPen(QPen(c, best || onSelectedPath(n.id) ? 2.4 : 1.0));
        const QPointF a(from.right(), from.center().y()), b(to.left(), to.center().y());
        QPainterPath path(a);
        path.cubicTo(QPointF((a.x() + b.x()) / 2, a.y()), QPointF((a.x() + b.x()) / 2, b.y()), b);
        p.drawPath(path);
    }
    auto drawBox = [&](const QRect& r, const QString& token, const QString& score, const QColor& border, const QColor& fill,
                       bool bold, bool selected, bool forced) {
        p.setPen(QPen(selected ? Qt::black : border, selected ? 2.4 : 1.2));
        p.setBrush(fill);
        p.drawRoundedRect(r, 4, 4);
        if (forced) p.fillRect(QRect(r.left() + 1, r.top() + 2, 3, r.height() - 4), QColor(0x2e, 0x6d, 0xb4));
        QFont f = font();
        f.setBold(bold);
        p.setFont(f);
        p.setPen(palette().color(QPalette::Text));
        p.drawText(r.adjusted(6, 0, -4, 0), Qt::AlignLeft | Qt::AlignVCenter,
                   QFontMetrics(f).elidedText(displayToken(token), Qt::ElideRight, r.width() / 2 + 20));
        p.setFont(font());
        p.setPen(palette().color(QPalette::PlaceholderText));
        p.drawText(r.adjusted(4, 0, -5, 0), Qt::AlignRight | Qt::AlignVCenter, score);
    };
    drawBox(m_root, QStringLiteral("<bos>"), QString(), kKept, QColor(0xf4, 0xf4, 0xf4), false, false, false);
    for (const BeamNode& n : t.nodes) {
        const bool finished = n.status == BeamNode::Status::finished, pruned = n.status == BeamNode::Status::pruned;
        const QColor border = finished ? kFinished : pruned ? kPruned : kKept;
        const QColor fill = finished ? QColor(0xe3, 0xf4, 0xe3) : pruned ? QColor(0xf6, 0xf6, 0xf6) : QColor(0xe1, 0xee, 0xf8);
        drawBox(m_boxes[size_t(n.id)], qs(n.token), scoreText(finished ? n.score : n.log_prob), border, fill, finished,
                n.id == m_selected, n.forced);
    }
}

void BeamTreeView::setSelectedNode(qint64 id) {
    if (!m_tree || id < -1 || id >= qint64(m_tree->nodes.size())) id = -1;
    if (id == m_selected) return;
    m_selected = id;
    update();
    Q_EMIT nodeSelected(id);
}

void BeamTreeView::mousePressEvent(QMouseEvent* event) {
    const qint64 id = nodeAt(event->position().toPoint());
    if (event->button() == Qt::LeftButton && id >= 0) setSelectedNode(id);
    QWidget::mousePressEvent(event);
}

// Left/right walk to the parent and the first child; up/down to the siblings.
void BeamTreeView::keyPressEvent(QKeyEvent* event) {
    if (!m_tree || m_selected < 0) return QWidget::keyPressEvent(event);
    const BeamNode& n = m_tree->nodes[size_t(m_selected)];
    const auto siblings = m_tree->children(n.parent);
    const auto here = std::find(siblings.begin(), siblings.end(), n.id) - siblings.begin();
    switch (event->key()) {
    case Qt::Key_Left: setSelectedNode(n.parent >= 0 ? n.parent : m_selected); break;
    case Qt::Key_Right: {
        const auto kids = m_tree->children(n.id);
        if (!kids.empty()) setSelectedNode(kids.front());
        break;
    }
    case Qt::Key_Up: if (here > 0) setSelectedNode(siblings[size_t(here - 1)]); break;
    case Qt::Key_Down: if (size_t(here + 1) < siblings.size()) setSelectedNode(siblings[size_t(here + 1)]); break;
    default: QWidget::keyPressEvent(event);
    }
}

bool BeamTreeView::event(QEvent* event) {
    if (event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
        const QString text = nodeToolTip(nodeAt(help->pos()));
        if (!text.isEmpty()) QToolTip::showText(help->globalPos(), text, this);
        else QToolTip::hideText();
        return true;
    }
    return QWidget::event(event);
}

}  // namespace attnviz::ui
