// Offscreen tests of the loss chart: smoothing, log scale, kept runs, CSV, when it
// redraws, and its bounded curve.
// LibTorch's c10 logging defines a CHECK macro of its own: include everything
// that pulls in LibTorch first, then let Catch2 define CHECK last.
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QDir>
#include <QDropEvent>
#include <QElapsedTimer>
#include <QFile>
#include <QImage>
#include <QLineEdit>
#include <QMessageBox>
#include <QMimeData>
#include <QPainter>
#include <QProgressBar>
#include <QSettings>
#include <QSignalSpy>
#include <QSpinBox>
#include <QSvgRenderer>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>
#include <QTimer>
#include <QUrl>
#include <QXmlStreamReader>
#include <QtCharts/QChartView>
#include <QtCharts/QXYSeries>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/persist/checkpoint.hpp"
#include "core/model/device.hpp"
#include "core/analysis/export.hpp"
#include "core/config/registry.hpp"
#include "core/train/train.hpp"
#include "ui/common/ColorMap.hpp"
#include "ui/training/CorpusPanel.hpp"
#include "ui/heatmap/HeatmapWidget.hpp"
#include "ui/training/LossChart.hpp"
#include "ui/window/MainWindow.hpp"
#include "ui/training/ProbePanel.hpp"
#include "ui/tools/Screenshots.hpp"
#include "ui/training/SettingsPanel.hpp"
#include "ui/translate/StepInspector.hpp"
#include "ui/translate/TranslatePanel.hpp"

#include "catch_torch.hpp"  // not <catch2/catch.hpp>: a unity batch (see there)

#include "ui_fixture.hpp"

using namespace attnviz;
using namespace attnviz::ui;

using namespace ui_testing;

TEST_CASE("loss chart: smoothing, log scale, kept runs, CSV", "[ui][chart]") {
    app();
    LossChart chart;
    chart.resize(600, 400);
    chart.startRun(QStringLiteral("first"));
    std::vector<std::pair<int64_t, double>> points;
    for (int i = 1; i <= 50; ++i) points.emplace_back(i, 5.0 * std::exp(-i / 10.0) + (i % 2 ? 0.2 : -0.2) + 0.3);
    chart.addBatchLosses(points);
    EpochReport e;
    e.epoch = 1;
    e.val_loss = 0.8;
    e.val_bleu = 42;
    e.val_accuracy = 0.5;
    chart.addEpoch(e, 50);
    CHECK(chart.pointCount() == 50);
    CHECK(chart.epochCount() == 1);
    chart.setSmoothing(0.0);
    CHECK(chart.lastSmoothed() == Approx(points.back().second));
    chart.setSmoothing(0.9);
    CHECK(chart.lastSmoothed() != Approx(points.back().second));
    const auto [lo, hi] = chart.lossAxisRange();
    CHECK(lo <= 0.4);
    CHECK(hi >= 5.0);
    chart.setLogScale(true);
    CHECK(chart.lossAxisRange().first > 0);
    chart.keepRun();
    CHECK(chart.keptRunCount() == 1);
    chart.startRun(QStringLiteral("second"));
    chart.addBatchLosses({{1, 3.0}, {2, 2.0}});
    CHECK(chart.keptRunCount() == 1);
    CHECK(chart.pointCount() == 2);
    const QString csv = chart.toCsv();
    CHECK(csv.count(QStringLiteral("first,batch_loss")) == 50);
    CHECK(csv.count(QStringLiteral("second,batch_loss")) == 2);
    CHECK(csv.contains(QStringLiteral("first,val_bleu,50,1,42")));
    chart.clearKeptRuns();
    CHECK(chart.keptRunCount() == 0);
}

TEST_CASE("loss chart: batch losses are drawn a few times a second when shown, on show when hidden", "[ui][chart]") {
    app();
    LossChart chart;
    chart.resize(600, 400);
    chart.startRun(QStringLiteral("run"));
    auto* view = qobject_cast<QChartView*>(chart.chartView());
    REQUIRE(view != nullptr);
    auto drawn = [&] { return static_cast<QXYSeries*>(view->chart()->series().at(0))->count(); };  // the raw loss
    chart.addBatchLosses({{1, 3.0}, {2, 2.0}});
    CHECK(chart.pointCount() == 2);
    CHECK(chart.refreshPending());  // hidden: the series wait
    QTest::qWait(400);
    CHECK(drawn() == 0);
    chart.show();  // showing draws what waited
    CHECK_FALSE(chart.refreshPending());
    CHECK(drawn() == 2);
    // Shown: many updates in a burst become one refresh a little later.
    for (int i = 3; i <= 40; ++i) chart.addBatchLosses({{i, 1.0 + 1.0 / i}});
    CHECK(drawn() == 2);
    CHECK(QTest::qWaitFor([&] { return !chart.refreshPending(); }, 3000));
    CHECK(drawn() == 40);
    // Reading the axes or keeping the run sees every point at once.
    chart.hide();
    chart.addBatchLosses({{41, 0.01}});
    CHECK(chart.lossAxisRange().first <= 0.01);
    chart.addBatchLosses({{42, 0.5}});
    chart.keepRun();
    CHECK(drawn() == 42);
    // An epoch's end while hidden waits for the show too; shown, it is drawn at once.
    chart.startRun(QStringLiteral("next"));
    chart.addBatchLosses({{1, 2.0}, {2, 1.0}});
    EpochReport e;
    e.epoch = 1;
    e.val_loss = 0.5;
    chart.addEpoch(e, 2);
    CHECK(chart.refreshPending());
    chart.show();
    CHECK_FALSE(chart.refreshPending());
    e.epoch = 2;
    chart.addEpoch(e, 4);
    CHECK_FALSE(chart.refreshPending());
}

TEST_CASE("loss chart: a long run keeps a bounded number of points, the averages of the batches", "[ui][chart]") {
    app();
    LossChart chart;
    chart.resize(600, 400);
    chart.startRun(QStringLiteral("long"));
    chart.setSmoothing(0.99);
    const int64_t batches = 100000;
    auto loss = [](int64_t step) { return 5.0 - 2e-5 * double(step); };  // 5 -> 3, no noise
    for (int64_t b = 0; b < batches; b += 1000) {
        std::vector<std::pair<int64_t, double>> chunk;
        for (int64_t s = b + 1; s <= b + 1000; ++s) chunk.emplace_back(s, loss(s));
        chart.addBatchLosses(chunk);
    }
    // 20,000 points at most: halved at 20,000 batches, 40,000, 80,000; a point is 8 batches now.
    CHECK(chart.pointCount() < int(TrainHistory::max_batch_points));
    CHECK(chart.pointStride() == 8);
    CHECK(chart.pointCount() * chart.pointStride() == batches);
    chart.refreshNow();
    const auto [lo, hi] = chart.lossAxisRange();
    CHECK(lo <= 3.0 + 1e-3);
    CHECK(hi >= 5.0 - 1e-3);
    // Live, the moving average saw every batch: it lags the line by ~99 batches.
    const double live = chart.lastSmoothed();
    CHECK(live == Approx(loss(batches) + 99 * 2e-5).margin(2e-4));
    // Recomputed from 8-batch points (another smoothing, then back): each point moves the
    // average as 8 batches would, so the curve ends where it did (a point-by-point average
    // would lag 8 times as far: 0.016).
    chart.setSmoothing(0.5);
    chart.setSmoothing(0.99);
    CHECK(chart.lastSmoothed() == Approx(live).margin(2e-4));
    const QString csv = chart.toCsv();
    CHECK(csv.count(QStringLiteral("long,batch_loss,")) == chart.pointCount());
    CHECK(csv.contains(QStringLiteral("long,batch_loss,8,,4.99991")));  // batches 1..8 averaged: 5 - 4.5 * 2e-5

    // A history already at a stride is drawn as it is.
    TrainHistory h;
    for (int64_t s = 1; s <= 30003; ++s) h.record_batch(s, loss(s));  // halved once at 20,000
    REQUIRE(h.batch_loss.stride() == 2);
    chart.setHistory(h, QStringLiteral("opened"));
    CHECK(chart.pointCount() == int(h.batch_loss.size()));
    CHECK(chart.pointStride() == 2);
}
