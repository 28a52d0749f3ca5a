// Quitting the app while background work runs: a corpus being read, a training
// run, a save, a translation (beam search), a model being loaded for comparison.
// Each case quits as a user does (the window is closed, then destroyed, as
// main() destroys it after the event loop ends) and then lets the process end:
// ctest runs each case in a process of its own, so a crash in the window's
// destruction or in the static destructors at exit (a job still running on the
// background pool, a worker thread) fails the case.
// LibTorch's c10 logging defines a CHECK macro of its own: include everything
// that pulls in LibTorch first, then let Catch2 define CHECK last.
#include <QApplication>
#include <QElapsedTimer>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <fstream>

#include "core/persist/model_file.hpp"
#include "ui/common/Background.hpp"
#include "ui/compare/ComparePanel.hpp"
#include "ui/training/CorpusPanel.hpp"
#include "ui/training/LossChart.hpp"
#include "ui/window/MainWindow.hpp"
#include "ui/training/TrainingController.hpp"
#include "ui/translate/TranslatePanel.hpp"

#include "catch_torch.hpp"  // not <catch2/catch.hpp>: a unity batch (see there)

#include "ui_fixture.hpp"

using namespace attnviz;
using namespace attnviz::ui;
using namespace ui_testing;

namespace {

/// Quits as the app does: close (the unsaved prompt answered by the fixture), then destroy.
/// Returns how long the window took to go, in ms.
qint64 quit(Fixture& f) {
    QElapsedTimer clock;
    clock.start();
    f.w().close();
    f.window.reset();
    return clock.elapsed();
}

/// A corpus file large enough to take seconds to read (about 30 MB).
QString bigCorpus(const QTemporaryDir& dir) {
    const QString path = dir.filePath(QStringLiteral("big.tsv"));
    std::ofstream out(path.toStdString());
    for (int i = 0; i < 400000; ++i)
        out << "the red car number " << i << " is fast and the dog sees it\tla voiture rouge numéro " << i
            << " est rapide et le chien la voit\n";
    return path;
}

/// Nothing left running on the background pool once the window is gone.
bool poolIdle() { return backgroundPool()->waitForDone(5000); }

}  // namespace

TEST_CASE("quitting while a corpus is read leaves nothing running and exits cleanly", "[ui][quit]") {
    QTemporaryDir dir;
    const QString path = bigCorpus(dir);
    Fixture f;
    REQUIRE(f.w().openCorpusFile(path));
    REQUIRE(waitUntil([&] { return f.w().corpusPanel()->progressValue() > 0; }, 30000));
    REQUIRE(f.w().corpusPanel()->loading());  // mid-read
    const qint64 ms = quit(f);
    INFO("window gone after " << ms << " ms");
    CHECK(ms < 10000);  // the reader stops at its next chunk; it is not read to the end
    CHECK(poolIdle());
}

TEST_CASE("quitting during a training run stops the worker and exits cleanly", "[ui][quit]") {
    Fixture f(/*epochs=*/100000);
    f.w().trainAction()->trigger();
    REQUIRE(waitUntil([&] { return f.w().lossChart()->pointCount() >= 3; }, 60000));
    quit(f);
    CHECK(poolIdle());
    // A worker that missed the close budget is left to finish alone; it must end.
    CHECK(waitUntil([] { return TrainingController::detachedWorkers() == 0; }, 30000));
}

TEST_CASE("quitting while a save is written exits cleanly and leaves a loadable file", "[ui][quit]") {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("quit.attnviz"));
    Fixture f(/*epochs=*/100000);
    f.w().trainAction()->trigger();
    REQUIRE(waitUntil([&] { return f.w().lossChart()->pointCount() >= 3; }, 60000));
    REQUIRE(f.w().saveCheckpointTo(path));  // queued for the worker, written between two batches
    quit(f);
    CHECK(poolIdle());
    CHECK(waitUntil([] { return TrainingController::detachedWorkers() == 0; }, 30000));
    // Written before the worker stopped, or not at all: never a broken file.
    if (QFileInfo::exists(path)) CHECK_NOTHROW(load_model(path.toStdString()));
}

TEST_CASE("quitting while a translation is computed exits cleanly", "[ui][quit]") {
    Fixture f(/*epochs=*/1, /*maxBatches=*/5);
    f.train();
    REQUIRE(f.w().currentModel() != nullptr);
    // A wide beam over a long input: the search is still running when the window goes.
    f.w().translatePanel()->setBeamWidth(32);
    QString sentence;
    for (int i = 0; i < 60; ++i) sentence += QStringLiteral("the red car sees a big dog ");
    f.w().translatePanel()->translateText(sentence);
    quit(f);
    CHECK(poolIdle());
}

TEST_CASE("quitting while a model is loaded for comparison exits cleanly", "[ui][quit]") {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("other.attnviz"));
    Fixture f(/*epochs=*/1, /*maxBatches=*/5);
    f.train();
    save_model(*f.w().currentModel(), path.toStdString());
    auto* compare = f.w().findChild<ComparePanel*>();
    REQUIRE(compare != nullptr);
    compare->addCheckpoint(path);  // read off the GUI thread
    quit(f);
    CHECK(poolIdle());
}
