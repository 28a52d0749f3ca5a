#pragma once
// Choosing the corpus: a built-in task or a Tatoeba-style TSV file, and a
// summary of what was read (pairs, skipped lines, vocabulary sizes, lengths).
#include <QWidget>
#include <memory>

#include "core/tasks.hpp"

QT_BEGIN_NAMESPACE
class QCheckBox;
class QComboBox;
class QLabel;
class QSpinBox;
QT_END_NAMESPACE

namespace attnviz::ui {

/// Grouped bars: how many pairs have a source / target of each length.
class LengthHistogram : public QWidget {
    Q_OBJECT
public:
    explicit LengthHistogram(QWidget* parent = nullptr);
    void setCorpus(const Corpus* corpus);
    QSize sizeHint() const override;

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    std::vector<int> m_src, m_tgt;  // counts per length bin (last bin: that length or more)
};

class CorpusPanel : public QWidget {
    Q_OBJECT
public:
    explicit CorpusPanel(QWidget* parent = nullptr);

    std::shared_ptr<const Corpus> corpus() const { return m_corpus; }
    /// "task:toy-french" or "file:/path/to.tsv": what to restore next time.
    QString sourceKey() const;
    bool isTask() const { return m_filePath.isEmpty(); }
    TaskKind task() const { return m_task; }
    QString filePath() const { return m_filePath; }
    /// Example source sentences (the task's, or the first pairs of a file).
    QStringList examples() const;
    int numPairs() const;
    int sourceVocabSize() const { return m_srcVocab; }
    int targetVocabSize() const { return m_tgtVocab; }
    QString summaryText() const;

    void selectTask(TaskKind kind);
    /// Reads a TSV file; on failure returns false, sets *error and keeps the previous corpus.
    bool loadFile(const QString& path, QString* error);
    /// Restores a sourceKey(); falls back to the default task.
    void restore(const QString& key, QString* error = nullptr);
    void setNumPairs(int pairs);

Q_SIGNALS:
    void corpusChanged();
    /// The user asked for a file from the combo box.
    void openFileRequested();

private:
    void rebuildTask();
    void setCorpus(std::shared_ptr<const Corpus> corpus);
    void comboActivated(int index);
    void refreshFileOptions();

    QComboBox* m_combo;
    QLabel* m_description;
    QSpinBox* m_pairs;
    QComboBox* m_level;
    QCheckBox* m_swap;
    QSpinBox* m_maxPairs;
    QWidget* m_taskOptions;
    QWidget* m_fileOptions;
    QLabel* m_summary;
    LengthHistogram* m_histogram;

    std::shared_ptr<const Corpus> m_corpus;
    TaskKind m_task = TaskKind::toy_french;
    QString m_filePath;
    int m_srcVocab = 0, m_tgtVocab = 0;
};

}  // namespace attnviz::ui
