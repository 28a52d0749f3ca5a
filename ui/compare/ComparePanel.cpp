#include "ui/compare/ComparePanel.hpp"

#include "core/persist/model_file.hpp"

#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QPushButton>
#include <QScrollArea>
#include <QSplitter>
#include <QToolBar>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "ui/common/Background.hpp"
#include "ui/common/Format.hpp"
#include "ui/heatmap/HeatmapWidget.hpp"

namespace attnviz::ui {
namespace {
QWidget* titled(const QString& title, HeatmapWidget* heatmap, QWidget* parent) {
    auto* box = new QWidget(parent);
    auto* label = new QLabel(title, box);
    label->setTextFormat(Qt::RichText);
    QScrollArea* scroll = scrolled(heatmap, box);
    auto* layout = new QVBoxLayout(box);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(label);
    layout->addWidget(scroll, 1);
    return box;
}
}  // namespace

ComparePanel::ComparePanel(QWidget* parent)
    : QWidget(parent), m_jobs(new LatestOnly(this)), m_loads(new LatestOnly(this)) {
    m_a = new QComboBox(this);
    m_b = new QComboBox(this);
    m_a->setToolTip(tr("Model A: its own translation and attention"));
    m_b->setToolTip(tr("Model B: its own translation, and its attention while reading A's output (for the difference)"));
    m_add = new QPushButton(tr("Add model"), this);
    m_add->setToolTip(tr("Open a saved model or a Hugging Face model folder to compare (it becomes B)"));
    auto* addMenu = new QMenu(m_add);
    addMenu->addAction(tr("Checkpoint or model file…"), this, &ComparePanel::browseCheckpoint);
    addMenu->addAction(tr("Hugging Face model folder…"), this, &ComparePanel::browseModelFolder);
    m_add->setMenu(addMenu);
    m_input = new QLineEdit(this);
    m_input->setClearButtonEnabled(true);
    m_input->setPlaceholderText(tr("A sentence both models translate"));
    m_go = new QPushButton(tr("Compare"), this);
    auto* row = new QHBoxLayout();
    row->addWidget(new QLabel(tr("A"), this));
    row->addWidget(m_a, 1);
    row->addWidget(new QLabel(tr("B"), this));
    row->addWidget(m_b, 1);
    row->addWidget(m_add);
    auto* row2 = new QHBoxLayout();
    row2->addWidget(m_input, 1);
    row2->addWidget(m_go);
    m_summary = new QLabel(this);
    m_summary->setWordWrap(true);
    m_summary->setTextFormat(Qt::RichText);
    m_summary->setText(tr("Keep a run (Training ▸ Keep this run) or add a checkpoint, choose A and B, and compare them "
                          "on a sentence: their heatmaps side by side, and where A attends more (red) or less (blue) "
                          "than B while both read A's output."));
    m_tools = new QToolBar(this);
    m_tools->setIconSize(QSize(16, 16));
    m_tools->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    m_heatmapA = new HeatmapWidget(this);
    m_heatmapB = new HeatmapWidget(this);
    m_difference = new HeatmapWidget(this);
    m_heatmapA->setObjectName(QStringLiteral("compareA"));
    m_heatmapB->setObjectName(QStringLiteral("compareB"));
    m_difference->setObjectName(QStringLiteral("compareDifference"));
    m_difference->clear(tr("The difference A − B appears here."));
    auto* splitter = new QSplitter(Qt::Horizontal, this);
    splitter->addWidget(titled(tr("<b>A</b>"), m_heatmapA, splitter));
    splitter->addWidget(titled(tr("<b>B</b>"), m_heatmapB, splitter));
    splitter->addWidget(titled(tr("<b>A − B</b> (B reading A's output)"), m_difference, splitter));

    auto* layout = new QVBoxLayout(this);
    layout->addLayout(row);
    layout->addLayout(row2);
    layout->addWidget(m_summary);
    layout->addWidget(m_tools);
    layout->addWidget(splitter, 1);

    connect(m_go, &QPushButton::clicked, this, &ComparePanel::compare);
    connect(m_input, &QLineEdit::returnPressed, this, &ComparePanel::compare);
    m_models.push_back({tr("Current model"), nullptr});
    m_a->addItem(m_models[0].label);
    m_b->addItem(m_models[0].label);
}

void ComparePanel::setCurrentModel(TranslationModelPtr model) {
    m_models[0].model = std::move(model);
    const QString label = m_models[0].model ? tr("Current model") : tr("Current model (none yet)");
    m_a->setItemText(0, label);
    m_b->setItemText(0, label);
}

int ComparePanel::addModel(const QString& label, TranslationModelPtr model) {
    m_models.push_back({label, std::move(model)});
    m_a->addItem(label);
    m_b->addItem(label);
    return int(m_models.size()) - 1;
}

QString ComparePanel::modelLabel(int index) const {
    return index >= 0 && index < modelCount() ? m_models[size_t(index)].label : QString();
}

void ComparePanel::setChoices(int a, int b) {
    m_a->setCurrentIndex(a);
    m_b->setCurrentIndex(b);
}

void ComparePanel::setSentence(const QString& sentence) { m_input->setText(sentence); }
QString ComparePanel::sentence() const { return m_input->text(); }

void ComparePanel::fail(const QString& message) {
    m_summary->setText(QStringLiteral("<span style='color:#b00020'>%1</span>").arg(message.toHtmlEscaped()));
    Q_EMIT compareFailed(message);
}

void ComparePanel::compare() {
    const Entry a = m_models[size_t(std::max(0, m_a->currentIndex()))];
    const Entry b = m_models[size_t(std::max(0, m_b->currentIndex()))];
    if (!a.model || !b.model) {
        fail(tr("%1 has no model yet: train one, keep a run or add a checkpoint.").arg(!a.model ? a.label : b.label));
        return;
    }
    const std::string text = ss(m_input->text());
    // Two pretrained models (the published one beside a fine-tuned copy) decode as generate() would,
    // greedily: A's generation config (length limit, forced and barred tokens) for both.
    const bool pretrained = a.model->config().is_pretrained() && b.model->config().is_pretrained();
    DecodeOptions options = pretrained ? a.model->decode_defaults() : DecodeOptions{};
    options.beam_size = options.num_hypotheses = 1;
    options.top_k = 5;
    m_summary->setText(tr("Comparing…"));
    m_jobs->run<std::shared_ptr<const AttentionComparison>>(
        [a = a.model, b = b.model, text, options] {
            return std::make_shared<const AttentionComparison>(compare_attention(*a, *b, text, options));
        },
        [this, la = a.label, lb = b.label](std::shared_ptr<const AttentionComparison> c) { showComparison(c, la, lb); },
        [this](const QString& message) { fail(message); });
}

void ComparePanel::showComparison(std::shared_ptr<const AttentionComparison> c, const QString& labelA,
                                  const QString& labelB) {
    m_comparison = std::move(c);
    m_labelA = labelA;
    m_labelB = labelB;
    const AttentionComparison& r = *m_comparison;
    auto show = [this](HeatmapWidget* h, const Translation& t, const QString& label) {
        if (t.empty()) return h->clear(QObject::tr("Nothing to show for an empty sentence."));
        if (!t.attention_available) return h->clear(QObject::tr("%1 has no attention (scoring “none”).").arg(label));
        h->setHeatmapData(mapHeatmapData(t, 0, m_mapChoice, label + QStringLiteral(": ") + qs(t.best().text)));
    };
    show(m_heatmapA, r.a, labelA);
    show(m_heatmapB, r.b, labelB);
    if (!r.comparable) {
        m_difference->clear(qs(r.note));
        m_summary->setText(tr("No difference to show: %1.").arg(qs(r.note).toHtmlEscaped()));
        Q_EMIT compared();
        return;
    }
    m_mapName.clear();
    if (showMapDifference()) {
        m_summary->setText(summary());
        Q_EMIT compared();
        return;
    }
    HeatmapData d;
    d.source = toQStringList(r.a.src_tokens);
    d.output = toQStringList(r.a.best().tokens);
    d.weights = r.difference;
    d.signedRange = float(std::max(0.05, r.max_abs_difference));
    d.title = tr("A − B on “%1”").arg(qs(r.a.best().text));
    m_difference->setHeatmapData(d);
    m_summary->setText(summary());
    Q_EMIT compared();
}

void ComparePanel::setMapChoice(const MapChoice& choice) {
    m_mapChoice = choice;
    if (m_comparison) showComparison(m_comparison, m_labelA, m_labelB);
}

bool ComparePanel::showMapDifference() {
    const AttentionComparison& r = *m_comparison;
    if (r.a.empty() || r.b_on_a.empty() || !hasMapChoice(r.a.best().attention) || !hasMapChoice(r.b_on_a.best().attention))
        return false;
    const HeatmapData a = mapHeatmapData(r.a, 0, m_mapChoice, {}), b = mapHeatmapData(r.b_on_a, 0, m_mapChoice, {});
    if (a.mapName != b.mapName || a.rows() != b.rows() || a.columns() != b.columns() || a.rows() == 0) return false;
    HeatmapData d;
    d.source = a.source;
    d.output = a.output;
    double largest = 0.0, sum = 0.0;
    for (int row = 0; row < a.rows(); ++row) {
        std::vector<float> diff(size_t(a.columns()));
        for (size_t col = 0; col < diff.size(); ++col) {
            diff[col] = a.weights[size_t(row)][col] - b.weights[size_t(row)][col];
            largest = std::max(largest, double(std::abs(diff[col])));
            sum += std::abs(diff[col]);
        }
        d.weights.push_back(std::move(diff));
    }
    m_mapName = a.mapName;
    m_mapMean = sum / double(a.rows() * a.columns());
    m_mapMax = largest;
    d.signedRange = float(std::max(0.05, largest));
    d.title = tr("A − B on “%1”   ·   %2").arg(qs(r.a.best().text), a.mapName);
    m_difference->setHeatmapData(d);
    return true;
}

QString ComparePanel::summary() const {
    if (!m_comparison || !m_comparison->comparable) return {};
    const AttentionComparison& r = *m_comparison;
    QString text = r.same_output ? tr("Both write <b>%1</b>.").arg(qs(r.a.best().text).toHtmlEscaped())
                                 : tr("A writes <b>%1</b>, B writes <b>%2</b>.")
                                       .arg(qs(r.a.best().text).toHtmlEscaped(), qs(r.b.best().text).toHtmlEscaped());
    const bool map = !m_mapName.isEmpty();  // a Transformer's chosen map, else the primary maps
    text += tr(" Reading A's output, their attention%5 differs by %1 per cell on average (at most %2); B gives it "
               "log P %3 where A gives %4.")
                .arg(map ? m_mapMean : r.mean_abs_difference, 0, 'f', 3)
                .arg(map ? m_mapMax : r.max_abs_difference, 0, 'f', 3)
                .arg(r.b_on_a.best().log_prob, 0, 'f', 3)
                .arg(r.a.best().log_prob, 0, 'f', 3)
                .arg(map ? QStringLiteral(" (%1)").arg(m_mapName.toHtmlEscaped()) : QString());
    return text;
}

void ComparePanel::browseCheckpoint() {
    const QString path = QFileDialog::getOpenFileName(this, tr("Add a checkpoint to compare"), QString(),
                                                      checkpointFileFilter());
    if (!path.isEmpty()) addCheckpoint(path);
}

void ComparePanel::browseModelFolder() {
    const QString path = QFileDialog::getExistingDirectory(this, tr("Add a Hugging Face model folder to compare"));
    if (!path.isEmpty()) addCheckpoint(path);
}

void ComparePanel::addCheckpoint(const QString& path) {
    const std::string file = ss(path);
    m_summary->setText(tr("Reading %1…").arg(QFileInfo(path).fileName().toHtmlEscaped()));
    m_loads->run<TranslationModelPtr>(
        [file] { return load_model(file); },
        [this, path](TranslationModelPtr model) {
            const int index = addModel(QFileInfo(path).fileName(), std::move(model));
            m_b->setCurrentIndex(index);
            m_summary->setText(tr("Added %1 as B.").arg(QFileInfo(path).fileName().toHtmlEscaped()));
            Q_EMIT checkpointAdded(index);
        },
        [this](const QString& message) { fail(message); });
}

}  // namespace attnviz::ui
