#pragma once
// One decoding step under the microscope (seed 004's steps 1-4): for output
// token t, the raw score of every source token, the softmax weights that turn
// them into a distribution, and the norm of the context vector they produce.
#include <QWidget>

#include "ui/common/ColorMap.hpp"
#include "ui/heatmap/HeatmapWidget.hpp"

class QLabel;
class QTableWidget;

namespace attnviz::ui {

/// Vertical bars of the weights of one step, the token under each bar.
class WeightBars : public QWidget {
    Q_OBJECT
public:
    explicit WeightBars(QWidget* parent = nullptr);
    void setValues(const QStringList& labels, const std::vector<float>& weights);
    void setColorMap(ColorMap::Kind kind);
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    QStringList m_labels;
    std::vector<float> m_weights;
    ColorMap m_colorMap;
};

/// The step's most probable next tokens (top-k), best first, as probability bars;
/// the token the row holds is marked (chosen, or given when forced).
class CandidateList : public QWidget {
    Q_OBJECT
public:
    explicit CandidateList(QWidget* parent = nullptr);
    /// `token`: the row's token; `prob`/`rank`: its probability and 0-based rank (rank < 0: unknown).
    void setValues(const std::vector<Candidate>& candidates, const QString& token, double prob, long long rank, bool forced);
    int count() const { return int(m_candidates.size()); }
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    std::vector<Candidate> m_candidates;
    QString m_token;
    double m_prob = -1;
    long long m_rank = -1;
    bool m_forced = false;
};

class StepInspector : public QWidget {
    Q_OBJECT
public:
    explicit StepInspector(QWidget* parent = nullptr);

    /// Shows row `step` of data (-1 or out of range: nothing selected).
    void setStep(const HeatmapData& data, int step);
    int step() const { return m_step; }
    /// Number of rows in the table (one per source token).
    int tableRows() const;
    /// Weight shown in the table for source token `column`.
    double weightAt(int column) const;
    /// Number of top-k candidates shown (0 when the decoding recorded none).
    int candidateCount() const;
    /// The table of raw scores and weights (its header says which is which).
    QTableWidget* table() const { return m_table; }
    /// The width a column needs to show its header whole: the widest line of its text and the margins.
    int headerTextWidth(int section) const;

public Q_SLOTS:
    void setColorMap(attnviz::ui::ColorMap::Kind kind);
    void clear();

private:
    /// Keeps every column at least as wide as the widest header (headerTextWidth).
    void fitHeaders();

    QLabel* m_title;
    QLabel* m_context;
    WeightBars* m_bars;
    QLabel* m_candidatesTitle;
    CandidateList* m_candidates;
    QTableWidget* m_table;
    int m_step = -1;
};

}  // namespace attnviz::ui
