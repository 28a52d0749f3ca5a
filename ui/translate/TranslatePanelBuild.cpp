// TranslatePanel's widgets and connections, built in named steps (as Qt's
// application example splits its constructor): the input row, the reference row,
// the attention pane, the beam-tree pane, the layout, the connections.
#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMenu>
#include <QPushButton>
#include <QScrollArea>
#include <QSettings>
#include <QSpinBox>
#include <QSplitter>
#include <QStyle>
#include <QTabWidget>
#include <QToolBar>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>

#include "ui/analysis/AttributionView.hpp"
#include "ui/translate/BeamTreeView.hpp"
#include "ui/common/Format.hpp"
#include "ui/heatmap/HeatmapWidget.hpp"
#include "ui/heatmap/MapSelector.hpp"
#include "ui/analysis/InterventionPanel.hpp"
#include "ui/translate/StepInspector.hpp"
#include "ui/heatmap/PositionBiasView.hpp"
#include "ui/translate/TranslatePanel.hpp"
#include "ui/translate/Translator.hpp"

namespace attnviz::ui {
namespace {
/// A pane of a label over a scrolled heatmap.
QWidget* labelledHeatmap(QLabel* label, HeatmapWidget* heatmap, QWidget* parent) {
    auto* pane = new QWidget(parent);
    auto* layout = new QVBoxLayout(pane);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(label);
    layout->addWidget(scrolled(heatmap, pane), 1);
    return pane;
}
}  // namespace

TranslatePanel::TranslatePanel(QWidget* parent) : QWidget(parent) {
    m_translator = new Translator(this);
    m_forcer = new Translator(this);
    QLayout* inputRow = createInputRow();
    QLayout* referenceRow = createReferenceRow();
    createResultLabels();
    QLayout* modelRow = createModelRow();
    QWidget* attention = createAttentionPane();
    QWidget* tree = createTreePane();
    QWidget* models = createModelViewPane();

    m_views = new QTabWidget(this);
    m_views->addTab(attention, tr("Attention"));
    m_views->addTab(tree, tr("Beam search tree"));
    m_views->setTabVisible(m_views->addTab(models, tr("Model view")), false);  // a Transformer's
    auto* left = new QWidget(this);
    auto* leftLayout = new QVBoxLayout(left);
    leftLayout->setContentsMargins(0, 0, 0, 0);
    leftLayout->addWidget(m_hypotheses);
    leftLayout->addWidget(m_tools);
    leftLayout->addWidget(m_mapSelector);
    leftLayout->addWidget(m_views, 1);
    m_inspector = new StepInspector(this);
    m_intervention = new InterventionPanel(this);
    // The heatmap takes what the window grows by; the inspector and what-if keep the width they
    // have (at least what the inspector's table needs), and each pane can be dragged shut.
    m_sideSplitter = new QSplitter(Qt::Vertical, this);
    m_sideSplitter->setObjectName(QStringLiteral("inspectorSplitter"));
    // The inspector scrolls when the window is short (a laptop's 800 px) rather than cutting its
    // lines: its parts keep their height, the column its table's width.
    auto* inspectorScroll = new QScrollArea(this);
    inspectorScroll->setWidget(m_inspector);
    inspectorScroll->setWidgetResizable(true);
    inspectorScroll->setFrameShape(QFrame::NoFrame);
    inspectorScroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    inspectorScroll->setMinimumWidth(m_inspector->minimumSizeHint().width() +
                                     inspectorScroll->style()->pixelMetric(QStyle::PM_ScrollBarExtent) + 2);
    m_sideSplitter->addWidget(inspectorScroll);
    m_sideSplitter->addWidget(m_intervention);
    m_biasView = new PositionBiasView(this);  // T5's position bias beside the head's map
    m_biasView->setVisible(false);
    m_sideSplitter->addWidget(m_biasView);
    m_sideSplitter->setStretchFactor(0, 3);
    m_sideSplitter->setStretchFactor(1, 2);
    m_splitter = new QSplitter(Qt::Horizontal, this);
    m_splitter->addWidget(left);
    m_splitter->addWidget(m_sideSplitter);
    m_splitter->setStretchFactor(0, 1);
    m_splitter->setStretchFactor(1, 0);
    m_splitter->setObjectName(QStringLiteral("translateSplitter"));

    auto* layout = new QVBoxLayout(this);
    layout->addLayout(inputRow);
    layout->addLayout(referenceRow);
    layout->addLayout(modelRow);
    layout->addWidget(m_result);
    layout->addWidget(m_splitter, 1);

    connectInputs();
    connectViews();
    connectTranslators();
    setModel(nullptr);
}

QLayout* TranslatePanel::createInputRow() {
    m_input = new QLineEdit(this);
    m_input->setClearButtonEnabled(true);
    m_input->setPlaceholderText(tr("Type a sentence and press Enter"));
    m_go = new QPushButton(tr("Translate"), this);
    m_beam = new QSpinBox(this);
    m_beam->setRange(1, 32);
    m_beam->setValue(1);
    m_beam->setToolTip(tr("Beam width: 1 = greedy decoding"));
    m_nbest = new QSpinBox(this);
    m_nbest->setRange(1, 32);
    m_nbest->setValue(1);
    m_nbest->setToolTip(tr("How many hypotheses to list (at most the beam width)"));
    m_mergeBox = new QCheckBox(tr("Merge subwords"), this);
    m_mergeBox->setObjectName(QStringLiteral("mergeSubwords"));
    m_mergeBox->setToolTip(tr("Subword models: show words instead of pieces — the columns of a source word are "
                              "summed, the rows of an output word averaged (each row still sums to 1)"));
    m_mergeBox->setVisible(false);  // shown for subword models
    auto* examples = new QToolButton(this);
    examples->setText(tr("Examples"));
    examples->setPopupMode(QToolButton::InstantPopup);
    examples->setMenu(new QMenu(examples));
    examples->setObjectName(QStringLiteral("examplesButton"));

    m_srcLang = new QComboBox(this);
    m_srcLang->setObjectName(QStringLiteral("sourceLanguage"));
    m_srcLang->setToolTip(tr("The source language (a multilingual pretrained model's codes)"));
    m_tgtLang = new QComboBox(this);
    m_tgtLang->setObjectName(QStringLiteral("targetLanguage"));
    m_tgtLang->setToolTip(tr("The target language: the model writes its code as the first token"));
    m_srcLangLabel = new QLabel(tr("From"), this);
    m_tgtLangLabel = new QLabel(tr("to"), this);
    for (QWidget* w : std::initializer_list<QWidget*>{m_srcLang, m_tgtLang, m_srcLangLabel, m_tgtLangLabel})
        w->setVisible(false);  // shown for a multilingual pretrained model

    m_taskPrefix = new QComboBox(this);
    m_taskPrefix->setObjectName(QStringLiteral("taskPrefix"));
    m_taskPrefix->setToolTip(tr("T5 reads its task from the text: choose one of the model's task prefixes to put it "
                                "before the sentence (config.json's task_specific_params)"));
    m_taskPrefix->setVisible(false);  // shown for a model whose config names task prefixes
    connect(m_taskPrefix, qOverload<int>(&QComboBox::activated), this, [this](int index) {
        if (index <= 0) return;
        QString text = m_input->text();
        for (int i = 1; i < m_taskPrefix->count(); ++i) {  // one prefix at a time: another chosen replaces it
            const QString other = m_taskPrefix->itemData(i).toString();
            if (!other.isEmpty() && text.startsWith(other)) {
                text = text.mid(other.size());
                break;
            }
        }
        m_input->setText(m_taskPrefix->itemData(index).toString() + text);
        m_input->setFocus();
        m_taskPrefix->setCurrentIndex(0);
    });

    auto* row = new QHBoxLayout();
    row->addWidget(m_taskPrefix);
    row->addWidget(m_input, 1);
    row->addWidget(examples);
    row->addWidget(m_srcLangLabel);
    row->addWidget(m_srcLang);
    row->addWidget(m_tgtLangLabel);
    row->addWidget(m_tgtLang);
    row->addWidget(new QLabel(tr("Beam"), this));
    row->addWidget(m_beam);
    row->addWidget(new QLabel(tr("N-best"), this));
    row->addWidget(m_nbest);
    row->addWidget(m_mergeBox);
    row->addWidget(m_go);
    return row;
}

QLayout* TranslatePanel::createReferenceRow() {
    m_reference = new QLineEdit(this);
    m_reference->setClearButtonEnabled(true);
    m_reference->setPlaceholderText(tr("Optional: a translation of your own — see what the model thinks of it, word by word"));
    m_reference->setToolTip(tr("Scored teacher-forced: each given token's probability and rank, its attention, and the "
                               "first step where the model would have said something else"));
    m_forceModeBox = new QComboBox(this);
    m_forceModeBox->addItem(tr("Score it"), int(ForceMode::reference));
    m_forceModeBox->addItem(tr("Continue after it"), int(ForceMode::prefix));
    m_forceModeBox->setToolTip(tr("Score it: the whole reference, then <eos>. Continue after it: the reference is a "
                                  "prefix, and the model goes on from there"));
    auto* row = new QHBoxLayout();
    row->addWidget(new QLabel(tr("Reference"), this));
    row->addWidget(m_reference, 1);
    row->addWidget(m_forceModeBox);
    return row;
}

QLayout* TranslatePanel::createModelRow() {
    // The Precision setting beside the line that describes the model: it is a choice about the
    // model's weights, and the line says which weights translate.
    m_precisionBox = new QComboBox(this);
    m_precisionBox->setObjectName(QStringLiteral("precision"));
    m_precisionBox->addItem(tr("fp32"), QStringLiteral("fp32"));
    m_precisionBox->setItemData(0, tr("The model's own float32 weights"), Qt::ToolTipRole);
    m_precisionBox->addItem(tr("int8"), QStringLiteral("int8"));
    m_precisionBox->setItemData(1, tr("Weights quantized per output channel: about 3× faster on the CPU, maps within "
                                      "a few hundredths of fp32's"),
                                Qt::ToolTipRole);
    m_precisionBox->addItem(tr("bf16"), QStringLiteral("bf16"));
    m_precisionBox->setItemData(2, tr("bfloat16 weights: the CPU's native bf16 instructions where it has them (AVX-512 "
                                      "BF16, AMX)"),
                                Qt::ToolTipRole);
    const int saved = m_precisionBox->findData(QSettings().value(QStringLiteral("translate/precision")).toString());
    m_precisionBox->setCurrentIndex(std::max(0, saved));
    m_precisionNote = new QLabel(this);
    m_precisionNote->setObjectName(QStringLiteral("precisionNote"));
    m_precisionNote->setVisible(false);
    auto* label = new QLabel(tr("Precision"), this);
    label->setBuddy(m_precisionBox);
    auto* row = new QHBoxLayout();
    row->addWidget(m_modelLabel, 1);
    row->addWidget(m_precisionNote);
    row->addWidget(label);
    row->addWidget(m_precisionBox);
    return row;
}

void TranslatePanel::createResultLabels() {
    m_modelLabel = new QLabel(this);
    m_modelLabel->setStyleSheet(QStringLiteral("color: palette(placeholder-text);"));
    m_result = new QLabel(this);
    m_result->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_result->setWordWrap(true);
    QFont big = m_result->font();
    big.setPointSizeF(big.pointSizeF() * 1.3);
    m_result->setFont(big);
    m_hypotheses = new QListWidget(this);
    m_hypotheses->setMaximumHeight(4 * QFontMetrics(font()).height() + 8);
    m_hypotheses->setToolTip(tr("N-best hypotheses, best first: select one to see its own attention"));
    m_tools = new QToolBar(this);
    m_tools->setIconSize(QSize(16, 16));
    m_tools->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
}

QWidget* TranslatePanel::createAttentionPane() {
    m_heatmap = new HeatmapWidget(this);
    m_forcedHeatmap = new HeatmapWidget(this);
    m_forcedHeatmap->setObjectName(QStringLiteral("forcedHeatmap"));
    m_forcedLabel = new QLabel(this);
    m_forcedLabel->setWordWrap(true);
    m_forcedLabel->setTextFormat(Qt::RichText);
    m_forcedPane = labelledHeatmap(m_forcedLabel, m_forcedHeatmap, this);
    m_forcedPane->hide();
    // The attention heatmap over the attribution heatmap: each as wide as the pane (their rows are
    // the same output tokens), the reference's heatmap beside the model's own when there is one.
    auto* heatmaps = new QSplitter(Qt::Horizontal, this);
    heatmaps->addWidget(scrolled(m_heatmap, this));
    heatmaps->addWidget(m_forcedPane);
    heatmaps->setObjectName(QStringLiteral("heatmapSplitter"));
    m_attribution = new AttributionView(this);
    m_attentionSplitter = new QSplitter(Qt::Vertical, this);
    m_attentionSplitter->setObjectName(QStringLiteral("attributionSplitter"));
    m_attentionSplitter->addWidget(heatmaps);
    m_attentionSplitter->addWidget(m_attribution);
    m_attentionSplitter->setStretchFactor(0, 3);
    m_attentionSplitter->setStretchFactor(1, 2);
    return m_attentionSplitter;
}

QWidget* TranslatePanel::createTreePane() {
    m_tree = new BeamTreeView(this);
    m_nodeLabel = new QLabel(this);
    m_nodeLabel->setWordWrap(true);
    m_nodeLabel->setTextFormat(Qt::RichText);
    m_nodeHeatmap = new HeatmapWidget(this);
    m_nodeHeatmap->setObjectName(QStringLiteral("nodeHeatmap"));
    m_nodeHeatmap->clear(tr("Click a node of the tree to see its partial hypothesis and where it looked."));
    auto* treePane = new QSplitter(Qt::Vertical, this);
    m_treeScroll = scrolled(m_tree, treePane);
    treePane->addWidget(m_treeScroll);
    treePane->addWidget(labelledHeatmap(m_nodeLabel, m_nodeHeatmap, treePane));
    treePane->setStretchFactor(0, 3);
    treePane->setStretchFactor(1, 2);
    return treePane;
}

void TranslatePanel::connectInputs() {
    connect(m_input, &QLineEdit::returnPressed, this, &TranslatePanel::translateInput);
    connect(m_go, &QPushButton::clicked, this, &TranslatePanel::translateInput);
    connect(m_reference, &QLineEdit::returnPressed, this, &TranslatePanel::translateInput);
    connect(m_beam, &QSpinBox::valueChanged, this, [this](int beam) {
        m_nbest->setMaximum(beam);
        if (m_translation) translateText(qs(m_translation->input));  // re-run with the new width
    });
    connect(m_nbest, &QSpinBox::valueChanged, this, [this] {
        if (m_translation) translateText(qs(m_translation->input));
    });
    connect(m_mergeBox, &QCheckBox::toggled, this, [this] {
        refreshMerged();
        if (m_translation && !m_translation->empty()) showHypothesis(selectedHypothesis());
        if (m_forced) showForced(m_forced);
    });
    connect(m_precisionBox, &QComboBox::currentIndexChanged, this, [this] {
        QSettings().setValue(QStringLiteral("translate/precision"), m_precisionBox->currentData().toString());
        m_precisionCopy.reset();  // the copy of the other precision is freed
        m_fallbackSaid.clear();   // a fallback of the new choice is said again
        refreshPrecisionNote();
        if (m_translation) translateText(qs(m_translation->input));  // the same sentence with the new weights
    });
    for (QComboBox* box : {m_srcLang, m_tgtLang})
        connect(box, &QComboBox::activated, this, [this] {
            if (m_translation) translateText(qs(m_translation->input));  // the same sentence in the new language
        });
    connect(m_forceModeBox, &QComboBox::currentIndexChanged, this, [this] {
        if (m_translation) requestForced(qs(m_translation->input));
    });
}

void TranslatePanel::connectViews() {
    connect(m_hypotheses, &QListWidget::currentRowChanged, this, &TranslatePanel::showHypothesis);
    // A row clicked on any heatmap shows that step in the inspector.
    for (HeatmapWidget* heatmap : {m_heatmap, m_forcedHeatmap, m_nodeHeatmap})
        connect(heatmap, &HeatmapWidget::rowSelected, this,
                [this, heatmap](int row) { m_inspector->setStep(heatmap->heatmapData(), row); });
    // The attribution's rows are the attention's: a row selected on either is selected on both.
    connect(m_heatmap, &HeatmapWidget::rowSelected, m_attribution->heatmap(), &HeatmapWidget::setSelectedRow);
    connect(m_attribution->heatmap(), &HeatmapWidget::rowSelected, m_heatmap, &HeatmapWidget::setSelectedRow);
    connect(m_attribution, &AttributionView::attributionReady, this,
            [this] { m_attribution->heatmap()->setSelectedRow(m_heatmap->selectedRow()); });
    connect(m_heatmap, &HeatmapWidget::rowSelected, m_intervention, &InterventionPanel::setStep);
    connect(m_tree, &BeamTreeView::nodeSelected, this, &TranslatePanel::showNode);
    // The selected node stays in view, also when the tree's tab is shown later. Queued: a new
    // tree's size reaches the scroll area's range only after a layout pass.
    connect(m_tree, &BeamTreeView::nodeSelected, this, &TranslatePanel::revealSelectedNode, Qt::QueuedConnection);
    connect(m_views, &QTabWidget::currentChanged, this, &TranslatePanel::revealSelectedNode, Qt::QueuedConnection);
}

void TranslatePanel::connectTranslators() {
    connect(m_forcer, &Translator::translated, this,
            [this](quint64, std::shared_ptr<const Translation> t, TranslationModelPtr model) {
                m_forcedPrecision = model ? inference_precision(*model->network()) : InferencePrecision::fp32;
                showForced(t);
            });
    connect(m_forcer, &Translator::failed, this, [this](quint64, const QString& message) {
        m_forced.reset();
        m_forcedHeatmap->clear(message);
        m_forcedLabel->setText(tr("<span style='color:#b00020'>%1</span>").arg(message.toHtmlEscaped()));
        m_forcedPane->show();
    });
    connect(m_translator, &Translator::translated, this,
            [this](quint64, std::shared_ptr<const Translation> t, TranslationModelPtr model) { showTranslation(t, model); });
    connect(m_translator, &Translator::failed, this, [this](quint64, const QString& message) {
        m_result->setText(tr("<span style='color:#b00020'>%1</span>").arg(message.toHtmlEscaped()));
        Q_EMIT translationFailed(message);
    });
}

}  // namespace attnviz::ui
