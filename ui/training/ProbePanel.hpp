#pragma once
// Live probe: one sentence the trainer translates at every snapshot, shown as
// a heatmap that refreshes during training; a slider replays the stored
// snapshots so the alignment can be watched emerging.
#include <QWidget>
#include <vector>

#include "core/session/session.hpp"
#include "ui/heatmap/MapChoice.hpp"

QT_BEGIN_NAMESPACE
class QCheckBox;
class QLabel;
class QLineEdit;
class QSlider;
class QSpinBox;
class QToolBar;
QT_END_NAMESPACE

namespace attnviz::ui {

class HeatmapWidget;

class ProbePanel : public QWidget {
    Q_OBJECT
public:
    explicit ProbePanel(QWidget* parent = nullptr);

    QString sentence() const;
    void setSentence(const QString& sentence);
    /// Batches between refreshes (0 = once per epoch): TrainConfig::snapshot_every.
    int refreshEvery() const;
    void setRefreshEvery(int batches);

    int snapshotCount() const { return int(m_snapshots.size()); }
    int currentIndex() const;
    const ProbeResult* currentSnapshot() const;
    HeatmapWidget* heatmap() const { return m_heatmap; }
    QToolBar* heatmapToolBar() const { return m_tools; }

public Q_SLOTS:
    void addSnapshot(const attnviz::ProbeResult& snapshot);
    void clearSnapshots();
    void showSnapshot(int index);
    /// The attention map the heatmap shows (a Transformer's; ui/heatmap/MapChoice.hpp).
    void setMapChoice(const attnviz::ui::MapChoice& choice);

Q_SIGNALS:
    void sentenceChanged(const QString& sentence);
    void refreshEveryChanged(int batches);

private:
    QLineEdit* m_input;
    QSpinBox* m_every;
    QToolBar* m_tools;
    HeatmapWidget* m_heatmap;
    QSlider* m_slider;
    QLabel* m_position;
    QCheckBox* m_follow;
    std::vector<ProbeResult> m_snapshots;
    MapChoice m_mapChoice;
};

}  // namespace attnviz::ui
