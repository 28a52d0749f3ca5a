#include "ui/analysis/AgreementPanel.hpp"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPainter>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "ui/common/Background.hpp"
#include "ui/common/Format.hpp"

namespace attnviz::ui {
namespace {
QString pairName(AttributionMethod m) { return QStringLiteral("attention vs ") + qs(to_string(m)); }

/// A number cell that sorts as a number (NaN: empty, sorted first).
QTableWidgetItem* numberItem(double v, int decimals) {
    auto* item = new QTableWidgetItem();
    item->setData(Qt::DisplayRole, std::isfinite(v) ? QVariant(std::round(v * std::pow(10, decimals)) / std::pow(10, decimals))
                                                    : QVariant(-2.0));
    if (!std::isfinite(v)) item->setData(Qt::ToolTipRole, QObject::tr("undefined: no step with a defined τ-b"));
    item->setFlags(item->flags() & ~Qt::ItemIsEditable);
    return item;
}
/// A map's value for an order, or `fallback`.
template <class Map>
typename Map::mapped_type orderValue(const Map& map, ErasureOrder o, typename Map::mapped_type fallback) {
    const auto it = map.find(o);
    return it == map.end() ? fallback : it->second;
}

/// Mean removals: a number, or "never" (sorted after every number) when no step flipped.
class RemovalsItem : public QTableWidgetItem {
public:
    explicit RemovalsItem(std::optional<double> mean) {
        setData(Qt::DisplayRole, mean ? QVariant(std::round(*mean * 100) / 100) : QVariant(QObject::tr("never")));
        setData(Qt::UserRole, mean ? *mean : std::numeric_limits<double>::infinity());
        setFlags(flags() & ~Qt::ItemIsEditable);
    }
    bool operator<(const QTableWidgetItem& other) const override {
        return data(Qt::UserRole).toDouble() < other.data(Qt::UserRole).toDouble();
    }
};
}  // namespace

TauHistograms::TauHistograms(QWidget* parent) : QWidget(parent) {
    setMinimumHeight(120);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
}

void TauHistograms::setTable(const AgreementTable* table, const std::vector<std::string>& pairs) {
    m_bins.clear();
    m_means.clear();
    for (const std::string& p : pairs) {
        if (!table || !std::count(table->pairs().begin(), table->pairs().end(), p)) continue;
        const AgreementRow& row = table->row(p);
        m_bins.emplace_back(qs(p), row.step_tau.histogram(20, -1.0, 1.0));
        m_means.push_back(row.step_tau.mean());
    }
    update();
}

QSize TauHistograms::sizeHint() const { return QSize(std::max<int>(1, int(m_bins.size())) * 220, 150); }

void TauHistograms::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.fillRect(rect(), palette().base());
    if (m_bins.empty()) {
        p.setPen(palette().color(QPalette::PlaceholderText));
        p.drawText(rect(), Qt::AlignCenter, tr("Run it to see the distribution of τ-b per method."));
        return;
    }
    const QFontMetrics fm = fontMetrics();
    const int n = int(m_bins.size());
    const int w = width() / n;
    for (int k = 0; k < n; ++k) {
        const auto& [name, bins] = m_bins[size_t(k)];
        const QRect box(k * w + 20, fm.height() + 4, w - 40, height() - 2 * fm.height() - 10);
        p.setPen(palette().color(QPalette::Text));
        p.drawText(QRect(k * w, 0, w, fm.height()), Qt::AlignCenter,
                   tr("%1 (mean %2)").arg(name).arg(std::isfinite(m_means[size_t(k)]) ? QString::number(m_means[size_t(k)], 'f', 2)
                                                                                        : QStringLiteral("–")));
        const size_t top = std::max<size_t>(1, *std::max_element(bins.begin(), bins.end()));
        const double bw = double(box.width()) / double(bins.size());
        for (size_t b = 0; b < bins.size(); ++b) {
            const int h = int(std::lround(double(bins[b]) / double(top) * box.height()));
            p.fillRect(QRectF(box.left() + b * bw + 1, box.bottom() - h + 1, bw - 2, h), QColor(0x2c, 0x7f, 0xb8));
        }
        p.setPen(QColor(0x80, 0x80, 0x80));
        p.drawLine(box.bottomLeft(), box.bottomRight());
        const int zero = box.left() + box.width() / 2;
        p.drawLine(zero, box.top(), zero, box.bottom());
        p.setPen(palette().color(QPalette::Text));
        const QRect ticks(box.left() - 8, box.bottom() + 2, box.width() + 16, fm.height());
        p.drawText(ticks, Qt::AlignLeft, QStringLiteral("−1"));
        p.drawText(ticks, Qt::AlignHCenter, QStringLiteral("0"));
        p.drawText(ticks, Qt::AlignRight, QStringLiteral("+1"));
    }
}

AgreementPanel::AgreementPanel(QWidget* parent) : QWidget(parent), m_jobs(new LatestOnly(this)) {
    setObjectName(QStringLiteral("agreementPanel"));
    setWindowTitle(tr("Corpus agreement: is attention an explanation here?"));
    auto* controls = new QHBoxLayout();
    const QStringList saved = QSettings().value(QStringLiteral("agreement/methods")).toStringList();
    for (AttributionMethod m : all_attribution_methods()) {
        auto* box = new QCheckBox(qs(cli_name(m)), this);
        // Integrated gradients costs 32 gradient passes a step: off unless chosen (as the CLI's default).
        box->setChecked(saved.isEmpty() ? m != AttributionMethod::integrated_gradients : saved.contains(box->text()));
        connect(box, &QCheckBox::toggled, this, [this] {
            QStringList names;
            for (QCheckBox* b : m_methodBoxes)
                if (b->isChecked()) names << b->text();
            QSettings().setValue(QStringLiteral("agreement/methods"), names);
        });
        m_methodBoxes.push_back(box);
        controls->addWidget(box);
    }
    m_erasure = new QCheckBox(tr("erasure"), this);
    m_erasure->setObjectName(QStringLiteral("agreementErasure"));
    m_erasure->setToolTip(tr("Also erasure flip curves (Serrano & Smith 2019): at every output step, source positions "
                             "are erased from every cross map, most important first by attention, |grad × input|, "
                             "integrated gradients (32 points) and at random, until the model's choice changes. Fewer "
                             "removals: the order explains the decision better. Costs a decoder step per removal."));
    m_erasure->setChecked(QSettings().value(QStringLiteral("agreement/erasure"), false).toBool());
    connect(m_erasure, &QCheckBox::toggled, this, [](bool on) { QSettings().setValue(QStringLiteral("agreement/erasure"), on); });
    controls->addWidget(m_erasure);
    m_max = new QSpinBox(this);
    m_max->setRange(1, 100000);
    m_max->setValue(QSettings().value(QStringLiteral("agreement/maxSentences"), 200).toInt());
    m_max->setToolTip(tr("The first sentences of the corpus to translate and attribute"));
    connect(m_max, &QSpinBox::valueChanged, this, [](int v) { QSettings().setValue(QStringLiteral("agreement/maxSentences"), v); });
    m_start = new QPushButton(tr("Run"), this);
    m_cancel = new QPushButton(tr("Cancel"), this);
    m_cancel->setEnabled(false);
    m_progress = new QProgressBar(this);
    controls->addWidget(new QLabel(tr("Sentences"), this));
    controls->addWidget(m_max);
    controls->addWidget(m_start);
    controls->addWidget(m_cancel);
    controls->addWidget(m_progress, 1);
    m_summary = new QLabel(tr("Translate the first sentences of the corpus, attribute every step and compare with "
                              "attention (Jain & Wallace's table)."),
                           this);
    m_summary->setWordWrap(true);
    m_summary->setTextFormat(Qt::RichText);
    m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_histograms = new TauHistograms(this);
    m_table = new QTableWidget(this);
    m_table->setObjectName(QStringLiteral("agreementTable"));
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setWordWrap(false);
    m_table->verticalHeader()->hide();
    m_table->setToolTip(tr("Click a column's head to sort; double-click a sentence to open its heatmaps"));
    auto* split = new QSplitter(Qt::Vertical, this);
    auto* top = new QWidget(split);
    auto* topLayout = new QVBoxLayout(top);
    topLayout->setContentsMargins(0, 0, 0, 0);
    topLayout->addWidget(m_summary);
    topLayout->addWidget(m_histograms, 1);
    split->addWidget(top);
    split->addWidget(m_table);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(controls);
    layout->addWidget(split, 1);
    m_poll = new QTimer(this);
    m_poll->setInterval(100);
    connect(m_poll, &QTimer::timeout, this, [this] {
        if (!m_run) return;
        m_progress->setMaximum(int(std::max<size_t>(1, m_run->total.load())));
        m_progress->setValue(int(m_run->done.load()));
    });
    connect(m_start, &QPushButton::clicked, this, &AgreementPanel::start);
    connect(m_cancel, &QPushButton::clicked, this, &AgreementPanel::cancel);
    connect(m_table, &QTableWidget::cellDoubleClicked, this, [this](int row, int) {
        if (QTableWidgetItem* item = m_table->item(row, 1)) Q_EMIT sentenceActivated(item->text());
    });
}

AgreementPanel::~AgreementPanel() {
    if (m_run) m_run->stop = true;  // the job ends after its sentence; LatestOnly's destructor waits for it
}

void AgreementPanel::setModel(TranslationModelPtr model) { m_model = std::move(model); }

void AgreementPanel::setCorpus(std::shared_ptr<const Corpus> corpus) { m_corpus = std::move(corpus); }

std::vector<AttributionMethod> AgreementPanel::methods() const {
    std::vector<AttributionMethod> out;
    for (size_t i = 0; i < m_methodBoxes.size(); ++i)
        if (m_methodBoxes[i]->isChecked()) out.push_back(all_attribution_methods()[i]);
    return out;
}

void AgreementPanel::setMethods(const std::vector<AttributionMethod>& methods) {
    for (size_t i = 0; i < m_methodBoxes.size(); ++i)
        m_methodBoxes[i]->setChecked(std::count(methods.begin(), methods.end(), all_attribution_methods()[i]) > 0);
}

bool AgreementPanel::busy() const { return m_jobs->busy(); }

void AgreementPanel::start() {
    QString problem;
    if (!m_model) problem = tr("There is no model yet: train one or open a checkpoint.");
    else if (!m_model->has_attention()) problem = tr("This model has no attention: there is nothing to compare.");
    else if (!m_corpus || m_corpus->pairs.empty()) problem = tr("There is no corpus: open one or choose a task.");
    else if (m_corpus->level != m_model->level()) problem = tr("The corpus is tokenised differently from the model.");
    else if (methods().empty()) problem = tr("Choose at least one method.");
    if (!problem.isEmpty()) {
        m_summary->setText(QStringLiteral("<span style='color:#b00020'>%1</span>").arg(problem.toHtmlEscaped()));
        Q_EMIT failed(problem);
        return;
    }
    if (m_run) m_run->stop = true;
    m_run = std::make_shared<Progress>();
    CorpusAgreementOptions options;
    options.attribution.methods = methods();
    options.max_sentences = size_t(m_max->value());
    options.decode.num_hypotheses = 1;
    options.erasure = m_erasure->isChecked();
    std::function<CorpusAgreement()> work = [model = m_model, corpus = m_corpus, options, run = m_run] {
        std::vector<std::vector<std::string>> sources;
        for (const SentencePair& p : corpus->pairs) {
            if (sources.size() >= options.max_sentences) break;
            sources.push_back(model->level() == TokenLevel::subword ? model->tokenizer().split_words(p.src) : p.src);
        }
        run->total = sources.size();
        return corpus_agreement(*model, sources, options, [run](size_t done, size_t) {
            run->done = done;
            return !run->stop.load();
        });
    };
    m_start->setEnabled(false);
    m_cancel->setEnabled(true);
    m_progress->setValue(0);
    m_poll->start();
    m_summary->setText(tr("Translating and attributing…"));
    m_jobs->run<CorpusAgreement>(
        std::move(work), [this, run = m_run](CorpusAgreement r) { showResult(std::move(r), run->stop.load()); },
        [this](const QString& message) {
            m_poll->stop();
            m_start->setEnabled(true);
            m_cancel->setEnabled(false);
            m_summary->setText(QStringLiteral("<span style='color:#b00020'>%1</span>").arg(message.toHtmlEscaped()));
            Q_EMIT failed(message);
        });
}

void AgreementPanel::cancel() {
    if (m_run) m_run->stop = true;
}

void AgreementPanel::showResult(CorpusAgreement result, bool cancelled) {
    m_poll->stop();
    m_start->setEnabled(true);
    m_cancel->setEnabled(false);
    m_progress->setMaximum(int(std::max<size_t>(1, m_run->total.load())));
    m_progress->setValue(int(result.sentences.size()));
    m_result = std::move(result);
    QString text = tr("%1 sentences%2, %3 s. ")
                       .arg(m_result->sentences.size())
                       .arg(cancelled ? tr(" (cancelled)") : QString())
                       .arg(m_result->seconds, 0, 'f', 1);
    text += QStringLiteral("<table cellspacing=6><tr><th align=left>%1</th><th>τ-b mean ± std</th><th>median</th>"
                           "<th>same top token</th><th>steps</th></tr>")
                .arg(tr("pair"));
    for (const std::string& p : m_result->table.pairs()) {
        const AgreementRow& row = m_result->table.row(p);
        text += QStringLiteral("<tr><td>%1</td><td align=center>%2 ± %3</td><td align=center>%4</td><td "
                               "align=center>%5</td><td align=center>%6</td></tr>")
                    .arg(qs(p).toHtmlEscaped())
                    .arg(row.step_tau.mean(), 0, 'f', 3)
                    .arg(row.step_tau.std_dev(), 0, 'f', 3)
                    .arg(row.step_tau.quantile(0.5), 0, 'f', 3)
                    .arg(row.top1_rate(), 0, 'f', 3)
                    .arg(row.steps);
    }
    text += QStringLiteral("</table>");
    if (const auto& e = m_result->erasure) {
        // Serrano & Smith: removals until the decision changes, per order; attention against the others.
        text += tr("<p>Erasure over %1 steps: source positions removed until the model's choice changes "
                   "(fewer: the order explains the decision better).</p>")
                    .arg(e->steps);
        text += QStringLiteral("<table cellspacing=6><tr><th align=left>%1</th><th>%2</th><th>%3</th><th>%4</th>"
                               "<th>%5</th></tr>")
                    .arg(tr("order"), tr("steps flipped"), tr("mean removals"), tr("median"),
                         tr("attention flips sooner · same · later"));
        for (ErasureOrder o : e->orders) {
            QString race = QStringLiteral("—");
            if (o != ErasureOrder::attention) {
                const auto it = e->attention_vs.find(o);
                if (it != e->attention_vs.end())
                    race = QStringLiteral("%1 · %2 · %3").arg(it->second.sooner).arg(it->second.same).arg(it->second.later);
            }
            text += QStringLiteral("<tr><td>%1</td><td align=center>%2 of %3</td><td align=center>%4</td>"
                                   "<td align=center>%5</td><td align=center>%6</td></tr>")
                        .arg(qs(to_string(o)).toHtmlEscaped())
                        .arg(orderValue(e->flipped, o, size_t{0}))
                        .arg(e->steps)
                        .arg(orderValue(e->mean, o, double(NAN)), 0, 'f', 2)
                        .arg(orderValue(e->median, o, double(NAN)), 0, 'f', 1)
                        .arg(race);
        }
        text += QStringLiteral("</table>");
    }
    m_summary->setText(text);
    std::vector<std::string> attentionPairs;
    for (AttributionMethod m : m_result->methods) attentionPairs.push_back(pairName(m).toStdString());
    m_histograms->setTable(&m_result->table, attentionPairs);
    fillTable();
    Q_EMIT finished();
}

void AgreementPanel::fillTable() {
    m_table->setSortingEnabled(false);
    m_table->clear();
    QStringList heads = {tr("#"), tr("source"), tr("output"), tr("steps")};
    for (AttributionMethod m : m_result->methods) heads << tr("τ %1").arg(qs(cli_name(m)));
    for (AttributionMethod m : m_result->methods) heads << tr("top-1 %1").arg(qs(cli_name(m)));
    const std::vector<ErasureOrder> orders = m_result->erasure ? m_result->erasure->orders : std::vector<ErasureOrder>{};
    for (ErasureOrder o : orders) heads << tr("removals %1").arg(qs(to_string(o)));
    m_table->setColumnCount(int(heads.size()));
    m_table->setHorizontalHeaderLabels(heads);
    m_table->setRowCount(int(m_result->sentences.size()));
    for (int r = 0; r < int(m_result->sentences.size()); ++r) {
        const SentenceAgreement& s = m_result->sentences[size_t(r)];
        m_table->setItem(r, 0, numberItem(double(s.index + 1), 0));
        for (const auto& [column, text] : {std::pair{1, s.text}, std::pair{2, s.output}}) {
            auto* item = new QTableWidgetItem(qs(text));
            item->setFlags(item->flags() & ~Qt::ItemIsEditable);
            m_table->setItem(r, column, item);
        }
        // The tokens the model read, where they differ from the text (subword pieces, characters).
        if (s.input != s.text) m_table->item(r, 1)->setToolTip(tr("read as: %1").arg(qs(s.input)));
        m_table->setItem(r, 3, numberItem(double(s.steps), 0));
        int column = 4;
        for (AttributionMethod m : m_result->methods) {
            const auto it = s.kendall_tau.find(pairName(m).toStdString());
            m_table->setItem(r, column++, numberItem(it == s.kendall_tau.end() ? NAN : it->second, 3));
        }
        for (AttributionMethod m : m_result->methods) {
            const auto it = s.top1.find(pairName(m).toStdString());
            m_table->setItem(r, column++, numberItem(it == s.top1.end() ? NAN : it->second, 3));
        }
        for (ErasureOrder o : orders) {  // the sentence's mean removals over the steps the order flipped
            auto* item = new RemovalsItem(s.erasure ? s.erasure->mean_removals(o) : std::nullopt);
            if (s.erasure)
                item->setToolTip(tr("%1 of %2 steps never flipped by erasing in this order")
                                     .arg(s.erasure->never(o))
                                     .arg(s.erasure->steps.size()));
            m_table->setItem(r, column++, item);
        }
    }
    m_table->setSortingEnabled(true);
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->horizontalHeader()->setSectionResizeMode(1, QHeaderView::Stretch);
    m_table->horizontalHeader()->setSectionResizeMode(2, QHeaderView::Stretch);
}

}  // namespace attnviz::ui
