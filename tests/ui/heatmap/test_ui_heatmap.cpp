// Offscreen tests of the translate view's heatmap: rows and columns, the step
// inspector, colour maps, zoom, tooltips, and the exports (PNG, SVG, CSV, JSON).
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

TEST_CASE("translation heatmap rows and columns match the tokens and the inspector follows clicks", "[ui][heatmap]") {
    Fixture f(/*epochs=*/1, /*maxBatches=*/15);
    f.train();
    f.w().tabs()->setCurrentIndex(MainWindow::TranslateTab);
    f.w().translatePanel()->setBeamWidth(3);
    f.translate(QStringLiteral("the red car is fast"));
    auto t = f.w().translatePanel()->translation();
    REQUIRE(t);
    REQUIRE_FALSE(t->empty());
    CHECK(t->hypotheses.size() <= 3);
    HeatmapWidget* h = f.w().translatePanel()->heatmap();
    REQUIRE(h->columns() == int(t->src_tokens.size()));
    CHECK(h->columns() == 6);  // five words and <eos>
    REQUIRE(h->rows() == int(t->best().tokens.size()));
    for (int c = 0; c < h->columns(); ++c) CHECK(h->heatmapData().source[c].toStdString() == t->src_tokens[c]);
    for (int r = 0; r < h->rows(); ++r) {
        CHECK(h->heatmapData().output[r].toStdString() == t->best().tokens[r]);
        double sum = 0;
        for (float w : h->heatmapData().weights[r]) sum += w;
        CHECK(sum == Approx(1.0).margin(1e-4));
    }

    // Clicking an output row selects that decoding step in the inspector.
    const int row = std::min(1, h->rows() - 1);
    const QRect cell = h->cellRect(row, 2);
    const QSize cs = h->contentSize();
    const QPoint offset(h->width() > cs.width() ? (h->width() - cs.width()) / 2 : 0, 0);
    QTest::mouseClick(h, Qt::LeftButton, {}, cell.center() + offset);
    CHECK(h->selectedRow() == row);
    StepInspector* inspector = f.w().translatePanel()->inspector();
    CHECK(inspector->step() == row);
    REQUIRE(inspector->tableRows() == h->columns());
    for (int c = 0; c < h->columns(); ++c) CHECK(inspector->weightAt(c) == Approx(t->best().attention.weights()[row][c]).margin(1e-4));
    CHECK(h->cellToolTip(row, 2).contains(QString::number(t->best().attention.weights()[row][2], 'f', 4)));

    // Another hypothesis shows its own attention.
    if (t->hypotheses.size() > 1) {
        f.w().translatePanel()->selectHypothesis(1);
        CHECK(h->rows() == int(t->hypotheses[1].tokens.size()));
    }

    // Typing a sentence and pressing Enter translates it.
    {
        QSignalSpy ready(f.w().translatePanel(), &TranslatePanel::translationReady);
        QLineEdit* input = f.w().translatePanel()->lineEdit();
        input->clear();
        QTest::keyClicks(input, QStringLiteral("the dog sees a black cat"));
        QTest::keyClick(input, Qt::Key_Return);
        REQUIRE(waitUntil([&] { return ready.count() > 0; }, 20000));
        CHECK(f.w().translatePanel()->translation()->input == "the dog sees a black cat");
    }

    // An unknown word is read as <unk> and marked.
    f.translate(QStringLiteral("the zebra car is fast"));
    CHECK(f.w().translatePanel()->heatmap()->heatmapData().source.contains(QStringLiteral("<unk>")));
    // An empty input gives an empty result, not a crash.
    f.translate(QString());
    CHECK(f.w().translatePanel()->heatmap()->rows() == 0);
}

TEST_CASE("heatmap widget: colour maps, zoom, special tokens, tooltips", "[ui][heatmap]") {
    app();
    const ColorMap viridis(ColorMap::Viridis);
    CHECK(std::abs(viridis.color(0).red() - 0x44) <= 3);
    CHECK(std::abs(viridis.color(0).blue() - 0x54) <= 3);
    CHECK(std::abs(viridis.color(1).red() - 0xfd) <= 3);
    CHECK(std::abs(viridis.color(1).green() - 0xe7) <= 3);
    for (const QString& name : ColorMap::names()) {
        const ColorMap map(ColorMap::fromName(name));
        CHECK(ColorMap::name(map.kind()) == name);
        // Lightness is monotonic (rising; Reds, light to dark, falls): the maps are ordered.
        const double sign = map.kind() == ColorMap::Reds ? -1.0 : 1.0;
        double previous = -1e9;
        for (int i = 0; i <= 20; ++i) {
            const QColor c = map.color(i / 20.0);
            const double luma = sign * (0.2126 * c.redF() + 0.7152 * c.greenF() + 0.0722 * c.blueF());
            CHECK(luma >= previous - 0.01);
            previous = luma;
        }
    }

    HeatmapWidget h;
    HeatmapData d;
    d.source = {QStringLiteral("the"), QStringLiteral("<unk>"), QStringLiteral("a-rather-long-token"), QStringLiteral("<eos>")};
    d.output = {QStringLiteral("le"), QStringLiteral("<unk>"), QStringLiteral("<eos>")};
    d.weights = {{0.7f, 0.1f, 0.1f, 0.1f}, {0.0f, 1.0f, 0.0f, 0.0f}, {0.05f, 0.05f, 0.1f, 0.8f}};
    d.rawScores = {{2.f, 0.f, 0.f, 0.f}, {-1.f, 5.f, -1.f, -1.f}, {0.f, 0.f, 1.f, 3.f}};
    h.setHeatmapData(d);
    CHECK(h.autoFit());
    h.resetZoom();  // a fixed zoom from here on
    CHECK_FALSE(h.autoFit());
    h.resize(h.contentSize());
    CHECK(h.rows() == 3);
    CHECK(h.columns() == 4);
    const QString tip = h.cellToolTip(0, 0);
    CHECK(tip.contains(QStringLiteral("0.7000")));
    CHECK(tip.contains(QStringLiteral("2.0000")));
    CHECK(h.cellAt(h.cellRect(2, 3).center()) == QPoint(2, 3));

    const QSize before = h.contentSize();
    h.zoomIn();
    CHECK(h.contentSize().width() > before.width());
    h.resetZoom();
    CHECK(h.contentSize() == before);
    h.fitToWindow();  // fill a large area: cells grow
    h.resize(1200, 900);
    CHECK(h.zoom() > 1.0);
    CHECK(h.contentSize().width() <= 1200);

    // <unk> is painted in its own colour: the label pixels differ from an ordinary token's.
    QImage image(h.contentSize(), QImage::Format_ARGB32);
    image.fill(Qt::white);
    {
        QPainter p(&image);
        h.paintContent(p);
    }
    bool unkColour = false;
    const QRect unkRow = h.cellRect(1, 0).translated(-h.cellRect(1, 0).width() * 2, 0);
    for (int y = unkRow.top(); y <= unkRow.bottom() && !unkColour; ++y)
        for (int x = std::max(0, unkRow.left() - 40); x < h.cellRect(1, 0).left() && !unkColour; ++x) {
            const QColor c = image.pixelColor(x, y);
            unkColour = c.red() > 150 && c.green() < 110 && c.blue() < 110;
        }
    CHECK(unkColour);

    h.setShowNumbers(true);
    h.setColorMap(ColorMap::Magma);
    CHECK(h.colorMap() == ColorMap::Magma);
    QSignalSpy selected(&h, &HeatmapWidget::rowSelected);
    h.setSelectedRow(1);
    CHECK(selected.count() == 1);
    h.setSelectedRow(7);  // out of range: nothing selected
    CHECK(h.selectedRow() == -1);
}

TEST_CASE("heatmap exports: PNG size, SVG parses, CSV rows sum to 1, JSON matches", "[ui][export]") {
    Fixture f(/*epochs=*/1, /*maxBatches=*/10);
    f.train();
    f.w().tabs()->setCurrentIndex(MainWindow::TranslateTab);
    f.translate(QStringLiteral("a tired girl watches the white boats"));
    HeatmapWidget* h = f.w().translatePanel()->heatmap();
    REQUIRE(h->rows() > 0);
    QTemporaryDir dir;

    const QString png = tempPath(dir, "heatmap.png");
    REQUIRE(f.w().exportHeatmapTo(png, 2.0));
    QImage image(png);
    REQUIRE_FALSE(image.isNull());
    CHECK(image.width() == 2 * h->contentSize().width());
    CHECK(image.height() == 2 * h->contentSize().height());

    const QString svg = tempPath(dir, "heatmap.svg");
    REQUIRE(f.w().exportHeatmapTo(svg));
    QSvgRenderer renderer(svg);
    CHECK(renderer.isValid());
    QFile svgFile(svg);
    REQUIRE(svgFile.open(QIODevice::ReadOnly));
    QXmlStreamReader xml(&svgFile);
    int texts = 0;
    while (!xml.atEnd())
        if (xml.readNext() == QXmlStreamReader::StartElement && xml.name() == QLatin1String("text")) ++texts;
    CHECK_FALSE(xml.hasError());
    CHECK(texts >= h->rows() + h->columns());  // the labels are real text, not pixels

    const QString csv = tempPath(dir, "heatmap.csv");
    REQUIRE(f.w().exportHeatmapTo(csv));
    const AttentionTable table = parse_attention_csv(readFile(csv));
    REQUIRE(int(table.output.size()) == h->rows());
    REQUIRE(int(table.source.size()) == h->columns());
    for (const auto& row : table.weights) {
        double sum = 0;
        for (float w : row) sum += w;
        CHECK(sum == Approx(1.0).margin(1e-4));
    }

    const QString json = tempPath(dir, "heatmap.json");
    REQUIRE(f.w().exportHeatmapTo(json));
    const auto j = nlohmann::json::parse(readFile(json));
    CHECK(j.at("weights").size() == size_t(h->rows()));
    CHECK(j.at("source").size() == size_t(h->columns()));
    CHECK(j.at("model").at("hidden_size") == 32);

    // Curves too.
    const QString curvesPng = tempPath(dir, "curves.png"), curvesCsv = tempPath(dir, "curves.csv");
    REQUIRE(f.w().exportCurvesTo(curvesPng));
    CHECK_FALSE(QImage(curvesPng).isNull());
    REQUIRE(f.w().exportCurvesTo(curvesCsv));
    const std::string curves = readFile(curvesCsv);
    CHECK(curves.rfind("run,series,step,epoch,value\n", 0) == 0);
    CHECK(std::count(curves.begin(), curves.end(), '\n') > 10);

    // A bad target gives a message, not a crash.
    CHECK_FALSE(f.w().exportHeatmapTo(QStringLiteral("/nonexistent-dir/x.png")));
    CHECK_FALSE(f.w().lastError().isEmpty());
}
