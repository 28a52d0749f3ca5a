#pragma once
// "Is attention an explanation here?" over a corpus (core/analysis/corpus_agreement.hpp):
// the first sentences of the corpus translated, attributed and compared with
// attention in the background, with progress and cancel; then histograms of
// Kendall's tau-b per method (attention against each), the summary table, and
// a sortable per-sentence table -- a row double-clicked opens that sentence's
// heatmaps on the Translate tab.
#include <QWidget>
#include <atomic>
#include <memory>
#include <optional>

#include "core/analysis/corpus_agreement.hpp"
#include "core/data/corpus_reader.hpp"

QT_BEGIN_NAMESPACE
class QCheckBox;
class QLabel;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableWidget;
class QTimer;
QT_END_NAMESPACE

namespace attnviz::ui {

class LatestOnly;

/// Histograms of tau-b over [-1, 1], one per pair ("attention vs saliency"), side by side.
class TauHistograms : public QWidget {
    Q_OBJECT
public:
    explicit TauHistograms(QWidget* parent = nullptr);
    void setTable(const AgreementTable* table, const std::vector<std::string>& pairs);
    QSize sizeHint() const override;

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    std::vector<std::pair<QString, std::vector<size_t>>> m_bins;
    std::vector<double> m_means;
};

class AgreementPanel : public QWidget {
    Q_OBJECT
public:
    explicit AgreementPanel(QWidget* parent = nullptr);
    ~AgreementPanel() override;

    void setModel(TranslationModelPtr model);
    void setCorpus(std::shared_ptr<const Corpus> corpus);
    /// The methods checked, in all_attribution_methods() order.
    std::vector<AttributionMethod> methods() const;
    void setMethods(const std::vector<AttributionMethod>& methods);

    /// Starts the run over the first maxSentences() sentences of the corpus.
    void start();
    /// Stops after the sentence in progress; what was done is shown.
    void cancel();
    bool busy() const;
    /// The last run's result (null before one finished).
    const CorpusAgreement* result() const { return m_result ? &*m_result : nullptr; }

    QSpinBox* maxSentences() const { return m_max; }
    QPushButton* startButton() const { return m_start; }
    QPushButton* cancelButton() const { return m_cancel; }
    QProgressBar* progressBar() const { return m_progress; }
    QTableWidget* table() const { return m_table; }
    TauHistograms* histograms() const { return m_histograms; }
    QLabel* summary() const { return m_summary; }
    /// Erasure flip curves too (Serrano & Smith 2019, core/analysis/erasure.hpp): per output step,
    /// source positions erased in order of attention, |grad x input|, integrated gradients and at
    /// random until the decision changes; the summary and a column per order in the table.
    QCheckBox* erasureBox() const { return m_erasure; }

Q_SIGNALS:
    /// A run ended (finished or cancelled): result() holds it.
    void finished();
    void failed(const QString& message);
    /// A sentence's row was double-clicked: its source as a user types it (not a subword model's pieces).
    void sentenceActivated(const QString& sentence);

private:
    void showResult(CorpusAgreement result, bool cancelled);
    void fillTable();

    TranslationModelPtr m_model;
    std::shared_ptr<const Corpus> m_corpus;
    std::vector<QCheckBox*> m_methodBoxes;
    QCheckBox* m_erasure;
    QSpinBox* m_max;
    QPushButton* m_start;
    QPushButton* m_cancel;
    QProgressBar* m_progress;
    QLabel* m_summary;
    TauHistograms* m_histograms;
    QTableWidget* m_table;
    QTimer* m_poll;
    LatestOnly* m_jobs;
    struct Progress {
        std::atomic<size_t> done{0}, total{0};
        std::atomic<bool> stop{false};
    };
    std::shared_ptr<Progress> m_run;
    std::optional<CorpusAgreement> m_result;
};

}  // namespace attnviz::ui
