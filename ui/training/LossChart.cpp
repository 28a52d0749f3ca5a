#include "ui/training/LossChart.hpp"

#include "ui/training/LossChartRun.hpp"

#include <QAction>
#include <QCursor>
#include <QFile>
#include <QHBoxLayout>
#include <QLabel>
#include <QLegendMarker>
#include <QSlider>
#include <QTextStream>
#include <QTimer>
#include <QToolButton>
#include <QToolTip>
#include <QVBoxLayout>
#include <QtCharts/QChart>
#include <QtCharts/QChartView>
#include <QtCharts/QLineSeries>
#include <QtCharts/QLogValueAxis>
#include <QtCharts/QValueAxis>
#include <algorithm>
#include <cmath>

namespace attnviz::ui {
namespace {

// Tableau 10: distinguishable, and the default in matplotlib/TensorBoard users' eyes.
const QColor kRunColors[] = {QColor(0x1f77b4), QColor(0xff7f0e), QColor(0x2ca02c), QColor(0xd62728), QColor(0x9467bd),
                             QColor(0x8c564b), QColor(0xe377c2), QColor(0x7f7f7f), QColor(0xbcbd22), QColor(0x17becf)};
constexpr int kMaxRawPoints = 500;   // thin the shown series beyond this: Qt Charts strokes every segment on each update
// Batch losses arrive up to 20 times a second; each replace() of a line series makes
// Qt Charts rebuild the line's path and its hover outline (a stroke of every segment),
// 8-14 ms for two 500-point series on a 2-core machine, on the GUI thread. Four
// refreshes a second look as live, and a hidden chart waits until it is shown.
constexpr int kSeriesRefreshMs = 250;

QList<QPointF> strided(const std::vector<QPointF>& points, int stride) {
    QList<QPointF> out;
    out.reserve(int(points.size() / stride + 1));
    for (size_t i = 0; i < points.size(); i += stride) out << points[i];
    return out;
}

QList<QPointF> strided(const BoundedCurve& curve, int stride) {
    QList<QPointF> out;
    const auto& points = curve.points();
    out.reserve(int(points.size() / stride + 1));
    for (size_t i = 0; i < points.size(); i += stride) out << QPointF(double(points[i].first), points[i].second);
    return out;
}

// The shown series' stride: the smallest power of two that keeps them within kMaxRawPoints.
int shownStride(size_t points) {
    int stride = 1;
    while (points / size_t(stride) > size_t(kMaxRawPoints)) stride *= 2;
    return stride;
}

}  // namespace

LossChart::LossChart(QWidget* parent) : QWidget(parent) {
    m_chart = new QChart();
    m_chart->setAnimationOptions(QChart::NoAnimation);  // animations would fight live updates
    m_chart->legend()->setAlignment(Qt::AlignBottom);
    m_chart->setMargins(QMargins(4, 4, 4, 4));
    m_xAxis = new QValueAxis(m_chart);
    m_xAxis->setTitleText(tr("batch"));
    m_xAxis->setLabelFormat(QStringLiteral("%d"));
    m_chart->addAxis(m_xAxis, Qt::AlignBottom);
    m_metricAxis = new QValueAxis(m_chart);
    m_metricAxis->setTitleText(tr("validation BLEU / accuracy (%)"));
    m_metricAxis->setRange(0, 100);
    m_metricAxis->setLabelFormat(QStringLiteral("%d"));
    m_chart->addAxis(m_metricAxis, Qt::AlignRight);
    rebuildYAxis();

    m_refreshTimer = new QTimer(this);
    m_refreshTimer->setObjectName(QStringLiteral("chartRefresh"));
    m_refreshTimer->setSingleShot(true);
    m_refreshTimer->setInterval(kSeriesRefreshMs);
    connect(m_refreshTimer, &QTimer::timeout, this, [this] {
        if (isVisible()) refreshNow();
    });

    m_view = new QChartView(m_chart, this);
    m_view->setRenderHint(QPainter::Antialiasing);
    m_view->setMinimumSize(360, 220);

    m_smoothSlider = new QSlider(Qt::Horizontal, this);
    m_smoothSlider->setRange(0, 99);
    m_smoothSlider->setValue(int(std::lround(m_smoothing * 100)));
    m_smoothSlider->setToolTip(tr("Exponential moving average of the batch loss, debiased as in TensorBoard"));
    m_smoothLabel = new QLabel(this);
    m_smoothLabel->setMinimumWidth(QFontMetrics(font()).horizontalAdvance(QStringLiteral("0.00")) + 4);
    connect(m_smoothSlider, &QSlider::valueChanged, this, [this](int v) { setSmoothing(v / 100.0); });

    m_logAction = new QAction(tr("&Log scale"), this);
    m_logAction->setCheckable(true);
    m_logAction->setToolTip(tr("Logarithmic loss axis"));
    connect(m_logAction, &QAction::toggled, this, &LossChart::setLogScale);
    m_keepAction = new QAction(tr("&Keep run"), this);
    m_keepAction->setToolTip(tr("Keep the current curves to compare with the next run"));
    connect(m_keepAction, &QAction::triggered, this, &LossChart::keepRun);
    m_clearAction = new QAction(tr("&Clear kept runs"), this);
    connect(m_clearAction, &QAction::triggered, this, &LossChart::clearKeptRuns);

    auto* controls = new QHBoxLayout();
    controls->addWidget(new QLabel(tr("Smoothing"), this));
    controls->addWidget(m_smoothSlider, 1);
    controls->addWidget(m_smoothLabel);
    for (QAction* a : {m_logAction, m_keepAction, m_clearAction}) {
        auto* b = new QToolButton(this);
        b->setDefaultAction(a);
        b->setToolButtonStyle(Qt::ToolButtonTextOnly);
        controls->addWidget(b);
    }
    m_styleNote = new QLabel(tr("solid: training loss (smoothed) · dashed: validation loss · dotted: validation BLEU · "
                                "dash-dot: exact match %"),
                             this);
    m_styleNote->setAlignment(Qt::AlignCenter);
    m_styleNote->hide();
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addLayout(controls);
    layout->addWidget(m_view, 1);
    layout->addWidget(m_styleNote);
    setSmoothing(m_smoothing);
    startRun(QString());  // an empty run keeps the axes on screen before the first training
    m_keepAction->setEnabled(false);
    m_clearAction->setEnabled(false);
}

LossChart::~LossChart() {
    for (Run* r : m_runs) delete r;
}

QWidget* LossChart::chartView() const { return m_view; }

LossChart::Run& LossChart::current() {
    if (m_runs.empty() || m_runs.back()->kept) startRun(tr("run %1").arg(m_runCounter + 1));
    return *m_runs.back();
}

void LossChart::startRun(const QString& label) {
    if (!m_runs.empty() && !m_runs.back()->kept) {
        detachRun(*m_runs.back());
        delete m_runs.back();
        m_runs.pop_back();
    }
    auto* run = new Run();
    run->label = label;
    run->color = kRunColors[keptRunCount() % int(std::size(kRunColors))];
    m_runs.push_back(run);
    ++m_runCounter;
    m_forceRescale = true;
    attachRun(*run, false);
    updateRanges();
    m_keepAction->setEnabled(false);
}

void LossChart::attachRun(Run& run, bool kept) {
    run.rawSeries = new QLineSeries();
    run.smoothSeries = new QLineSeries();
    run.valSeries = new QLineSeries();
    run.bleuSeries = new QLineSeries();
    run.accSeries = new QLineSeries();
    run.alignSeries = new QLineSeries();
    run.aerSeries = new QLineSeries();
    const QString names[] = {tr("loss (raw)"), tr("loss (smoothed)"), tr("val loss"), tr("val BLEU"), tr("val accuracy"),
                             tr("alignment accuracy %"), tr("alignment error rate %")};
    int i = 0;
    for (QLineSeries* s : run.all()) {
        const QString name = names[i++];
        m_chart->addSeries(s);
        s->attachAxis(m_xAxis);
        const bool metric = s != run.rawSeries && s != run.smoothSeries && s != run.valSeries;
        s->attachAxis(metric ? static_cast<QAbstractAxis*>(m_metricAxis) : m_yAxis);
        connect(s, &QXYSeries::hovered, this,
                [this, name, &run](const QPointF& p, bool state) { showHover(run.label + QStringLiteral(" · ") + name, p, state); });
    }
    for (QLineSeries* s : run.epochSeries()) s->setPointsVisible(true);
    styleRun(run, kept);
    rebuildRaw(run);
    rebuildSmoothed(run);
    for (const auto& e : run.epochs) appendEpoch(run, e.report, e.step);
}

void LossChart::appendEpoch(Run& run, const EpochReport& report, int64_t step) {
    auto add = [step](QLineSeries* s, double value, double scale) {
        if (std::isfinite(value)) s->append(double(step), scale * value);
    };
    add(run.valSeries, report.val_loss, 1.0);
    add(run.bleuSeries, report.val_bleu, 1.0);
    add(run.accSeries, report.val_accuracy, 100.0);
    add(run.alignSeries, report.val_align_accuracy, 100.0);
    add(run.aerSeries, report.val_aer, 100.0);
}

void LossChart::styleRun(Run& run, bool kept) {
    // One run: a colour per series. Comparing runs: a colour per run, a line style per series.
    const bool comparing = keptRunCount() > 0;
    auto pen = [&](const QColor& color, qreal width, Qt::PenStyle style, int alpha) {
        QColor c = color;
        c.setAlpha(alpha);
        QPen p(c, width, style);
        p.setCapStyle(Qt::RoundCap);
        return p;
    };
    auto color = [&](int series) { return comparing ? run.color : kRunColors[series]; };
    run.rawSeries->setPen(pen(color(0), 1, Qt::SolidLine, 70));
    run.smoothSeries->setPen(pen(color(0), 2.2, Qt::SolidLine, 255));
    run.valSeries->setPen(pen(color(1), 1.8, Qt::DashLine, 255));
    run.bleuSeries->setPen(pen(color(2), 1.5, Qt::DotLine, 255));
    run.accSeries->setPen(pen(color(4), 1.5, Qt::DashDotLine, 220));
    run.alignSeries->setPen(pen(color(5), 1.8, Qt::DashDotDotLine, 255));
    run.aerSeries->setPen(pen(color(3), 1.2, Qt::DotLine, 200));
    for (QLineSeries* s : run.epochSeries()) s->setColor(s->pen().color());
    run.rawSeries->setVisible(!kept);
    const QString prefix = comparing ? run.label + QStringLiteral(": ") : QString();
    run.rawSeries->setName(prefix + tr("loss (raw)"));
    run.smoothSeries->setName(comparing ? run.label : tr("training loss (smoothed)"));
    run.valSeries->setName(prefix + tr("validation loss"));
    run.bleuSeries->setName(prefix + tr("validation BLEU"));
    run.accSeries->setName(prefix + tr("exact match %"));
    run.alignSeries->setName(prefix + tr("alignment accuracy %"));
    run.aerSeries->setName(prefix + tr("alignment error rate %"));
    // Comparing: one legend entry per run; otherwise one per series.
    for (QLineSeries* s : run.all()) {
        const bool show = comparing ? s == run.smoothSeries : s != run.rawSeries;
        for (QLegendMarker* m : m_chart->legend()->markers(s)) m->setVisible(show);
    }
    m_styleNote->setVisible(comparing);
}

void LossChart::restyleAll() {
    for (Run* r : m_runs) styleRun(*r, r->kept);
}

void LossChart::detachRun(Run& run) {
    for (QLineSeries* s : run.all()) {
        if (!s) continue;
        m_chart->removeSeries(s);
        delete s;
    }
    run.rawSeries = run.smoothSeries = run.valSeries = run.bleuSeries = run.accSeries = nullptr;
    run.alignSeries = run.aerSeries = nullptr;
}

void LossChart::addBatchLosses(const std::vector<std::pair<int64_t, double>>& points) {
    if (points.empty()) return;
    Run& run = current();
    QList<QPointF> rawAdd, smoothAdd;
    bool halved = false;
    const double w = m_smoothing;
    for (const auto& [step, loss] : points) {
        if (!std::isfinite(loss)) continue;
        run.emaLast = run.emaLast * w + (1 - w) * loss;  // the moving average sees every batch
        ++run.emaCount;
        if (!run.raw.add(step, loss)) continue;
        const QPointF raw(double(step), run.raw.points().back().second);
        const double debias = 1 - std::pow(w, double(run.emaCount));
        const QPointF s(double(step), debias > 0 ? run.emaLast / debias : loss);
        run.smoothed.push_back(s);
        if ((run.raw.size() - 1) % run.rawStride == 0) rawAdd << raw, smoothAdd << s;
        // A day of training costs the same memory, and the same time per refresh, as an hour.
        for (int n = run.raw.compact(); n > 0; --n) BoundedCurve::halve_beside(run.smoothed), halved = true;
    }
    if (halved || run.raw.size() / run.rawStride > size_t(kMaxRawPoints)) {
        run.rawStride = shownStride(run.raw.size());
        run.rawShown = strided(run.raw, run.rawStride);
        run.smoothShown = strided(run.smoothed, run.rawStride);
    } else {
        run.rawShown.append(rawAdd);
        run.smoothShown.append(smoothAdd);
    }
    scheduleRefresh();
    m_keepAction->setEnabled(true);
}

void LossChart::scheduleRefresh() {
    m_seriesStale = true;
    if (isVisible() && !m_refreshTimer->isActive()) m_refreshTimer->start();
}

void LossChart::refreshNow() {
    m_refreshTimer->stop();
    if (m_seriesStale && !m_runs.empty() && !m_runs.back()->kept) {
        // One replace() per refresh: QXYSeries::append(list) re-lays out the series once
        // per point, which grows quadratic as the curve gets long.
        Run& run = *m_runs.back();
        if (run.rawSeries) run.rawSeries->replace(run.rawShown);
        if (run.smoothSeries) run.smoothSeries->replace(run.smoothShown);
    }
    m_seriesStale = false;
    updateRanges();
}

void LossChart::showEvent(QShowEvent* event) {
    QWidget::showEvent(event);
    if (m_seriesStale) refreshNow();
}

void LossChart::addEpoch(const EpochReport& report, int64_t step) {
    Run& run = current();
    run.epochs.push_back({step, report});
    appendEpoch(run, report, step);
    // Shown, the epoch's points and the axes are drawn at once. Hidden, they wait for the
    // show like the batch losses: a refresh re-lays out the whole chart, and at an epoch's
    // end that made the training poll the GUI thread's longest work (16-24 ms in a soak).
    if (isVisible()) refreshNow();
    else scheduleRefresh();
    m_keepAction->setEnabled(true);
}

void LossChart::setHistory(const TrainHistory& history, const QString& label) {
    startRun(label);
    // The history's points cover its stride of batches each: taken as they are.
    Run& run = current();
    run.raw = history.batch_loss;
    run.rawStride = shownStride(run.raw.size());
    rebuildRaw(run);
    rebuildSmoothed(run);
    if (!run.raw.empty()) m_keepAction->setEnabled(true);
    scheduleRefresh();
    // Epoch e ends at the e-th equal share of the steps when the history does not say.
    const int64_t steps = history.global_step > 0 ? history.global_step : int64_t(history.batch_loss.size());
    const int n = int(history.epochs.size());
    for (int i = 0; i < n; ++i) {
        const int epoch = history.epochs[i].epoch > 0 ? history.epochs[i].epoch : i + 1;
        const int64_t step = history.epochs_done > 0 ? steps * epoch / std::max(history.epochs_done, n) : steps;
        addEpoch(history.epochs[i], step);
    }
}

void LossChart::rebuildRaw(Run& run) {
    run.rawShown = strided(run.raw, run.rawStride);
    if (run.rawSeries) run.rawSeries->replace(run.rawShown);
}

void LossChart::rebuildSmoothed(Run& run) {
    run.smoothed.clear();
    run.emaLast = 0;
    run.emaCount = 0;
    // Each point stands for raw.stride() batches of (about) its mean loss: the average
    // moves as it would over that many batches of that loss.
    const int64_t stride = run.raw.stride();
    const double w = std::pow(m_smoothing, double(stride));
    for (const auto& [step, loss] : run.raw.points()) {
        run.emaLast = run.emaLast * w + (1 - w) * loss;
        run.emaCount += stride;
        const double debias = 1 - std::pow(m_smoothing, double(run.emaCount));
        run.smoothed.emplace_back(double(step), debias > 0 ? run.emaLast / debias : loss);
    }
    run.smoothShown = strided(run.smoothed, run.rawStride);
    if (run.smoothSeries) run.smoothSeries->replace(run.smoothShown);
}

void LossChart::setSmoothing(double weight) {
    weight = std::clamp(weight, 0.0, 0.99);
    const bool changed = std::abs(weight - m_smoothing) > 1e-9;
    m_smoothing = weight;
    m_smoothLabel->setText(QString::number(weight, 'f', 2));
    if (m_smoothSlider->value() != int(std::lround(weight * 100))) m_smoothSlider->setValue(int(std::lround(weight * 100)));
    if (!changed) return;
    for (Run* r : m_runs) rebuildSmoothed(*r);
    refreshNow();
    Q_EMIT smoothingChanged(weight);
}

void LossChart::setLogScale(bool on) {
    if (on == m_logScale) return;
    m_logScale = on;
    if (m_logAction->isChecked() != on) m_logAction->setChecked(on);
    rebuildYAxis();
    m_forceRescale = true;
    refreshNow();
}

void LossChart::rebuildYAxis() {
    QAbstractAxis* axis;
    if (m_logScale) {
        auto* log = new QLogValueAxis(m_chart);
        log->setBase(10);
        log->setLabelFormat(QStringLiteral("%.3g"));
        log->setMinorTickCount(8);
        axis = log;
    } else {
        auto* lin = new QValueAxis(m_chart);
        lin->setLabelFormat(QStringLiteral("%.2f"));
        axis = lin;
    }
    axis->setTitleText(tr("loss (cross-entropy per token)"));
    if (m_yAxis) {
        for (Run* r : m_runs)
            for (QLineSeries* s : {r->rawSeries, r->smoothSeries, r->valSeries})
                if (s) s->detachAxis(m_yAxis);
        m_chart->removeAxis(m_yAxis);
        delete m_yAxis;
    }
    m_yAxis = axis;
    m_chart->addAxis(m_yAxis, Qt::AlignLeft);
    for (Run* r : m_runs)
        for (QLineSeries* s : {r->rawSeries, r->smoothSeries, r->valSeries})
            if (s) s->attachAxis(m_yAxis);
}

void LossChart::updateRanges() {
    bool empty = true;
    for (const Run* r : m_runs) empty = empty && r->raw.empty() && r->epochs.empty();
    m_chart->setTitle(empty ? tr("Press Train (F5): the loss appears here, batch by batch") : QString());
    double xMax = 1, yMin = INFINITY, yMax = -INFINITY;
    for (const Run* r : m_runs) {
        auto take = [&](double x, double y) {
            xMax = std::max(xMax, x);
            if (y > 0 || !m_logScale) yMin = std::min(yMin, y), yMax = std::max(yMax, y);
        };
        if (r->kept)
            for (const QPointF& p : r->smoothed) take(p.x(), p.y());
        else
            for (const auto& [step, loss] : r->raw.points()) take(double(step), loss);
        for (const auto& e : r->epochs) {
            xMax = std::max(xMax, double(e.step));
            if (std::isfinite(e.report.val_loss) && (e.report.val_loss > 0 || !m_logScale))
                yMin = std::min(yMin, e.report.val_loss), yMax = std::max(yMax, e.report.val_loss);
        }
    }
    // Changing an axis relayouts the whole chart (milliseconds): only rescale when the data
    // leaves the visible range or fills much less of it, growing x with room to spare.
    if (xMax > m_xAxis->max() || xMax < 0.4 * m_xAxis->max() || m_forceRescale) {
        // Empty: a placeholder range of whole batches (0..1 would print "0 0 0 0 0 1").
        m_xAxis->setRange(0, empty ? 100.0 : xMax * 1.15);
        m_xAxis->applyNiceNumbers();
    }
    if (!std::isfinite(yMin)) yMin = m_logScale ? 0.1 : 0, yMax = m_logScale ? 10 : 1;
    const auto [lo, hi] = drawnLossRange();
    const bool outside = yMin < lo || yMax > hi;
    const bool loose = m_logScale ? (hi / lo > 4 * (yMax / yMin)) : (hi - lo > 2.0 * (yMax - yMin) + 1e-6);
    if (outside || loose || m_forceRescale) {
        if (m_logScale) {
            m_yAxis->setRange(yMin * 0.85, yMax * 1.15);
        } else {
            const double pad = std::max(1e-3, (yMax - yMin) * 0.05);
            m_yAxis->setRange(std::max(0.0, yMin - pad), yMax + pad);
            static_cast<QValueAxis*>(m_yAxis)->applyNiceNumbers();
        }
    }
    m_forceRescale = false;
}

std::pair<double, double> LossChart::lossAxisRange() const {
    if (m_seriesStale) const_cast<LossChart*>(this)->refreshNow();  // what is drawn once the refresh is due
    return drawnLossRange();
}

std::pair<double, double> LossChart::drawnLossRange() const {
    if (auto* v = qobject_cast<QValueAxis*>(m_yAxis)) return {v->min(), v->max()};
    if (auto* l = qobject_cast<QLogValueAxis*>(m_yAxis)) return {l->min(), l->max()};
    return {0, 0};
}

void LossChart::showHover(const QString& series, const QPointF& point, bool state) {
    if (!state) {
        QToolTip::hideText();
        return;
    }
    QToolTip::showText(QCursor::pos(),
                       tr("%1\nbatch %2: %3").arg(series).arg(std::lround(point.x())).arg(point.y(), 0, 'g', 5), m_view);
}

void LossChart::keepRun() {
    if (m_runs.empty() || m_runs.back()->kept) return;
    Run& run = *m_runs.back();
    if (run.raw.empty() && run.epochs.empty()) return;
    if (m_seriesStale) refreshNow();  // the kept curve is drawn complete
    run.kept = true;  // keeps the colour it was given when it started
    restyleAll();
    updateRanges();
    m_keepAction->setEnabled(false);
    m_clearAction->setEnabled(true);
    Q_EMIT runKept(run.label);
}

void LossChart::clearKeptRuns() {
    for (auto it = m_runs.begin(); it != m_runs.end();) {
        if ((*it)->kept) {
            detachRun(**it);
            delete *it;
            it = m_runs.erase(it);
        } else {
            ++it;
        }
    }
    if (!m_runs.empty()) m_runs.back()->color = kRunColors[0];
    restyleAll();
    m_forceRescale = true;
    refreshNow();
    m_clearAction->setEnabled(false);
}

QString LossChart::currentRunLabel() const {
    return (!m_runs.empty() && !m_runs.back()->kept) ? m_runs.back()->label : QString();
}
int LossChart::pointCount() const { return (!m_runs.empty() && !m_runs.back()->kept) ? int(m_runs.back()->raw.size()) : 0; }
int64_t LossChart::pointStride() const { return (!m_runs.empty() && !m_runs.back()->kept) ? m_runs.back()->raw.stride() : 1; }
int LossChart::epochCount() const {
    return (!m_runs.empty() && !m_runs.back()->kept) ? int(m_runs.back()->epochs.size()) : 0;
}
int LossChart::keptRunCount() const {
    return int(std::count_if(m_runs.begin(), m_runs.end(), [](const Run* r) { return r->kept; }));
}
double LossChart::lastSmoothed() const {
    if (m_runs.empty() || m_runs.back()->kept || m_runs.back()->smoothed.empty()) return std::nan("");
    return m_runs.back()->smoothed.back().y();
}

}  // namespace attnviz::ui
