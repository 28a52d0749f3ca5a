#pragma once
// Choosing the corpus: a built-in task, a TSV file (Tatoeba, Tatoeba-Challenge
// or chosen columns) or two-file parallel text, and a summary of what training
// will get from it (the layout detected, pairs, skipped lines, the split,
// vocabulary sizes, lengths). Reading, generating and summarising run off the
// GUI thread (ui/common/Background.hpp) with a progress bar and a Cancel button; the
// previous corpus stays until the new one is ready. The summary is the core's
// (summarize_corpus, built on prepare_data), so its sizes are the ones a
// training run reports.
#include <QWidget>
#include <memory>
#include <optional>

#include "core/data/corpus_info.hpp"
#include "core/data/tasks.hpp"

QT_BEGIN_NAMESPACE
class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTimer;
QT_END_NAMESPACE

namespace attnviz::ui {

class LatestOnly;
class LengthHistogram;

class CorpusPanel : public QWidget {
    Q_OBJECT
public:
    explicit CorpusPanel(QWidget* parent = nullptr);
    /// Stops a corpus being read (at the reader's next chunk) and waits for it.
    ~CorpusPanel() override;

    /// The corpus in use (the previous one while another loads; null before the first).
    std::shared_ptr<const Corpus> corpus() const { return m_corpus; }
    /// What training gets from it under the current data settings (null before the first summary).
    const CorpusSummary* summary() const { return m_summary ? &*m_summary : nullptr; }
    /// "task:toy-french", "file:/path/to.tsv" or "parallel:/path/a.en\n/path/a.fr": the
    /// corpus chosen last (the one loading, if any) -- what to restore next time.
    QString sourceKey() const;
    bool isTask() const { return m_chosen.file.isEmpty(); }
    TaskKind task() const { return m_chosen.task; }
    QString filePath() const { return m_chosen.file; }
    /// The target file of parallel text (empty for a TSV file or a task).
    QString targetFilePath() const { return m_chosen.targetFile; }
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
    /// Reads two-file parallel text (line N of source translates line N of target), as loadFile.
    void loadParallel(const QString& sourcePath, const QString& targetPath);
    /// Stops a load under way: the previous corpus stays, loadCancelled() follows. Reading
    /// a file stops within a chunk; a task being generated finishes unseen.
    void cancelLoading();
    /// The file columns to use: "" = detect, or "SRC,TGT" (see TsvOptions::columns).
    void setColumns(const QString& columns);
    /// Reading progress of the load under way: 0..1000 (per mille of the bytes), -1 when unknown.
    int progressValue() const;
    /// Restores a sourceKey(); the default task when that fails.
    void restore(const QString& key);
    void setNumPairs(int pairs);
    /// The settings the summary follows (those prepare_data reads); a change recomputes it in the background.
    void setDataSettings(const TrainConfig& config);

Q_SIGNALS:
    void corpusChanged();
    void summaryChanged();
    void loadFailed(const QString& message);
    void loadCancelled();
    void busyChanged(bool busy);
    /// The user asked for a file from the combo box.
    void openFileRequested();
    /// The user asked for two-file parallel text from the combo box.
    void openParallelRequested();

private:
    /// Where a corpus comes from.
    struct Source {
        QString file;  ///< empty: the built-in task; the source side of parallel text
        QString targetFile;  ///< parallel text: the target side; empty otherwise
        TaskKind task = TaskKind::toy_french;
        size_t pairs = 0;
        TsvOptions tsv;
    };
    Source sourceFromForm(const QString& file, TaskKind task) const;
    void load(const Source& source);
    void request(bool load);
    void showSummary();
    void updateBusy(const QString& text = QString());
    /// Shows the reading progress the worker publishes (polled by m_progressTimer).
    void showProgress();
    void comboActivated(int index);
    /// Shows the chosen source: combo box, its options, description.
    void refreshCombo();

    QComboBox* m_combo;
    QLabel* m_description;
    QSpinBox* m_pairs;
    QComboBox* m_level;
    QCheckBox* m_swap;
    QLineEdit* m_columns;
    QSpinBox* m_maxPairs;
    QWidget* m_taskOptions;
    QWidget* m_fileOptions;
    QWidget* m_busy;          ///< a progress bar, what is being done and Cancel
    QProgressBar* m_progress;
    QLabel* m_busyText;
    QPushButton* m_cancel;
    QTimer* m_progressTimer;
    QString m_busyWhat;       ///< "Reading x.tsv" while it is read
    QLabel* m_summaryLabel;
    LengthHistogram* m_histogram;
    LatestOnly* m_jobs;

    Source m_chosen;   ///< what the user chose last
    Source m_loaded;   ///< where m_corpus came from
    bool m_loading = false;
    bool m_wasBusy = false;
    TrainConfig m_data;
    struct LoadState;          ///< what the worker publishes and the Cancel flag it reads
    std::shared_ptr<LoadState> m_loadState;
    std::shared_ptr<const Corpus> m_corpus;
    std::optional<CorpusSummary> m_summary;
};

}  // namespace attnviz::ui
