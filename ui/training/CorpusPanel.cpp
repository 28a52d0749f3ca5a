#include "ui/training/CorpusPanel.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>
#include <atomic>

#include "ui/common/Background.hpp"
#include "ui/common/Format.hpp"
#include "ui/training/LengthHistogram.hpp"

namespace attnviz::ui {
namespace {
constexpr int kFileItem = -1;   // combo data of the "file" entry
constexpr int kOpenItem = -2;   // combo data of "Open a TSV file…"
constexpr int kOpenParallelItem = -3;  // combo data of "Open parallel text…"

/// A corpus and what training gets from it: what a background load delivers.
struct Loaded {
    std::shared_ptr<const Corpus> corpus;
    CorpusSummary summary;
};
}  // namespace

/// Published by the worker as it reads (atomics: the GUI thread polls them), and the
/// Cancel flag the reader checks between chunks. One per load.
struct CorpusPanel::LoadState {
    std::atomic<uint64_t> bytes{0}, total{0};
    std::atomic<size_t> lines{0}, pairs{0};
    std::atomic<bool> summarising{false};
    std::atomic<bool> cancel{false};
};

CorpusPanel::CorpusPanel(QWidget* parent) : QWidget(parent), m_jobs(new LatestOnly(this)) {
    m_combo = new QComboBox(this);
    for (TaskKind kind : all_tasks())
        m_combo->addItem(tr("Built-in: %1").arg(qs(task_name(kind))), int(kind));
    m_combo->insertSeparator(m_combo->count());
    m_combo->addItem(tr("Open a TSV file…"), kOpenItem);
    m_combo->addItem(tr("Open parallel text (two files)…"), kOpenParallelItem);
    m_combo->setToolTip(tr("A built-in task generated in code; a TSV file: Tatoeba source<TAB>target[<TAB>…] or "
                           "Tatoeba-Challenge lang<TAB>lang<TAB>source<TAB>target; or parallel text: two files, "
                           "one sentence per line"));
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
    m_columns = new QLineEdit(m_fileOptions);
    m_columns->setPlaceholderText(tr("detect"));
    m_columns->setToolTip(tr("The sentence columns of a TSV file, SRC,TGT: 1-based numbers (3,4) or the language "
                             "codes of a Tatoeba-Challenge file (fra,eng). Empty: detect the layout"));
    m_maxPairs = new QSpinBox(m_fileOptions);
    m_maxPairs->setRange(0, 10000000);
    m_maxPairs->setSingleStep(1000);
    m_maxPairs->setSpecialValueText(tr("all"));
    auto* fileForm = new QFormLayout(m_fileOptions);
    fileForm->setContentsMargins(0, 0, 0, 0);
    fileForm->addRow(tr("Tokens"), m_level);
    fileForm->addRow(m_swap);
    fileForm->addRow(tr("Columns"), m_columns);
    fileForm->addRow(tr("Read at most"), m_maxPairs);

    m_busy = new QWidget(this);
    m_progress = new QProgressBar(m_busy);
    m_progress->setRange(0, 0);  // busy: no known end until the reader reports
    m_progress->setTextVisible(false);
    m_progress->setMaximumHeight(QFontMetrics(font()).height());
    m_busyText = new QLabel(m_busy);
    m_busyText->setWordWrap(true);
    m_cancel = new QPushButton(tr("Cancel"), m_busy);
    m_cancel->setToolTip(tr("Stop reading: the corpus in use stays"));
    auto* busyLayout = new QVBoxLayout(m_busy);
    busyLayout->setContentsMargins(0, 0, 0, 0);
    auto* busyRow = new QHBoxLayout();
    busyRow->addWidget(m_progress, 1);
    busyRow->addWidget(m_cancel);
    busyLayout->addLayout(busyRow);
    busyLayout->addWidget(m_busyText);
    m_busy->setVisible(false);
    m_progressTimer = new QTimer(this);
    m_progressTimer->setInterval(100);  // polled: a fast reader cannot flood the event loop
    connect(m_progressTimer, &QTimer::timeout, this, &CorpusPanel::showProgress);
    connect(m_cancel, &QPushButton::clicked, this, &CorpusPanel::cancelLoading);
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
    connect(m_columns, &QLineEdit::editingFinished, this, [this] {
        if (!isTask() && m_chosen.targetFile.isEmpty() && ss(m_columns->text().trimmed()) != m_chosen.tsv.columns)
            loadFile(m_chosen.file);
    });
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
    s.tsv.columns = ss(m_columns->text().trimmed());
    return s;
}

void CorpusPanel::comboActivated(int index) {
    const int data = m_combo->itemData(index).toInt();
    if (data == kOpenItem) {
        refreshCombo();  // put the selection back; the main window shows the file dialog
        Q_EMIT openFileRequested();
    } else if (data == kOpenParallelItem) {
        refreshCombo();
        Q_EMIT openParallelRequested();
    } else if (data != kFileItem) {  // the file entry is the current file already
        selectTask(static_cast<TaskKind>(data));
    }
}

void CorpusPanel::selectTask(TaskKind kind) { load(sourceFromForm(QString(), kind)); }

void CorpusPanel::loadFile(const QString& path) { load(sourceFromForm(QFileInfo(path).absoluteFilePath(), m_chosen.task)); }

void CorpusPanel::loadParallel(const QString& sourcePath, const QString& targetPath) {
    Source s = sourceFromForm(QFileInfo(sourcePath).absoluteFilePath(), m_chosen.task);
    s.targetFile = QFileInfo(targetPath).absoluteFilePath();
    s.tsv.columns.clear();  // one sentence per line: no columns
    load(s);
}

void CorpusPanel::setColumns(const QString& columns) {
    m_columns->setText(columns);
    if (!isTask() && m_chosen.targetFile.isEmpty() && ss(columns.trimmed()) != m_chosen.tsv.columns)
        loadFile(m_chosen.file);
}

void CorpusPanel::setNumPairs(int pairs) {
    m_pairs->setValue(pairs);
    if (isTask() && m_chosen.pairs != size_t(m_pairs->value())) selectTask(m_chosen.task);
}

int CorpusPanel::numPairs() const { return m_pairs->value(); }

void CorpusPanel::restore(const QString& key) {
    if (key.startsWith(QLatin1String("parallel:"))) {
        const QStringList files = key.mid(9).split(QLatin1Char('\n'));
        if (files.size() == 2) loadParallel(files[0], files[1]);
    } else if (key.startsWith(QLatin1String("file:"))) {
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
    if (m_loadState) m_loadState->cancel = true;  // a load this one replaces stops reading
    auto state = std::make_shared<LoadState>();
    m_loadState = state;
    m_jobs->run<Loaded>(
        [source, settings, current, state] {
            Loaded out;
            TsvOptions tsv = source.tsv;
            tsv.progress = [state](const ReadProgress& p) {
                state->bytes = p.bytes_read;
                state->total = p.total_bytes;
                state->lines = p.lines;
                state->pairs = p.pairs;
                return !state->cancel.load();
            };
            if (current) out.corpus = current;
            else if (source.file.isEmpty()) out.corpus = std::make_shared<const Corpus>(task_corpus(source.task, {source.pairs}));
            else if (source.targetFile.isEmpty()) out.corpus = std::make_shared<const Corpus>(read_tsv(ss(source.file), tsv));
            else out.corpus = std::make_shared<const Corpus>(read_parallel(ss(source.file), ss(source.targetFile), tsv));
            state->summarising = true;
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
    QString name = source.file.isEmpty() ? qs(task_name(source.task)) : QFileInfo(source.file).fileName();
    if (!source.targetFile.isEmpty()) name += QStringLiteral(" + ") + QFileInfo(source.targetFile).fileName();
    m_busyWhat = !load                   ? tr("Updating the summary")
                 : source.file.isEmpty() ? tr("Generating %1").arg(name)
                                         : tr("Reading %1").arg(name);
    m_progress->setRange(0, 0);
    m_cancel->setVisible(load);
    updateBusy(m_busyWhat + QStringLiteral("…"));
    if (load) m_progressTimer->start();
}

void CorpusPanel::cancelLoading() {
    if (!m_loading) return;
    if (m_loadState) m_loadState->cancel = true;  // the reader stops at its next chunk
    m_jobs->cancel();                              // and nothing it returns is delivered
    m_loading = false;
    m_chosen = m_loaded;
    refreshCombo();
    updateBusy();
    Q_EMIT loadCancelled();
    if (!m_corpus) selectTask(TaskKind::toy_french);  // nothing to go back to
}

CorpusPanel::~CorpusPanel() {
    // The reader stops at its next chunk; m_jobs, a child, then cancels and waits for it.
    if (m_loadState) m_loadState->cancel = true;
}

int CorpusPanel::progressValue() const {
    if (!m_loading || !m_loadState || m_loadState->total == 0) return -1;
    return int(std::min<uint64_t>(1000, m_loadState->bytes * 1000 / m_loadState->total));
}

void CorpusPanel::showProgress() {
    if (!m_loading || !m_loadState) {
        m_progressTimer->stop();
        return;
    }
    const LoadState& st = *m_loadState;
    if (st.summarising) {
        m_progress->setRange(0, 0);
        m_busyText->setText(tr("%1: %L2 pairs read; summarising…").arg(m_busyWhat).arg(st.pairs.load()));
        return;
    }
    const int value = progressValue();
    if (value < 0) return;  // generating a task, or nothing reported yet
    m_progress->setRange(0, 1000);
    m_progress->setValue(value);
    m_busyText->setText(tr("%1: %2 of %3 MB, %L4 lines, %L5 pairs")
                            .arg(m_busyWhat)
                            .arg(double(st.bytes) / 1e6, 0, 'f', 1)
                            .arg(double(st.total) / 1e6, 0, 'f', 1)
                            .arg(st.lines.load())
                            .arg(st.pairs.load()));
}


void CorpusPanel::updateBusy(const QString& text) {
    const bool now = busy();
    if (!text.isEmpty()) m_busyText->setText(text);
    m_busy->setVisible(now);
    if (!m_loading) m_progressTimer->stop();
    m_summaryLabel->setEnabled(!m_loading);  // greyed: it describes the corpus that is being replaced
    if (now != m_wasBusy) {
        m_wasBusy = now;
        Q_EMIT busyChanged(now);
    }
}

bool CorpusPanel::busy() const { return m_jobs->busy(); }

QString CorpusPanel::sourceKey() const {
    if (isTask()) return QStringLiteral("task:") + qs(task_name(m_chosen.task));
    if (!m_chosen.targetFile.isEmpty())
        return QStringLiteral("parallel:") + m_chosen.file + QLatin1Char('\n') + m_chosen.targetFile;
    return QStringLiteral("file:") + m_chosen.file;
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
        const bool parallel = !m_chosen.targetFile.isEmpty();
        m_combo->setItemText(file, parallel ? tr("Files: %1 + %2")
                                                  .arg(QFileInfo(m_chosen.file).fileName(),
                                                       QFileInfo(m_chosen.targetFile).fileName())
                                            : tr("File: %1").arg(QFileInfo(m_chosen.file).fileName()));
        m_combo->setItemData(file, parallel ? m_chosen.file + QLatin1Char('\n') + m_chosen.targetFile : m_chosen.file,
                             Qt::ToolTipRole);
        m_combo->setCurrentIndex(file);
    }
    m_taskOptions->setVisible(isTask());
    m_fileOptions->setVisible(!isTask());
    const bool parallel = !isTask() && !m_chosen.targetFile.isEmpty();
    m_columns->setEnabled(!parallel);
    if (isTask()) m_description->setText(qs(task_description(m_chosen.task)));
    else if (parallel)
        m_description->setText(tr("Parallel text: sources from %1, targets from %2")
                                   .arg(m_chosen.file.toHtmlEscaped(), m_chosen.targetFile.toHtmlEscaped()));
    else m_description->setText(tr("Sentence pairs from %1").arg(m_chosen.file.toHtmlEscaped()));
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
    QString text = (s.pairs == 1 ? tr("<b>1</b> pair") : tr("<b>%1</b> pairs").arg(s.pairs)) + QStringLiteral(" · ") +
                   (s.skipped_lines == 0   ? tr("no skipped lines")
                    : s.skipped_lines == 1 ? tr("1 skipped line")
                                           : tr("%1 skipped lines").arg(s.skipped_lines));
    if (!s.detected.empty()) {
        text += tr("<br>layout: %1").arg(qs(s.detected).toHtmlEscaped());
        if (s.stopped_early) text += tr(" (read %L1 lines: stopped at the maximum pairs)").arg(s.lines_read);
    }
    if (s.problem.empty()) {
        text += tr("<br>training %1 + validation %2 pairs<br>vocabulary: %3 source, %4 target tokens (%5)")
                    .arg(s.train_pairs)
                    .arg(s.val_pairs)
                    .arg(s.src_vocab)
                    .arg(s.tgt_vocab)
                    .arg(s.level == TokenLevel::character ? tr("characters")
                         : s.level == TokenLevel::subword ? tr("subwords")
                                                          : tr("words"));
        if (s.too_long > 0)
            text += s.too_long == 1 ? tr("<br>1 pair over the maximum length left out")
                                    : tr("<br>%1 pairs over the maximum length left out").arg(s.too_long);
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
