#include "ui/CorpusPanel.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QLabel>
#include <QPainter>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QVBoxLayout>
#include <algorithm>

#include "core/error.hpp"
#include "ui/Format.hpp"

namespace attnviz::ui {
namespace {
constexpr int kMaxBin = 30;
constexpr int kFileItem = -1;   // combo data of the "file" entry
constexpr int kOpenItem = -2;   // combo data of "Open a TSV file…"
}  // namespace

LengthHistogram::LengthHistogram(QWidget* parent) : QWidget(parent) {
    setMinimumHeight(90);
    setToolTip(tr("Sentence lengths in tokens: source (blue) and target (orange)"));
}

void LengthHistogram::setCorpus(const Corpus* corpus) {
    m_src.assign(kMaxBin + 1, 0);
    m_tgt.assign(kMaxBin + 1, 0);
    if (corpus)
        for (const auto& p : corpus->pairs) {
            ++m_src[std::min<size_t>(p.src.size(), kMaxBin)];
            ++m_tgt[std::min<size_t>(p.tgt.size(), kMaxBin)];
        }
    update();
}

QSize LengthHistogram::sizeHint() const { return QSize(240, 110); }

void LengthHistogram::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.fillRect(rect(), palette().base());
    int first = -1, last = 0, peak = 1;
    for (int i = 0; i <= kMaxBin && i < int(m_src.size()); ++i) {
        if (m_src[i] || m_tgt[i]) last = i, first = first < 0 ? i : first;
        peak = std::max({peak, m_src[i], m_tgt[i]});
    }
    first = std::max(0, first - 1);
    const QFontMetrics fm(font());
    const QRect plot = rect().adjusted(4, 4, -4, -fm.height() - 4);
    if (last == 0) {
        p.setPen(palette().color(QPalette::PlaceholderText));
        p.drawText(rect(), Qt::AlignCenter, tr("no corpus"));
        return;
    }
    const double slot = double(plot.width()) / (last - first + 1);
    const QColor colors[] = {QColor(0x1f77b4), QColor(0xff7f0e)};
    for (int i = first; i <= last; ++i) {
        for (int side = 0; side < 2; ++side) {
            const int v = side == 0 ? m_src[i] : m_tgt[i];
            const double h = double(v) / peak * plot.height();
            p.fillRect(QRectF(plot.left() + (i - first) * slot + slot * 0.05 + side * slot * 0.45, plot.bottom() - h,
                              slot * 0.45, h),
                       colors[side]);
        }
    }
    p.setPen(palette().color(QPalette::Text));
    p.drawLine(plot.bottomLeft(), plot.bottomRight());
    const int step = std::max(1, int(std::ceil(fm.horizontalAdvance(QStringLiteral("30+")) / slot)));
    for (int i = first; i <= last; i += step)
        p.drawText(QRectF(plot.left() + (i - first) * slot - slot, plot.bottom() + 2, 3 * slot, fm.height()), Qt::AlignHCenter,
                   i == kMaxBin ? QStringLiteral("%1+").arg(kMaxBin) : QString::number(i));
}

CorpusPanel::CorpusPanel(QWidget* parent) : QWidget(parent) {
    m_combo = new QComboBox(this);
    for (TaskKind kind : all_tasks())
        m_combo->addItem(tr("Built-in: %1").arg(qs(task_name(kind))), int(kind));
    m_combo->insertSeparator(m_combo->count());
    m_combo->addItem(tr("Open a TSV file…"), kOpenItem);
    m_combo->setToolTip(tr("A built-in task generated in code, or a Tatoeba-style file: source<TAB>target[<TAB>…]"));
    m_description = new QLabel(this);
    m_description->setWordWrap(true);

    m_taskOptions = new QWidget(this);
    m_pairs = new QSpinBox(m_taskOptions);
    m_pairs->setRange(50, 200000);
    m_pairs->setSingleStep(500);
    m_pairs->setValue(3000);
    m_pairs->setToolTip(tr("How many pairs the task generates (validation is taken from these)"));
    auto* taskForm = new QFormLayout(m_taskOptions);
    taskForm->setContentsMargins(0, 0, 0, 0);
    taskForm->addRow(tr("Pairs"), m_pairs);

    m_fileOptions = new QWidget(this);
    m_level = new QComboBox(m_fileOptions);
    m_level->addItem(tr("words"), int(TokenLevel::word));
    m_level->addItem(tr("characters"), int(TokenLevel::character));
    m_swap = new QCheckBox(tr("Swap columns (target → source)"), m_fileOptions);
    m_maxPairs = new QSpinBox(m_fileOptions);
    m_maxPairs->setRange(0, 10000000);
    m_maxPairs->setSingleStep(1000);
    m_maxPairs->setSpecialValueText(tr("all"));
    auto* fileForm = new QFormLayout(m_fileOptions);
    fileForm->setContentsMargins(0, 0, 0, 0);
    fileForm->addRow(tr("Tokens"), m_level);
    fileForm->addRow(m_swap);
    fileForm->addRow(tr("Read at most"), m_maxPairs);

    m_summary = new QLabel(this);
    m_summary->setWordWrap(true);
    m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_histogram = new LengthHistogram(this);

    auto* layout = new QVBoxLayout(this);
    layout->addWidget(m_combo);
    layout->addWidget(m_description);
    layout->addWidget(m_taskOptions);
    layout->addWidget(m_fileOptions);
    layout->addWidget(m_summary);
    layout->addWidget(m_histogram);

    connect(m_combo, &QComboBox::activated, this, &CorpusPanel::comboActivated);
    connect(m_pairs, &QSpinBox::editingFinished, this, [this] {
        if (isTask() && (!m_corpus || int(m_corpus->pairs.size()) != m_pairs->value())) rebuildTask();
    });
    auto reloadFile = [this] {
        QString error;
        if (!m_filePath.isEmpty() && !loadFile(m_filePath, &error)) m_summary->setText(error);
    };
    connect(m_level, &QComboBox::activated, this, reloadFile);
    connect(m_swap, &QCheckBox::toggled, this, reloadFile);
    connect(m_maxPairs, &QSpinBox::editingFinished, this, reloadFile);
    selectTask(TaskKind::toy_french);
}

void CorpusPanel::comboActivated(int index) {
    const int data = m_combo->itemData(index).toInt();
    if (data == kOpenItem) {
        refreshFileOptions();  // put the selection back; the main window shows the file dialog
        Q_EMIT openFileRequested();
    } else if (data == kFileItem) {
        // already the current file
    } else {
        selectTask(static_cast<TaskKind>(data));
    }
}

void CorpusPanel::selectTask(TaskKind kind) {
    m_task = kind;
    m_filePath.clear();
    const int file = m_combo->findData(kFileItem);
    if (file >= 0) m_combo->removeItem(file);
    rebuildTask();
}

void CorpusPanel::setNumPairs(int pairs) {
    m_pairs->setValue(pairs);
    if (isTask()) rebuildTask();
}

int CorpusPanel::numPairs() const { return m_pairs->value(); }

void CorpusPanel::rebuildTask() {
    TaskOptions options;
    options.num_pairs = size_t(m_pairs->value());
    auto corpus = std::make_shared<Corpus>(task_corpus(m_task, options));
    m_description->setText(qs(task_description(m_task)));
    setCorpus(std::move(corpus));
}

bool CorpusPanel::loadFile(const QString& path, QString* error) {
    TsvOptions options;
    options.level = static_cast<TokenLevel>(m_level->currentData().toInt());
    options.reverse = m_swap->isChecked();
    options.max_pairs = size_t(m_maxPairs->value());
    std::shared_ptr<Corpus> corpus;
    try {
        corpus = std::make_shared<Corpus>(read_tsv(ss(path), options));
    } catch (const std::exception& e) {
        if (error) *error = qs(e.what());
        return false;
    }
    m_filePath = QFileInfo(path).absoluteFilePath();
    int file = m_combo->findData(kFileItem);
    if (file < 0) {
        m_combo->insertItem(0, QString(), kFileItem);
        file = 0;
    }
    m_combo->setItemText(file, tr("File: %1").arg(QFileInfo(path).fileName()));
    m_combo->setItemData(file, m_filePath, Qt::ToolTipRole);
    m_description->setText(tr("Tatoeba-style pairs from %1").arg(m_filePath.toHtmlEscaped()));
    setCorpus(std::move(corpus));
    return true;
}

void CorpusPanel::restore(const QString& key, QString* error) {
    if (key.startsWith(QLatin1String("file:"))) {
        QString err;
        if (loadFile(key.mid(5), &err)) return;
        if (error) *error = err;
        selectTask(TaskKind::toy_french);
    } else if (key.startsWith(QLatin1String("task:"))) {
        try {
            selectTask(task_from_name(ss(key.mid(5))));
        } catch (const std::exception&) {
            selectTask(TaskKind::toy_french);
        }
    }
}

QString CorpusPanel::sourceKey() const {
    return isTask() ? QStringLiteral("task:") + qs(task_name(m_task)) : QStringLiteral("file:") + m_filePath;
}

QStringList CorpusPanel::examples() const {
    if (isTask()) return toQStringList(task_examples(m_task));
    QStringList out;
    if (m_corpus)
        for (size_t i = 0; i < m_corpus->pairs.size() && out.size() < 5; i += std::max<size_t>(1, m_corpus->pairs.size() / 5))
            out << qs(detokenize(m_corpus->pairs[i].src, m_corpus->level));
    return out;
}

void CorpusPanel::refreshFileOptions() {
    const QSignalBlocker block(m_combo);
    const int index = isTask() ? m_combo->findData(int(m_task)) : m_combo->findData(kFileItem);
    m_combo->setCurrentIndex(std::max(0, index));
    m_taskOptions->setVisible(isTask());
    m_fileOptions->setVisible(!isTask());
}

void CorpusPanel::setCorpus(std::shared_ptr<const Corpus> corpus) {
    m_corpus = std::move(corpus);
    std::vector<std::vector<std::string>> src, tgt;
    src.reserve(m_corpus->pairs.size());
    tgt.reserve(m_corpus->pairs.size());
    for (const auto& p : m_corpus->pairs) src.push_back(p.src), tgt.push_back(p.tgt);
    m_srcVocab = int(Vocab::build(src).size());
    m_tgtVocab = int(Vocab::build(tgt).size());
    m_summary->setText(summaryText());
    QString skippedTip;
    for (size_t i = 0; i < m_corpus->skipped.size() && i < 20; ++i)
        skippedTip += tr("line %1: %2\n").arg(m_corpus->skipped[i].line).arg(qs(m_corpus->skipped[i].reason));
    if (m_corpus->skipped.size() > 20) skippedTip += tr("… and %1 more").arg(m_corpus->skipped.size() - 20);
    m_summary->setToolTip(skippedTip.trimmed());
    m_histogram->setCorpus(m_corpus.get());
    refreshFileOptions();
    Q_EMIT corpusChanged();
}

QString CorpusPanel::summaryText() const {
    if (!m_corpus) return {};
    QString text = tr("<b>%1</b> pairs · %2 skipped line(s)<br>vocabulary: %3 source, %4 target tokens (%5)")
                       .arg(m_corpus->pairs.size())
                       .arg(m_corpus->skipped.size())
                       .arg(m_srcVocab)
                       .arg(m_tgtVocab)
                       .arg(m_corpus->level == TokenLevel::character ? tr("characters") : tr("words"));
    if (!m_corpus->skipped.empty())
        text += tr("<br><span style='color:#b35c00'>first skipped: line %1 (%2)</span>")
                    .arg(m_corpus->skipped.front().line)
                    .arg(qs(m_corpus->skipped.front().reason).toHtmlEscaped());
    return text;
}

}  // namespace attnviz::ui
