// Offscreen tests of the Heads tab (issue 39, ui/analysis/HeadsPanel.hpp): measuring a tiny
// Transformer fills the table with every head and head_stats()'s own figures; sorting, the CSV
// and JSON exports read back; the grid's history from training's head snapshots (and from epoch
// reports fed by hand); the pruning chart's series; PNG and SVG exports; a failed measurement
// is a status line, not a crash.
// LibTorch's c10 logging defines a CHECK macro of its own: include everything that pulls in
// LibTorch first, then let Catch2 define CHECK last.
#include <QCheckBox>
#include <QComboBox>
#include <QFile>
#include <QImage>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTableWidget>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QtCharts/QChart>
#include <QtCharts/QLineSeries>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/analysis/heads.hpp"
#include "core/analysis/prune_curve.hpp"
#include "core/data/training_data.hpp"
#include "ui/analysis/HeadsGrid.hpp"
#include "ui/analysis/HeadsPanel.hpp"
#include "ui/heatmap/ModelView.hpp"
#include "ui/translate/TranslatePanel.hpp"
#include "ui/analysis/PruneChart.hpp"

#include "catch_torch.hpp"  // not <catch2/catch.hpp>: a unity batch (see there)

#include "ui_fixture.hpp"

using namespace ui_testing;

namespace heads_ui_test {

/// A tiny Transformer: 2 blocks of 2 heads, 16 wide (3 kinds × 2 layers × 2 heads = 12 heads).
ModelConfig tinyHeadsTransformer() {
    ModelConfig m;
    m.arch = ModelArch::transformer;
    m.hidden_size = 16;
    m.num_layers = 2;
    m.num_heads = 2;
    m.ffn_size = 16;
    return m;
}

/// Waits until the panel's measurement finished or failed; REQUIREs it finished.
void waitMeasured(HeadsPanel* panel, QSignalSpy& done, QSignalSpy& failed) {
    REQUIRE(waitUntil([&] { return done.count() > 0 || failed.count() > 0; }, 300000));  // a state, not a speed
    if (failed.count() > 0) FAIL(failed.front().front().toString().toStdString());
    CHECK_FALSE(panel->busy());
    CHECK_FALSE(panel->busyIndicator()->isVisible());
}

QString readText(const QString& path) {
    QFile f(path);
    REQUIRE(f.open(QIODevice::ReadOnly));
    return QString::fromUtf8(f.readAll());
}

/// Heads of one kind, layers × heads, with values that tell the epoch apart.
std::vector<HeadSnapshot> snapshots(const std::string& kind, int layers, int heads, double base) {
    std::vector<HeadSnapshot> out;
    for (int l = 0; l < layers; ++l)
        for (int h = 0; h < heads; ++h) out.push_back({kind, l, h, base + 0.1 * h, 0.5 + 0.01 * l});
    return out;
}

}  // namespace heads_ui_test

TEST_CASE("heads tab: training with head statistics fills the grid's histories, Measure heads fills the table "
          "with head_stats' figures, sorts, exports CSV, JSON, PNG and SVG, and draws the pruning curve",
          "[ui][heads_ui]") {
    using namespace heads_ui_test;
    Fixture f(/*epochs=*/2, /*maxBatches=*/0, /*pairs=*/300);
    f.w().settingsPanel()->setModelConfig(tinyHeadsTransformer());
    TrainConfig t = f.w().settingsPanel()->trainConfig();
    t.head_stats = 8;  // every validation measures every head on 8 pairs
    f.w().settingsPanel()->setTrainConfig(t);
    f.train();
    const TranslationModelPtr model = f.w().currentModel();
    REQUIRE(model);
    REQUIRE(model->config().arch == ModelArch::transformer);
    const size_t epochsWithHeads = size_t(std::count_if(model->history().epochs.begin(), model->history().epochs.end(),
                                                        [](const EpochReport& e) { return !e.heads.empty(); }));
    REQUIRE(epochsWithHeads == 2);

    // The model view's thumbnails carry the last validation's importance and confidence.
    const std::vector<HeadStats>& badges = f.w().translatePanel()->modelView()->headStats();
    REQUIRE(badges.size() == 12);
    CHECK(badges.front().importance == Approx(model->history().epochs.back().heads.front().importance));

    HeadsPanel* panel = f.w().headsPanel();
    REQUIRE(panel);
    // Exported with the curves: each head's importance and confidence at each validation.
    {
        QTemporaryDir curvesDir;
        REQUIRE(f.w().exportCurvesTo(curvesDir.filePath(QStringLiteral("curves.csv"))));
        const QStringList lines = readText(curvesDir.filePath(QStringLiteral("curves-heads.csv"))).trimmed().split(QLatin1Char('\n'));
        CHECK(lines.front() == QStringLiteral("epoch,kind,layer,head,importance,confidence"));
        CHECK(lines.size() == 1 + 2 * 12);  // 2 validations x 12 heads
    }
    f.w().tabs()->setCurrentIndex(MainWindow::HeadsTab);
    CHECK(f.w().tabs()->currentWidget() == panel);
    // Live: each validation's snapshots are a point of every head's curve.
    HeadsGrid* grid = panel->grid();
    CHECK(grid->cellCount() == 3 * 2 * 2);
    for (AttentionKind kind : {AttentionKind::encoder_self, AttentionKind::decoder_self, AttentionKind::cross})
        for (int l = 0; l < 2; ++l)
            for (int h = 0; h < 2; ++h) {
                const HeadsGrid::Cell* c = grid->cell(kind, l, h);
                REQUIRE(c);
                CHECK(c->importanceHistory.size() == 2);
                CHECK(c->confidenceHistory.size() == 2);
                CHECK(grid->cellRect(kind, l, h).isValid());
            }

    panel->sentencesBox()->setValue(20);
    panel->pruneBox()->setChecked(true);
    QSignalSpy done(panel, &HeadsPanel::headsMeasured);
    QSignalSpy failed(panel, &HeadsPanel::measureFailed);
    panel->measureButton()->click();
    CHECK(panel->busy());
    CHECK(panel->busyIndicator()->isVisible());
    waitMeasured(panel, done, failed);

    // The figures head_stats gives on the same pairs.
    const auto corpus = f.w().corpusPanel()->corpus();
    std::vector<SentencePair> pairs = prepare_data(*corpus, model->trained_with(), model->tokenizer_ptr()).val;
    REQUIRE(pairs.size() >= 20);
    pairs.resize(20);
    HeadStatsOptions options;
    options.fixed_steps = model->trained_with().fixed_steps;
    for (const SentencePair& p : corpus->pairs)
        for (const auto& token : p.src) ++options.source_counts[token];
    const HeadReport direct = head_stats(*model->with_heads_masked({}), pairs, options);
    const std::vector<HeadStats>& heads = panel->heads();
    REQUIRE(heads.size() == direct.heads.size());
    // and the measurement replaces them in the model view
    CHECK(f.w().translatePanel()->modelView()->headStats().size() == heads.size());
    CHECK(f.w().translatePanel()->modelView()->headStats().front().entropy == Approx(heads.front().entropy));
    REQUIRE(heads.size() == 12);
    QTableWidget* table = panel->table();
    REQUIRE(table->rowCount() == 12);
    for (size_t i = 0; i < heads.size(); ++i) {
        INFO("head " << i);
        CHECK((heads[i].id == direct.heads[i].id));
        CHECK(heads[i].importance == Approx(direct.heads[i].importance).epsilon(1e-6).margin(1e-9));
        CHECK(heads[i].confidence == Approx(direct.heads[i].confidence).epsilon(1e-6).margin(1e-9));
        CHECK(heads[i].entropy == Approx(direct.heads[i].entropy).epsilon(1e-6).margin(1e-9));
    }
    int perKind[3] = {0, 0, 0};
    for (int r = 0; r < table->rowCount(); ++r) {
        const QString kind = table->item(r, HeadsPanel::KindCol)->text();
        perKind[kind == QLatin1String("cross") ? 0 : kind == QLatin1String("encoder_self") ? 1 : 2]++;
    }
    CHECK(perKind[0] == 4);
    CHECK(perKind[1] == 4);
    CHECK(perKind[2] == 4);
    // Positional columns only for self-attention; the table's tooltips carry the head's figures.
    for (int r = 0; r < table->rowCount(); ++r) {
        const bool cross = table->item(r, HeadsPanel::KindCol)->text() == QLatin1String("cross");
        CHECK((table->item(r, HeadsPanel::OffsetCol)->text() == QStringLiteral("–")) == cross);
        CHECK(table->item(r, HeadsPanel::ImportanceCol)->toolTip().contains(QStringLiteral("importance")));
    }
    // The grid's cells took the measurement's values.
    for (const HeadStats& h : heads) {
        const HeadsGrid::Cell* c = grid->cell(h.id.kind, h.id.layer, h.id.head);
        REQUIRE(c);
        CHECK(c->importance == h.importance);
        CHECK(c->measured == &h);
    }

    // Sorting by importance orders the rows.
    table->sortItems(HeadsPanel::ImportanceCol, Qt::DescendingOrder);
    for (int r = 1; r < table->rowCount(); ++r)
        CHECK(table->item(r - 1, HeadsPanel::ImportanceCol)->data(Qt::UserRole).toDouble() >=
              table->item(r, HeadsPanel::ImportanceCol)->data(Qt::UserRole).toDouble());
    table->sortItems(HeadsPanel::ImportanceCol, Qt::AscendingOrder);
    for (int r = 1; r < table->rowCount(); ++r)
        CHECK(table->item(r - 1, HeadsPanel::ImportanceCol)->data(Qt::UserRole).toDouble() <=
              table->item(r, HeadsPanel::ImportanceCol)->data(Qt::UserRole).toDouble());

    // The pruning curve: a series per order, with points.
    REQUIRE_FALSE(panel->pruneCurve().empty());
    PruneChart* chart = panel->pruneChart();
    const auto series = chart->chart()->series();
    REQUIRE(series.size() == 5);  // importance, confidence, 3 random seeds
    for (auto* s : series) {
        auto* line = qobject_cast<QLineSeries*>(s);
        REQUIRE(line);
        CHECK(line->count() >= 2);
    }
    CHECK(chart->kindsBox()->count() == 4);  // all, and each of the 3 kinds
    chart->metricBox()->setCurrentIndex(1);  // loss
    CHECK(chart->chart()->series().size() == 5);
    chart->kindsBox()->setCurrentIndex(1);
    CHECK(chart->chart()->series().size() == 5);

    // Exports read back.
    QTemporaryDir dir;
    QString error;
    const QString csv = dir.filePath(QStringLiteral("heads.csv"));
    REQUIRE(panel->exportCsv(csv, &error));
    const QStringList lines = readText(csv).trimmed().split(QLatin1Char('\n'));
    REQUIRE(lines.size() == 13);
    CHECK(lines[0].startsWith(QStringLiteral("kind,layer,head,importance,")));
    const QStringList first = lines[1].split(QLatin1Char(','));
    CHECK(first[0] == qs(to_string(heads[0].id.kind)));
    CHECK(first[3].toDouble() == Approx(heads[0].importance).epsilon(1e-6));
    const QString json = dir.filePath(QStringLiteral("heads.json"));
    REQUIRE(panel->exportJson(json, &error));
    const nlohmann::json j = nlohmann::json::parse(readText(json).toStdString());
    REQUIRE(j.at("heads").size() == 12);
    CHECK(j["heads"][0] == head_to_json(heads[0]));
    CHECK(j.at("prune_curve").size() == panel->pruneCurve().size());
    CHECK(j.at("history").size() == 12);
    CHECK(j["history"][0]["points"].size() == 2);
    const QString chartCsv = dir.filePath(QStringLiteral("curve.csv"));
    REQUIRE(chart->exportCsv(chartCsv, &error));
    CHECK(readText(chartCsv).trimmed().split(QLatin1Char('\n')).size() == int(panel->pruneCurve().size()) + 1);
    for (const QString& name : {QStringLiteral("grid.png"), QStringLiteral("curve.png")}) {
        const QString path = dir.filePath(name);
        REQUIRE((name.startsWith(QLatin1String("grid")) ? grid->exportTo(path, 1.0, &error) : chart->exportTo(path, 1.0, &error)));
        const QImage image(path);
        CHECK(image.width() > 100);
        CHECK(image.height() > 100);
    }
    for (const QString& name : {QStringLiteral("grid.svg"), QStringLiteral("curve.svg")}) {
        const QString path = dir.filePath(name);
        REQUIRE((name.startsWith(QLatin1String("grid")) ? grid->exportTo(path, 1.0, &error) : chart->exportTo(path, 1.0, &error)));
        CHECK(readText(path).contains(QStringLiteral("<svg")));
    }
    // The settings persist.
    CHECK(QSettings().value(QStringLiteral("heads/sentences")).toInt() == 20);
    CHECK(QSettings().value(QStringLiteral("heads/pruneCurve")).toBool());

    // Cancel: the run stops at its next batch or point and shows nothing; the table stays as it was.
    const size_t before = panel->heads().size();
    const int measured = done.count();
    panel->sentencesBox()->setValue(300);
    panel->measureButton()->click();
    REQUIRE(panel->cancelButton()->isEnabled());
    panel->cancelButton()->click();
    CHECK_FALSE(panel->busy());
    CHECK_FALSE(panel->cancelButton()->isEnabled());
    CHECK(panel->statusLabel()->text().contains(QStringLiteral("Cancelled")));
    QTest::qWait(300);
    CHECK(done.count() == measured);
    CHECK(panel->heads().size() == before);
}

TEST_CASE("heads grid: two epoch reports with heads give every cell two history points, a history and exports",
          "[ui][heads_ui]") {
    using namespace heads_ui_test;
    app();
    QSettings().clear();
    HeadsPanel panel;
    panel.resize(900, 700);
    panel.show();
    HeadsGrid* grid = panel.grid();
    CHECK(grid->cellCount() == 0);
    QTemporaryDir dir;
    QString error;
    CHECK_FALSE(grid->exportTo(dir.filePath(QStringLiteral("empty.png")), 1.0, &error));
    CHECK_FALSE(error.isEmpty());

    EpochReport e1, e2, none;
    e1.epoch = 1;
    e1.heads = snapshots("cross", 2, 3, 0.2);
    auto enc = snapshots("encoder_self", 2, 3, 0.1);
    e1.heads.insert(e1.heads.end(), enc.begin(), enc.end());
    e2 = e1;
    e2.epoch = 2;
    for (auto& s : e2.heads) s.importance += 0.3;
    none.epoch = 3;  // a validation without head statistics: nothing added
    panel.addEpoch(e1);
    panel.addEpoch(e2);
    panel.addEpoch(none);
    CHECK(grid->cellCount() == 12);
    CHECK((grid->kinds() == std::vector<AttentionKind>{AttentionKind::encoder_self, AttentionKind::cross}));
    for (AttentionKind kind : {AttentionKind::encoder_self, AttentionKind::cross})
        for (int l = 0; l < 2; ++l)
            for (int h = 0; h < 3; ++h) {
                const HeadsGrid::Cell* c = grid->cell(kind, l, h);
                REQUIRE(c);
                REQUIRE(c->importanceHistory.size() == 2);
                CHECK(c->importanceHistory[0].first == 1);
                CHECK(c->importanceHistory[1].first == 2);
                CHECK(c->importanceHistory[1].second == Approx(c->importanceHistory[0].second + 0.3));
                CHECK(c->importance == c->importanceHistory[1].second);  // the latest is the current value
            }
    CHECK_FALSE(grid->cell(AttentionKind::decoder_self, 0, 0));
    // The grid's colour follows the chosen metric.
    panel.gridMetricBox()->setCurrentIndex(1);
    CHECK(grid->metric() == HeadsGrid::Confidence);
    panel.gridMetricBox()->setCurrentIndex(0);
    CHECK(grid->metric() == HeadsGrid::Importance);

    for (const QString& name : {QStringLiteral("grid.png"), QStringLiteral("grid.svg")}) {
        const QString path = dir.filePath(name);
        REQUIRE(grid->exportTo(path, 2.0, &error));
        if (name.endsWith(QLatin1String(".png"))) {
            const QImage image(path);
            CHECK(image.width() >= 2 * grid->contentSize().width() - 2);
        } else {
            CHECK(readText(path).contains(QStringLiteral("<svg")));
        }
    }

    // A checkpoint's history: the same two points; a new run clears them.
    TrainHistory history;
    history.epochs = {e1, none, e2};
    panel.clearHistory();
    CHECK(grid->cellCount() == 0);
    panel.setHistory(history);
    REQUIRE(grid->cell(AttentionKind::cross, 1, 2));
    CHECK(grid->cell(AttentionKind::cross, 1, 2)->importanceHistory.size() == 2);

    // Nothing measured yet: the exports say so, and Measure heads without a model is a status line.
    CHECK_FALSE(panel.exportCsv(dir.filePath(QStringLiteral("h.csv")), &error));
    CHECK_FALSE(panel.pruneChart()->exportTo(dir.filePath(QStringLiteral("p.png")), 1.0, &error));
    QSignalSpy failed(&panel, &HeadsPanel::measureFailed);
    panel.measureButton()->click();
    CHECK(failed.count() == 1);
    CHECK(panel.statusLabel()->text().contains(QStringLiteral("no model")));
    CHECK_FALSE(panel.busy());
}
