#pragma once
// Which heads matter (issue 39), in the app: "Measure heads" runs head_stats() -- and, with
// "Pruning curve", prune_curve() -- in the background over the validation pairs of the corpus
// chosen in the app, on a copy of the model with gates of its own (the translate views keep using
// the model meanwhile); then a sortable table of every head (importance, confidence, entropy,
// positional role, rare words, sinks, AER; tooltips name the roles), the layers × heads grid per
// kind (HeadsGrid: live from training's head snapshots, Michel's Fig. 5) and the pruning curves
// (PruneChart). Everything exports: CSV and JSON (the CLI's shape), PNG and SVG.
#include <QWidget>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "core/analysis/heads.hpp"
#include "core/analysis/prune_curve.hpp"
#include "core/config/history.hpp"
#include "core/data/corpus_reader.hpp"

QT_BEGIN_NAMESPACE
class QCheckBox;
class QComboBox;
class QLabel;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableWidget;
class QTimer;
class QToolButton;
QT_END_NAMESPACE

namespace attnviz::ui {

class HeadsGrid;
class LatestOnly;
class PruneChart;

/// Training's head snapshots (importance and confidence) as HeadStats, the rest unmeasured (NaN):
/// what the model view's badges show while a model trains. Snapshots of unknown kinds are skipped.
std::vector<HeadStats> headStatsFromSnapshots(const std::vector<HeadSnapshot>& snapshots);

class HeadsPanel : public QWidget {
    Q_OBJECT
public:
    /// The table's columns.
    enum Column { KindCol, LayerCol, HeadCol, ImportanceCol, ConfidenceCol, EntropyCol, OffsetCol, ShareCol,
                  RareCol, SinkCol, AerCol, ColumnCount };

    explicit HeadsPanel(QWidget* parent = nullptr);
    ~HeadsPanel() override;

    /// The model measured (the current one: a training snapshot or an opened checkpoint).
    void setModel(TranslationModelPtr model);
    /// The corpus whose validation pairs are measured (re-split as the model's training did).
    void setCorpus(std::shared_ptr<const Corpus> corpus);
    /// Where a multilingual model's (M2M100, NLLB, mBART-50) languages come from when Measure runs:
    /// (source, target) codes, "" for the tokenizer's own (the Translate tab's lists, as Train's).
    void setLanguages(std::function<std::pair<QString, QString>()> languages);

    /// Starts a measurement (a newer one supersedes a run in progress: its result is dropped).
    void measure();
    bool busy() const;

    /// A validation's head snapshots while training (EpochReport::heads; none: ignored).
    void addEpoch(const EpochReport& report);
    /// A run's history (a checkpoint opened): every epoch's snapshots.
    void setHistory(const TrainHistory& history);
    /// A new training run starts: the histories go.
    void clearHistory();

    /// The last measurement's heads (empty before one finished).
    const std::vector<HeadStats>& heads() const { return m_report.heads; }
    const HeadReport& report() const { return m_report; }
    /// Its pruning curve (empty when not asked for).
    const std::vector<PrunePoint>& pruneCurve() const { return m_curve; }

    /// The heads table as CSV, and the measurement as JSON ({"heads": [...], "prune_curve": [...]},
    /// attnviz-cli heads --json's shape, and each head's history over validations), atomically.
    bool exportCsv(const QString& path, QString* error) const;
    bool exportJson(const QString& path, QString* error) const;
    /// Every head's history over training's validations as CSV ("epoch,kind,layer,head,importance,
    /// confidence"), atomically; false (and *error) when no validation measured heads.
    bool exportHistoryCsv(const QString& path, QString* error) const;
    bool hasHistory() const;

    /// Stops the measurement in progress after its current batch or point (nothing is shown).
    void cancel();

    QPushButton* measureButton() const { return m_measure; }
    QPushButton* cancelButton() const { return m_cancel; }
    QSpinBox* sentencesBox() const { return m_sentences; }
    QCheckBox* pruneBox() const { return m_prune; }
    QProgressBar* busyIndicator() const { return m_busy; }
    QLabel* statusLabel() const { return m_status; }
    QTableWidget* table() const { return m_table; }
    HeadsGrid* grid() const { return m_grid; }
    QComboBox* gridMetricBox() const { return m_gridMetric; }
    PruneChart* pruneChart() const { return m_chart; }

Q_SIGNALS:
    /// A measurement finished: heads() (and pruneCurve()) hold it.
    void headsMeasured();
    void measureFailed(const QString& message);

private:
    struct Measurement;
    /// A run's stop flag and progress, shared with its work (the core's progress callbacks).
    struct Run;
    void showMeasurement(Measurement m);
    void showProgress();
    void showError(const QString& message);
    void fillTable();
    void exportDialog(const QString& what);

    TranslationModelPtr m_model;
    std::shared_ptr<const Corpus> m_corpus;
    std::function<std::pair<QString, QString>()> m_languages;  ///< the chosen languages (empty: the tokenizer's)
    HeadReport m_report;
    std::vector<PrunePoint> m_curve;
    QString m_measuredOn;  ///< "toy-french, 200 validation pairs"
    QPushButton* m_measure;
    QPushButton* m_cancel;
    QTimer* m_poll;
    std::shared_ptr<Run> m_run;
    QSpinBox* m_sentences;
    QCheckBox* m_prune;
    QProgressBar* m_busy;
    QLabel* m_status;
    QToolButton* m_export;
    QTableWidget* m_table;
    HeadsGrid* m_grid;
    QComboBox* m_gridMetric;
    PruneChart* m_chart;
    LatestOnly* m_jobs;
};

}  // namespace attnviz::ui
