// Offscreen tests of the window's room for the heatmap (issue 41): at a laptop's 1280 × 800 and
// at 1920 × 1080 the attention heatmap keeps at least half of the Translate tab's width with the
// step inspector, the attribution and what-if open; the inspector's column headers are whole;
// a title too long for the heatmap is elided with the whole title as its tooltip; the splitters
// come back where the user left them; the default size follows the screen.
// LibTorch's c10 logging defines a CHECK macro of its own: include everything
// that pulls in LibTorch first, then let Catch2 define CHECK last.
#include <QHeaderView>
#include <QScreen>
#include <QScrollArea>
#include <QSplitter>
#include <QTabWidget>
#include <QTableWidget>

#include "ui/analysis/AttributionView.hpp"
#include "ui/analysis/InterventionPanel.hpp"
#include "ui/heatmap/HeatmapWidget.hpp"
#include "ui/translate/StepInspector.hpp"

#include "catch_torch.hpp"  // not <catch2/catch.hpp>: a unity batch (see there)

#include "ui_fixture.hpp"

using namespace ui_testing;

namespace {

/// The width of the heatmap a user sees: its scroll area's viewport (the widget may be wider, scrolled).
int layoutVisibleWidth(const HeatmapWidget* heatmap) {
    const auto* viewport = heatmap->parentWidget();
    return std::min(heatmap->width(), viewport ? viewport->width() : heatmap->width());
}

/// Every line of every column header of the step inspector fits its column.
void layoutCheckHeaders(const StepInspector* inspector) {
    const QTableWidget* table = inspector->table();
    const QHeaderView* header = table->horizontalHeader();
    const QFontMetrics fm = header->fontMetrics();
    for (int i = 0; i < table->columnCount(); ++i) {
        const QString text = table->horizontalHeaderItem(i)->text();
        INFO("column " << i << ": " << text.toStdString() << ", " << header->sectionSize(i) << " px");
        for (const QString& line : text.split(QLatin1Char('\n'))) CHECK(fm.horizontalAdvance(line) <= header->sectionSize(i));
        CHECK(inspector->headerTextWidth(i) <= header->sectionSize(i));
    }
}

/// The window at `size`, on the Translate tab with a translation and its first step inspected.
void layoutShow(Fixture& f, const QSize& size) {
    f.w().resize(size);
    f.w().tabs()->setCurrentIndex(MainWindow::TranslateTab);
    QApplication::processEvents();
    f.translate(QStringLiteral("the red car sees a black dog"));
    f.w().translatePanel()->heatmap()->setSelectedRow(1);
    QApplication::processEvents();
}

/// The heatmap has half of the tab, the panes beside and under it are open, the headers whole.
void layoutCheckRoom(Fixture& f, const QSize& size) {
    INFO("window " << size.width() << " × " << size.height());
    REQUIRE(f.w().size() == size);
    TranslatePanel* panel = f.w().translatePanel();
    const int tab = panel->width();
    const int heatmap = layoutVisibleWidth(panel->heatmap());
    INFO("Translate tab " << tab << " px, heatmap " << heatmap << " px; the inspector column "
                           << panel->sideSplitter()->width() << " px (at least "
                           << panel->sideSplitter()->minimumSizeHint().width() << ": inspector "
                           << panel->inspector()->minimumSizeHint().width() << ", what-if "
                           << panel->interventionPanel()->minimumSizeHint().width() << ", its table "
                           << panel->inspector()->table()->minimumWidth() << ")");
    CHECK(heatmap * 2 >= tab);
    // The inspector, the attribution and what-if are open (not collapsed).
    for (QWidget* pane : {static_cast<QWidget*>(panel->inspector()), static_cast<QWidget*>(panel->attributionView()),
                          static_cast<QWidget*>(panel->interventionPanel())}) {
        CHECK(pane->isVisible());
        CHECK(pane->width() > 0);
        CHECK(pane->height() > 0);
    }
    CHECK(panel->inspector()->tableRows() > 0);
    layoutCheckHeaders(panel->inspector());
    // The heatmap's title is whole at this size (the sentence is a short one).
    CHECK_FALSE(panel->heatmap()->titleElided());
    // The Setup dock takes about a quarter of the window, not its form's comfortable width.
    const QWidget* dock = f.w().findChild<QWidget*>(QStringLiteral("setupDock"));
    REQUIRE(dock);
    INFO("Setup dock " << dock->width() << " px (its minimum " << dock->minimumSizeHint().width() << ")");
    CHECK(dock->width() <= std::max(size.width() / 4 + 40, 360));
}

}  // namespace

TEST_CASE("layout: at 1280 × 800 and 1920 × 1080 the heatmap keeps half of the Translate tab, headers whole",
          "[ui][layout]") {
    Fixture f(/*epochs=*/1, /*maxBatches=*/5);
    f.train();
    layoutShow(f, QSize(1280, 800));
    layoutCheckRoom(f, QSize(1280, 800));
    layoutShow(f, QSize(1920, 1080));
    layoutCheckRoom(f, QSize(1920, 1080));
    // Back to the laptop's size: the inspector column did not grow with the window.
    layoutShow(f, QSize(1280, 800));
    layoutCheckRoom(f, QSize(1280, 800));
}

TEST_CASE("layout: a heatmap title too long for the widget is elided, with the whole title as its tooltip",
          "[ui][layout]") {
    app();
    HeatmapWidget heatmap;
    HeatmapData data;
    data.source = {QStringLiteral("a"), QStringLiteral("b")};
    data.output = {QStringLiteral("x"), QStringLiteral("<eos>")};
    data.weights = {{0.25f, 0.75f}, {0.5f, 0.5f}};
    data.title = QStringLiteral("a title far longer than the few cells of this heatmap could ever hold on one line");
    heatmap.setHeatmapData(data);
    heatmap.resize(heatmap.minimumSize().width(), 300);
    heatmap.show();
    QApplication::processEvents();
    REQUIRE(heatmap.titleElided());
    CHECK(heatmap.toolTipAt(QPoint(20, 14)) == data.title);
    heatmap.resize(2000, 300);
    QApplication::processEvents();
    CHECK_FALSE(heatmap.titleElided());
    CHECK(heatmap.toolTipAt(QPoint(20, 14)).isEmpty());
}

TEST_CASE("layout: the splitters come back where the user left them, the default size follows the screen",
          "[ui][layout]") {
    QList<int> mainSizes, side, attention;
    {
        Fixture f;
        CHECK(f.w().defaultSize().width() <= f.w().screen()->availableGeometry().width());
        CHECK(f.w().defaultSize().height() <= f.w().screen()->availableGeometry().height());
        f.w().resize(1280, 800);
        f.w().tabs()->setCurrentIndex(MainWindow::TranslateTab);
        QApplication::processEvents();
        TranslatePanel* panel = f.w().translatePanel();
        const int width = panel->splitter()->width() - panel->splitter()->handleWidth();
        panel->splitter()->setSizes({width - 420, 420});
        panel->sideSplitter()->setSizes({300, 0});  // what-if collapsed
        QApplication::processEvents();
        mainSizes = panel->splitter()->sizes();
        side = panel->sideSplitter()->sizes();
        attention = panel->attentionSplitter()->sizes();
        REQUIRE(side.value(1) == 0);
        REQUIRE(f.w().close());
    }
    MainWindow again;  // the same settings
    again.setErrorDialogsEnabled(false);
    again.resize(1280, 800);  // as saved (the offscreen screen is smaller than the window)
    again.show();
    again.tabs()->setCurrentIndex(MainWindow::TranslateTab);
    QApplication::processEvents();
    // The inspector column as wide as it was left, what-if still collapsed.
    CHECK(again.translatePanel()->splitter()->sizes().value(1) == mainSizes.value(1));
    CHECK(again.translatePanel()->sideSplitter()->sizes().value(1) == 0);
    CHECK(again.translatePanel()->attentionSplitter()->sizes().size() == attention.size());
}
