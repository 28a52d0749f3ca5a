// Offscreen tests of the "why this word?" views: matplotlib's colour maps and
// scales, the statistics strips beside the heatmap, the step inspector's top-k
// candidates, and the reference field with its forced heatmap.
// LibTorch's c10 logging defines a CHECK macro of its own: include everything
// that pulls in LibTorch first, then let Catch2 define CHECK last.
#include <QImage>
#include <QLineEdit>
#include <QPainter>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>
#include <cmath>

#include "core/persist/model_file.hpp"
#include "core/decode/beam_tree.hpp"
#include "core/decode/translation.hpp"
#include "core/config/history.hpp"
#include "ui/translate/BeamTreeView.hpp"
#include "ui/common/ColorMap.hpp"
#include "ui/compare/ComparePanel.hpp"
#include "ui/heatmap/HeatmapWidget.hpp"
#include "ui/training/LossChart.hpp"
#include "ui/translate/StepInspector.hpp"
#include "ui/translate/TranslatePanel.hpp"

#include "catch_torch.hpp"  // not <catch2/catch.hpp>: a unity batch (see there)

#include "ui_fixture.hpp"

using namespace ui_testing;

namespace {
QRgb rgb(const QColor& c) { return c.rgb() & 0xffffff; }

/// A hand-made translation: 3 source tokens (+<eos>), 2 output tokens (+<eos>).
Translation handMade() {
    Translation t;
    t.input = "a b c";
    t.src_tokens = {"a", "b", "c", "<eos>"};
    Hypothesis h;
    h.tokens = {"x", "y", "<eos>"};
    h.ids = {4, 5, 3};
    h.attention.at({}).weights = {{0.25f, 0.25f, 0.25f, 0.25f}, {0.0f, 1.0f, 0.0f, 0.0f}, {0.1f, 0.1f, 0.1f, 0.7f}};
    h.attention.at({}).scores = {{0, 0, 0, 0}, {-9, 9, -9, -9}, {0, 0, 0, 2}};
    h.step_log_prob = {std::log(0.5f), std::log(0.25f), std::log(0.9f)};
    h.rank = {0, 2, 0};
    h.top_k = {{{4, "x", 0.5f}, {6, "z", 0.3f}}, {{6, "z", 0.4f}, {7, "w", 0.3f}, {5, "y", 0.25f}}, {{3, "<eos>", 0.9f}}};
    h.forced_steps = 3;
    h.first_divergence = 1;
    t.hypotheses.push_back(h);
    return t;
}
}  // namespace

TEST_CASE("colour maps are matplotlib's tables, looked up as matplotlib does", "[ui][colormap]") {
    app();
    // First and last entries as matplotlib paints them: Colormap(x, bytes=True) truncates
    // lut * 255 (viridis' top is 0xfde724 there; the published hex #fde725 is rounded).
    struct Ends {
        ColorMap::Kind kind;
        QRgb first, last;
    };
    for (const Ends& e : {Ends{ColorMap::Viridis, 0x440154, 0xfde724}, Ends{ColorMap::Magma, 0x000003, 0xfbfcbf},
                          Ends{ColorMap::Plasma, 0x0c0786, 0xeff821}, Ends{ColorMap::Cividis, 0x00224d, 0xfde737},
                          Ends{ColorMap::Reds, 0xfff5f0, 0x67000c}, Ends{ColorMap::Bone, 0x000000, 0xffffff}}) {
        const ColorMap map(e.kind);
        INFO(ColorMap::name(e.kind).toStdString());
        CHECK(rgb(map.color(0.0)) == e.first);
        CHECK(rgb(map.color(1.0)) == e.last);
        CHECK(ColorMap::fromName(ColorMap::name(e.kind)) == e.kind);
    }
    // matplotlib's lookup: index int(x * 256), 1.0 -> 255: 0.5 is entry 128, 0.499 entry 127.
    const ColorMap viridis(ColorMap::Viridis);
    CHECK(rgb(viridis.color(0.5)) == rgb(viridis.entry(128)));
    CHECK(rgb(viridis.color(0.499)) == rgb(viridis.entry(127)));
    CHECK(rgb(viridis.color(std::nan(""))) == rgb(viridis.entry(0)));
    CHECK(ColorMap::names().contains(QStringLiteral("Reds")));
    CHECK(ColorMap::names().contains(QStringLiteral("bone")));
    CHECK_FALSE(ColorMap::names().contains(QStringLiteral("RdBu_r")));  // the difference map is not for weights

    // Scales: PowerNorm(0.5) and LogNorm(0.001, 1), and their inverses.
    const ColorMap sqrtMap(ColorMap::Viridis, ColorMap::Sqrt), logMap(ColorMap::Viridis, ColorMap::Log);
    CHECK(sqrtMap.position(0.25) == Approx(0.5));
    CHECK(rgb(sqrtMap.color(0.25)) == rgb(viridis.color(0.5)));
    CHECK(logMap.position(0.01) == Approx(1.0 / 3));
    CHECK(logMap.position(1e-6) == 0.0);
    CHECK(logMap.position(1.0) == Approx(1.0));
    for (double v : {0.001, 0.02, 0.3, 0.9}) {
        CHECK(sqrtMap.valueAt(sqrtMap.position(v)) == Approx(v));
        CHECK(logMap.valueAt(logMap.position(v)) == Approx(v));
    }
    CHECK(ColorMap::scaleFromName(QStringLiteral("log")) == ColorMap::Log);
    // The difference map: white at 0, red above, blue below.
    const QColor zero = viridis.signedColor(0, 1), up = viridis.signedColor(1, 1), down = viridis.signedColor(-1, 1);
    CHECK(zero.lightness() > 200);
    CHECK(up.red() > up.blue());
    CHECK(down.blue() > down.red());
}

TEST_CASE("heatmap strips: token probability, entropy, largest weight and coverage", "[ui][heatmap][strips]") {
    app();
    const Translation t = handMade();
    const HeatmapData d = HeatmapData::fromTranslation(t);
    REQUIRE(d.rows() == 3);
    REQUIRE(d.rowStrips.size() == 3);
    CHECK(d.rowStrips[0].name == QStringLiteral("P"));
    CHECK(d.rowStrips[0].values[1] == Approx(0.25));
    CHECK(d.rowStrips[1].name == QStringLiteral("H"));
    CHECK(d.rowStrips[1].values[0] == Approx(std::log(4.0)));  // uniform over 4: ln 4
    CHECK(d.rowStrips[1].values[1] == Approx(0.0));            // one-hot: 0
    CHECK(d.rowStrips[1].maximum == Approx(std::log(4.0)));
    CHECK(d.rowStrips[2].values[2] == Approx(0.7));
    REQUIRE(d.columnStrips.size() == 1);
    CHECK(d.columnStrips[0].values[1] == Approx(1.35));  // 0.25 + 1 + 0.1
    CHECK(d.forcedRows == 3);
    CHECK(d.highlightRow == 1);
    CHECK(d.highlightNote.contains(QStringLiteral("z")));  // the model preferred z
    REQUIRE(d.topK.size() == 3);
    CHECK(d.topK[1].front().token == QStringLiteral("z"));

    HeatmapWidget h;
    h.setHeatmapData(d);
    h.resetZoom();
    h.resize(h.contentSize());
    const QSize withStrips = h.contentSize();
    // Hovering the strips tells their values; the grid still answers for cells.
    const QRect cell = h.cellRect(1, 1), last = h.cellRect(1, 3);
    const QPoint stripP(last.right() + 1 + 6 + 4, last.center().y());  // the first strip beside row 1
    const QString tip = h.toolTipAt(stripP);
    CHECK(tip.contains(QStringLiteral("0.250")));
    CHECK(tip.contains(QStringLiteral("rank 3")));
    CHECK(h.toolTipAt(cell.center()).contains(QStringLiteral("1.0000")));
    const QPoint coverage(h.cellRect(2, 1).center().x(), h.cellRect(2, 1).bottom() + 1 + 6 + 3);
    CHECK(h.toolTipAt(coverage).contains(QStringLiteral("1.35")));
    // The divergence row's label is red.
    QImage image(h.contentSize(), QImage::Format_ARGB32);
    image.fill(Qt::white);
    {
        QPainter p(&image);
        h.paintContent(p);
    }
    bool red = false;
    const QRect labels(0, h.cellRect(1, 0).top(), h.cellRect(1, 0).left(), h.cellRect(1, 0).height());
    for (int y = labels.top(); y <= labels.bottom() && !red; ++y)
        for (int x = labels.left(); x < labels.right() && !red; ++x) {
            const QColor c = image.pixelColor(x, y);
            red = c.red() > 140 && c.green() < 80 && c.blue() < 90;
        }
    CHECK(red);
    h.setShowStrips(false);
    CHECK(h.contentSize().width() < withStrips.width());
    CHECK(h.contentSize().height() < withStrips.height());
    h.resize(h.contentSize());  // widget and content coordinates agree again
    const QRect lastNow = h.cellRect(1, 3);
    CHECK(h.toolTipAt(QPoint(lastNow.right() + 1 + 6 + 4, lastNow.center().y())).isEmpty());
}

TEST_CASE("step inspector: top-k candidates of the selected step, the given token marked", "[ui][inspector]") {
    app();
    const HeatmapData d = HeatmapData::fromTranslation(handMade());
    StepInspector inspector;
    inspector.setStep(d, 1);
    CHECK(inspector.candidateCount() == 3);
    inspector.setStep(d, 2);
    CHECK(inspector.candidateCount() == 1);
    inspector.clear();
    CHECK(inspector.candidateCount() == 0);
}

TEST_CASE("translate panel: top-k per step, and a reference scored beside the model's own heatmap",
          "[ui][forced]") {
    Fixture f(/*epochs=*/2, /*maxBatches=*/0, /*pairs=*/400);
    f.train();
    f.w().tabs()->setCurrentIndex(MainWindow::TranslateTab);
    TranslatePanel* panel = f.w().translatePanel();
    f.translate(QStringLiteral("the red car is fast"));
    auto t = panel->translation();
    REQUIRE(t);
    REQUIRE_FALSE(t->empty());
    const Hypothesis& greedy = t->best();
    // Greedy decoding records the top-k: the first candidate is the token chosen.
    REQUIRE(greedy.top_k.size() == greedy.tokens.size());
    for (size_t s = 0; s < greedy.tokens.size(); ++s) CHECK(greedy.top_k[s].front().token == greedy.tokens[s]);
    panel->heatmap()->setSelectedRow(0);
    CHECK(panel->inspector()->candidateCount() == int(greedy.top_k[0].size()));
    CHECK_FALSE(panel->forcedHeatmap()->isVisibleTo(panel));  // no reference, no forced view

    // The model's own output as the reference: no divergence, the same log-probability and attention.
    QString own = QString::fromStdString(greedy.text);
    {
        QSignalSpy forced(panel, &TranslatePanel::forcedReady);
        panel->referenceEdit()->setText(own);
        f.translate(QStringLiteral("the red car is fast"));
        REQUIRE(waitUntil([&] { return forced.count() > 0; }, 20000));
    }
    auto r = panel->forcedTranslation();
    REQUIRE(r);
    CHECK(panel->forcedHeatmap()->isVisibleTo(panel));
    CHECK(r->best().first_divergence == -1);
    CHECK(r->best().log_prob == Approx(greedy.log_prob).margin(1e-4));
    CHECK(panel->forcedHeatmap()->heatmapData().highlightRow == -1);
    CHECK(panel->forcedSummary().contains(QStringLiteral("own first choice")));

    // Another reference, typed and entered: its tokens, their probabilities, the divergence marked.
    {
        QSignalSpy forced(panel, &TranslatePanel::forcedReady);
        panel->referenceEdit()->clear();
        QTest::keyClicks(panel->referenceEdit(), QStringLiteral("le chien noir voit un chat"));
        QTest::keyClick(panel->referenceEdit(), Qt::Key_Return);
        REQUIRE(waitUntil([&] { return forced.count() > 0; }, 20000));
    }
    r = panel->forcedTranslation();
    REQUIRE(r);
    const Hypothesis& ref = r->best();
    const HeatmapData& fd = panel->forcedHeatmap()->heatmapData();
    REQUIRE(fd.rows() == 7);  // six words and <eos>
    CHECK(fd.output.front() == QStringLiteral("le"));
    CHECK(fd.output.back() == QStringLiteral("<eos>"));
    CHECK(fd.forcedRows == 7);
    REQUIRE(fd.rowStrips.front().name == QStringLiteral("P"));
    for (int row = 0; row < fd.rows(); ++row)
        CHECK(fd.rowStrips.front().values[size_t(row)] == Approx(std::exp(ref.step_log_prob[size_t(row)])));
    REQUIRE(ref.first_divergence >= 0);  // "le chien" is not "la voiture"
    CHECK(fd.highlightRow == int(ref.first_divergence));
    CHECK(panel->forcedHeatmap()->selectedRow() == fd.highlightRow);
    CHECK(panel->forcedSummary().contains(QStringLiteral("something else")));
    // Clicking a forced row shows that step in the inspector, with the given token's rank.
    panel->forcedHeatmap()->setSelectedRow(0);
    CHECK(panel->inspector()->step() == 0);
    CHECK(panel->inspector()->candidateCount() > 0);

    // Prefix mode: the given tokens, then the model goes on.
    {
        QSignalSpy forced(panel, &TranslatePanel::forcedReady);
        panel->referenceEdit()->setText(QStringLiteral("la"));
        panel->setForceMode(ForceMode::prefix);
        REQUIRE(waitUntil([&] { return forced.count() > 0; }, 20000));
    }
    r = panel->forcedTranslation();
    REQUIRE(r);
    CHECK(r->best().forced_steps == 1);
    CHECK(r->best().tokens.front() == "la");
    CHECK(panel->forcedHeatmap()->heatmapData().forcedRows == 1);

    // Clearing the reference hides the forced view.
    panel->referenceEdit()->clear();
    f.translate(QStringLiteral("the red car is fast"));
    CHECK_FALSE(panel->forcedHeatmap()->isVisibleTo(panel));
}

TEST_CASE("compare tab: a kept run against the current model, side by side and their difference", "[ui][compare]") {
    Fixture f(/*epochs=*/2, /*maxBatches=*/0, /*pairs=*/400);
    f.train();
    ComparePanel* panel = f.w().comparePanel();
    REQUIRE(panel->modelCount() == 1);  // the current model
    f.w().lossChart()->keepRun();
    REQUIRE(panel->modelCount() == 2);  // the kept run's model joined the choices
    // A second run with dot-product attention becomes the current model.
    ModelConfig m = f.w().settingsPanel()->modelConfig();
    m.scoring = Scoring::dot;
    f.w().settingsPanel()->setModelConfig(m);
    f.train();
    f.w().tabs()->setCurrentIndex(MainWindow::CompareTab);
    panel->setChoices(1, 0);
    panel->setSentence(QStringLiteral("the red car is fast"));
    {
        QSignalSpy done(panel, &ComparePanel::compared);
        panel->compare();
        REQUIRE(waitUntil([&] { return done.count() > 0; }, 20000));
    }
    auto c = panel->comparison();
    REQUIRE(c);
    REQUIRE(c->comparable);
    CHECK(panel->heatmapA()->rows() == int(c->a.best().tokens.size()));
    CHECK(panel->heatmapB()->rows() == int(c->b.best().tokens.size()));
    const HeatmapData& d = panel->difference()->heatmapData();
    REQUIRE(d.rows() == int(c->a.best().tokens.size()));
    REQUIRE(d.columns() == 6);  // five words and <eos>
    CHECK(d.signedRange > 0.0f);
    for (int r = 0; r < d.rows(); ++r)
        for (int s = 0; s < d.columns(); ++s)
            CHECK(d.weights[size_t(r)][size_t(s)] ==
                  Approx(c->a.best().attention.weights()[size_t(r)][size_t(s)] - c->b_on_a.best().attention.weights()[size_t(r)][size_t(s)])
                      .margin(1e-6));
    CHECK(panel->summary().contains(QStringLiteral("differs by")));
    CHECK(f.w().currentHeatmap() == panel->difference());

    // A checkpoint added from a file becomes B; a bad file says why and changes nothing.
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("dot.attnviz"));
    save_model(*f.w().currentModel(), path.toStdString());
    {
        QSignalSpy added(panel, &ComparePanel::checkpointAdded);
        panel->addCheckpoint(path);
        REQUIRE(waitUntil([&] { return added.count() > 0; }, 20000));
    }
    CHECK(panel->modelCount() == 3);
    CHECK(panel->modelLabel(2) == QStringLiteral("dot.attnviz"));
    {
        QSignalSpy failed(panel, &ComparePanel::compareFailed);
        panel->addCheckpoint(dir.filePath(QStringLiteral("missing.attnviz")));
        REQUIRE(waitUntil([&] { return failed.count() > 0; }, 20000));
        CHECK(failed.front().front().toString().contains(QStringLiteral("missing.attnviz")));
    }
    CHECK(panel->modelCount() == 3);
}

TEST_CASE("loss chart: alignment accuracy and AER curves when the task knows its alignments", "[ui][chart][alignment]") {
    app();
    LossChart chart;
    chart.startRun(QStringLiteral("run"));
    chart.addBatchLosses({{1, 2.0}, {2, 1.5}});
    EpochReport measured;
    measured.epoch = 1;
    measured.val_loss = 1.0;
    measured.val_align_accuracy = 0.75;
    measured.val_aer = 0.25;
    chart.addEpoch(measured, 2);
    EpochReport unmeasured;  // a TSV corpus: NaN, no point
    unmeasured.epoch = 2;
    unmeasured.val_loss = 0.9;
    chart.addEpoch(unmeasured, 4);
    const QString csv = chart.toCsv();
    CHECK(csv.contains(QStringLiteral("run,val_align_accuracy,2,1,0.75")));
    CHECK(csv.contains(QStringLiteral("run,val_aer,2,1,0.25")));
    CHECK(csv.count(QStringLiteral("val_align_accuracy")) == 1);
}

TEST_CASE("beam search tree view: the search drawn, a node's partial hypothesis and heatmap", "[ui][beamtree]") {
    Fixture f(/*epochs=*/2, /*maxBatches=*/0, /*pairs=*/400);
    f.train();
    f.w().tabs()->setCurrentIndex(MainWindow::TranslateTab);
    TranslatePanel* panel = f.w().translatePanel();
    panel->setBeamWidth(3);
    f.translate(QStringLiteral("the red car is fast"));
    auto t = panel->translation();
    REQUIRE(t);
    REQUIRE(t->beam_tree);
    BeamTreeView* view = panel->beamTreeView();
    REQUIRE(view->tree() == t->beam_tree);
    const BeamTree& tree = *t->beam_tree;
    REQUIRE_FALSE(tree.finished.empty());
    // The best finished leaf is selected: its partial hypothesis is the best translation.
    CHECK(view->selectedNode() == tree.finished.front());
    CHECK(panel->nodeHeatmap()->rows() == int(t->best().tokens.size()));
    panel->viewTabs()->setCurrentIndex(1);
    // The selected leaf is scrolled into view once the tab shows (a tree is larger than its pane).
    QTRY_VERIFY(view->visibleRegion().boundingRect().contains(view->nodeRect(view->selectedNode()).center()));
    view->resize(view->sizeHint());
    // Clicking another node (a first-step one) shows its own one-row hypothesis.
    const auto first = tree.children(-1);
    REQUIRE_FALSE(first.empty());
    const qint64 target = first.back();
    QSignalSpy selected(view, &BeamTreeView::nodeSelected);
    QTest::mouseClick(view, Qt::LeftButton, {}, view->nodeRect(target).center());
    REQUIRE(selected.count() == 1);
    CHECK(view->selectedNode() == target);
    CHECK(view->nodeAt(view->nodeRect(target).center()) == target);
    REQUIRE(panel->nodeHeatmap()->rows() == 1);
    CHECK(panel->nodeHeatmap()->heatmapData().output.front().toStdString() == tree.nodes[size_t(target)].token);
    for (size_t s = 0; s < tree.source.size(); ++s)
        CHECK(panel->nodeHeatmap()->heatmapData().weights[0][s] == Approx(tree.nodes[size_t(target)].attention[s]));
    CHECK(view->nodeToolTip(target).contains(QString::fromStdString(to_string(tree.nodes[size_t(target)].status))));
    // Right arrow walks to the first child, left back to the parent.
    const auto kids = tree.children(target);
    if (!kids.empty()) {
        QTest::keyClick(view, Qt::Key_Right);
        CHECK(view->selectedNode() == kids.front());
        QTest::keyClick(view, Qt::Key_Left);
        CHECK(view->selectedNode() == target);
    }
    // Greedy decoding records no tree: the view says how to get one.
    panel->setBeamWidth(1);
    f.translate(QStringLiteral("the red car is fast"));
    CHECK_FALSE(view->tree());
    CHECK(panel->nodeHeatmap()->rows() == 0);
}
