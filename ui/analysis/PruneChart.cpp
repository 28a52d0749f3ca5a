#include "ui/analysis/PruneChart.hpp"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPainter>
#include <QVBoxLayout>
#include <QtCharts/QChart>
#include <QtCharts/QChartView>
#include <QtCharts/QLegend>
#include <QtCharts/QLineSeries>
#include <QtCharts/QValueAxis>
#include <algorithm>
#include <cmath>
#include <map>

#include "ui/common/Format.hpp"
#include "ui/heatmap/HeatmapExport.hpp"

namespace attnviz::ui {
namespace {
/// importance, confidence, then random:1, random:2, ...
int pruneOrderRank(const std::string& order) {
    if (order == "importance") return 0;
    if (order == "confidence") return 1;
    return 2;
}
}  // namespace

PruneChart::PruneChart(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("pruneChart"));
    m_chart = new QChart();
    m_chart->setTitle(tr("Pruning curve: heads masked in increasing order of importance, of confidence, and at random"));
    m_chart->legend()->setAlignment(Qt::AlignBottom);
    m_chart->setMargins(QMargins(4, 4, 4, 4));
    m_x = new QValueAxis(m_chart);
    m_x->setTitleText(tr("heads masked (% of the kinds' heads)"));
    m_x->setRange(0, 100);
    m_x->setLabelFormat(QStringLiteral("%.0f"));
    m_x->setTickCount(11);
    m_y = new QValueAxis(m_chart);
    m_chart->addAxis(m_x, Qt::AlignBottom);
    m_chart->addAxis(m_y, Qt::AlignLeft);
    m_view = new QChartView(m_chart, this);
    m_view->setRenderHint(QPainter::Antialiasing);
    m_view->setMinimumHeight(220);
    m_metric = new QComboBox(this);
    m_metric->setObjectName(QStringLiteral("pruneMetric"));
    m_metric->addItem(tr("BLEU"), QStringLiteral("bleu"));
    m_metric->addItem(tr("Validation loss"), QStringLiteral("loss"));
    m_metric->setToolTip(tr("BLEU of greedy decoding, or the teacher-forced loss, at each point"));
    m_kinds = new QComboBox(this);
    m_kinds->setObjectName(QStringLiteral("pruneKinds"));
    m_kinds->addItem(tr("all kinds"), QStringLiteral("all"));
    m_kinds->setToolTip(tr("The heads masked: all kinds together, or one kind alone"));
    m_empty = new QLabel(tr("Check “Pruning curve” and press Measure heads to see how many heads can go."), this);
    m_empty->setWordWrap(true);
    m_metric->setSizePolicy(QSizePolicy::Fixed, QSizePolicy::Fixed);
    m_kinds->setSizePolicy(QSizePolicy::Fixed, QSizePolicy::Fixed);
    m_kinds->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    auto* controls = new QHBoxLayout();
    controls->addWidget(new QLabel(tr("Show"), this));
    controls->addWidget(m_metric);
    controls->addWidget(new QLabel(tr("masking"), this));
    controls->addWidget(m_kinds);
    controls->addWidget(m_empty, 1);
    controls->addStretch(0);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addLayout(controls);
    layout->addWidget(m_view, 1);
    connect(m_metric, &QComboBox::currentIndexChanged, this, &PruneChart::rebuild);
    connect(m_kinds, &QComboBox::currentIndexChanged, this, &PruneChart::rebuild);
    rebuild();
}

void PruneChart::setPoints(std::vector<PrunePoint> points) {
    m_points = std::move(points);
    const QString kept = m_kinds->currentData().toString();
    {
        const QSignalBlocker block(m_kinds);
        m_kinds->clear();
        m_kinds->addItem(tr("all kinds"), QStringLiteral("all"));
        std::vector<std::string> kinds;
        for (const PrunePoint& p : m_points)
            if (p.kinds != "all" && std::find(kinds.begin(), kinds.end(), p.kinds) == kinds.end()) kinds.push_back(p.kinds);
        for (const std::string& k : kinds) m_kinds->addItem(tr("%1 only").arg(qs(k)), qs(k));
        const int again = m_kinds->findData(kept);
        m_kinds->setCurrentIndex(again >= 0 ? again : 0);
    }
    rebuild();
}

void PruneChart::rebuild() {
    m_chart->removeAllSeries();
    const bool bleu = m_metric->currentData().toString() == QLatin1String("bleu");
    const std::string kinds = m_kinds->currentData().toString().toStdString();
    m_y->setTitleText(bleu ? tr("BLEU") : tr("validation loss (nats per token)"));
    std::map<std::pair<int, std::string>, std::vector<const PrunePoint*>> byOrder;
    for (const PrunePoint& p : m_points)
        if (p.kinds == kinds) byOrder[{pruneOrderRank(p.order), p.order}].push_back(&p);
    double lo = INFINITY, hi = -INFINITY;
    for (auto& [key, points] : byOrder) {
        std::sort(points.begin(), points.end(), [](const PrunePoint* a, const PrunePoint* b) { return a->fraction < b->fraction; });
        auto* series = new QLineSeries();
        const std::string& order = key.second;
        series->setName(order.rfind("random", 0) == 0 ? tr("random (seed %1)").arg(qs(order.substr(order.find(':') + 1)))
                                                       : tr("by %1").arg(qs(order)));
        QPen pen = series->pen();
        pen.setWidthF(2.2);
        if (key.first == 0) pen.setColor(QColor(0x1f, 0x77, 0xb4));
        else if (key.first == 1) pen.setColor(QColor(0xff, 0x7f, 0x0e));
        else {
            pen.setColor(QColor(0x80, 0x80, 0x80));
            pen.setStyle(Qt::DashLine);
            pen.setWidthF(1.4);
        }
        series->setPen(pen);
        series->setPointsVisible(true);
        for (const PrunePoint* p : points) {
            const double y = bleu ? p->bleu : p->loss;
            if (!std::isfinite(y)) continue;
            series->append(100.0 * p->fraction, y);
            lo = std::min(lo, y);
            hi = std::max(hi, y);
        }
        m_chart->addSeries(series);
        series->attachAxis(m_x);
        series->attachAxis(m_y);
    }
    if (std::isfinite(lo)) {
        const double pad = std::max(1e-3, (hi - lo) * 0.05);
        m_y->setRange(bleu ? std::max(0.0, lo - pad) : lo - pad, hi + pad);
        m_y->applyNiceNumbers();
    } else {
        m_y->setRange(0, bleu ? 100 : 1);
    }
    m_empty->setVisible(m_points.empty());
}

bool PruneChart::exportTo(const QString& path, double scale, QString* error) const {
    if (m_points.empty()) {
        if (error) *error = tr("There is no pruning curve to export: check Pruning curve and measure the heads first.");
        return false;
    }
    // The chart as on screen, at a readable size when the view has not been laid out yet.
    const QSize size = m_view->size().width() >= 300 ? m_view->size() : QSize(760, 460);
    if (m_view->size() != size) m_view->resize(size);
    return exportPicture([this, size](QPainter& p) { m_view->render(&p, QRectF(QPointF(0, 0), size), QRect(QPoint(0, 0), size)); },
                         size, path, scale, error);
}

bool PruneChart::exportCsv(const QString& path, QString* error) const {
    if (m_points.empty()) {
        if (error) *error = tr("There is no pruning curve to export: check Pruning curve and measure the heads first.");
        return false;
    }
    return writeExportFile(path, QByteArray::fromStdString(prune_curve_csv(m_points)), error);
}

}  // namespace attnviz::ui
