#pragma once
// Choosing the corpus: a built-in task or a Tatoeba-style TSV file, and a
// summary of what training will get from it (pairs, skipped lines, the split,
// vocabulary sizes, lengths). Reading, generating and summarising run off the
// GUI thread (ui/Background.hpp); the previous corpus stays until the new one
// is ready. The summary is the core's (summarize_corpus, built on
// prepare_data), so its sizes are the ones a training run reports.
#include <QWidget>
#include <memory>
#include <optional>

#include "core/corpus_info.hpp"
#include "core/tasks.hpp"

QT_BEGIN_NAMESPACE
class QCheckBox;
class QComboBox;
class QLabel;
class QProgressBar;
class QSpinBox;
QT_END_NAMESPACE

namespace attnviz::ui {

class LatestOnly;
class LengthHistogram;

class CorpusPanel : public QWidget {
    Q_OBJECT
public:
    explicit CorpusPanel(QWidget* parent = nullptr);

    /// The corpus in use (the previous one while another loads; null before the first).
    std::shared_ptr<const Corpus> corpus() const { return m_corpus; }
    /// What training gets from it under the current data settings (null before the first summary).
    const CorpusSummary* summary() const { return m_summary ? &*m_summary : nullptr; }
    /// "task:toy-french" or "file:/path/to.tsv": the corpus chosen last (the one
    /// loading, if any) -- what to restore next time.
    QString sourceKey() const;
    bool isTask() const { return m_chosen.file.isEmpty(); }
    TaskKind task() const { return m_chosen.task; }
    QString filePath() const { return m_chosen.file; }
    /// Example source sentences of the corpus in use (the task's, or the first pairs of a file).
    QStringList examples() const;
    int numPairs() const;
    /// Vocabulary sizes training will build (special tokens included; 0 before the first summary).
    int sourceVocabSize() const { return m_summary ? int(m_summary->src_vocab) : 0; }
    int targetVocabSize() const { return m_summary ? int(m_summary->tgt_vocab) : 0; }
    QString summaryText() const;
    /// A corpus is being read or generated.
    bool loading() const { return m_loading; }
    /// Work is under way in the background: loading, or the summary being recomputed.
    bool busy() const;

    /// Generates a built-in task in the background; corpusChanged() when it is ready.
    void selectTask(TaskKind kind);
    /// Reads a TSV file in the background: corpusChanged() when it is ready, or
    /// loadFailed() with the reason (the previous corpus stays).
    void loadFile(const QString& path);
    /// Restores a sourceKey(); the default task when that fails.
    void restore(const QString& key);
    void setNumPairs(int pairs);
    /// The settings the summary follows (those prepare_data reads); a change recomputes it in the background.
    void setDataSettings(const TrainConfig& config);

Q_SIGNALS:
    void corpusChanged();
    void summaryChanged();
    void loadFailed(const QString& message);
    void busyChanged(bool busy);
    /// The user asked for a file from the combo box.
    void openFileRequested();

private:
    /// Where a corpus comes from.
    struct Source {
        QString file;  ///< empty: the built-in task
        TaskKind task = TaskKind::toy_french;
        size_t pairs = 0;
        TsvOptions tsv;
    };
    Source sourceFromForm(const QString& file, TaskKind task) const;
    void load(const Source& source);
    void request(bool load);
    void applySource(const Source& source);
    void showSummary();
    void updateBusy(const QString& text = QString());
    void comboActivated(int index);
    void refreshCombo();

    QComboBox* m_combo;
    QLabel* m_description;
    QSpinBox* m_pairs;
    QComboBox* m_level;
    QCheckBox* m_swap;
    QSpinBox* m_maxPairs;
    QWidget* m_taskOptions;
    QWidget* m_fileOptions;
    QProgressBar* m_busy;
    QLabel* m_summaryLabel;
    LengthHistogram* m_histogram;
    LatestOnly* m_jobs;

    Source m_chosen;   ///< what the user chose last
    Source m_loaded;   ///< where m_corpus came from
    bool m_loading = false;
    bool m_wasBusy = false;
    TrainConfig m_data;
    std::shared_ptr<const Corpus> m_corpus;
    std::optional<CorpusSummary> m_summary;
};

}  // namespace attnviz::ui
