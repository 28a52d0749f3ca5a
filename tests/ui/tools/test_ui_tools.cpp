// Offscreen tests of the developer tooling (ui/tools): the screenshot script and
// the soak's event timing and lateness record.
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

TEST_CASE("the screenshot script writes PNGs of the main views", "[ui][screenshots]") {
    Fixture f;
    QTemporaryDir dir;
    ScreenshotOptions options;
    options.directory = dir.path();
    options.trainSeconds = 3;  // a glimpse of training is enough to check the views render
    options.minEpochs = 1;
    options.targetAccuracy = 0.0;
    QString error;
    const QStringList files = takeScreenshots(f.w(), options, &error);
    INFO(error.toStdString());
    for (const char* name : {"training.png", "curves.png", "translate.png", "heatmap.png", "probe.png", "compare.png"}) {
        const QString path = dir.filePath(QString::fromLatin1(name));
        CHECK(files.contains(path));
        QImage image(path);
        CHECK(image.width() > 200);
        CHECK(image.height() > 150);
    }
    CHECK(f.w().lossChart()->keptRunCount() == 1);
}

TEST_CASE("the soak's event timing tells the GUI thread's work from its waiting", "[ui][soak]") {
    auto* timed = qobject_cast<TimedApplication*>(&app());
    REQUIRE(timed != nullptr);
    timed->setTiming(true);
    timed->takeLongest(nullptr);
    timed->takeLongestCpu();
    const int over16 = timed->over16(), cpuOver16 = timed->cpuOver16();
    bool done = false;
    // Waiting: 40 ms asleep inside one event (the thread holds no core).
    QTimer::singleShot(0, [&] {
        QThread::msleep(40);
        done = true;
    });
    REQUIRE(waitUntil([&] { return done; }, 5000));
    QString what;
    TimedApplication::EventCost slept = timed->takeLongest(&what);
    CHECK(slept.wallMs >= 39.0);
    CHECK(slept.cpuMs < 15.0);  // sleeping costs next to nothing
    CHECK(slept.blocked >= 1);  // and the thread gave its core up
    CHECK(!what.isEmpty());     // which event, to which object
    CHECK(timed->takeLongestCpu() < 15.0);
    CHECK(timed->over16() == over16 + 1);
    CHECK(timed->cpuOver16() == cpuOver16);

    // Working: 40 ms of the thread's own CPU time inside one event.
    done = false;
    QTimer::singleShot(0, [&] {
        const double start = threadUsage().cpuMs;
        volatile double x = 0;
        while (threadUsage().cpuMs - start < 40.0) x = x + 1;
        done = true;
    });
    REQUIRE(waitUntil([&] { return done; }, 5000));
    const TimedApplication::EventCost worked = timed->takeLongest(nullptr);
    CHECK(worked.wallMs >= 39.0);
    CHECK(worked.cpuMs >= 39.0);
    CHECK(timed->takeLongestCpu() >= 39.0);
    CHECK(timed->cpuOver16() == cpuOver16 + 1);
    CHECK(timed->longestCpuOverall() >= 39.0);
    timed->setTiming(false);
}

TEST_CASE("the soak's lateness record: quantiles to 10 us in fixed memory", "[ui][soak]") {
    LatenessHistogram h;
    CHECK(h.count() == 0);
    CHECK(h.quantile(0.5) == 0.0);
    // 1,000 ticks: 0.00, 0.01, ..., 9.99 ms; then three late ones.
    for (int i = 0; i < 1000; ++i) h.add(i / 100.0);
    for (double late : {17.5, 300.0, 16.0}) h.add(late);
    CHECK(h.count() == 1003);
    CHECK(h.over16() == 2);  // 16.0 itself is not over
    CHECK(h.max() == 300.0);  // exact, beyond the last bin
    CHECK(h.quantile(0.5) == Approx(5.015).margin(0.011));
    CHECK(h.quantile(0.99) == Approx(9.925).margin(0.011));
    CHECK(h.quantile(1.0) == 300.0);  // the last bin's tick is the maximum
    h.add(-1.0);  // a clock step backwards counts as on time
    CHECK(h.quantile(0.0) == Approx(0.005));
}
