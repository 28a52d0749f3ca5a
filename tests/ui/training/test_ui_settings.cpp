// Offscreen tests of the settings form (generated from the parameter registry) and of
// what the window remembers between runs.
// LibTorch's c10 logging defines a CHECK macro of its own: include everything
// that pulls in LibTorch first, then let Catch2 define CHECK last.
#include <QAction>
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

TEST_CASE("settings: ranges and clashing choices cannot be entered", "[ui][settings]") {
    app();
    SettingsPanel panel;
    ModelConfig m = panel.modelConfig();
    m.hidden_size = 0;  // below the spin box range: clamped
    panel.setModelConfig(m);
    CHECK(panel.modelConfig().hidden_size == 1);
    CHECK(panel.isValid());

    m = SettingsPanel::defaultModelConfig();
    m.scoring = Scoring::dot;
    panel.setModelConfig(m);
    auto* bidirectional = panel.findChild<QCheckBox*>(QStringLiteral("bidirectional"));
    REQUIRE(bidirectional);
    CHECK_FALSE(bidirectional->isEnabled());  // dot scoring needs a unidirectional encoder

    m.bidirectional = true;  // forced anyway (e.g. a hand-edited settings file): explained, Train refused
    panel.setModelConfig(m);
    CHECK_FALSE(panel.isValid());
    CHECK(panel.validationError().contains(QStringLiteral("bidirectional")));

    TrainConfig t = panel.trainConfig();
    t.teacher_forcing = 3.0;
    t.lr = -1;
    panel.setTrainConfig(t);
    CHECK(panel.trainConfig().teacher_forcing == Approx(1.0));
    CHECK(panel.trainConfig().lr > 0);
}

TEST_CASE("settings: the form is generated from the parameter registry", "[ui][settings]") {
    app();
    SettingsPanel panel;
    // Every form editor has its parameter's range, tooltip and name.
    for (const auto& p : parameters()) {
        INFO(p.name);
        QWidget* editor = panel.findChild<QWidget*>(QString::fromStdString(p.name));
        CHECK((editor != nullptr) == p.in_form);
        if (!editor) continue;
        CHECK(editor->toolTip().size() > 10);
        if (auto* s = qobject_cast<QSpinBox*>(editor)) {
            CHECK(s->minimum() == *p.min);
            CHECK(s->maximum() == *p.max);
        } else if (auto* d = qobject_cast<QDoubleSpinBox*>(editor)) {
            CHECK(d->maximum() == *p.max);
            CHECK(d->minimum() == Approx(*p.min).margin(1e-4));
            if (p.min_exclusive) CHECK(d->minimum() > *p.min);
        } else if (auto* c = qobject_cast<QComboBox*>(editor); c && p.type == ParamType::choice) {
            CHECK(c->count() == int(p.choices.size()));
            CHECK(c->itemText(0) == QString::fromStdString(p.choice_labels.at(0)));
        }
    }
    CHECK(panel.findChild<QDoubleSpinBox*>(QStringLiteral("dropout"))->maximum() == 0.99);
    CHECK(panel.findChild<QDoubleSpinBox*>(QStringLiteral("dropout"))->maximum() ==
          *find_parameter("dropout").max);

    // GUI defaults: small, early stopping on; the form's validation is the registry's (no vocabulary needed).
    CHECK(panel.modelConfig().hidden_size == 64);
    CHECK(panel.trainConfig().batch_size == 32);
    CHECK(panel.trainConfig().patience == 3);
    CHECK(panel.trainConfig().keep_best);
    // min_delta's small default is shown, and stepped, to its last decimal (not rounded to 0.00).
    auto* minDelta = panel.findChild<QDoubleSpinBox*>(QStringLiteral("min_delta"));
    REQUIRE(minDelta);
    CHECK(SettingsPanel::defaultTrainConfig().min_delta > 0);
    CHECK(minDelta->value() == Approx(SettingsPanel::defaultTrainConfig().min_delta));
    CHECK(panel.trainConfig().min_delta == Approx(SettingsPanel::defaultTrainConfig().min_delta));
    CHECK(minDelta->singleStep() <= SettingsPanel::defaultTrainConfig().min_delta);
    CHECK(panel.modelConfig().src_vocab == 0);
    CHECK(panel.isValid());

    // A seed beyond 32 bits survives; it seeds the model too.
    TrainConfig t = panel.trainConfig();
    t.seed = 5000000000ULL;
    t.eval_sample = 7;  // not in the form: kept
    panel.setTrainConfig(t);
    CHECK(panel.trainConfig().seed == 5000000000ULL);
    CHECK(panel.modelConfig().seed == 5000000000ULL);
    CHECK(panel.trainConfig().eval_sample == 7);

    // The schedule's own settings are enabled with their schedule; momentum with SGD.
    auto* lrStep = panel.findChild<QWidget*>(QStringLiteral("lr_step"));
    auto* lrPatience = panel.findChild<QWidget*>(QStringLiteral("lr_patience"));
    CHECK_FALSE(lrStep->isEnabled());
    t.lr_schedule = LrSchedule::step;
    t.optimizer = OptimizerKind::sgd;
    panel.setTrainConfig(t);
    CHECK(lrStep->isEnabled());
    CHECK_FALSE(lrPatience->isEnabled());
    CHECK(panel.findChild<QWidget*>(QStringLiteral("momentum"))->isEnabled());

    // Settings: one key per field; the two JSON objects of older versions are still read.
    QTemporaryDir dir;
    QSettings store(dir.filePath(QStringLiteral("s.ini")), QSettings::IniFormat);
    store.setValue(QStringLiteral("settings/model"), QStringLiteral("{\"hidden_size\": 40, \"cell\": \"lstm\"}"));
    store.setValue(QStringLiteral("settings/train"), QStringLiteral("{\"epochs\": 9, \"max_batches\": 5}"));
    SettingsPanel loaded;
    loaded.loadSettings(store);
    CHECK(loaded.modelConfig().hidden_size == 40);
    CHECK(loaded.modelConfig().cell == CellType::lstm);
    CHECK(loaded.trainConfig().epochs == 9);
    CHECK(loaded.trainConfig().max_batches == 0);  // test-only limits never carry over
    CHECK(loaded.trainConfig().patience == 3);     // absent from old settings: the GUI default
    panel.saveSettings(store);
    CHECK(store.value(QStringLiteral("settings/lr_schedule")).toString() == QStringLiteral("step"));
    CHECK_FALSE(store.contains(QStringLiteral("settings/model")));
    store.setValue(QStringLiteral("settings/dropout"), QStringLiteral("7"));  // hand-edited: ignored
    loaded.loadSettings(store);
    CHECK(loaded.trainConfig().seed == 5000000000ULL);
    CHECK(loaded.trainConfig().lr_schedule == LrSchedule::step);
    CHECK(loaded.modelConfig().dropout == panel.modelConfig().dropout);
}

TEST_CASE("settings: the TensorBoard folder is a line edit, empty for off, and is remembered",
          "[ui][settings][tensorboard]") {
    app();
    SettingsPanel panel;
    auto* folder = panel.findChild<QLineEdit*>(QStringLiteral("tensorboard"));
    REQUIRE(folder);
    CHECK(folder->text().isEmpty());  // off by default
    CHECK(folder->placeholderText() == QStringLiteral("off"));
    CHECK(panel.trainConfig().tensorboard.empty());
    CHECK(panel.findChild<QAction*>(QStringLiteral("tensorboardChoose")) != nullptr);  // the folder chooser
    folder->setText(QStringLiteral("  runs/a "));
    CHECK(panel.trainConfig().tensorboard == "runs/a");
    CHECK(panel.isValid());
    TrainConfig t = panel.trainConfig();
    t.tensorboard = "runs/b";
    panel.setTrainConfig(t);
    CHECK(folder->text() == QStringLiteral("runs/b"));
    QTemporaryDir dir;
    QSettings store(dir.filePath(QStringLiteral("s.ini")), QSettings::IniFormat);
    panel.saveSettings(store);
    SettingsPanel loaded;
    loaded.loadSettings(store);
    CHECK(loaded.trainConfig().tensorboard == "runs/b");
    folder->clear();
    CHECK(panel.trainConfig().tensorboard.empty());
}

TEST_CASE("the window remembers settings, view choices and the corpus", "[ui][settings]") {
    QTemporaryDir dir;
    {
        Fixture f;
        ModelConfig m = f.w().settingsPanel()->modelConfig();
        m.hidden_size = 48;
        m.cell = CellType::lstm;
        f.w().settingsPanel()->setModelConfig(m);
        f.w().corpusPanel()->selectTask(TaskKind::dates);
        f.w().translatePanel()->heatmap()->setColorMap(ColorMap::Magma);
        for (QAction* a : f.w().findChildren<QAction*>())
            if (a->text() == QStringLiteral("magma")) a->trigger();
        f.w().lossChart()->setSmoothing(0.5);
        f.w().close();
    }
    MainWindow w;
    CHECK(w.settingsPanel()->modelConfig().hidden_size == 48);
    CHECK(w.settingsPanel()->modelConfig().cell == CellType::lstm);
    CHECK(w.corpusPanel()->sourceKey() == QStringLiteral("task:dates"));
    CHECK(w.translatePanel()->heatmap()->colorMap() == ColorMap::Magma);
    CHECK(w.lossChart()->smoothing() == Approx(0.5));
}

TEST_CASE("settings: the app's defaults stop the converged toy task early", "[ui][settings][early][slow]") {
    // The task and the model as the app starts with them (toy-french, its default number of
    // pairs, the settings form's defaults), on the CPU. Its validation loss goes on falling by
    // crumbs for as long as it trains: patience alone never stopped it, min_delta does.
    Fixture f(/*epochs=*/30, /*maxBatches=*/0, /*pairs=*/3000);
    TrainConfig t = SettingsPanel::defaultTrainConfig();
    t.device = "cpu";
    REQUIRE(t.min_delta > 0);
    f.w().settingsPanel()->setModelConfig(SettingsPanel::defaultModelConfig());
    f.w().settingsPanel()->setTrainConfig(t);
    QSignalSpy finished(&f.controller(), &TrainingController::finished);
    QSignalSpy epochs(&f.controller(), &TrainingController::epochFinished);
    REQUIRE(f.waitCorpus());
    f.w().trainAction()->trigger();
    REQUIRE(f.controller().isActive());
    REQUIRE(f.waitIdle(1200000));
    REQUIRE(finished.count() == 1);
    INFO("message: " << finished.at(0).at(1).toString().toStdString() << "; epochs " << epochs.count());
    CHECK(finished.at(0).at(0).value<StopReason>() == StopReason::early_stop);
    CHECK(epochs.count() < t.epochs);
    CHECK(epochs.count() > t.patience);
}
