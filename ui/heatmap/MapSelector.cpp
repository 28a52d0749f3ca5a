#include "ui/heatmap/MapSelector.hpp"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSettings>
#include <QStandardItemModel>
#include <algorithm>

namespace attnviz::ui {
namespace {
constexpr AttentionKind kKinds[] = {AttentionKind::cross, AttentionKind::encoder_self, AttentionKind::decoder_self};
}  // namespace

MapSelector::MapSelector(QWidget* parent) : QWidget(parent) {
    m_kind = new QComboBox(this);
    m_kind->setObjectName(QStringLiteral("mapKind"));
    m_kind->setToolTip(tr("Which attention: cross (output steps over source tokens), encoder self (source over "
                          "source) or decoder self (each output step over the steps before it)"));
    m_layer = new QComboBox(this);
    m_layer->setObjectName(QStringLiteral("mapLayer"));
    m_layer->setToolTip(tr("The block (layer) whose attention is shown"));
    m_head = new QComboBox(this);
    m_head->setObjectName(QStringLiteral("mapHead"));
    m_head->setToolTip(tr("One head; the mean of the layer's heads; or attention rollout (Abnar & Zuidema 2020): "
                          "the self-attention of every layer multiplied through, the residual counted as "
                          "attention to oneself"));
    auto* row = new QHBoxLayout(this);
    row->setContentsMargins(0, 0, 0, 0);
    row->addWidget(new QLabel(tr("Map"), this));
    row->addWidget(m_kind);
    row->addWidget(m_layer);
    row->addWidget(m_head);
    row->addStretch(1);
    const QSettings s;
    m_choice.kind = AttentionKind(std::clamp(s.value(QStringLiteral("view/mapKind"), 0).toInt(), 0, 2));
    m_choice.layer = s.value(QStringLiteral("view/mapLayer"), -1).toInt();
    m_choice.head = s.value(QStringLiteral("view/mapHead"), MapChoice::kMean).toInt();
    for (QComboBox* box : {m_kind, m_layer, m_head})
        connect(box, &QComboBox::currentIndexChanged, this, &MapSelector::readBoxes);
    setVisible(false);  // shown for a model with more than one map
}

void MapSelector::setRecord(const AttentionRecord& record) {
    for (int k = 0; k < 3; ++k) {
        m_layers[k] = record.layer_count(kKinds[k]);
        m_heads[k] = record.head_count(kKinds[k]);
    }
    setVisible(hasMapChoice(record));
    fill();
}

void MapSelector::setChoice(const MapChoice& choice) {
    if (choice == m_choice) return;
    m_choice = choice;
    fill();
    QSettings s;
    s.setValue(QStringLiteral("view/mapKind"), int(m_choice.kind));
    s.setValue(QStringLiteral("view/mapLayer"), m_choice.layer);
    s.setValue(QStringLiteral("view/mapHead"), m_choice.head);
    Q_EMIT choiceChanged();
}

void MapSelector::fill() {
    m_filling = true;
    const int k = int(m_choice.kind);
    m_kind->clear();
    for (int i = 0; i < 3; ++i)
        if (m_layers[i] > 0) m_kind->addItem(kindLabel(kKinds[i]), i);
    m_kind->setCurrentIndex(std::max(0, m_kind->findData(k)));
    const int kind = m_kind->currentData().toInt();
    const int layers = m_layers[kind], heads = m_heads[kind];
    m_layer->clear();
    for (int l = 0; l < layers; ++l) m_layer->addItem(tr("layer %1").arg(l), l);
    m_layer->setCurrentIndex(m_choice.layer < 0 ? layers - 1 : std::min(m_choice.layer, layers - 1));
    m_head->clear();
    for (int h = 0; h < heads; ++h) m_head->addItem(tr("head %1").arg(h), h);
    m_head->addItem(tr("mean of heads"), MapChoice::kMean);
    m_head->addItem(tr("rollout"), MapChoice::kRollout);
    if (kKinds[kind] == AttentionKind::cross) {
        auto* model = qobject_cast<QStandardItemModel*>(m_head->model());
        QStandardItem* rollout = model->item(m_head->count() - 1);
        rollout->setEnabled(false);
        rollout->setToolTip(tr("Rollout follows self-attention through the layers: cross-attention's queries and "
                               "keys are not the same positions"));
    }
    int head = m_head->findData(m_choice.head);
    if (head < 0 || (m_choice.head == MapChoice::kRollout && kKinds[kind] == AttentionKind::cross))
        head = m_head->findData(MapChoice::kMean);
    m_head->setCurrentIndex(head);
    m_layer->setEnabled(m_head->currentData().toInt() != MapChoice::kRollout);
    m_filling = false;
}

void MapSelector::readBoxes() {
    if (m_filling || m_kind->count() == 0) return;
    MapChoice c;
    c.kind = kKinds[m_kind->currentData().toInt()];
    const bool kindChanged = c.kind != m_choice.kind;
    // A new kind keeps the layer and head where that kind has them (fill() clamps).
    c.layer = kindChanged ? m_choice.layer : m_layer->currentData().toInt();
    c.head = kindChanged ? m_choice.head : m_head->currentData().toInt();
    if (c.layer == m_layers[int(c.kind)] - 1 && m_choice.layer < 0) c.layer = -1;  // "last" stays last
    setChoice(c);
}

}  // namespace attnviz::ui
