#pragma once
// The translate panel's "Map" row: which attention map the heatmap, the step
// inspector, the exports, the live probe and compare-models show — a kind
// (cross, encoder self, decoder self), a layer, and one head, the mean of the
// layer's heads or the rollout through the layers. Hidden for a model with one
// map (the RNN). The choice is remembered (QSettings "view/map*").
#include <QWidget>

#include "ui/heatmap/MapChoice.hpp"

QT_BEGIN_NAMESPACE
class QComboBox;
QT_END_NAMESPACE

namespace attnviz::ui {

class MapSelector : public QWidget {
    Q_OBJECT
public:
    explicit MapSelector(QWidget* parent = nullptr);

    /// What the user chose (layer -1: the last), before it meets a record.
    MapChoice choice() const { return m_choice; }
    /// Offers the kinds, layers and heads this record has; hides the row when it has one map.
    void setRecord(const AttentionRecord& record);
    QComboBox* kindBox() const { return m_kind; }
    QComboBox* layerBox() const { return m_layer; }
    QComboBox* headBox() const { return m_head; }

public Q_SLOTS:
    void setChoice(const attnviz::ui::MapChoice& choice);

Q_SIGNALS:
    void choiceChanged();

private:
    void fill();
    void readBoxes();

    QComboBox* m_kind;
    QComboBox* m_layer;
    QComboBox* m_head;
    MapChoice m_choice;
    int m_layers[3] = {0, 0, 0};  ///< layers per kind in the last record
    int m_heads[3] = {0, 0, 0};   ///< heads per kind
    bool m_filling = false;
};

}  // namespace attnviz::ui
