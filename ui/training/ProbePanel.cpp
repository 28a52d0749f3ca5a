#include "ui/training/ProbePanel.hpp"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QScrollArea>
#include <QSlider>
#include <QSpinBox>
#include <QToolBar>
#include <QVBoxLayout>

#include "ui/common/Format.hpp"
#include "ui/heatmap/HeatmapWidget.hpp"

namespace attnviz::ui {
namespace {
constexpr size_t kMaxSnapshots = 600;  // beyond this every other old frame is dropped
}

ProbePanel::ProbePanel(QWidget* parent) : QWidget(parent) {
    m_input = new QLineEdit(this);
    m_input->setClearButtonEnabled(true);
    m_input->setPlaceholderText(tr("Probe sentence, translated at every snapshot while training"));
    m_every = new QSpinBox(this);
    m_every->setRange(0, 100000);
    m_every->setValue(20);
    m_every->setSpecialValueText(tr("each epoch"));
    m_every->setSuffix(tr(" batches"));
    m_every->setToolTip(tr("How often the trainer publishes weights and the probe is refreshed"));

    auto* top = new QHBoxLayout();
    top->addWidget(new QLabel(tr("Probe"), this));
    top->addWidget(m_input, 1);
    top->addWidget(new QLabel(tr("Refresh every"), this));
    top->addWidget(m_every);

    m_tools = new QToolBar(this);
    m_tools->setIconSize(QSize(16, 16));
    m_tools->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    m_heatmap = new HeatmapWidget(this);
    m_heatmap->clear(tr("The probe's heatmap appears here during training."));
    auto* scroll = new QScrollArea(this);
    scroll->setWidget(m_heatmap);
    scroll->setWidgetResizable(true);

    m_slider = new QSlider(Qt::Horizontal, this);
    m_slider->setRange(0, 0);
    m_slider->setEnabled(false);
    m_slider->setToolTip(tr("Replay the snapshots: watch the alignment emerge"));
    m_position = new QLabel(tr("no snapshot yet"), this);
    fixLabelSize(m_position, tr("epoch %1 · batch %2 · %3/%4").arg(99999).arg(99999999).arg(600).arg(600));
    m_position->setAlignment(Qt::AlignRight | Qt::AlignVCenter);
    m_follow = new QCheckBox(tr("Follow latest"), this);
    m_follow->setChecked(true);
    auto* bottom = new QHBoxLayout();
    bottom->addWidget(m_slider, 1);
    bottom->addWidget(m_position);
    bottom->addWidget(m_follow);

    auto* layout = new QVBoxLayout(this);
    layout->addLayout(top);
    layout->addWidget(m_tools);
    layout->addWidget(scroll, 1);
    layout->addLayout(bottom);

    connect(m_input, &QLineEdit::editingFinished, this, [this] {
        if (m_input->isModified()) {
            m_input->setModified(false);
            clearSnapshots();
            Q_EMIT sentenceChanged(sentence());
        }
    });
    connect(m_every, &QSpinBox::valueChanged, this, &ProbePanel::refreshEveryChanged);
    connect(m_slider, &QSlider::valueChanged, this, [this](int v) {
        m_follow->setChecked(v == m_slider->maximum());
        showSnapshot(v);
    });
}

QString ProbePanel::sentence() const { return m_input->text().trimmed(); }

void ProbePanel::setSentence(const QString& sentence) {
    if (sentence == m_input->text()) return;
    m_input->setText(sentence);
    m_input->setModified(false);
    clearSnapshots();
    Q_EMIT sentenceChanged(this->sentence());
}

int ProbePanel::refreshEvery() const { return m_every->value(); }
void ProbePanel::setRefreshEvery(int batches) { m_every->setValue(batches); }

int ProbePanel::currentIndex() const { return m_snapshots.empty() ? -1 : m_slider->value(); }

const ProbeResult* ProbePanel::currentSnapshot() const {
    const int i = currentIndex();
    return i >= 0 && i < int(m_snapshots.size()) ? &m_snapshots[i] : nullptr;
}

void ProbePanel::addSnapshot(const ProbeResult& snapshot) {
    if (!snapshot.translation || snapshot.translation->input != ss(sentence())) return;  // an older probe
    const bool follow = m_follow->isChecked() || m_snapshots.empty();
    m_snapshots.push_back(snapshot);
    if (m_snapshots.size() > kMaxSnapshots) {
        std::vector<ProbeResult> thinned;
        for (size_t i = 0; i < m_snapshots.size(); ++i)
            if (i % 2 == 0 || i + 50 >= m_snapshots.size()) thinned.push_back(m_snapshots[i]);
        m_snapshots.swap(thinned);
    }
    m_slider->blockSignals(true);
    m_slider->setRange(0, int(m_snapshots.size()) - 1);
    m_slider->setEnabled(true);
    if (follow) m_slider->setValue(m_slider->maximum());
    m_slider->blockSignals(false);
    showSnapshot(m_slider->value());
}

void ProbePanel::clearSnapshots() {
    m_snapshots.clear();
    m_slider->blockSignals(true);
    m_slider->setRange(0, 0);
    m_slider->setEnabled(false);
    m_slider->blockSignals(false);
    m_follow->setChecked(true);
    m_position->setText(tr("no snapshot yet"));
    m_heatmap->clear(tr("The probe's heatmap appears here during training."));
}

void ProbePanel::showSnapshot(int index) {
    if (index < 0 || index >= int(m_snapshots.size())) return;
    const ProbeResult& s = m_snapshots[index];
    const Translation& t = *s.translation;
    m_position->setText(tr("epoch %1 · batch %2 · %3/%4").arg(s.epoch).arg(s.global_step).arg(index + 1).arg(m_snapshots.size()));
    if (t.empty() || !t.attention_available) {
        m_heatmap->clear(t.attention_available ? tr("(empty probe)") : tr("This model has no attention."));
        return;
    }
    m_heatmap->setHeatmapData(
        mapHeatmapData(t, 0, m_mapChoice, tr("batch %1:  %2  →  %3").arg(s.global_step).arg(qs(t.input), qs(t.best().text))));
}

void ProbePanel::setMapChoice(const MapChoice& choice) {
    m_mapChoice = choice;
    showSnapshot(currentIndex());
}

}  // namespace attnviz::ui
