#pragma once
// Translate and inspect: a sentence box (Enter translates with the current
// weights), beam width and N-best list, the heatmap of the selected hypothesis
// and the step inspector for the selected output row (with the step's top-k
// candidates). An optional reference translation is scored teacher-forced
// (or used as a prefix the model continues): its heatmap stands beside the
// model's own, with the probability of each given token and the first step
// where the model would have said something else marked. With a beam wider
// than 1 the search itself is shown as a tree; a node's partial hypothesis
// gets its own heatmap. A subword model's heatmaps show its pieces, or, with
// "Merge subwords", words (columns of a word summed, rows averaged; said above the grid).
// The Precision setting (fp32, int8, bf16; persisted) picks the weights translations run with:
// int8 and bf16 translate with a converted copy of the model made off the GUI thread
// (ui/translate/PrecisionCopy.hpp), so the model being trained and saved stays fp32.
#include <QWidget>
#include <functional>
#include <memory>
#include <optional>

#include "core/decode/translation.hpp"
#include "core/decode/translation_model.hpp"
#include "core/model/inference_precision.hpp"

QT_BEGIN_NAMESPACE
class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QPushButton;
class QScrollArea;
class QSettings;
class QSpinBox;
class QSplitter;
class QTabWidget;
class QToolBar;
QT_END_NAMESPACE

namespace attnviz::ui {

class AttributionView;
class BeamTreeView;
struct HeatmapData;
class HeatmapWidget;
class MapSelector;
class ModelView;
class InterventionPanel;
class StepInspector;
class PositionBiasView;
class PrecisionCopy;
class Translator;

class TranslatePanel : public QWidget {
    Q_OBJECT
public:
    explicit TranslatePanel(QWidget* parent = nullptr);

    void setModel(TranslationModelPtr model);
    TranslationModelPtr model() const { return m_model; }
    void setExamples(const QStringList& examples);
    DecodeOptions decodeOptions() const;
    void setBeamWidth(int width);

    std::shared_ptr<const Translation> translation() const { return m_translation; }
    /// What the heatmap shows: translation(), or its subword pieces merged into words
    /// (core/analysis/subword_merge.hpp) when mergeSubwords() is on. Exports take this one.
    std::shared_ptr<const Translation> shownTranslation() const;
    /// Subword models: show words (a word's columns summed, its rows averaged) instead of pieces.
    bool mergeSubwords() const;
    void setMergeSubwords(bool merge);
    QCheckBox* mergeSubwordsBox() const { return m_mergeBox; }
    /// The model that produced translation() (for export settings).
    TranslationModelPtr translationModel() const { return m_translationModel; }
    int selectedHypothesis() const;
    void selectHypothesis(int index);

    /// A multilingual pretrained model's languages (M2M100/NLLB: both; multilingual Marian: the
    /// target), filled from the model; hidden for a model without a choice.
    QComboBox* sourceLanguageBox() const { return m_srcLang; }
    QComboBox* targetLanguageBox() const { return m_tgtLang; }

    QLineEdit* lineEdit() const { return m_input; }
    /// The reference (or prefix) field; empty: no forced decoding.
    QLineEdit* referenceEdit() const { return m_reference; }
    /// Reference: score the whole given translation; prefix: force it, then let the model go on.
    ForceMode forceMode() const;
    void setForceMode(ForceMode mode);
    /// The forced decoding of the reference (null when there is no reference).
    std::shared_ptr<const Translation> forcedTranslation() const { return m_forced; }
    HeatmapWidget* forcedHeatmap() const { return m_forcedHeatmap; }
    /// The line above the forced heatmap (log-probability, first divergence).
    QString forcedSummary() const;
    HeatmapWidget* heatmap() const { return m_heatmap; }
    /// The beam search tree of the last translation (beam > 1) and the heatmap of its selected node.
    BeamTreeView* beamTreeView() const { return m_tree; }
    HeatmapWidget* nodeHeatmap() const { return m_nodeHeatmap; }
    /// "Attention" and "Beam search tree".
    QTabWidget* viewTabs() const { return m_views; }
    StepInspector* inspector() const { return m_inspector; }
    /// Attribution beside the attention heatmap (ui/analysis/AttributionView.hpp).
    AttributionView* attributionView() const { return m_attribution; }
    /// What-if interventions on the selected step, under the inspector (ui/analysis/InterventionPanel.hpp).
    InterventionPanel* interventionPanel() const { return m_intervention; }
    QToolBar* heatmapToolBar() const { return m_tools; }
    int hypothesisCount() const;
    QString resultText() const;
    /// A Transformer's maps (ui/translate/TranslatePanelMaps.cpp): the "Map" row the heatmap, the step
    /// inspector and the exports follow, and the model view (a tab of viewTabs(), hidden for the RNN).
    MapSelector* mapSelector() const { return m_mapSelector; }
    ModelView* modelView() const { return m_modelView; }
    /// Heads switched off for every translation, forced decoding and what-if (the model view's mask
    /// boxes, issue 39): the model translates through TranslationModel::with_heads_masked (shared
    /// weights, gates of its own); empty: none.
    const std::vector<AttentionMapId>& maskedHeads() const { return m_maskedHeads; }
    /// Sets them, marks them in the model view and translates the sentence again. Heads the model
    /// does not have are refused: the masks are cleared and the status line says why.
    void setMaskedHeads(std::vector<AttentionMapId> heads);
    /// The Precision setting (QSettings "translate/precision"; fp32 by default): the weights
    /// translations, forced decoding, attribution and what-if run with. int8 and bf16 use a copy of
    /// the model converted on the worker thread when a translation first needs it, kept until the
    /// model or the setting changes; the RNN and a model on the GPU translate in fp32 instead, and
    /// the status line says why (statusMessage(), once).
    InferencePrecision precision() const;
    /// Sets the setting (remembered across restarts) and translates the shown sentence again.
    void setPrecision(InferencePrecision precision);
    QComboBox* precisionBox() const { return m_precisionBox; }
    /// What ran, beside the setting: a fallback to fp32 and why (its tooltip), or empty.
    QLabel* precisionNote() const { return m_precisionNote; }
    /// The precision translation() was computed in (fp32 before any translation).
    InferencePrecision translationPrecision() const { return m_translationPrecision; }
    /// The converted copy for the current model and setting (null until a translation asked for
    /// one, and after the model or the setting changed).
    std::shared_ptr<const PrecisionCopy> precisionCopy() const { return m_precisionCopy; }
    /// What the CSV/JSON exports write: shownTranslation() with the chosen map as its primary one
    /// (*hypothesis: the hypothesis' index in it).
    std::shared_ptr<const Translation> exportTranslation(size_t* hypothesis) const;

    /// The panes' splitters: heatmaps | inspector and what-if (translateSplitter), inspector over
    /// what-if (inspectorSplitter), attention over attribution (attributionSplitter).
    QSplitter* splitter() const { return m_splitter; }
    QSplitter* sideSplitter() const { return m_sideSplitter; }
    QSplitter* attentionSplitter() const { return m_attentionSplitter; }
    /// The splitters' positions in QSettings ("translate/splitters/*"); restored ones replace the
    /// first-show defaults (the inspector column a third of the width, at most 520 px).
    void saveLayout(QSettings& settings) const;
    void restoreLayout(const QSettings& settings);

public Q_SLOTS:
    /// Translates the line edit's text (Enter does this).
    void translateInput();
    void translateText(const QString& sentence);

protected:
    void showEvent(QShowEvent* event) override;

Q_SIGNALS:
    void translationReady();
    /// The forced decoding of the reference arrived (forcedTranslation()).
    void forcedReady();
    void translationFailed(const QString& message);
    /// Something for the window's status line (why the Precision setting fell back to fp32).
    void statusMessage(const QString& message);
    /// Another attention map was chosen (mapSelector()).
    void mapChoiceChanged();

private:
    // The constructor's steps (ui/translate/TranslatePanelBuild.cpp).
    QLayout* createInputRow();
    QLayout* createReferenceRow();
    void createResultLabels();
    QWidget* createAttentionPane();
    QWidget* createTreePane();
    QLayout* createModelRow();
    void connectInputs();
    void connectViews();
    void connectTranslators();

    /// The model translations run with, resolved on the worker thread: model() converted to
    /// precision() (the copy made once per model and setting), with the masked heads off.
    std::function<TranslationModelPtr()> decodingSource();
    /// The precision note and the setting's tooltip for the model and the last translation.
    void refreshPrecisionNote();
    /// "   ·   int8 weights" for a heatmap title when `p` is not fp32.
    QString precisionSuffix(InferencePrecision p) const;
    /// Fills the language lists from the model when its languages differ from those shown.
    void fillLanguages();
    void showTranslation(std::shared_ptr<const Translation> t, TranslationModelPtr model);
    void showHypothesis(int index);
    void requestForced(const QString& sentence);
    void showNode(qint64 id);
    /// Scrolls the tree so that its selected node is in view.
    void revealSelectedNode();
    void showForced(std::shared_ptr<const Translation> t);

    /// A heading for the heatmap of `t`: says whether it shows subword pieces or merged words.
    QString levelNote(const Translation& t) const;
    void refreshMerged();
    // The chosen map (ui/translate/TranslatePanelMaps.cpp).
    QWidget* createModelViewPane();
    /// The heatmap of hypothesis `hypothesis` of t for the chosen map, titled (and the map named).
    HeatmapData heatmapFor(const Translation& t, size_t hypothesis, const QString& title) const;
    /// The cross-attention map of the Map row, for the attribution's agreement (a Transformer's
    /// head or layer mean); none for the RNN's one map and for the self-attention kinds.
    std::optional<AttentionMapId> attributionMap(const AttentionRecord& record) const;
    void refreshModelView();
    /// T5's position-bias curves beside the chosen map (side pane) and under the model view, for its
    /// self-attention kinds; hidden for every other model and for cross-attention.
    void refreshPositionBias();
    void showChosenMap();

    QSplitter* m_splitter;
    QSplitter* m_sideSplitter;
    QSplitter* m_attentionSplitter;
    bool m_layoutRestored = false;  ///< restoreLayout() set the splitters: no first-show defaults
    bool m_laidOut = false;         ///< the first show has happened

    MapSelector* m_mapSelector;
    ModelView* m_modelView;
    QWidget* m_modelPane;
    QLabel* m_maskLabel;
    std::vector<AttentionMapId> m_maskedHeads;
    QComboBox* m_precisionBox;
    QLabel* m_precisionNote;
    std::shared_ptr<PrecisionCopy> m_precisionCopy;  ///< decodingSource()'s cache (model, precision)
    InferencePrecision m_translationPrecision = InferencePrecision::fp32;
    InferencePrecision m_forcedPrecision = InferencePrecision::fp32;
    QString m_fallbackSaid;  ///< the last fallback the status line was told (said once)
    /// Updates the model view's marks and the line that lists the masked heads.
    /// The masked heads on the model view and in the line above it (`note` instead, e.g. why masks were cleared).
    void showMaskedHeads(const QString& note = QString());

    Translator* m_translator;
    QCheckBox* m_mergeBox;
    std::shared_ptr<const Translation> m_merged, m_forcedMerged;  ///< merged copies (null: not merging)
    Translator* m_forcer;
    std::shared_ptr<const Translation> m_forced;
    QLineEdit* m_reference;
    QComboBox* m_forceModeBox;
    QWidget* m_forcedPane;
    QLabel* m_forcedLabel;
    HeatmapWidget* m_forcedHeatmap;
    QTabWidget* m_views;
    BeamTreeView* m_tree;
    QScrollArea* m_treeScroll;
    QLabel* m_nodeLabel;
    HeatmapWidget* m_nodeHeatmap;
    TranslationModelPtr m_model, m_translationModel;
    std::shared_ptr<const Translation> m_translation;
    QLineEdit* m_input;
    QPushButton* m_go;
    QComboBox* m_srcLang;
    QComboBox* m_tgtLang;
    QLabel* m_srcLangLabel;
    QLabel* m_tgtLangLabel;
    QSpinBox* m_beam;
    QSpinBox* m_nbest;
    QLabel* m_modelLabel;
    QLabel* m_result;
    QListWidget* m_hypotheses;
    QToolBar* m_tools;
    HeatmapWidget* m_heatmap;
    StepInspector* m_inspector;
    PositionBiasView* m_biasView = nullptr;       ///< beside the chosen head's map (ui/heatmap/PositionBiasView.hpp)
    PositionBiasView* m_modelBiasView = nullptr;  ///< under the model view's grid
    QComboBox* m_taskPrefix = nullptr;            ///< a T5 model's task prefixes (config.json's task_specific_params)
    AttributionView* m_attribution;
    InterventionPanel* m_intervention;
};

}  // namespace attnviz::ui
