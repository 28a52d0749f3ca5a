// TranslatePanel and a Transformer's many attention maps: the "Map" row that the
// heatmaps, the step inspector and the exports follow, and the model view tab
// (every layer and head as thumbnails; a click opens one in the heatmap). A
// model with one map (the RNN) hides both and shows what it always did.
#include <QCheckBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QScrollArea>
#include <QSettings>
#include <QTabWidget>
#include <QVBoxLayout>

#include "ui/common/Format.hpp"
#include "ui/heatmap/HeatmapWidget.hpp"
#include "ui/heatmap/MapSelector.hpp"
#include "ui/heatmap/ModelView.hpp"
#include "ui/heatmap/PositionBiasView.hpp"
#include "ui/translate/TranslatePanel.hpp"

namespace attnviz::ui {

QWidget* TranslatePanel::createModelViewPane() {
    m_mapSelector = new MapSelector(this);
    m_modelView = new ModelView(this);
    auto* note = new QLabel(tr("Layers × heads of the chosen kind: click one to open it large, its corner box to mask it."), this);
    note->setWordWrap(true);
    note->setToolTip(tr("Every layer (rows) and head (columns) of the kind chosen in the Map row, the mean of each "
                        "layer's heads last; for self-attention the rollout through the layers (Abnar & Zuidema "
                        "2020). A click opens the map in the Attention tab, with strips, values and zoom."));
    auto* exportButton = new QPushButton(tr("Export grid…"), this);
    exportButton->setObjectName(QStringLiteral("exportModelView"));
    exportButton->setToolTip(tr("Save the whole grid as one picture (PNG or SVG)"));
    auto* sortBox = new QCheckBox(tr("Sort by importance"), this);
    sortBox->setObjectName(QStringLiteral("sortHeadsByImportance"));
    sortBox->setToolTip(tr("Each layer's heads in decreasing importance (Michel et al. 2019), once heads are "
                           "measured (the Heads panel, or training with head statistics)"));
    auto* unmask = new QPushButton(tr("Unmask all"), this);
    unmask->setObjectName(QStringLiteral("unmaskHeads"));
    unmask->setToolTip(tr("Switch every masked head on again and translate once more"));
    m_maskLabel = new QLabel(this);
    m_maskLabel->setObjectName(QStringLiteral("maskedHeadsLabel"));
    // One line, cut at the pane's edge rather than wrapped (the whole list in its tooltip): the
    // grid below never moves under the pointer as heads are masked.
    m_maskLabel->setWordWrap(false);
    m_maskLabel->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Fixed);
    m_maskLabel->setText(tr("<span style='color:gray'>No head masked.</span>"));
    auto* status = new QLabel(this);
    status->setObjectName(QStringLiteral("modelViewStatus"));
    QScrollArea* scroll = scrolled(m_modelView, this);
    // The thumbnails fit the width: a scroll bar that came and went with the height would change it.
    scroll->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOn);
    m_modelPane = new QWidget(this);
    auto* top = new QHBoxLayout();
    top->addWidget(note, 1);
    top->addWidget(sortBox);
    top->addWidget(unmask);
    top->addWidget(exportButton);
    auto* layout = new QVBoxLayout(m_modelPane);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addLayout(top);
    layout->addWidget(m_maskLabel);
    layout->addWidget(status);
    layout->addWidget(scroll, 1);
    m_modelBiasView = new PositionBiasView(this);  // T5's position bias of the chosen head, under the grid
    m_modelBiasView->setObjectName(QStringLiteral("modelPositionBiasView"));
    m_modelBiasView->setFixedHeight(m_modelBiasView->sizeHint().height());
    m_modelBiasView->setVisible(false);
    layout->addWidget(m_modelBiasView);
    status->hide();

    connect(m_mapSelector, &MapSelector::choiceChanged, this, &TranslatePanel::showChosenMap);
    connect(sortBox, &QCheckBox::toggled, m_modelView, &ModelView::setSortByImportance);
    connect(unmask, &QPushButton::clicked, this, [this] { setMaskedHeads({}); });
    connect(m_modelView, &ModelView::maskToggled, this, [this](const AttentionMapId& id) {
        std::vector<AttentionMapId> heads = m_maskedHeads;
        const auto at = std::find(heads.begin(), heads.end(), id);
        if (at != heads.end()) heads.erase(at);
        else heads.push_back(id);
        setMaskedHeads(std::move(heads));
    });
    connect(m_modelView, &ModelView::mapClicked, this, [this](const MapChoice& c) {
        m_mapSelector->setChoice(c);
        m_views->setCurrentIndex(0);  // the Attention tab: the map large, with strips, values and zoom
    });
    connect(exportButton, &QPushButton::clicked, this, [this, status] {
        QSettings settings;
        const QString dir = settings.value(QStringLiteral("dirs/export")).toString();
        QString path = QFileDialog::getSaveFileName(this, tr("Export model view"),
                                                    (dir.isEmpty() ? QString() : dir + QLatin1Char('/')) +
                                                        QStringLiteral("model-view.png"),
                                                    tr("PNG image (*.png);;SVG vector image (*.svg)"));
        if (path.isEmpty()) return;
        if (QFileInfo(path).suffix().isEmpty()) path += QStringLiteral(".png");
        settings.setValue(QStringLiteral("dirs/export"), QFileInfo(path).absolutePath());
        QString error;
        const bool ok = m_modelView->exportTo(path, 2.0, &error);
        status->setText(ok ? tr("Exported %1").arg(path) : tr("<span style='color:#b00020'>%1</span>").arg(error.toHtmlEscaped()));
        status->show();
    });
    return m_modelPane;
}

HeatmapData TranslatePanel::heatmapFor(const Translation& t, size_t hypothesis, const QString& title) const {
    return mapHeatmapData(t, hypothesis, m_mapSelector->choice(), title);
}

std::optional<AttentionMapId> TranslatePanel::attributionMap(const AttentionRecord& record) const {
    if (!hasMapChoice(record)) return std::nullopt;
    const MapChoice c = clampChoice(m_mapSelector->choice(), record);
    if (c.kind != AttentionKind::cross) return std::nullopt;
    return AttentionMapId{AttentionKind::cross, c.layer, c.head >= 0 ? c.head : -1};
}

void TranslatePanel::refreshModelView() {
    const std::shared_ptr<const Translation> shown = shownTranslation();
    const size_t index = size_t(selectedHypothesis());
    const bool maps = shown && shown->attention_available && index < shown->hypotheses.size() &&
                      hasMapChoice(shown->hypotheses[index].attention);
    m_views->setTabVisible(m_views->indexOf(m_modelPane), maps);
    if (!maps) {
        m_mapSelector->setRecord(AttentionRecord{});
        m_modelView->clear();
        return;
    }
    const AttentionRecord& record = shown->hypotheses[index].attention;
    m_mapSelector->setRecord(record);
    const MapChoice c = clampChoice(m_mapSelector->choice(), record);
    m_modelView->setTranslation(shown, index, c.kind,
                                tr("%1 attention · “%2” → “%3” · %4 layers × %5 heads")
                                    .arg(kindLabel(c.kind), qs(shown->input), qs(shown->hypotheses[index].text))
                                    .arg(record.layer_count(c.kind))
                                    .arg(record.head_count(c.kind)));
    m_modelView->setSelected(c);
    refreshPositionBias();
}

void TranslatePanel::refreshPositionBias() {
    const MapChoice c = m_mapSelector->choice();
    const bool self = c.kind == AttentionKind::encoder_self || c.kind == AttentionKind::decoder_self;
    for (PositionBiasView* view : {m_biasView, m_modelBiasView}) {
        if (!view) continue;
        view->setChoice(c.kind, c.head >= 0 ? c.head : -1);
        view->setVisible(self && view->hasCurves());
    }
}

void TranslatePanel::showChosenMap() {
    if (m_translation && !m_translation->empty()) showHypothesis(selectedHypothesis());
    if (m_forced) showForced(m_forced);
    refreshPositionBias();
    Q_EMIT mapChoiceChanged();
}

std::shared_ptr<const Translation> TranslatePanel::exportTranslation(size_t* hypothesis) const {
    std::shared_ptr<const Translation> shown = shownTranslation();
    *hypothesis = size_t(selectedHypothesis());
    if (!shown || *hypothesis >= shown->hypotheses.size() || !hasMapChoice(shown->hypotheses[*hypothesis].attention))
        return shown;
    auto view = std::make_shared<const Translation>(mapTranslation(*shown, *hypothesis, m_mapSelector->choice()));
    *hypothesis = 0;
    return view;
}

}  // namespace attnviz::ui
