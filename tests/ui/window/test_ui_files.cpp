// Offscreen tests of files in the window: checkpoints saved and reopened, bad files
// and failures reported while the app keeps running, and the unsaved-model prompt
// (Qt's maybeSave()).
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

TEST_CASE("checkpoints: save while training, save and reopen with the same translation", "[ui][checkpoint]") {
    QTemporaryDir dir;
    const QString during = tempPath(dir, "during.attnviz"), after = tempPath(dir, "after.attnviz");
    std::string expected;
    int points = 0;
    {
        Fixture f(/*epochs=*/1000);
        f.w().trainAction()->trigger();
        REQUIRE(waitUntil([&] { return f.w().lossChart()->pointCount() >= 3; }, 20000));
        QSignalSpy saved(&f.controller(), &TrainingController::saveFinished);
        REQUIRE(f.w().saveCheckpointTo(during));  // written by the worker between two batches
        REQUIRE(waitUntil([&] { return saved.count() > 0; }, 20000));
        CHECK(saved.at(0).at(0).toBool());
        f.w().stopAction()->trigger();
        REQUIRE(f.waitIdle());
        CHECK_NOTHROW(load_checkpoint(during.toStdString()));

        REQUIRE(f.w().saveCheckpointTo(after));
        f.translate(QStringLiteral("the dog sees a black cat"));
        expected = f.w().translatePanel()->translation()->best().text;
        points = f.w().lossChart()->pointCount();
        CHECK(f.w().recentFiles().contains(QFileInfo(after).absoluteFilePath()));
    }
    Fixture g;
    REQUIRE(g.w().openCheckpoint(after));
    CHECK(g.w().lossChart()->pointCount() == points);
    g.translate(QStringLiteral("the dog sees a black cat"));
    CHECK(g.w().translatePanel()->translation()->best().text == expected);
    CHECK(g.w().continueAction()->isEnabled());
}

TEST_CASE("bad files give a clear error and the app keeps running", "[ui][errors]") {
    Fixture f;
    QTemporaryDir dir;
    const QString corrupt = tempPath(dir, "corrupt.attnviz");
    {
        std::ofstream out(corrupt.toStdString(), std::ios::binary);
        out << "ATTNVIZ\x01" << std::string(200, '\x7f');
    }
    CHECK_FALSE(f.w().openCheckpoint(corrupt));
    CHECK_FALSE(f.w().lastError().isEmpty());
    CHECK(f.w().currentModel() == nullptr);

    const QString foreign = tempPath(dir, "notes.txt");
    {
        std::ofstream out(foreign.toStdString());
        out << "no tabs here\nnor here\n";
    }
    const QString before = f.w().corpusPanel()->sourceKey();
    // The file is read in the background: the failure arrives as loadFailed().
    QSignalSpy failed(f.w().corpusPanel(), &CorpusPanel::loadFailed);
    f.w().openFile(foreign);
    REQUIRE(f.waitCorpus());
    CHECK(failed.count() == 1);
    CHECK(f.w().lastError().contains(QStringLiteral("notes.txt")));
    CHECK(f.w().corpusPanel()->sourceKey() == before);
    CHECK_FALSE(f.w().openFile(tempPath(dir, "missing.tsv")));

    // A good TSV dropped on the window becomes the corpus; its bad lines are counted.
    const QString tsv = tempPath(dir, "pairs.tsv");
    {
        std::ofstream out(tsv.toStdString());
        out << "Go.\tVa !\nHi.\tSalut !\nbad line without tab\nRun!\tCours !\n";
    }
    QMimeData mime;
    mime.setUrls({QUrl::fromLocalFile(tsv)});
    QDragEnterEvent enter(QPoint(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(&f.w(), &enter);
    CHECK(enter.isAccepted());
    QDropEvent drop(QPointF(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(&f.w(), &drop);
    REQUIRE(f.waitCorpus());
    INFO("last error: " << f.w().lastError().toStdString());
    CHECK(f.w().corpusPanel()->sourceKey() == QStringLiteral("file:") + QFileInfo(tsv).absoluteFilePath());
    CHECK(f.w().corpusPanel()->corpus()->pairs.size() == 3);
    CHECK(f.w().corpusPanel()->corpus()->skipped.size() == 1);
    CHECK(f.w().corpusPanel()->summaryText().startsWith(QStringLiteral("<b>3</b> pairs · 1 skipped line<br>")));

    // Training still works after all that.
    f.w().corpusPanel()->selectTask(TaskKind::reverse);
    TrainConfig t = f.w().settingsPanel()->trainConfig();
    t.max_batches = 3;
    f.w().settingsPanel()->setTrainConfig(t);
    f.train();
    CHECK(f.w().lossChart()->pointCount() == 3);
}

TEST_CASE("a CUDA request without a GPU and a diverging loss are reported", "[ui][errors]") {
    Fixture f;
    QSignalSpy finished(&f.controller(), &TrainingController::finished);
    if (!cuda_available()) {
        // The session checks the device when a run starts: it is refused at once, with the reason.
        TrainConfig t = f.w().settingsPanel()->trainConfig();
        t.device = "cuda";
        f.w().settingsPanel()->setTrainConfig(t);
        f.w().trainAction()->trigger();
        CHECK_FALSE(f.controller().isActive());
        CHECK(finished.count() == 0);
        CHECK(f.w().lastError().contains(QStringLiteral("CUDA"), Qt::CaseInsensitive));
    }
    // A NaN loss: the trainer reports on_finished(diverged, message); the window shows the
    // message and keeps the last good weights. (Provoking a real NaN is the core's test.)
    f.w().settingsPanel()->setTrainConfig([&] {
        TrainConfig t = f.w().settingsPanel()->trainConfig();
        t.device = "cpu";
        t.max_batches = 5;
        return t;
    }());
    f.train();
    REQUIRE(f.w().currentModel() != nullptr);
    const auto model = f.w().currentModel();
    Q_EMIT f.controller().finished(StopReason::diverged,
                                   QStringLiteral("the training loss became NaN; training stopped and the last good weights were kept"));
    CHECK(f.w().lastError().contains(QStringLiteral("NaN")));
    CHECK(f.w().currentModel() == model);
    CHECK(f.w().trainAction()->isEnabled());
}

// --- the unsaved-model prompt (Qt's maybeSave()) -------------------------------

namespace {

/// A window whose session holds a freshly trained, unsaved model (3 batches).
struct Unsaved : Fixture {
    QTemporaryDir dir;
    Unsaved() : Fixture(/*epochs=*/1, /*maxBatches=*/3) {
        train();
        REQUIRE(controller().unsaved());
        REQUIRE(prompts == 0);
        savePath = dir.filePath(QStringLiteral("asked.attnviz"));
    }
    bool written() const { return QFileInfo::exists(savePath); }
};

}  // namespace

TEST_CASE("closing with an unsaved model asks Save, Discard or Cancel", "[ui][unsaved]") {
    // Save: written, then closed (a cancelled save dialog keeps the window). Discard: closed,
    // nothing written. Cancel: the window and the model stay.
    using B = QMessageBox::StandardButton;
    const auto [answer, pathGiven, closes, writes] =
        GENERATE(table<B, bool, bool, bool>({{QMessageBox::Save, true, true, true},
                                             {QMessageBox::Save, false, false, false},
                                             {QMessageBox::Discard, true, true, false},
                                             {QMessageBox::Cancel, true, false, false}}));
    Unsaved f;
    const TranslationModelPtr model = f.w().currentModel();
    f.answer = answer;
    if (!pathGiven) f.savePath.clear();
    f.w().close();
    CHECK(f.prompts == 1);
    CHECK(f.pathsAsked == (answer == QMessageBox::Save ? 1 : 0));
    CHECK(f.w().isVisible() == !closes);
    REQUIRE(f.written() == writes);
    if (writes) CHECK_NOTHROW(load_checkpoint(f.savePath.toStdString()));
    CHECK(f.controller().unsaved() == !writes);
    CHECK(f.w().currentModel() == model);
}

TEST_CASE("closing during training with Save stops the run, the worker writes the file, then the window closes",
          "[ui][unsaved]") {
    Fixture f(/*epochs=*/1000);
    QTemporaryDir dir;
    f.savePath = dir.filePath(QStringLiteral("closing.attnviz"));
    f.answer = QMessageBox::Save;
    f.w().trainAction()->trigger();
    REQUIRE(waitUntil([&] { return f.w().lossChart()->pointCount() >= 3; }, 20000));
    f.w().close();
    CHECK(f.prompts == 1);
    // The window waits for the worker's write (it never writes on the GUI thread while a worker exists).
    REQUIRE(waitUntil([&] { return !f.w().isVisible(); }, 20000));
    CHECK(f.prompts == 1);  // the second close found nothing unsaved
    REQUIRE(QFileInfo::exists(f.savePath));
    CHECK_NOTHROW(load_checkpoint(f.savePath.toStdString()));
    REQUIRE(f.waitIdle(10000));
    CHECK_FALSE(f.controller().workerAlive());
}

TEST_CASE("opening a checkpoint over an unsaved model asks first", "[ui][unsaved]") {
    Unsaved f;
    // A checkpoint to open, saved from this model; then the model changes again.
    const QString other = f.dir.filePath(QStringLiteral("other.attnviz"));
    REQUIRE(f.w().saveCheckpointTo(other));
    CHECK_FALSE(f.controller().unsaved());
    f.train();  // a new run: nothing was unsaved, so no question
    CHECK(f.prompts == 0);
    REQUIRE(f.controller().unsaved());
    const TranslationModelPtr before = f.w().currentModel();
    const int64_t otherSteps = load_checkpoint(other.toStdString()).model->history().global_step;

    SECTION("Save writes the current model, then opens") {
        f.answer = QMessageBox::Save;
        REQUIRE(f.w().openCheckpoint(other));
        CHECK(f.prompts == 1);
        REQUIRE(f.written());
        CHECK(load_checkpoint(f.savePath.toStdString()).model->history().global_step ==
              before->history().global_step);
        CHECK(f.w().currentModel() != before);
        CHECK(f.controller().checkpointPath() == other);
        CHECK_FALSE(f.controller().unsaved());
    }
    SECTION("Discard opens without writing") {
        f.answer = QMessageBox::Discard;
        REQUIRE(f.w().openCheckpoint(other));
        CHECK(f.prompts == 1);
        CHECK_FALSE(f.written());
        CHECK(f.w().currentModel() != before);
        CHECK(f.w().currentModel()->history().global_step == otherSteps);
    }
    SECTION("Cancel keeps the current model") {
        f.answer = QMessageBox::Cancel;
        CHECK_FALSE(f.w().openCheckpoint(other));
        CHECK(f.prompts == 1);
        CHECK_FALSE(f.written());
        CHECK(f.w().currentModel() == before);
        CHECK(f.controller().unsaved());
    }
}

TEST_CASE("a new training run over an unsaved model asks first", "[ui][unsaved]") {
    // Save: written, then the run starts. Discard: the run starts, nothing written. Cancel: nothing happens.
    using B = QMessageBox::StandardButton;
    const auto [answer, writes, starts] =
        GENERATE(table<B, bool, bool>({{QMessageBox::Save, true, true}, {QMessageBox::Discard, false, true},
                                       {QMessageBox::Cancel, false, false}}));
    Unsaved f;
    QSignalSpy started(&f.controller(), &TrainingController::started);
    const TranslationModelPtr model = f.w().currentModel();
    f.answer = answer;
    f.w().trainAction()->trigger();
    CHECK(f.prompts == 1);
    CHECK(f.written() == writes);
    CHECK(started.count() == (starts ? 1 : 0));
    CHECK(f.controller().isActive() == starts);
    if (starts) REQUIRE(f.waitIdle());
    else CHECK(f.w().currentModel() == model);
}

TEST_CASE("Continue trains the same model further: nothing is lost, nothing is asked", "[ui][unsaved]") {
    Unsaved f;
    QSignalSpy started(&f.controller(), &TrainingController::started);
    f.w().continueAction()->trigger();
    CHECK(started.count() == 1);
    CHECK(f.prompts == 0);
    REQUIRE(f.waitIdle());
}

TEST_CASE("no unsaved-model prompt when nothing is unsaved", "[ui][unsaved]") {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("saved.attnviz"));
    SECTION("a fresh window") {
        Fixture f;
        f.answer = QMessageBox::Cancel;  // would keep it open
        CHECK_FALSE(f.controller().unsaved());
        f.w().close();
        CHECK(f.prompts == 0);
        CHECK_FALSE(f.w().isVisible());
    }
    SECTION("just saved, just opened") {
        Fixture f(/*epochs=*/1, /*maxBatches=*/3);
        f.answer = QMessageBox::Cancel;
        f.train();
        REQUIRE(f.w().saveCheckpointTo(path));
        CHECK_FALSE(f.controller().unsaved());
        CHECK(f.controller().checkpointPath() == path);
        f.train();  // no question before the new run
        CHECK(f.prompts == 0);
        // Save (Ctrl+S) after a run asks for a path: the run's weights are not in the old file.
        f.savePath = dir.filePath(QStringLiteral("second.attnviz"));
        f.w().saveAction()->trigger();
        CHECK(f.pathsAsked == 1);
        CHECK(QFileInfo::exists(f.savePath));
        REQUIRE(f.w().openCheckpoint(path));
        CHECK_FALSE(f.controller().unsaved());
        CHECK(f.prompts == 0);
        f.w().close();
        CHECK(f.prompts == 0);
        CHECK_FALSE(f.w().isVisible());
    }
}
