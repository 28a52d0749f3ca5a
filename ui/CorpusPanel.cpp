#include "ui/CorpusPanel.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QVBoxLayout>
#include <algorithm>

#include "ui/Background.hpp"
#include "ui/Format.hpp"
#include "ui/LengthHistogram.hpp"

namespace attnviz::ui {
namespace {
constexpr int kFileItem = -1;   // combo data of the "file" entry
constexpr int kOpenItem = -2;   // combo data of "Open a TSV file…"

/// A corpus and what training gets from it: what a background load delivers.
struct Loaded {
    std::shared_ptr<const Corpus> corpus;
    CorpusSummary summary;
};
}  // namespace

CorpusPanel::CorpusPanel(QWidget* parent) : QWidget(parent), m_jobs(new LatestOnly(this)) {
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
    m_level->addItem(tr("subwords (SentencePiece)"), int(TokenLevel::subword));
    m_level->setToolTip(tr("Subwords: a SentencePiece model trained on the training pairs cuts the words into "
                           "pieces (its size and algorithm: Subword vocabulary / Subword model in the settings)"));
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

    m_busy = new QWidget(this);
    auto* bar = new QProgressBar(m_busy);
    bar->setRange(0, 0);  // busy: no known end
    bar->setTextVisible(false);
    bar->setMaximumSize(60, QFontMetrics(font()).height());
    m_busyText = new QLabel(m_busy);
    auto* busyRow = new QHBoxLayout(m_busy);
    busyRow->setContentsMargins(0, 0, 0, 0);
    busyRow->addWidget(bar);
    busyRow->addWidget(m_busyText, 1);
    m_busy->setVisible(false);
    m_summaryLabel = new QLabel(this);
    m_summaryLabel->setWordWrap(true);
    m_summaryLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_histogram = new LengthHistogram(this);

    auto* layout = new QVBoxLayout(this);
    layout->addWidget(m_combo);
    layout->addWidget(m_description);
    layout->addWidget(m_taskOptions);
    layout->addWidget(m_fileOptions);
    layout->addWidget(m_busy);
    layout->addWidget(m_summaryLabel);
    layout->addWidget(m_histogram);

    connect(m_combo, &QComboBox::activated, this, &CorpusPanel::comboActivated);
    connect(m_pairs, &QSpinBox::editingFinished, this, [this] {
        if (isTask() && m_chosen.pairs != size_t(m_pairs->value())) selectTask(m_chosen.task);
    });
    auto reloadFile = [this] {
        if (!isTask()) loadFile(m_chosen.file);
    };
    connect(m_level, &QComboBox::activated, this, reloadFile);
    connect(m_swap, &QCheckBox::toggled, this, reloadFile);
    connect(m_maxPairs, &QSpinBox::editingFinished, this, reloadFile);
    selectTask(TaskKind::toy_french);
}

CorpusPanel::Source CorpusPanel::sourceFromForm(const QString& file, TaskKind task) const {
    Source s;
    s.file = file;
    s.task = task;
    s.pairs = size_t(m_pairs->value());
    s.tsv.level = static_cast<TokenLevel>(m_level->currentData().toInt());
    s.tsv.reverse = m_swap->isChecked();
    s.tsv.max_pairs = size_t(m_maxPairs->value());
    return s;
}

void CorpusPanel::comboActivated(int index) {
    const int data = m_combo->itemData(index).toInt();
    if (data == kOpenItem) {
        refreshCombo();  // put the selection back; the main window shows the file dialog
        Q_EMIT openFileRequested();
    } else if (data != kFileItem) {  // the file entry is the current file already
        selectTask(static_cast<TaskKind>(data));
    }
}

void CorpusPanel::selectTask(TaskKind kind) { load(sourceFromForm(QString(), kind)); }

void CorpusPanel::loadFile(const QString& path) { load(sourceFromForm(QFileInfo(path).absoluteFilePath(), m_chosen.task)); }

void CorpusPanel::setNumPairs(int pairs) {
    m_pairs->setValue(pairs);
    if (isTask() && m_chosen.pairs != size_t(m_pairs->value())) selectTask(m_chosen.task);
}

int CorpusPanel::numPairs() const { return m_pairs->value(); }

void CorpusPanel::restore(const QString& key) {
    if (key.startsWith(QLatin1String("file:"))) {
        loadFile(key.mid(5));  // falls back to the default task when it fails
    } else if (key.startsWith(QLatin1String("task:"))) {
        try {
            selectTask(task_from_name(ss(key.mid(5))));
        } catch (const std::exception&) {
            selectTask(TaskKind::toy_french);
        }
    }
}

void CorpusPanel::setDataSettings(const TrainConfig& config) {
    if (same_data_settings(config, m_data)) return;
    m_data = data_settings(config);
    if (m_loading) request(true);  // the corpus on its way gets summarised with the new settings
    else if (m_corpus) request(false);
}

void CorpusPanel::load(const Source& source) {
    m_chosen = source;
    refreshCombo();
    request(true);
}

void CorpusPanel::request(bool load) {
    const Source source = m_chosen;
    const TrainConfig settings = m_data;
    const std::shared_ptr<const Corpus> current = load ? nullptr : m_corpus;
    m_loading = load;
    m_jobs->run<Loaded>(
        [source, settings, current] {
            Loaded out;
            if (current) out.corpus = current;
            else if (source.file.isEmpty()) out.corpus = std::make_shared<const Corpus>(task_corpus(source.task, {source.pairs}));
            else out.corpus = std::make_shared<const Corpus>(read_tsv(ss(source.file), source.tsv));
            out.summary = summarize_corpus(*out.corpus, settings);
            return out;
        },
        [this, load, source](Loaded result) {
            m_loading = false;
            if (load) {
                m_corpus = std::move(result.corpus);
                m_loaded = source;
            }
            m_summary = std::move(result.summary);
            showSummary();
            updateBusy();
            if (load) Q_EMIT corpusChanged();
            Q_EMIT summaryChanged();
        },
        [this, load](const QString& message) {
            m_loading = false;
            if (!load) {
                m_summaryLabel->setText(tr("<span style='color:#b00020'>%1</span>").arg(message.toHtmlEscaped()));
                updateBusy();
                return;
            }
            m_chosen = m_loaded;  // back to the corpus in use
            refreshCombo();
            updateBusy();
            Q_EMIT loadFailed(message);
            if (!m_corpus) selectTask(TaskKind::toy_french);  // nothing to go back to
        });
    const QString name = source.file.isEmpty() ? qs(task_name(source.task)) : QFileInfo(source.file).fileName();
    updateBusy(!load                   ? tr("Updating the summary…")
               : source.file.isEmpty() ? tr("Generating %1…").arg(name)
                                       : tr("Reading %1…").arg(name));
}


void CorpusPanel::updateBusy(const QString& text) {
    const bool now = busy();
    if (!text.isEmpty()) m_busyText->setText(text);
    m_busy->setVisible(now);
    m_summaryLabel->setEnabled(!m_loading);  // greyed: it describes the corpus that is being replaced
    if (now != m_wasBusy) {
        m_wasBusy = now;
        Q_EMIT busyChanged(now);
    }
}

bool CorpusPanel::busy() const { return m_jobs->busy(); }

QString CorpusPanel::sourceKey() const {
    return isTask() ? QStringLiteral("task:") + qs(task_name(m_chosen.task)) : QStringLiteral("file:") + m_chosen.file;
}

QStringList CorpusPanel::examples() const {
    if (!m_corpus) return {};
    if (m_loaded.file.isEmpty()) return toQStringList(task_examples(m_loaded.task));
    QStringList out;
    for (size_t i = 0; i < m_corpus->pairs.size() && out.size() < 5; i += std::max<size_t>(1, m_corpus->pairs.size() / 5))
        out << qs(detokenize(m_corpus->pairs[i].src, m_corpus->level));
    return out;
}

void CorpusPanel::refreshCombo() {
    const QSignalBlocker block(m_combo);
    int file = m_combo->findData(kFileItem);
    if (isTask()) {
        if (file >= 0) m_combo->removeItem(file);
        m_combo->setCurrentIndex(std::max(0, m_combo->findData(int(m_chosen.task))));
    } else {
        if (file < 0) {
            m_combo->insertItem(0, QString(), kFileItem);
            file = 0;
        }
        m_combo->setItemText(file, tr("File: %1").arg(QFileInfo(m_chosen.file).fileName()));
        m_combo->setItemData(file, m_chosen.file, Qt::ToolTipRole);
        m_combo->setCurrentIndex(file);
    }
    m_taskOptions->setVisible(isTask());
    m_fileOptions->setVisible(!isTask());
    if (isTask()) m_description->setText(qs(task_description(m_chosen.task)));
    else m_description->setText(tr("Tatoeba-style pairs from %1").arg(m_chosen.file.toHtmlEscaped()));
}

void CorpusPanel::showSummary() {
    m_summaryLabel->setText(summaryText());
    QString skippedTip;
    for (const SkippedLine& s : m_summary->first_skipped) skippedTip += tr("line %1: %2\n").arg(s.line).arg(qs(s.reason));
    if (m_summary->skipped_lines > m_summary->first_skipped.size())
        skippedTip += tr("… and %1 more").arg(m_summary->skipped_lines - m_summary->first_skipped.size());
    m_summaryLabel->setToolTip(skippedTip.trimmed());
    m_histogram->setCounts(m_summary->src_lengths, m_summary->tgt_lengths);
}

QString CorpusPanel::summaryText() const {
    if (!m_summary) return {};
    const CorpusSummary& s = *m_summary;
    QString text = tr("<b>%1</b> pairs · %2 skipped line(s)").arg(s.pairs).arg(s.skipped_lines);
    if (s.problem.empty()) {
        text += tr("<br>training %1 + validation %2 pairs<br>vocabulary: %3 source, %4 target tokens (%5)")
                    .arg(s.train_pairs)
                    .arg(s.val_pairs)
                    .arg(s.src_vocab)
                    .arg(s.tgt_vocab)
                    .arg(s.level == TokenLevel::character ? tr("characters")
                         : s.level == TokenLevel::subword ? tr("subwords")
                                                          : tr("words"));
        if (s.too_long > 0) text += tr("<br>%1 pair(s) over the maximum length left out").arg(s.too_long);
    } else {
        text += tr("<br><span style='color:#b00020'>%1</span>").arg(qs(s.problem).toHtmlEscaped());
    }
    if (!s.first_skipped.empty())
        text += tr("<br><span style='color:#b35c00'>first skipped: line %1 (%2)</span>")
                    .arg(s.first_skipped.front().line)
                    .arg(qs(s.first_skipped.front().reason).toHtmlEscaped());
    return text;
}

}  // namespace attnviz::ui
