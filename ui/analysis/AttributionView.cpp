#include "ui/analysis/AttributionView.hpp"

#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QLabel>
#include <QScrollArea>
#include <QSettings>
#include <QToolBar>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/analysis/attribution.hpp"
#include "core/io/error.hpp"
#include "core/analysis/subword_merge.hpp"
#include "ui/common/Background.hpp"
#include "ui/common/Format.hpp"
#include "ui/heatmap/HeatmapExport.hpp"

namespace attnviz::ui {
namespace {
const char* kMethodKey = "view/attributionMethod";

QString methodTitle(AttributionMethod m) {
    switch (m) {
    case AttributionMethod::saliency: return QObject::tr("Saliency");
    case AttributionMethod::grad_input: return QObject::tr("Gradient × input");
    case AttributionMethod::integrated_gradients: return QObject::tr("Integrated gradients");
    case AttributionMethod::occlusion: return QObject::tr("Occlusion");
    }
    return {};
}

QString methodHelp(AttributionMethod m) {
    switch (m) {
    case AttributionMethod::saliency:
        return QObject::tr("how strongly log p of the step's token reacts to each source token's embedding (L2 norm of "
                           "the gradient; never negative)");
    case AttributionMethod::grad_input:
        return QObject::tr("gradient × embedding, summed: red pushed the token up, blue pushed it down");
    case AttributionMethod::integrated_gradients:
        return QObject::tr("gradients integrated from the zero embedding to the input; per step they add up to "
                           "log p(input) − log p(baseline), and each step takes twice the points (from 16) until they "
                           "do within 1%");
    case AttributionMethod::occlusion:
        return QObject::tr("log p of the step's token minus log p with the source token replaced by <unk> (same prefix)");
    }
    return {};
}

/// The methods computed in the same pass: saliency and gradient x input share one gradient.
std::vector<AttributionMethod> withSiblings(AttributionMethod m) {
    if (m == AttributionMethod::saliency || m == AttributionMethod::grad_input)
        return {AttributionMethod::saliency, AttributionMethod::grad_input};
    return {m};
}
}  // namespace

AttributionView::AttributionView(QWidget* parent) : QWidget(parent), m_jobs(new LatestOnly(this)) {
    m_methodBox = new QComboBox(this);
    m_methodBox->setObjectName(QStringLiteral("attributionMethod"));
    for (AttributionMethod m : all_attribution_methods()) {
        m_methodBox->addItem(methodTitle(m), int(m));
        m_methodBox->setItemData(m_methodBox->count() - 1, methodHelp(m), Qt::ToolTipRole);
    }
    m_methodBox->setToolTip(tr("Attribution method: which source tokens mattered to each output token"));
    const int saved = m_methodBox->findText(QSettings().value(QLatin1String(kMethodKey)).toString());
    if (saved >= 0) m_methodBox->setCurrentIndex(saved);
    m_tools = new QToolBar(this);
    m_tools->setIconSize(QSize(16, 16));
    m_tools->addWidget(new QLabel(tr("Attribution "), this));
    m_tools->addWidget(m_methodBox);
    auto* exportButton = new QToolButton(this);
    exportButton->setText(tr("Export…"));
    exportButton->setToolTip(tr("Export the attribution heatmap as PNG, SVG, CSV or JSON"));
    exportButton->setObjectName(QStringLiteral("attributionExport"));
    m_tools->addWidget(exportButton);
    m_status = new QLabel(this);
    m_status->setWordWrap(true);
    m_status->setTextFormat(Qt::RichText);
    m_heatmap = new HeatmapWidget(this);
    m_heatmap->setObjectName(QStringLiteral("attributionHeatmap"));
    m_heatmap->clear(tr("Translate a sentence: which source tokens mattered to each output token shows here."));
    QScrollArea* scroll = scrolled(m_heatmap, this);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_tools);
    layout->addWidget(m_status);
    layout->addWidget(scroll, 1);

    connect(m_methodBox, &QComboBox::currentIndexChanged, this, [this] {
        QSettings().setValue(QLatin1String(kMethodKey), m_methodBox->currentText());
        showMethod();
    });
    connect(exportButton, &QToolButton::clicked, this, &AttributionView::exportDialog);
}

AttributionMethod AttributionView::method() const { return AttributionMethod(m_methodBox->currentData().toInt()); }

void AttributionView::setMethod(AttributionMethod method) { m_methodBox->setCurrentIndex(m_methodBox->findData(int(method))); }

bool AttributionView::busy() const { return m_jobs->busy(); }

void AttributionView::setTranslation(TranslationModelPtr model, std::shared_ptr<const Translation> translation,
                                     int hypothesis, const QString& note, std::optional<AttentionMapId> map) {
    if (model && model == m_model && translation && translation == m_translation && hypothesis == m_hypothesis &&
        map == m_attentionMap) {  // the same work: keep what was computed and shown; only the title changes
        m_note = note;
        showMethod();
        return;
    }
    m_model = std::move(model);
    m_attentionMap = map;
    m_translation = std::move(translation);
    m_hypothesis = hypothesis;
    m_note = note;
    m_result.reset();
    m_shown.reset();
    m_pending.clear();
    m_jobs->cancel();
    if (!m_model || !m_translation || m_translation->empty() || !m_translation->attention_available ||
        hypothesis < 0 || hypothesis >= int(m_translation->hypotheses.size())) {
        m_status->clear();
        m_heatmap->clear(tr("Nothing to attribute: translate a sentence with a model that attends."));
        return;
    }
    m_status->setText(tr("Attributing…"));
    request(withSiblings(method()));
}

void AttributionView::request(std::vector<AttributionMethod> methods) {
    AttributionOptions options;
    options.methods = methods;
    options.attention_map = m_attentionMap;
    m_pending = std::set<AttributionMethod>(methods.begin(), methods.end());
    std::function<SentenceAttribution()> work = [model = m_model, translation = m_translation, options,
                                                 hypothesis = size_t(m_hypothesis)] {
        return attribute(*model, *translation, options, hypothesis);
    };
    m_jobs->run<SentenceAttribution>(
        std::move(work), [this](SentenceAttribution part) { arrived(part); },
        [this](const QString& message) {
            if (m_pending.count(method())) m_heatmap->clear(tr("%1 is not shown: see below.").arg(methodTitle(method())));
            m_pending.clear();
            m_status->setText(tr("<span style='color:#b00020'>%1</span>").arg(message.toHtmlEscaped()));
            Q_EMIT attributionFailed(message);
        });
}

void AttributionView::setMergeSubwords(bool merge) {
    if (merge == m_merge) return;
    m_merge = merge;
    m_shown.reset();
    showMethod();
}

bool AttributionView::merging() const { return m_merge && m_model && m_model->level() == TokenLevel::subword; }

void AttributionView::arrived(const SentenceAttribution& part) {
    m_pending.clear();
    m_shown.reset();
    if (!m_result) {
        m_result = std::make_shared<SentenceAttribution>(part);
    } else {  // the same steps: add this part's methods
        for (size_t t = 0; t < m_result->steps.size() && t < part.steps.size(); ++t) {
            StepAttribution& step = m_result->steps[t];
            for (const auto& [m, scores] : part.steps[t].scores) step.scores[m] = scores;
            if (part.ig_steps > 0) {
                step.baseline_log_prob = part.steps[t].baseline_log_prob;
                step.completeness_error = part.steps[t].completeness_error;
                step.ig_steps = part.steps[t].ig_steps;
            }
        }
        if (part.ig_steps > 0) {
            m_result->ig_steps = part.ig_steps;
            m_result->ig_auto = part.ig_auto;
            m_result->ig_tolerance = part.ig_tolerance;
            m_result->ig_relative_error = part.ig_relative_error;
            m_result->ig_converged = part.ig_converged;
            m_result->ig_work_capped = part.ig_work_capped;
        }
        std::vector<AttributionMethod> methods;
        for (AttributionMethod m : all_attribution_methods())
            if (std::count(m_result->methods.begin(), m_result->methods.end(), m) ||
                std::count(part.methods.begin(), part.methods.end(), m))
                methods.push_back(m);
        m_result->methods = methods;
    }
    showMethod();
    // Then the methods not computed yet, in one request, so that switching shows them at once:
    // as many as fit the work bound together (a method left out is asked for only when chosen,
    // and then says why it is not shown).
    std::vector<AttributionMethod> missing;
    for (AttributionMethod m : all_attribution_methods()) {
        if (std::count(m_result->methods.begin(), m_result->methods.end(), m)) continue;
        missing.push_back(m);  // kept only while the request as a whole stays within the bound
        if (!withinWorkBound(missing)) missing.pop_back();
    }
    if (!missing.empty() && m_pending.empty()) request(missing);
}

bool AttributionView::withinWorkBound(const std::vector<AttributionMethod>& methods) const {
    if (!m_model || !m_translation || m_translation->empty()) return false;
    AttributionOptions options;
    options.methods = methods;
    const auto S = int64_t(m_translation->src_tokens.size());
    const auto T = int64_t(m_translation->hypotheses.at(size_t(m_hypothesis)).ids.size());
    try {
        attribution_work(*m_model->network(), S, T, options);
        return true;
    } catch (const ConfigError&) {
        return false;
    }
}

void AttributionView::showMethod() {
    if (!m_result) return;
    const AttributionMethod m = method();
    if (!std::count(m_result->methods.begin(), m_result->methods.end(), m)) {
        if (!m_pending.count(m)) request(withSiblings(m));
        m_status->setText(tr("Attributing by %1…").arg(methodTitle(m).toLower()));
        m_heatmap->clear(tr("Attributing by %1…").arg(methodTitle(m).toLower()));
        return;
    }
    if (!m_shown)
        m_shown = merging() ? std::make_shared<const SentenceAttribution>(merge_subwords(*m_result, m_translation->unknown))
                            : m_result;
    HeatmapData data = heatmapData(*m_shown, m);
    data.title = methodTitle(m) + m_note;
    // The agreement with attention over the sentence, in words.
    double sum = 0;
    int defined = 0, same = 0;
    for (const StepAttribution& s : m_shown->steps) {
        const RankAgreement g = attention_agreement(s).at(m);
        if (std::isfinite(g.kendall_tau)) {
            sum += g.kendall_tau;
            ++defined;
        }
        same += g.top1 ? 1 : 0;
    }
    m_status->setToolTip(methodHelp(m));
    QString text = tr("Agreement with attention: mean τ-b <b>%1</b>, the same top token at <b>%2 of %3</b> steps.")
                       .arg(defined ? QString::number(sum / defined, 'f', 2) : tr("undefined"))
                       .arg(same)
                       .arg(m_shown->steps.size());
    if (m == AttributionMethod::integrated_gradients && m_result->ig_steps > 0) text += ' ' + integratedGradientsNote(*m_result);
    m_status->setText(text);
    const int row = m_heatmap->selectedRow();
    m_heatmap->setHeatmapData(data);
    m_heatmap->setSelectedRow(std::min(row, data.rows() - 1));
    Q_EMIT attributionReady();
}

QString AttributionView::integratedGradientsNote(const SentenceAttribution& a) {
    const QString error = QString::number(100.0 * a.ig_relative_error, 'f', a.ig_relative_error < 0.001 ? 2 : 1);
    if (a.ig_auto && !a.ig_converged && a.ig_work_capped)
        return tr("<span style='color:#b00020'>⚠ Integrated gradients stopped at %1 points, the most the work bound "
                  "allows for a sentence this long, and still misses completeness by %2% (more than %3%): read its "
                  "scores with care.</span>")
            .arg(a.ig_steps)
            .arg(error)
            .arg(QString::number(100.0 * a.ig_tolerance, 'g', 3));
    if (a.ig_auto && !a.ig_converged)
        return tr("<span style='color:#b00020'>⚠ Integrated gradients reached %1 points and still miss completeness by "
                  "%2% (more than %3%): read its scores with care.</span>")
            .arg(a.ig_steps)
            .arg(error)
            .arg(QString::number(100.0 * a.ig_tolerance, 'g', 3));
    return tr("Integrated gradients: %1 points%2, adds up to within %3%.")
        .arg(a.ig_steps)
        .arg(a.ig_auto ? tr(" (chosen per step)") : QString())
        .arg(error);
}

HeatmapData AttributionView::heatmapData(const SentenceAttribution& a, AttributionMethod method) {
    HeatmapData d;
    d.source = toQStringList(a.source);
    const bool saliency = method == AttributionMethod::saliency;
    float largest = 0.0f;
    for (const StepAttribution& s : a.steps)
        if (const AttributionScores* scores = s.find(method))
            for (float v : scores->source) largest = std::max(largest, std::abs(v));
    HeatmapStrip tau{QStringLiteral("τ"),
                     QObject::tr("Kendall's τ-b between the step's attention and |attribution| over the source tokens "
                                 "(1: the same order, 0: unrelated, −1: reversed; nan: a constant row)"),
                     {}, 1.0f, 3};
    HeatmapStrip top{QStringLiteral("top"),
                     QObject::tr("1: attention and the attribution put their largest value on the same source token"),
                     {}, 1.0f, 0};
    for (const StepAttribution& s : a.steps) {
        const AttributionScores* scores = s.find(method);
        if (!scores) return {};
        d.output << qs(s.token);
        std::vector<float> values = scores->source;
        values.resize(size_t(d.columns()), 0.0f);
        if (saliency) {  // as a share of the step's largest, like a row of attention read by its peak
            d.rawScores.push_back(values);
            const float peak = values.empty() ? 0.0f : *std::max_element(values.begin(), values.end());
            for (float& v : values) v = peak > 0 ? v / peak : 0.0f;
        }
        d.weights.push_back(std::move(values));
        d.stepLogProb.push_back(float(s.log_prob));
        const RankAgreement g = attention_agreement(s).at(method);
        tau.values.push_back(float(g.kendall_tau));
        top.values.push_back(g.top1 ? 1.0f : 0.0f);
    }
    d.valueName = saliency ? QObject::tr("saliency, as a share of the step's largest") : methodTitle(method).toLower();
    if (!saliency) d.signedRange = largest > 0 ? largest : 1.0f;
    d.rowStrips.push_back(std::move(tau));
    d.rowStrips.push_back(std::move(top));
    return d;
}

bool AttributionView::exportTo(const QString& path, double scale, QString* error) const {
    if (m_heatmap->heatmapData().empty() || !m_shown) {
        if (error) *error = tr("There is no attribution on screen yet.");
        return false;
    }
    switch (heatmapFormatFor(path)) {
    case HeatmapFormat::Png: return exportHeatmapPng(*m_heatmap, path, scale, error);
    case HeatmapFormat::Svg: return exportHeatmapSvg(*m_heatmap, path, error);
    case HeatmapFormat::Json: return writeExportFile(path, QByteArray::fromStdString(to_json(*m_shown).dump(2)), error);
    case HeatmapFormat::Csv: {
        QByteArray csv = "step,token,source_position,source_token,attention";
        for (AttributionMethod m : m_shown->methods) csv += ',' + QByteArray::fromStdString(to_string(m));
        csv += '\n';
        auto field = [](const std::string& s) {
            QByteArray q = QByteArray::fromStdString(s);
            return '"' + q.replace('"', "\"\"") + '"';
        };
        for (size_t t = 0; t < m_shown->steps.size(); ++t) {
            const StepAttribution& s = m_shown->steps[t];
            for (size_t c = 0; c < m_shown->source.size(); ++c) {
                csv += QByteArray::number(qulonglong(t)) + ',' + field(s.token) + ',' + QByteArray::number(qulonglong(c)) +
                       ',' + field(m_shown->source[c]) + ',' +
                       QByteArray::number(c < s.attention.size() ? double(s.attention[c]) : 0.0, 'g', 9);
                for (AttributionMethod m : m_shown->methods) {
                    const AttributionScores* scores = s.find(m);
                    csv += ',' + QByteArray::number(scores && c < scores->source.size() ? double(scores->source[c]) : 0.0,
                                                    'g', 9);
                }
                csv += '\n';
            }
        }
        return writeExportFile(path, csv, error);
    }
    case HeatmapFormat::Unknown: break;
    }
    if (error) *error = tr("Unknown export format: use .png, .svg, .csv or .json");
    return false;
}

void AttributionView::exportDialog() {
    QSettings settings;
    const QString folder = settings.value(QStringLiteral("dirs/export"), QDir::homePath()).toString();
    QString path = QFileDialog::getSaveFileName(this, tr("Export attribution"), folder + QStringLiteral("/attribution.png"),
                                                heatmapFileFilter());
    if (path.isEmpty()) return;
    settings.setValue(QStringLiteral("dirs/export"), QFileInfo(path).absolutePath());
    QString error;
    if (!exportTo(path, 2.0, &error)) {
        m_status->setText(tr("<span style='color:#b00020'>%1</span>").arg(error.toHtmlEscaped()));
        Q_EMIT attributionFailed(error);
    } else {
        m_status->setText(tr("Exported %1").arg(path.toHtmlEscaped()));
    }
}

}  // namespace attnviz::ui
