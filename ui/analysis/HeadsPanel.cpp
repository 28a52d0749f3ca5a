#include "ui/analysis/HeadsPanel.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QElapsedTimer>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMenu>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSettings>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QTextStream>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>
#include <atomic>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/data/training_data.hpp"
#include "core/io/error.hpp"
#include "core/text/pretrained_tokenizer.hpp"
#include "core/text/text.hpp"
#include "ui/analysis/HeadsGrid.hpp"
#include "ui/analysis/PruneChart.hpp"
#include "ui/common/Background.hpp"
#include "ui/common/Format.hpp"
#include "ui/heatmap/HeatmapExport.hpp"
#include "ui/training/FineTuneLanguages.hpp"

namespace attnviz::ui {

std::vector<HeadStats> headStatsFromSnapshots(const std::vector<HeadSnapshot>& snapshots) {
    std::vector<HeadStats> out;
    for (const HeadSnapshot& h : snapshots) {
        HeadStats s;
        try {
            s.id = AttentionMapId{attention_kind_from_string(h.kind), h.layer, h.head};
        } catch (const std::exception&) {
            continue;
        }
        s.importance = h.importance;
        s.confidence = h.confidence;
        out.push_back(s);
    }
    return out;
}


struct HeadsPanel::Measurement {
    HeadReport report;
    std::vector<PrunePoint> curve;
    QString measuredOn;
    double seconds = 0;
};

namespace {
/// A number cell that sorts as a number; NaN shows as "–" and sorts below every number.
class HeadsTableNumber : public QTableWidgetItem {
public:
    HeadsTableNumber(double v, int decimals) {
        setData(Qt::DisplayRole, std::isfinite(v) ? QString::number(v, 'f', decimals) : QStringLiteral("–"));
        setData(Qt::UserRole, std::isfinite(v) ? v : -1e300);
        setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
        setFlags(flags() & ~Qt::ItemIsEditable);
    }
    bool operator<(const QTableWidgetItem& other) const override {
        return data(Qt::UserRole).toDouble() < other.data(Qt::UserRole).toDouble();
    }
};

/// Rare-word and sink heads: at least half of the queries (rows) on them.
constexpr double kHeadsRoleShare = 0.5;

QString headsSignedOffset(int offset) { return offset > 0 ? QStringLiteral("+%1").arg(offset) : QString::number(offset); }

/// The roles a head plays, one per line, for the tooltips ("" when none).
QString headsRoles(const HeadStats& h) {
    QStringList roles;
    if (h.positional && h.positional->positional()) {
        const int o = h.positional->offset;
        const QString where = o == -1 ? QObject::tr(" (the previous token)")
                              : o == 1 ? QObject::tr(" (the next token)")
                              : o == 0 ? QObject::tr(" (the token itself)")
                                       : QString();
        roles << QObject::tr("Positional head: its maximum at offset %1%2 for %3% of the queries")
                     .arg(headsSignedOffset(o), where)
                     .arg(100 * h.positional->share, 0, 'f', 0);
    }
    if (std::isfinite(h.rare_share) && h.rare_share >= kHeadsRoleShare)
        roles << QObject::tr("Rare-word head: its maximum on the sentence's rarest source token %1% of the time")
                     .arg(100 * h.rare_share, 0, 'f', 0);
    if (std::isfinite(h.sink_share) && h.sink_share >= kHeadsRoleShare)
        roles << QObject::tr("Sink head: %1% of its weight on <eos> and punctuation").arg(100 * h.sink_share, 0, 'f', 0);
    return roles.join(QLatin1Char('\n'));
}

/// The validation pairs the CLI's `heads --split val` measures: the corpus re-split as the model's
/// training did (every pair when that leaves none), subword sentences cut by the model's tokenizer.
std::vector<SentencePair> headsValidationPairs(const TranslationModel& model, const Corpus& corpus, bool* all) {
    *all = false;
    std::vector<SentencePair> pairs = prepare_data(corpus, model.trained_with(), model.tokenizer_ptr()).val;
    if (!pairs.empty()) return pairs;
    *all = true;
    pairs = corpus.pairs;
    if (model.level() == TokenLevel::subword)
        for (auto& p : pairs) {
            p.src = model.tokenizer().split_words(p.src);
            p.tgt = model.tokenizer().split_words(p.tgt);
            p.alignment.reset();
        }
    return pairs;
}

QString headsCsvNumber(double v) { return std::isfinite(v) ? QString::number(v, 'g', 8) : QString(); }
}  // namespace

HeadsPanel::HeadsPanel(QWidget* parent) : QWidget(parent), m_jobs(new LatestOnly(this)) {
    setObjectName(QStringLiteral("headsPanel"));
    QSettings settings;
    m_measure = new QPushButton(tr("Measure heads"), this);
    m_measure->setObjectName(QStringLiteral("measureHeads"));
    m_measure->setToolTip(tr("Every head's importance (Michel et al. 2019), confidence and role (Voita et al. 2019) "
                             "over the corpus' validation pairs, teacher-forced on their references"));
    m_sentences = new QSpinBox(this);
    m_sentences->setObjectName(QStringLiteral("headsSentences"));
    m_sentences->setRange(1, 100000);
    m_sentences->setValue(settings.value(QStringLiteral("heads/sentences"), 200).toInt());
    m_sentences->setToolTip(tr("Measure the first validation pairs of the corpus"));
    m_prune = new QCheckBox(tr("Pruning curve"), this);
    m_prune->setObjectName(QStringLiteral("headsPruneCurve"));
    m_prune->setChecked(settings.value(QStringLiteral("heads/pruneCurve"), false).toBool());
    m_prune->setToolTip(tr("Also mask 0, 10, …, 90% of the heads by importance, by confidence and at random (3 "
                           "seeds), re-measuring loss and BLEU at each point (slower: a greedy decoding per point)"));
    m_cancel = new QPushButton(tr("Cancel"), this);
    m_cancel->setObjectName(QStringLiteral("cancelHeads"));
    m_cancel->setEnabled(false);
    m_cancel->setToolTip(tr("Stop the measurement after its current batch or point"));
    m_poll = new QTimer(this);
    m_poll->setInterval(100);
    connect(m_poll, &QTimer::timeout, this, &HeadsPanel::showProgress);
    m_busy = new QProgressBar(this);
    m_busy->setRange(0, 0);  // busy: an indicator without a known end, until the work says
    m_busy->setMaximumWidth(140);
    m_busy->setTextVisible(false);
    m_busy->hide();
    m_export = new QToolButton(this);
    m_export->setText(tr("Export"));
    m_export->setPopupMode(QToolButton::InstantPopup);
    auto* exportMenu = new QMenu(m_export);
    const std::pair<QString, QString> exports[] = {
        {tr("Heads table as CSV…"), QStringLiteral("csv")},       {tr("Heads as JSON…"), QStringLiteral("json")},
        {tr("Grid as PNG…"), QStringLiteral("grid.png")},          {tr("Grid as SVG…"), QStringLiteral("grid.svg")},
        {tr("Pruning curve as PNG…"), QStringLiteral("prune.png")}, {tr("Pruning curve as SVG…"), QStringLiteral("prune.svg")},
        {tr("Pruning curve as CSV…"), QStringLiteral("prune.csv")}};
    for (const auto& [text, what] : exports) {
        QAction* a = exportMenu->addAction(text);
        connect(a, &QAction::triggered, this, [this, what = what] { exportDialog(what); });
    }
    m_export->setMenu(exportMenu);
    m_status = new QLabel(tr("Press Measure heads to see which heads matter."), this);
    m_status->setObjectName(QStringLiteral("headsStatus"));
    m_status->setWordWrap(true);
    m_status->setTextFormat(Qt::RichText);
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* controls = new QHBoxLayout();
    controls->addWidget(m_measure);
    controls->addWidget(new QLabel(tr("Sentences"), this));
    controls->addWidget(m_sentences);
    controls->addWidget(m_prune);
    controls->addWidget(m_cancel);
    controls->addWidget(m_busy);
    controls->addWidget(m_export);
    controls->addWidget(m_status, 1);

    m_grid = new HeadsGrid();
    m_gridMetric = new QComboBox(this);
    m_gridMetric->setObjectName(QStringLiteral("headsGridMetric"));
    m_gridMetric->addItem(tr("Importance"), int(HeadsGrid::Importance));
    m_gridMetric->addItem(tr("Confidence"), int(HeadsGrid::Confidence));
    m_gridMetric->setCurrentIndex(settings.value(QStringLiteral("heads/gridMetric"), 0).toInt() == 1 ? 1 : 0);
    m_grid->setMetric(HeadsGrid::Metric(m_gridMetric->currentData().toInt()));
    auto* gridScroll = new QScrollArea();
    gridScroll->setWidget(m_grid);
    gridScroll->setWidgetResizable(true);
    gridScroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    auto* gridBox = new QWidget();
    auto* gridLayout = new QVBoxLayout(gridBox);
    gridLayout->setContentsMargins(0, 0, 0, 0);
    auto* gridControls = new QHBoxLayout();
    gridControls->addWidget(new QLabel(tr("Heads by layer — colour by"), gridBox));
    gridControls->addWidget(m_gridMetric);
    gridControls->addStretch(1);
    gridLayout->addLayout(gridControls);
    gridLayout->addWidget(gridScroll, 1);

    m_table = new QTableWidget(0, ColumnCount);
    m_table->setObjectName(QStringLiteral("headsTable"));
    m_table->setHorizontalHeaderLabels({tr("kind"), tr("layer"), tr("head"), tr("importance"), tr("confidence"),
                                        tr("entropy"), tr("offset"), tr("share"), tr("rare"), tr("sink"), tr("AER")});
    const QString headerTips[] = {
        tr("Encoder self-attention, decoder self-attention or cross-attention"), tr("Layer (from 0)"), tr("Head (from 0)"),
        tr("Michel et al.: E|∂L/∂ξ|, ξ a gate on the head's output; per kind and layer divided by the L2 norm of the "
           "layer's raw importances"),
        tr("Voita et al.: the mean over queries of the head's largest weight, <eos> left out"),
        tr("Mean row entropy (nats)"),
        tr("Self-attention: the relative offset (key − query) the head's maximum takes most often"),
        tr("How often it takes that offset: a positional head at 0.9 or more"),
        tr("How often the maximum falls on the sentence's rarest source token"),
        tr("The mean share of a row on sink tokens (<eos>, punctuation)"),
        tr("Cross heads, where the corpus has gold alignments: the alignment error rate of the head's argmax")};
    for (int c = 0; c < ColumnCount; ++c) m_table->horizontalHeaderItem(c)->setToolTip(headerTips[c]);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setWordWrap(false);
    m_table->verticalHeader()->hide();
    m_table->verticalHeader()->setDefaultSectionSize(m_table->fontMetrics().height() + 6);
    m_table->setSortingEnabled(true);
    m_table->horizontalHeader()->setSortIndicator(-1, Qt::AscendingOrder);  // the model's order until a column is clicked
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);

    m_chart = new PruneChart();

    auto* top = new QSplitter(Qt::Horizontal);
    top->addWidget(gridBox);
    top->addWidget(m_table);
    top->setStretchFactor(0, 1);
    top->setStretchFactor(1, 1);
    top->setSizes({1000, 1000});
    auto* split = new QSplitter(Qt::Vertical);
    split->addWidget(top);
    split->addWidget(m_chart);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(controls);
    layout->addWidget(split, 1);

    connect(m_measure, &QPushButton::clicked, this, &HeadsPanel::measure);
    connect(m_cancel, &QPushButton::clicked, this, &HeadsPanel::cancel);
    connect(m_sentences, &QSpinBox::valueChanged, this,
            [](int v) { QSettings().setValue(QStringLiteral("heads/sentences"), v); });
    connect(m_prune, &QCheckBox::toggled, this, [](bool on) { QSettings().setValue(QStringLiteral("heads/pruneCurve"), on); });
    connect(m_gridMetric, &QComboBox::currentIndexChanged, this, [this](int index) {
        m_grid->setMetric(HeadsGrid::Metric(m_gridMetric->itemData(index).toInt()));
        QSettings().setValue(QStringLiteral("heads/gridMetric"), index);
    });
}

struct HeadsPanel::Run {
    std::atomic<bool> stop{false};
    std::atomic<bool> pruning{false};  ///< the pruning curve's points (else head_stats' batches)
    std::atomic<size_t> done{0}, total{0};
};

HeadsPanel::~HeadsPanel() {
    // The job stops at its next batch or point; LatestOnly's destructor waits for it, briefly.
    if (m_run) m_run->stop = true;
}

void HeadsPanel::cancel() {
    if (!m_run) return;
    m_run->stop = true;
    m_jobs->cancel();
    m_poll->stop();
    m_busy->hide();
    m_cancel->setEnabled(false);
    m_status->setText(tr("Cancelled."));
}

void HeadsPanel::showProgress() {
    if (!m_run || m_run->total == 0) return;
    m_busy->setRange(0, int(m_run->total.load()));
    m_busy->setValue(int(m_run->done.load()));
    m_status->setText(m_run->pruning ? tr("Pruning curve: point %1 of %2…").arg(m_run->done.load()).arg(m_run->total.load())
                                     : tr("Measuring every head: batch %1 of %2…").arg(m_run->done.load()).arg(m_run->total.load()));
}

void HeadsPanel::setModel(TranslationModelPtr model) { m_model = std::move(model); }

void HeadsPanel::setCorpus(std::shared_ptr<const Corpus> corpus) { m_corpus = std::move(corpus); }

void HeadsPanel::setLanguages(std::function<std::pair<QString, QString>()> languages) {
    m_languages = std::move(languages);
}

bool HeadsPanel::busy() const { return m_jobs->busy(); }

void HeadsPanel::measure() {
    QString problem;
    if (!m_model) problem = tr("There is no model yet: train one or open a checkpoint.");
    else if (!m_model->has_attention() || m_model->network()->head_groups().empty())
        problem = tr("This model has no attention heads: there is nothing to measure.");
    else if (!m_corpus || m_corpus->pairs.empty()) problem = tr("There is no corpus: open one or choose a task.");
    // A pretrained model cuts the corpus's sentences again with its own tokenizer (prepare_data).
    else if (m_corpus->level != m_model->level() && !m_model->tokenizer().pretrained())
        problem = tr("The corpus is tokenised differently from the model.");
    if (!problem.isEmpty()) {
        showError(problem);
        return;
    }
    // A multilingual model scores its pairs with language codes, the ones chosen in the Translate
    // tab (attnviz-cli heads --source-lang/--target-lang); one naming no target needs one chosen.
    std::string sourceLang, targetLang;
    if (FineTuneLanguages::multilingual(m_model.get())) {
        const auto [source, target] = m_languages ? m_languages() : std::pair<QString, QString>();
        sourceLang = source.toStdString();
        targetLang = target.toStdString();
        if (targetLang.empty() && m_model->tokenizer().pretrained()->default_target_language().empty()) {
            showError(tr("This model translates into %1 languages and its tokenizer_config.json names no target "
                         "language: choose the corpus's target language in the Translate tab's “to” list first.")
                          .arg(m_model->target_languages().size()));
            return;
        }
    }
    const size_t sentences = size_t(m_sentences->value());
    const bool prune = m_prune->isChecked();
    if (m_run) m_run->stop = true;  // a run in progress is superseded: it stops at its next batch
    m_run = std::make_shared<Run>();
    std::function<Measurement()> work = [model = m_model, corpus = m_corpus, sentences, prune, run = m_run, sourceLang,
                                         targetLang] {
        const auto start = std::chrono::steady_clock::now();
        // Gates of its own: head_stats and prune_curve set them while they run, and the app
        // translates with `model` on other threads meanwhile.
        const TranslationModelPtr own = model->with_heads_masked({});
        bool all = false;
        std::vector<SentencePair> pairs = headsValidationPairs(*model, *corpus, &all);
        if (pairs.empty()) throw ConfigError(corpus->name + ": no pairs to measure");
        if (pairs.size() > sentences) pairs.resize(sentences);
        HeadStatsOptions options;
        options.fixed_steps = model->trained_with().fixed_steps;
        options.source_lang = sourceLang;
        options.target_lang = targetLang;
        // Rare words by the corpus' own counts, its source tokens as the model splits them (attnviz-cli heads').
        for (const SentencePair& p : corpus->pairs) {
            if (model->tokenizer().pretrained()) {  // its own pieces of the text
                const auto pieces = corpus->model_pieces
                                        ? p.src
                                        : model->tokenizer().encode(detokenize(p.src, corpus->level), false);
                for (const auto& token : pieces) ++options.source_counts[token];
            } else if (model->level() == TokenLevel::subword) {
                for (const auto& token : model->tokenizer().split_words(p.src)) ++options.source_counts[token];
            } else {
                for (const auto& token : p.src) ++options.source_counts[token];
            }
        }
        options.progress = [run](size_t done, size_t total) {
            run->total = total;
            run->done = done;
            return !run->stop.load();
        };
        Measurement m;
        m.report = head_stats(*own, pairs, options);
        if (prune) {
            PruneCurveOptions p;
            p.fixed_steps = options.fixed_steps;
            p.source_lang = sourceLang;
            p.target_lang = targetLang;
            run->done = 0;
            run->pruning = true;
            p.progress = options.progress;
            m.curve = prune_curve(*own, pairs, m.report, p);
            if (run->stop) throw Cancelled("cancelled");
        }
        m.measuredOn = all ? tr("the first %1 pairs of %2 (it has no validation split)").arg(pairs.size()).arg(qs(corpus->name))
                           : tr("%1 validation pairs of %2").arg(pairs.size()).arg(qs(corpus->name));
        m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        return m;
    };
    m_busy->setRange(0, 0);
    m_busy->show();
    m_cancel->setEnabled(true);
    m_poll->start();
    m_status->setText(prune ? tr("Measuring every head and the pruning curve…") : tr("Measuring every head…"));
    m_jobs->run<Measurement>(
        std::move(work), [this](Measurement m) { showMeasurement(std::move(m)); },
        [this](const QString& message) { showError(message); });
}

void HeadsPanel::showError(const QString& message) {
    m_poll->stop();
    m_cancel->setEnabled(false);
    m_busy->setVisible(m_jobs->busy());
    m_status->setText(QStringLiteral("<span style='color:#b00020'>%1</span>").arg(message.toHtmlEscaped()));
    Q_EMIT measureFailed(message);
}

void HeadsPanel::showMeasurement(Measurement m) {
    m_poll->stop();
    m_cancel->setEnabled(false);
    m_busy->hide();
    m_report = std::move(m.report);
    m_curve = std::move(m.curve);
    m_measuredOn = m.measuredOn;
    m_grid->setMeasured(m_report.heads);
    m_chart->setPoints(m_curve);
    fillTable();
    int positional = 0;
    for (const HeadStats& h : m_report.heads) positional += h.positional && h.positional->positional() ? 1 : 0;
    QString text = tr("%1 heads on %2 in %3 s; loss %4; %5 positional.")
                       .arg(m_report.heads.size())
                       .arg(m_measuredOn)
                       .arg(m.seconds, 0, 'f', 1)
                       .arg(formatLoss(m_report.loss))
                       .arg(positional);
    if (!m_curve.empty()) text += tr(" Pruning curve: %1 points.").arg(m_curve.size());
    m_status->setText(text.toHtmlEscaped());
    Q_EMIT headsMeasured();
}

void HeadsPanel::fillTable() {
    m_table->setSortingEnabled(false);
    m_table->clearContents();
    m_table->setRowCount(int(m_report.heads.size()));
    for (int r = 0; r < int(m_report.heads.size()); ++r) {
        const HeadStats& h = m_report.heads[size_t(r)];
        auto* kind = new QTableWidgetItem(qs(to_string(h.id.kind)));
        kind->setFlags(kind->flags() & ~Qt::ItemIsEditable);
        m_table->setItem(r, KindCol, kind);
        m_table->setItem(r, LayerCol, new HeadsTableNumber(h.id.layer, 0));
        m_table->setItem(r, HeadCol, new HeadsTableNumber(h.id.head, 0));
        m_table->setItem(r, ImportanceCol, new HeadsTableNumber(h.importance, 3));
        m_table->setItem(r, ConfidenceCol, new HeadsTableNumber(h.confidence, 3));
        m_table->setItem(r, EntropyCol, new HeadsTableNumber(h.entropy, 3));
        if (h.positional) {
            auto* offset = new HeadsTableNumber(h.positional->offset, 0);
            offset->setText(headsSignedOffset(h.positional->offset));
            m_table->setItem(r, OffsetCol, offset);
            auto* share = new HeadsTableNumber(h.positional->share, 2);
            if (h.positional->positional()) {
                share->setText(share->text() + QStringLiteral(" ★"));
                QFont bold = share->font();
                bold.setBold(true);
                share->setFont(bold);
            }
            m_table->setItem(r, ShareCol, share);
        } else {
            m_table->setItem(r, OffsetCol, new HeadsTableNumber(NAN, 0));
            m_table->setItem(r, ShareCol, new HeadsTableNumber(NAN, 2));
        }
        m_table->setItem(r, RareCol, new HeadsTableNumber(h.rare_share, 2));
        m_table->setItem(r, SinkCol, new HeadsTableNumber(h.sink_share, 2));
        m_table->setItem(r, AerCol, new HeadsTableNumber(h.aer ? *h.aer : NAN, 3));
        QString tip = tr("%1, layer %2, head %3: importance %4 (raw %5), confidence %6")
                          .arg(qs(to_string(h.id.kind)))
                          .arg(h.id.layer)
                          .arg(h.id.head)
                          .arg(h.importance, 0, 'f', 3)
                          .arg(h.importance_raw, 0, 'g', 3)
                          .arg(h.confidence, 0, 'f', 3);
        const QString roles = headsRoles(h);
        if (!roles.isEmpty()) tip += QLatin1Char('\n') + roles;
        for (int c = 0; c < ColumnCount; ++c) m_table->item(r, c)->setToolTip(tip);
    }
    m_table->setSortingEnabled(true);
}

void HeadsPanel::addEpoch(const EpochReport& report) {
    if (!report.heads.empty()) m_grid->addSnapshots(report.epoch, report.heads);
}

// Another model's history, or a new run: the grid shows that model's heads only (the table keeps
// the last measurement, which its status line names, until the next one).
void HeadsPanel::setHistory(const TrainHistory& history) { m_grid->setHistory(history); }

void HeadsPanel::clearHistory() { m_grid->clear(); }

bool HeadsPanel::exportCsv(const QString& path, QString* error) const {
    if (m_report.heads.empty()) {
        if (error) *error = tr("There are no heads to export: press Measure heads first.");
        return false;
    }
    QString out;
    QTextStream ts(&out);
    ts << "kind,layer,head,importance,importance_raw,confidence,entropy,positional_offset,positional_share,positional,"
          "rare_share,sink_share,aer\n";
    for (const HeadStats& h : m_report.heads) {
        ts << qs(to_string(h.id.kind)) << ',' << h.id.layer << ',' << h.id.head << ',' << headsCsvNumber(h.importance) << ','
           << headsCsvNumber(h.importance_raw) << ',' << headsCsvNumber(h.confidence) << ','
           << headsCsvNumber(h.entropy) << ',';
        if (h.positional)
            ts << h.positional->offset << ',' << headsCsvNumber(h.positional->share) << ','
               << (h.positional->positional() ? "true" : "false");
        else
            ts << ",,";
        ts << ',' << headsCsvNumber(h.rare_share) << ',' << headsCsvNumber(h.sink_share) << ','
           << (h.aer ? headsCsvNumber(*h.aer) : QString()) << '\n';
    }
    return writeExportFile(path, out.toUtf8(), error);
}

bool HeadsPanel::hasHistory() const {
    for (AttentionKind kind : m_grid->kinds())
        if (const HeadsGrid::Cell* c = m_grid->cell(kind, 0, 0); c && !c->importanceHistory.empty()) return true;
    return false;
}

bool HeadsPanel::exportHistoryCsv(const QString& path, QString* error) const {
    if (!hasHistory()) {
        if (error) *error = tr("No validation measured the heads: train with Head statistics above 0.");
        return false;
    }
    const auto number = [](double v) { return std::isfinite(v) ? QString::number(v, 'g', 6) : QString(); };
    QString text = QStringLiteral("epoch,kind,layer,head,importance,confidence\n");
    for (AttentionKind kind : m_grid->kinds())
        for (int layer = 0; m_grid->cell(kind, layer, 0); ++layer)
            for (int head = 0;; ++head) {
                const HeadsGrid::Cell* c = m_grid->cell(kind, layer, head);
                if (!c) break;
                for (size_t i = 0; i < c->importanceHistory.size(); ++i)
                    text += QStringLiteral("%1,%2,%3,%4,%5,%6\n")
                                .arg(c->importanceHistory[i].first)
                                .arg(qs(to_string(kind)))
                                .arg(layer)
                                .arg(head)
                                .arg(number(c->importanceHistory[i].second),
                                     number(i < c->confidenceHistory.size() ? c->confidenceHistory[i].second : NAN));
            }
    return writeExportFile(path, text.toUtf8(), error);
}

bool HeadsPanel::exportJson(const QString& path, QString* error) const {
    if (m_report.heads.empty()) {
        if (error) *error = tr("There are no heads to export: press Measure heads first.");
        return false;
    }
    nlohmann::json j;
    j["measured_on"] = m_measuredOn.toStdString();
    j["sentences"] = m_report.sentences;
    j["tokens"] = m_report.tokens;
    j["loss"] = std::isfinite(m_report.loss) ? nlohmann::json(m_report.loss) : nlohmann::json(nullptr);
    j["importance_normalisation"] =
        "per kind and layer: the raw importances E|dL/dxi| divided by their L2 norm over the layer's heads "
        "(Michel et al. 2019)";
    j["heads"] = heads_to_json(m_report.heads);
    if (!m_curve.empty()) j["prune_curve"] = prune_curve_json(m_curve);
    // Each head's history over the validations of training (the grid's curves), where there is one.
    nlohmann::json history = nlohmann::json::array();
    for (AttentionKind kind : m_grid->kinds())
        for (int layer = 0;; ++layer) {
            if (!m_grid->cell(kind, layer, 0)) break;
            for (int head = 0;; ++head) {
                const HeadsGrid::Cell* c = m_grid->cell(kind, layer, head);
                if (!c) break;
                if (c->importanceHistory.empty()) continue;
                nlohmann::json points = nlohmann::json::array();
                for (size_t i = 0; i < c->importanceHistory.size(); ++i) {
                    const double imp = c->importanceHistory[i].second, conf = c->confidenceHistory[i].second;
                    points.push_back({{"epoch", c->importanceHistory[i].first},
                                      {"importance", std::isfinite(imp) ? nlohmann::json(imp) : nlohmann::json(nullptr)},
                                      {"confidence", std::isfinite(conf) ? nlohmann::json(conf) : nlohmann::json(nullptr)}});
                }
                history.push_back({{"kind", to_string(kind)}, {"layer", layer}, {"head", head}, {"points", points}});
            }
        }
    if (!history.empty()) j["history"] = history;
    return writeExportFile(path, QByteArray::fromStdString(j.dump(2) + "\n"), error);
}

void HeadsPanel::exportDialog(const QString& what) {
    const QString suffix = what.section(QLatin1Char('.'), -1);
    const QString base = what.startsWith(QLatin1String("grid")) ? QStringLiteral("heads-grid")
                         : what.startsWith(QLatin1String("prune")) ? QStringLiteral("pruning-curve")
                                                                    : QStringLiteral("heads");
    const QString filter = suffix == QLatin1String("png")   ? tr("PNG image (*.png)")
                           : suffix == QLatin1String("svg") ? tr("SVG image (*.svg)")
                           : suffix == QLatin1String("csv") ? tr("CSV (*.csv)")
                                                            : tr("JSON (*.json)");
    QSettings settings;
    QString path = QFileDialog::getSaveFileName(
        this, tr("Export"),
        settings.value(QStringLiteral("dirs/export"), QDir::homePath()).toString() + QLatin1Char('/') + base +
            QLatin1Char('.') + suffix,
        filter);
    if (path.isEmpty()) return;
    if (QFileInfo(path).suffix().isEmpty()) path += QLatin1Char('.') + suffix;
    settings.setValue(QStringLiteral("dirs/export"), QFileInfo(path).absolutePath());
    QString error;
    bool ok = false;
    if (what == QLatin1String("csv")) ok = exportCsv(path, &error);
    else if (what == QLatin1String("json")) ok = exportJson(path, &error);
    else if (what.startsWith(QLatin1String("grid"))) ok = m_grid->exportTo(path, 2.0, &error);
    else if (what == QLatin1String("prune.csv")) ok = m_chart->exportCsv(path, &error);
    else ok = m_chart->exportTo(path, 2.0, &error);
    if (ok) m_status->setText(tr("Wrote %1").arg(path).toHtmlEscaped());
    else m_status->setText(QStringLiteral("<span style='color:#b00020'>%1</span>").arg(error.toHtmlEscaped()));
}

}  // namespace attnviz::ui
