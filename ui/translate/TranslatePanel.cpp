#include "ui/translate/TranslatePanel.hpp"

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
#include <QShowEvent>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTimer>
#include <QToolBar>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>
#include <utility>

#include "core/decode/beam_tree.hpp"
#include "core/analysis/subword_merge.hpp"
#include "core/config/pretrained_config.hpp"
#include "core/text/pretrained_tokenizer.hpp"
#include "ui/analysis/AttributionView.hpp"
#include "ui/translate/BeamTreeView.hpp"
#include "ui/common/Format.hpp"
#include "ui/heatmap/HeatmapWidget.hpp"
#include "ui/analysis/InterventionPanel.hpp"
#include "ui/heatmap/MapChoice.hpp"
#include "ui/heatmap/ModelView.hpp"
#include "ui/heatmap/PositionBiasView.hpp"
#include "core/config/t5_config.hpp"
#include "core/model/t5_model.hpp"
#include "ui/translate/PrecisionCopy.hpp"
#include "ui/translate/StepInspector.hpp"
#include "ui/translate/Translator.hpp"

namespace attnviz::ui {
namespace {
constexpr int kTopK = 5;  // candidates per step for the step inspector
}  // namespace

void TranslatePanel::fillLanguages() {
    const auto fill = [this](QComboBox* box, QLabel* label, const std::vector<std::string>& languages,
                             const std::string& preferred) {
        const QStringList codes = toQStringList(languages);
        QStringList shown;
        for (int i = 1; i < box->count(); ++i) shown << box->itemData(i).toString();
        if (codes != shown || box->count() == 0) {  // another model's (a snapshot of the same model keeps the choice)
            box->clear();
            // First "as typed": no code added (a Marian model reads a >>xxx<< typed in the sentence;
            // M2M100 and NLLB take their tokenizer's default), then the model's codes.
            box->addItem(tr("default"), QString());
            box->setItemData(0, tr("No language code added: the model's default, or a code typed in the sentence"),
                             Qt::ToolTipRole);
            for (const QString& code : codes) box->addItem(code, code);
            const int index = preferred.empty() ? -1 : box->findData(qs(preferred));
            box->setCurrentIndex(index >= 0 ? index : 0);
        }
        box->setVisible(!codes.isEmpty());
        label->setVisible(!codes.isEmpty());
    };
    const PretrainedTokenizer* tokenizer = m_model ? m_model->tokenizer().pretrained().get() : nullptr;
    fill(m_srcLang, m_srcLangLabel, m_model ? m_model->source_languages() : std::vector<std::string>{},
         tokenizer ? tokenizer->default_source_language() : std::string());
    fill(m_tgtLang, m_tgtLangLabel, m_model ? m_model->target_languages() : std::vector<std::string>{},
         tokenizer ? tokenizer->default_target_language() : std::string());
    m_srcLangLabel->setText(m_srcLang->isVisibleTo(this) ? tr("From") : QString());
    m_tgtLangLabel->setText(m_srcLang->isVisibleTo(this) ? tr("to") : tr("To"));
}

void TranslatePanel::setModel(TranslationModelPtr model) {
    if (model != m_model) m_precisionCopy.reset();  // a converted copy is of the old weights: freed
    m_model = std::move(model);
    refreshPrecisionNote();
    if (m_model && !m_maskedHeads.empty()) {
        try {  // the masks carry over to the next snapshot of the same network, not to another network
            HeadGates::mask(m_model->network()->head_groups(), m_maskedHeads);
        } catch (const std::exception& e) {
            m_maskedHeads.clear();
            showMaskedHeads(tr("Masks cleared: %1").arg(qs(e.what()).toHtmlEscaped()));
        }
    }
    m_mergeBox->setVisible(m_model && m_model->level() == TokenLevel::subword);
    fillLanguages();
    {
        // T5: each head's relative position bias (-max_distance..max_distance) and the task prefixes.
        std::vector<PositionBiasCurve> curves;
        m_taskPrefix->clear();
        m_taskPrefix->addItem(tr("Task…"));
        if (m_model && m_model->config().is_pretrained() && m_model->config().pretrained) {
            const PretrainedConfig& pc = m_model->config().pretrained->model;
            if (pc.t5) curves = position_bias_curves(*m_model->network(), std::min<int64_t>(pc.t5->relative_max_distance, 512));
            for (const auto& [task, prefix] : task_prefixes(pc)) m_taskPrefix->addItem(qs(task), qs(prefix));
        }
        m_taskPrefix->setVisible(m_taskPrefix->count() > 1);
        m_biasView->setCurves(curves);
        m_modelView->setPositionBias(curves);  // each self-attention thumbnail's strip
        m_modelBiasView->setCurves(std::move(curves));
        refreshPositionBias();
    }
    if (!m_model) {
        m_modelLabel->setText(tr("No model yet: press Train, or open a checkpoint (Ctrl+O)."));
        return;
    }
    const TrainHistory& h = m_model->history();
    const ModelConfig& c = m_model->config();
    if (c.is_pretrained()) {
        m_modelLabel->setText(tr("Model: %1 · pretrained %2 · weights after epoch %3, batch %4")
                                  .arg(qs(m_model->corpus_name()), qs(c.pretrained->model.describe()))
                                  .arg(h.epochs_done)
                                  .arg(h.global_step));
        return;
    }
    if (c.is_transformer()) {
        m_modelLabel->setText(tr("Model: %1 · Transformer, %2 × %3 wide, %4 heads, feed-forward %5 · weights "
                                 "after epoch %6, batch %7")
                                  .arg(qs(m_model->corpus_name()))
                                  .arg(c.num_layers == 1 ? tr("1 block") : tr("%1 blocks").arg(c.num_layers))
                                  .arg(c.hidden_size)
                                  .arg(c.num_heads)
                                  .arg(c.ffn_size)
                                  .arg(h.epochs_done)
                                  .arg(h.global_step));
        return;
    }
    m_modelLabel->setText(tr("Model: %1 · %2 scoring, %3 × %4 %5 · weights after epoch %6, batch %7")
                              .arg(qs(m_model->corpus_name()), qs(to_string(m_model->config().scoring)))
                              .arg(m_model->config().num_layers)
                              .arg(m_model->config().hidden_size)
                              .arg(qs(to_string(m_model->config().cell)).toUpper())
                              .arg(h.epochs_done)
                              .arg(h.global_step));
}

void TranslatePanel::saveLayout(QSettings& settings) const {
    settings.setValue(QStringLiteral("translate/splitters/main"), m_splitter->saveState());
    settings.setValue(QStringLiteral("translate/splitters/side"), m_sideSplitter->saveState());
    settings.setValue(QStringLiteral("translate/splitters/attention"), m_attentionSplitter->saveState());
}

void TranslatePanel::restoreLayout(const QSettings& settings) {
    bool restored = false;
    for (auto [key, splitter] : {std::pair{"translate/splitters/main", m_splitter},
                                 std::pair{"translate/splitters/side", m_sideSplitter},
                                 std::pair{"translate/splitters/attention", m_attentionSplitter}})
        restored = splitter->restoreState(settings.value(QLatin1String(key)).toByteArray()) || restored;
    m_layoutRestored = m_layoutRestored || restored;
}

void TranslatePanel::showEvent(QShowEvent* event) {
    QWidget::showEvent(event);
    if (m_laidOut) return;
    m_laidOut = true;
    if (m_layoutRestored) return;
    // First shown: the heatmaps get two thirds of the width, the inspector column the rest (at
    // least what its table needs, at most 520 px); the attention heatmap 60% of the height.
    const int width = m_splitter->width() - m_splitter->handleWidth();
    const int side = std::clamp(width / 3, m_sideSplitter->minimumSizeHint().width(), std::max(520, m_sideSplitter->minimumSizeHint().width()));
    m_splitter->setSizes({width - side, side});
    const int height = m_attentionSplitter->height() - m_attentionSplitter->handleWidth();
    if (height > 0) m_attentionSplitter->setSizes({height * 3 / 5, height - height * 3 / 5});
}

void TranslatePanel::setExamples(const QStringList& examples) {
    auto* button = findChild<QToolButton*>(QStringLiteral("examplesButton"));
    QMenu* menu = button->menu();
    menu->clear();
    for (const QString& e : examples)
        menu->addAction(e, this, [this, e] {
            m_input->setText(e);
            translateInput();
        });
    button->setEnabled(!examples.isEmpty());
    if (!examples.isEmpty()) m_input->setPlaceholderText(tr("Type a sentence and press Enter, e.g. “%1”").arg(examples.front()));
}

DecodeOptions TranslatePanel::decodeOptions() const {
    // A pretrained model's generation config (length limit, length penalty, forced and barred tokens)
    // as generate() reads it; the beam and N-best are the panel's.
    DecodeOptions o = m_model ? m_model->decode_defaults() : DecodeOptions{};
    o.source_lang = ss(m_srcLang->currentData().toString());
    o.target_lang = ss(m_tgtLang->currentData().toString());
    o.beam_size = m_beam->value();
    o.num_hypotheses = std::min(m_nbest->value(), m_beam->value());
    o.top_k = kTopK;
    o.beam_tree = o.beam_size > 1;
    return o;
}

void TranslatePanel::setBeamWidth(int width) {
    m_beam->setValue(width);
    m_nbest->setValue(width);
}

void TranslatePanel::translateInput() { translateText(m_input->text()); }

void TranslatePanel::translateText(const QString& sentence) {
    if (m_input->text() != sentence) m_input->setText(sentence);
    if (!m_model) {
        const QString message = tr("There is no model yet: press Train, or open a checkpoint.");
        m_result->setText(message);
        Q_EMIT translationFailed(message);
        return;
    }
    m_translator->request(decodingSource(), sentence, decodeOptions());
    requestForced(sentence);
}

std::function<TranslationModelPtr()> TranslatePanel::decodingSource() {
    if (!m_model) return [] { return TranslationModelPtr(); };
    const InferencePrecision wanted = precision();
    if (!m_precisionCopy || m_precisionCopy->model() != m_model || m_precisionCopy->wanted() != wanted)
        m_precisionCopy = std::make_shared<PrecisionCopy>(m_model, wanted);
    // The copy is made (once) by the first job that runs, on the worker thread.
    return [copy = m_precisionCopy, masks = m_maskedHeads] { return copy->resolve(masks); };
}

InferencePrecision TranslatePanel::precision() const {
    return parse_inference_precision(ss(m_precisionBox->currentData().toString()));
}

void TranslatePanel::setPrecision(InferencePrecision precision) {
    m_precisionBox->setCurrentIndex(m_precisionBox->findData(qs(precision_name(precision))));
}

QString TranslatePanel::precisionSuffix(InferencePrecision p) const {
    if (p == InferencePrecision::fp32) return {};
    return tr("   ·   %1 weights").arg(qs(precision_name(p)));
}

void TranslatePanel::refreshPrecisionNote() {
    const InferencePrecision wanted = precision();
    QString tip = tr("<p>The weights translations run with (forced decoding, attribution and what-if too).</p>"
                     "<p><b>fp32</b>: the model's own float32 weights.<br>"
                     "<b>int8</b>: weights quantized per output channel; about 3× faster on the CPU, maps within a "
                     "few hundredths of fp32's.<br>"
                     "<b>bf16</b>: bfloat16 weights; the CPU's native bf16 instructions where it has them "
                     "(AVX-512 BF16, AMX), a slower exact path elsewhere.</p>"
                     "<p>int8 and bf16 translate with a converted copy made when first needed: the model you train "
                     "and save stays fp32. They run on the CPU only (a model on the GPU translates in fp32) and "
                     "not for the RNN.</p>");
    // Why a translation with this model would run in fp32: known at once for the RNN and the GPU,
    // after the first translation when the conversion itself failed.
    QString reason;
    if (m_model && wanted != InferencePrecision::fp32) {
        if (m_precisionCopy && m_precisionCopy->model() == m_model && m_precisionCopy->wanted() == wanted)
            reason = qs(m_precisionCopy->fallbackReason());
        else
            reason = qs(PrecisionCopy(m_model, wanted).fallbackReason());  // the checks that need no work
    }
    if (m_model && !m_model->device().is_cpu())
        tip += tr("<p><i>This model is on %1: it translates in fp32.</i></p>").arg(qs(m_model->device().str()));
    m_precisionBox->setToolTip(tip);
    if (reason.isEmpty()) {
        m_precisionNote->clear();
        m_precisionNote->setToolTip(QString());
        m_precisionNote->setVisible(false);
    } else {
        m_precisionNote->setText(tr("<span style='color:#b35900'>falls back to fp32</span>"));
        m_precisionNote->setToolTip(reason);
        m_precisionNote->setVisible(true);
    }
}

void TranslatePanel::setMaskedHeads(std::vector<AttentionMapId> heads) {
    QString note;
    if (m_model && !heads.empty()) {
        try {
            HeadGates::mask(m_model->network()->head_groups(), heads);
        } catch (const std::exception& e) {
            heads.clear();
            note = tr("Masks cleared: %1").arg(qs(e.what()).toHtmlEscaped());
        }
    }
    m_maskedHeads = std::move(heads);  // the masked view of the model is made for them on the worker thread
    showMaskedHeads(note);
    if (m_model && !m_input->text().trimmed().isEmpty()) translateInput();
}

void TranslatePanel::showMaskedHeads(const QString& note) {
    m_modelView->setMaskedHeads(m_maskedHeads);
    QStringList names;
    for (const AttentionMapId& id : m_maskedHeads) names << qs(head_text(id));
    // Always one line, so that the grid below never moves under the pointer when a head is masked.
    m_maskLabel->setToolTip(names.join(QStringLiteral(", ")));
    m_maskLabel->setText(!note.isEmpty()            ? note
                         : m_maskedHeads.empty() ? tr("<span style='color:gray'>No head masked.</span>")
                                                 : tr("<span style='color:#b00020'>%1 masked</span> for every translation: %2")
                                                       .arg(m_maskedHeads.size() == 1 ? tr("1 head")
                                                                                      : tr("%1 heads").arg(m_maskedHeads.size()),
                                                            names.join(QStringLiteral(", "))));
}

void TranslatePanel::showNode(qint64 id) {
    const auto tree = m_tree->tree();
    if (!tree || id < 0 || id >= qint64(tree->nodes.size())) {
        m_nodeLabel->setText(QString());
        m_nodeHeatmap->clear(tree ? tr("Click a node of the tree to see its partial hypothesis and where it looked.")
                                  : tr("Translate with a beam wider than 1 to see the search tree."));
        return;
    }
    const BeamNode& n = tree->nodes[size_t(id)];
    Translation partial;
    partial.src_tokens = tree->source;
    partial.attention_available = tree->attention_available;
    partial.hypotheses.push_back(tree->partial_hypothesis(id));
    const Hypothesis& h = partial.hypotheses.front();
    m_nodeLabel->setText(tr("<b>%1</b> — %2 at step %3 · log P %4 · score %5")
                             .arg(qs(h.text).toHtmlEscaped(), qs(to_string(n.status)))
                             .arg(n.step + 1)
                             .arg(n.log_prob, 0, 'f', 3)
                             .arg(n.score, 0, 'f', 3));
    if (!partial.attention_available) {
        m_nodeHeatmap->clear(tr("This model has no attention (scoring “none”): there is nothing to show."));
        return;
    }
    QString title = tr("Partial hypothesis: %1").arg(qs(h.text));
    // A Transformer's nodes keep one map, not every layer and head: say which, whatever the Map row shows.
    if (m_translation && !m_translation->empty() && hasMapChoice(m_translation->best().attention))
        title += tr("   ·   %1 (the search tree keeps this map for each node)").arg(qs(describe(tree->attention_map)));
    HeatmapData data = heatmapFor(partial, 0, title);
    m_nodeHeatmap->setHeatmapData(data);
    m_nodeHeatmap->setSelectedRow(data.rows() - 1);
}

ForceMode TranslatePanel::forceMode() const { return ForceMode(m_forceModeBox->currentData().toInt()); }

void TranslatePanel::setForceMode(ForceMode mode) { m_forceModeBox->setCurrentIndex(m_forceModeBox->findData(int(mode))); }

void TranslatePanel::requestForced(const QString& sentence) {
    if (!m_model || m_reference->text().trimmed().isEmpty()) {
        m_forced.reset();
        m_forcedPane->hide();
        return;
    }
    DecodeOptions o = decodeOptions();
    o.beam_size = o.num_hypotheses = 1;
    o.top_k = kTopK;
    m_forcer->requestForced(decodingSource(), sentence, m_reference->text(), forceMode(), o);
}

void TranslatePanel::showForced(std::shared_ptr<const Translation> t) {
    m_forced = std::move(t);
    m_forcedPane->show();
    if (!m_forced || m_forced->empty()) {
        m_forcedLabel->setText(tr("(empty input)"));
        m_forcedHeatmap->clear(tr("Nothing to show for an empty sentence."));
        Q_EMIT forcedReady();
        return;
    }
    const Hypothesis& h = m_forced->best();
    m_forcedLabel->setText(forcedSummary());
    if (!m_forced->attention_available) {
        m_forcedHeatmap->clear(tr("This model has no attention (scoring “none”): there is nothing to show."));
    } else {
        refreshMerged();
        const Translation& shown = m_forcedMerged ? *m_forcedMerged : *m_forced;
        HeatmapData data = heatmapFor(
            shown, 0,
            (forceMode() == ForceMode::reference ? tr("Reference: %1") : tr("Prefix, then the model: %1")).arg(qs(h.text)) +
                levelNote(shown) + precisionSuffix(m_forcedPrecision));
        m_forcedHeatmap->setHeatmapData(data);
        m_forcedHeatmap->setSelectedRow(data.highlightRow);
    }
    Q_EMIT forcedReady();
}

QString TranslatePanel::forcedSummary() const {
    if (!m_forced || m_forced->empty()) return {};
    const Hypothesis& h = m_forced->best();
    const size_t given = size_t(std::max<int64_t>(0, h.forced_steps));
    QString text = forceMode() == ForceMode::reference
                       ? tr("The model gives this translation log P = <b>%1</b> (%2 tokens with &lt;eos&gt;, mean "
                            "p per token %3).")
                             .arg(h.log_prob, 0, 'f', 3)
                             .arg(h.ids.size())
                             .arg(h.ids.empty() ? 0.0 : std::exp(h.log_prob / double(h.ids.size())), 0, 'f', 3)
                       : tr("After the %1 given tokens the model goes on: <b>%2</b>.").arg(given).arg(qs(h.text).toHtmlEscaped());
    if (h.first_divergence < 0)
        text += tr(" At every given step it is the model's own first choice.");
    else {
        const auto step = size_t(h.first_divergence);
        QString preferred;
        if (step < h.top_k.size() && !h.top_k[step].empty())
            preferred = tr(" (it preferred “%1”)").arg(displayToken(qs(h.top_k[step].front().token)).toHtmlEscaped());
        text += tr(" <span style='color:#b00020'>First step where the model would say something else: %1, “%2”%3.</span>")
                    .arg(step + 1)
                    .arg(step < h.tokens.size() ? displayToken(qs(h.tokens[step])).toHtmlEscaped() : QString())
                    .arg(preferred);
    }
    return text;
}

void TranslatePanel::showTranslation(std::shared_ptr<const Translation> t, TranslationModelPtr model) {
    m_translation = std::move(t);
    m_translationModel = std::move(model);
    m_translationPrecision =
        m_translationModel ? inference_precision(*m_translationModel->network()) : InferencePrecision::fp32;
    refreshPrecisionNote();
    const QString fallback = m_precisionNote->toolTip();
    if (!fallback.isEmpty() && m_translationPrecision != precision() && fallback != m_fallbackSaid) {
        m_fallbackSaid = fallback;  // said once, not at every translation
        Q_EMIT statusMessage(fallback);
    }
    refreshMerged();
    m_hypotheses->blockSignals(true);
    m_hypotheses->clear();
    for (const Hypothesis& h : m_translation->hypotheses)
        m_hypotheses->addItem(tr("%1   (score %2, log P %3)").arg(qs(h.text)).arg(h.score, 0, 'f', 3).arg(h.log_prob, 0, 'f', 3));
    m_hypotheses->blockSignals(false);
    m_tree->setTree(m_translation->beam_tree);
    m_views->setTabText(1, m_translation->beam_tree ? tr("Beam search tree (%1 nodes)").arg(m_translation->beam_tree->nodes.size())
                                                    : tr("Beam search tree"));
    if (m_translation->beam_tree && !m_translation->beam_tree->finished.empty())
        m_tree->setSelectedNode(m_translation->beam_tree->finished.front());
    else
        showNode(-1);
    if (m_translation->empty()) {
        m_result->setText(tr("(empty input)"));
        m_heatmap->clear(tr("Nothing to show for an empty sentence."));
        m_inspector->clear();
        refreshModelView();
        m_attribution->setTranslation(nullptr, nullptr, 0);
        m_intervention->setTranslation(nullptr, nullptr, 0);
    } else {
        m_hypotheses->setCurrentRow(0);
        showHypothesis(0);
    }
    Q_EMIT translationReady();
}

void TranslatePanel::revealSelectedNode() {
    const QRect box = m_tree->nodeRect(m_tree->selectedNode());
    if (box.isNull()) return;
    const QWidget* view = m_treeScroll->viewport();
    m_treeScroll->ensureVisible(box.center().x(), box.center().y(), std::min(view->width() / 3, 2 * box.width()),
                                view->height() / 3);
}

void TranslatePanel::showHypothesis(int index) {
    if (!m_translation || index < 0 || index >= int(m_translation->hypotheses.size())) return;
    const Hypothesis& h = m_translation->hypotheses[index];
    refreshModelView();
    QString text = QStringLiteral("→ <b>%1</b>").arg(qs(h.text).toHtmlEscaped());
    if (!m_translation->unknown.empty())
        text += tr(" <span style='color:#c0392b'>(unknown: %1, read as &lt;unk&gt;)</span>")
                    .arg(toQStringList(m_translation->unknown).join(QStringLiteral(", ")).toHtmlEscaped());
    m_result->setText(text);
    if (!m_translation->attention_available) {
        m_heatmap->clear(tr("This model has no attention (scoring “none”): there is nothing to show."));
        m_inspector->clear();
        m_attribution->setTranslation(nullptr, nullptr, 0);
        m_intervention->setTranslation(nullptr, nullptr, 0);
        return;
    }
    m_attribution->setMergeSubwords(m_merged != nullptr);
    m_attribution->setTranslation(m_translationModel, m_translation, index,
                                  m_merged ? tr("   ·   subwords merged into words: a word's pieces summed")
                                           : levelNote(*m_translation),
                                  attributionMap(h.attention));
    const Translation& shown = m_merged ? *m_merged : *m_translation;
    HeatmapData data = heatmapFor(shown, size_t(index), qs(m_translation->input) + QStringLiteral("  →  ") + qs(h.text) +
                                                            levelNote(shown) + precisionSuffix(m_translationPrecision));
    const int row = std::max(0, m_heatmap->selectedRow());
    m_heatmap->setHeatmapData(data);
    m_heatmap->setSelectedRow(std::min(row, data.rows() - 1));
    m_inspector->setStep(m_heatmap->heatmapData(), m_heatmap->selectedRow());
    // Interventions change the pieces' own rows: not offered on merged words.
    m_intervention->setTranslation(m_merged ? nullptr : m_translationModel, m_translation, index);
    m_intervention->setStep(m_heatmap->selectedRow());
}

int TranslatePanel::selectedHypothesis() const { return std::max(0, m_hypotheses->currentRow()); }

void TranslatePanel::selectHypothesis(int index) { m_hypotheses->setCurrentRow(index); }

int TranslatePanel::hypothesisCount() const { return m_translation ? int(m_translation->hypotheses.size()) : 0; }

QString TranslatePanel::resultText() const {
    return (m_translation && !m_translation->empty()) ? qs(m_translation->hypotheses[selectedHypothesis()].text) : QString();
}

bool TranslatePanel::mergeSubwords() const { return !m_mergeBox->isHidden() && m_mergeBox->isChecked(); }

void TranslatePanel::setMergeSubwords(bool merge) { m_mergeBox->setChecked(merge); }

std::shared_ptr<const Translation> TranslatePanel::shownTranslation() const {
    return m_merged ? m_merged : m_translation;
}

void TranslatePanel::refreshMerged() {
    // Only a subword model's translations have pieces to merge.
    const bool subword = m_translationModel && m_translationModel->level() == TokenLevel::subword;
    const bool merge = subword && m_mergeBox->isChecked();
    m_merged = merge && m_translation ? std::make_shared<const Translation>(merge_subwords(*m_translation)) : nullptr;
    m_forcedMerged = merge && m_forced ? std::make_shared<const Translation>(merge_subwords(*m_forced)) : nullptr;
}

QString TranslatePanel::levelNote(const Translation& t) const {
    if (!t.merged.empty()) return tr("   ·   subwords merged into words: columns summed, rows averaged");
    if (m_translationModel && m_translationModel->level() == TokenLevel::subword)
        return tr("   ·   subword pieces (▁ starts a word)");
    return {};
}

}  // namespace attnviz::ui
