#pragma once
// "Is attention an explanation?" beside the attention heatmap: which source
// tokens mattered to each output token by an attribution method the user picks
// (gradient saliency, gradient x input, integrated gradients, occlusion;
// core/analysis/attribution.hpp), on the same rows (output steps) and columns
// (source tokens) as the attention heatmap, with each step's agreement with
// attention (Kendall's tau-b, same top token) in the strips beside the rows.
// Computed off the GUI thread (ui/common/Background.hpp): the selected method first,
// then the others, so switching the method shows them at once.
#include <QWidget>
#include <memory>
#include <optional>
#include <set>

#include "core/analysis/attribution_result.hpp"
#include "core/decode/translation_model.hpp"
#include "ui/heatmap/HeatmapWidget.hpp"

QT_BEGIN_NAMESPACE
class QComboBox;
class QLabel;
class QToolBar;
QT_END_NAMESPACE

namespace attnviz::ui {

class LatestOnly;

class AttributionView : public QWidget {
    Q_OBJECT
public:
    explicit AttributionView(QWidget* parent = nullptr);

    /// Attributes hypothesis `hypothesis` of `translation` (made by `model`) in the background;
    /// null, empty or without attention: cleared. `note` is added to the title (e.g. subwords).
    /// `map`: the cross-attention map the agreement compares with (a Transformer's chosen head or
    /// layer mean); none: the hypothesis' primary map. The same model, translation, hypothesis and
    /// map again only change the note: what was computed stays.
    void setTranslation(TranslationModelPtr model, std::shared_ptr<const Translation> translation, int hypothesis,
                        const QString& note = QString(), std::optional<AttentionMapId> map = std::nullopt);
    /// A subword model's attribution shown per word (core merge_subwords: the heatmap's rows and
    /// columns when it merges pieces) or per piece. Computed per piece either way; switching
    /// recomputes nothing.
    void setMergeSubwords(bool merge);
    AttributionMethod method() const;
    void setMethod(AttributionMethod method);

    HeatmapWidget* heatmap() const { return m_heatmap; }
    QComboBox* methodBox() const { return m_methodBox; }
    QToolBar* toolBar() const { return m_tools; }
    /// What has been computed for the current translation (the methods so far), per piece for a
    /// subword model; null before the first answer.
    std::shared_ptr<const SentenceAttribution> attribution() const { return m_result; }
    /// What is on screen: attribution(), or its words when subwords are merged.
    std::shared_ptr<const SentenceAttribution> shownAttribution() const { return m_shown; }
    /// Work for the current translation is under way.
    bool busy() const;
    /// Writes the visible attribution: .png/.svg as drawn, .json as `attnviz-cli attribute` writes a sentence,
    /// .csv one line per step and source token with every method computed.
    bool exportTo(const QString& path, double scale, QString* error) const;

    /// The heatmap of one method of an attribution: rows are the steps, columns the source tokens.
    /// Signed methods show their values with the diverging map (signedRange: the largest |value|);
    /// saliency, never negative, shows value / the step's largest value with the colour map, its own
    /// values in rawScores. Strips: tau-b and top-1 agreement with the attention row.
    static HeatmapData heatmapData(const SentenceAttribution& a, AttributionMethod method);
    /// The status line's words on integrated gradients: the points it took and how close it adds
    /// up, or a warning where the automatic points reached their cap above the tolerance.
    static QString integratedGradientsNote(const SentenceAttribution& a);

Q_SIGNALS:
    /// The selected method's values are on screen.
    void attributionReady();
    void attributionFailed(const QString& message);

private:
    void request(std::vector<AttributionMethod> methods);
    void arrived(const SentenceAttribution& part);
    /// Whether `methods`, in one request, attribute the current hypothesis within the work bound
    /// (core/model/work_cost.hpp): what the background prefetch of the other methods asks.
    bool withinWorkBound(const std::vector<AttributionMethod>& methods) const;
    void showMethod();
    /// Whether the shown attribution merges pieces into words now (a subword model and m_merge).
    bool merging() const;
    void exportDialog();

    QComboBox* m_methodBox;
    QToolBar* m_tools;
    QLabel* m_status;
    HeatmapWidget* m_heatmap;
    LatestOnly* m_jobs;
    TranslationModelPtr m_model;
    std::shared_ptr<const Translation> m_translation;
    int m_hypothesis = 0;
    QString m_note;
    std::optional<AttentionMapId> m_attentionMap;
    std::shared_ptr<SentenceAttribution> m_result;
    std::shared_ptr<const SentenceAttribution> m_shown;  ///< m_result, or its words (m_merge)
    bool m_merge = false;
    std::set<AttributionMethod> m_pending;  ///< methods the newest request computes
};

}  // namespace attnviz::ui
