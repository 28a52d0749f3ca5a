#pragma once
// The beam search as a tree (core/decode/beam_tree.hpp): one column per decoding step,
// every candidate the search looked at as a box with its token and score,
// marked kept (blue), pruned (grey) or finished (green); the best hypothesis'
// path in orange. Clicking a node selects it (nodeSelected): the panel then
// shows that partial hypothesis and its heatmap.
#include <QWidget>
#include <memory>
#include <vector>

#include "core/decode/beam_tree.hpp"

namespace attnviz::ui {

class BeamTreeView : public QWidget {
    Q_OBJECT
public:
    explicit BeamTreeView(QWidget* parent = nullptr);

    void setTree(std::shared_ptr<const BeamTree> tree);
    std::shared_ptr<const BeamTree> tree() const { return m_tree; }
    /// The selected node's id (-1: none).
    qint64 selectedNode() const { return m_selected; }
    /// The node's box in widget coordinates (empty for an unknown id).
    QRect nodeRect(qint64 id) const;
    /// The node under a point in widget coordinates, or -1.
    qint64 nodeAt(const QPoint& pos) const;
    /// The tooltip for a node.
    QString nodeToolTip(qint64 id) const;
    QSize sizeHint() const override;

public Q_SLOTS:
    void setSelectedNode(qint64 id);

Q_SIGNALS:
    void nodeSelected(qint64 id);

protected:
    void paintEvent(QPaintEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;
    bool event(QEvent* event) override;

private:
    void relayout();

    std::shared_ptr<const BeamTree> m_tree;
    std::vector<QRect> m_boxes;       ///< per node
    std::vector<bool> m_onBestPath;   ///< per node: on the path of the best finished hypothesis
    QRect m_root;                     ///< the <bos> box
    QSize m_size{200, 80};
    qint64 m_selected = -1;
};

}  // namespace attnviz::ui
