#pragma once
// Compare two models on one sentence: the current model, a kept run's model or
// an opened checkpoint as A and B; their heatmaps side by side and the
// difference A - B on the same rows (B reading A's output; core/attention_compare).
// A teacher shows additive vs dot vs no attention this way.
#include <QWidget>
#include <memory>
#include <vector>

#include "core/analysis/attention_compare.hpp"
#include "core/decode/translation_model.hpp"
#include "ui/heatmap/MapChoice.hpp"

QT_BEGIN_NAMESPACE
class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QToolBar;
QT_END_NAMESPACE

namespace attnviz::ui {

class HeatmapWidget;
class LatestOnly;

class ComparePanel : public QWidget {
    Q_OBJECT
public:
    explicit ComparePanel(QWidget* parent = nullptr);

    /// The first choice, "Current model", follows training and opened checkpoints.
    void setCurrentModel(TranslationModelPtr model);
    /// Adds a model to both choices (a kept run, a checkpoint); returns its index.
    int addModel(const QString& label, TranslationModelPtr model);
    int modelCount() const { return int(m_models.size()); }
    QString modelLabel(int index) const;
    /// Chooses A and B by index (0: the current model).
    void setChoices(int a, int b);
    void setSentence(const QString& sentence);
    QString sentence() const;

    /// The newest comparison (null before the first).
    std::shared_ptr<const AttentionComparison> comparison() const { return m_comparison; }
    QString summary() const;
    HeatmapWidget* heatmapA() const { return m_heatmapA; }
    HeatmapWidget* heatmapB() const { return m_heatmapB; }
    HeatmapWidget* difference() const { return m_difference; }
    QToolBar* heatmapToolBar() const { return m_tools; }

public Q_SLOTS:
    /// Compares A and B on the sentence, off the GUI thread (compared() or compareFailed()).
    void compare();
    /// Reads a checkpoint off the GUI thread and adds it (and chooses it as B).
    void addCheckpoint(const QString& path);
    /// The attention map A's and B's heatmaps and their difference show (a Transformer's; ui/heatmap/MapChoice.hpp).
    void setMapChoice(const attnviz::ui::MapChoice& choice);

Q_SIGNALS:
    void compared();
    void compareFailed(const QString& message);
    void checkpointAdded(int index);

private:
    struct Entry {
        QString label;
        TranslationModelPtr model;
    };
    void showComparison(std::shared_ptr<const AttentionComparison> c, const QString& labelA, const QString& labelB);
    void fail(const QString& message);
    void browseCheckpoint();
    void browseModelFolder();
    /// A − B of the chosen map when both models record it in the same shape (false: the primary maps').
    bool showMapDifference();

    std::vector<Entry> m_models;
    std::shared_ptr<const AttentionComparison> m_comparison;
    MapChoice m_mapChoice;
    QString m_mapName;                      ///< the map the difference shows (empty: the primary maps)
    double m_mapMean = 0.0, m_mapMax = 0.0;  ///< its mean and largest absolute difference
    QString m_labelA, m_labelB;
    LatestOnly* m_jobs;
    LatestOnly* m_loads;
    QComboBox* m_a;
    QComboBox* m_b;
    QPushButton* m_add;
    QLineEdit* m_input;
    QPushButton* m_go;
    QLabel* m_summary;
    QToolBar* m_tools;
    HeatmapWidget* m_heatmapA;
    HeatmapWidget* m_heatmapB;
    HeatmapWidget* m_difference;
};

}  // namespace attnviz::ui
