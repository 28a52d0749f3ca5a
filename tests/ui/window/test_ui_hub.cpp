// Offscreen tests of the Hugging Face Hub in the app (issue 48), against the local hub server
// (tests/hub/hub_server.py on 127.0.0.1): File → Open from the Hugging Face Hub… lists a
// model's files before fetching them, downloads off the GUI thread with progress, cancels, explains
// an error, and opens the model when done; File → Models… lists, opens and deletes revisions; Save
// checkpoint with a pretrained folder open asks for a file name. The pretrained model is
// tools/make_hf_fixtures.py's Marian (the tests that need it say so and pass without it).
#include <QDir>
#include <QGuiApplication>
#include <QScreen>
#include <QFileInfo>
#include <QSignalSpy>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QTest>

#include "core/hub/hub_cache.hpp"
#include "core/hub/hub_download.hpp"
#include "ui/window/HubDialogs.hpp"

#include "catch_torch.hpp"  // not <catch2/catch.hpp>: a unity batch (see there)

#include "hub_fixture.hpp"
#include "ui_fixture.hpp"

using namespace ui_testing;
using attnviz::testing::HubServer;
using attnviz::testing::ScopedEnv;

namespace {

const QString kHubFixtures = QStringLiteral(ATTNVIZ_HF_FIXTURES);

bool marianPresent() {
    if (QFileInfo::exists(kHubFixtures + QStringLiteral("/marian/config.json"))) return true;
    WARN("no pretrained fixtures at " << kHubFixtures.toStdString() << " (tools/make_hf_fixtures.py); skipping");
    return false;
}

bool pythonPresent() {
    if (::access(ATTNVIZ_HUB_PYTHON, X_OK) == 0) return true;
    WARN("no Python at " << ATTNVIZ_HUB_PYTHON << " for the local hub server; skipping");
    return false;
}

template <typename T>
T* waitForChild(QWidget& parent) {
    T* found = nullptr;
    waitUntil([&] { return (found = parent.findChild<T*>()) != nullptr; }, 10000);
    return found;
}

}  // namespace

TEST_CASE("hub ui: Open from the Hugging Face Hub lists the files, downloads with progress and opens the model", "[hf]") {
    if (!marianPresent() || !pythonPresent()) return;
    HubServer server({"--serve", "Helsinki-NLP/tiny-marian=" + (kHubFixtures + QStringLiteral("/marian")).toStdString()});
    QTemporaryDir cache;
    ScopedEnv endpoint("HF_ENDPOINT", server.endpoint().c_str()), hubCache("HF_HUB_CACHE", cache.path().toUtf8().constData()),
        token("HF_TOKEN", nullptr), offline("HF_HUB_OFFLINE", nullptr);
    Fixture f;
    CHECK(f.w().openHubAction()->isEnabled());
    f.w().openHubAction()->trigger();
    auto* dialog = waitForChild<HubDownloadDialog>(f.w());
    REQUIRE(dialog);
    CHECK(dialog->isVisible());
    dialog->setModelId(QStringLiteral("Helsinki-NLP/tiny-marian"));
    QSignalSpy listed(dialog, &HubDownloadDialog::listed);
    dialog->listFiles();
    CHECK(dialog->isBusy());  // the hub is asked on the background pool, not here
    REQUIRE(waitUntil([&] { return listed.count() > 0; }, 60000));
    CHECK(dialog->errorText().isEmpty());
    const int files = int(QDir(kHubFixtures + QStringLiteral("/marian")).entryList(QDir::Files).size());
    CHECK(dialog->listedFiles() == files);  // every file of the fixture is one a model needs
    CHECK(server.requests("/_cdn/", "GET") == 0);  // listed, nothing fetched yet

    QSignalSpy ready(dialog, &HubDownloadDialog::modelReady);
    QSignalSpy finished(dialog, &HubDownloadDialog::downloadFinished);
    dialog->startDownload();
    REQUIRE(waitUntil([&] { return finished.count() > 0; }, 120000));
    REQUIRE(finished.at(0).at(0).toBool());
    REQUIRE(ready.count() == 1);
    const QString snapshot = ready.at(0).at(0).toString();
    CHECK(snapshot.startsWith(cache.path()));
    // The model opened from its snapshot.
    const TranslationModelPtr model = f.controller().latestModel();
    REQUIRE(model);
    CHECK(model->config().is_pretrained());
    CHECK(f.w().statusBar()->currentMessage().contains(QStringLiteral("tiny-marian")));
    // Save checkpoint asks for a file name: the snapshot folder is no checkpoint file.
    f.savePath.clear();
    f.w().saveAction()->trigger();
    CHECK(f.pathsAsked == 1);

    // File → Models… lists it; Open emits its snapshot; Delete (confirmed) removes it.
    f.w().modelsAction()->trigger();
    auto* models = waitForChild<ModelsDialog>(f.w());
    REQUIRE(models);
    CHECK(models->modelCount() == 1);
    REQUIRE(models->selectRevision(QStringLiteral("Helsinki-NLP/tiny-marian"), QStringLiteral("main")));
    int asked = 0;
    models->setConfirmPrompt([&](const QString& question) {
        ++asked;
        CHECK(question.contains(QStringLiteral("tiny-marian")));
        return true;
    });
    models->deleteSelected();
    CHECK(asked == 1);
    CHECK(models->modelCount() == 0);
    CHECK_FALSE(QFileInfo::exists(snapshot));
}

TEST_CASE("hub ui: the download dialog explains an error, cancels while the hub is retried, and completes ids from the cache", "[hub_ui]") {
    if (!pythonPresent()) return;
    HubServer server;
    QTemporaryDir cache;
    ScopedEnv endpoint("HF_ENDPOINT", server.endpoint().c_str()), hubCache("HF_HUB_CACHE", cache.path().toUtf8().constData()),
        token("HF_TOKEN", nullptr), offline("HF_HUB_OFFLINE", nullptr);
    {
        attnviz::hub::DownloadOptions o;  // one model in the cache: the id field offers it
        o.repo_id = "tiny/model";
        attnviz::hub::download_model(o);
    }
    app();
    HubDownloadDialog dialog;
    dialog.show();
    CHECK(dialog.completions() == QStringList{QStringLiteral("tiny/model")});
    QSignalSpy listed(&dialog, &HubDownloadDialog::listed);
    dialog.setModelId(QStringLiteral("nobody/nothing"));
    dialog.listFiles();
    REQUIRE(waitUntil([&] { return listed.count() == 1; }, 60000));
    CHECK(dialog.errorText().contains(QStringLiteral("is not on")));
    CHECK(dialog.listedFiles() == 0);
    // A hub that answers 500: the dialog waits between tries, and Cancel stops it there.
    dialog.setModelId(QStringLiteral("faults/down"));
    dialog.listFiles();
    REQUIRE(waitUntil([&] { return dialog.statusText().contains(QStringLiteral("retrying")); }, 60000));
    dialog.cancel();
    REQUIRE(waitUntil([&] { return listed.count() == 2; }, 60000));
    CHECK_FALSE(dialog.isBusy());
    CHECK(dialog.statusText().contains(QStringLiteral("Cancelled")));
    CHECK(dialog.errorText().isEmpty());
    // Models… with that one model; deleting asks first, and a No keeps it.
    ModelsDialog models;
    CHECK(models.modelCount() == 1);
    REQUIRE(models.selectRevision(QStringLiteral("tiny/model"), QStringLiteral("main")));
    models.setConfirmPrompt([](const QString&) { return false; });
    models.deleteSelected();
    CHECK(models.modelCount() == 1);
    QSignalSpy open(&models, &ModelsDialog::openRequested);
    models.openSelected();
    REQUIRE(open.count() == 1);
    CHECK(attnviz::hub::find_snapshot("tiny/model") == open.at(0).at(0).toString().toStdString());
}

TEST_CASE("hub ui: Save checkpoint with a pretrained folder open asks for a file name", "[hf]") {
    if (!marianPresent()) return;
    Fixture f;
    const QString folder = kHubFixtures + QStringLiteral("/marian");
    REQUIRE(f.w().openFile(folder));
    f.savePath.clear();  // the user cancels the dialog
    f.w().saveAction()->trigger();
    CHECK(f.pathsAsked == 1);
    CHECK(QFileInfo(folder + QStringLiteral("/config.json")).isFile());
    QTemporaryDir dir;
    f.savePath = dir.filePath(QStringLiteral("tuned.attnviz"));
    f.w().saveAction()->trigger();
    CHECK(f.pathsAsked == 2);
    REQUIRE(waitUntil([&] { return QFileInfo(f.savePath).isFile(); }, 60000));
}

TEST_CASE("hub ui: a screenshot of the download dialog in the middle of a download", "[.][hub_screenshot]") {
    // By hand, under Xvfb: ATTNVIZ_SCREENSHOT_DIR=/tmp/shots xvfb-run -s "-screen 0 1280x820x24"
    //   env QT_QPA_PLATFORM=xcb build/release/tests/attnviz_tests_ui "[hub_screenshot]"
    // writes hub-listed.png (the files listed), hub-progress.png (the screen during the download) and
    // hub-models.png (File → Models…).
    if (!pythonPresent()) return;
    const QString dir = QString::fromLocal8Bit(qgetenv("ATTNVIZ_SCREENSHOT_DIR"));
    if (dir.isEmpty()) {
        WARN("ATTNVIZ_SCREENSHOT_DIR is not set: no screenshot taken");
        return;
    }
    HubServer server({"--big-mb", "400"});
    QTemporaryDir cache;
    ScopedEnv endpoint("HF_ENDPOINT", server.endpoint().c_str()), hubCache("HF_HUB_CACHE", cache.path().toUtf8().constData());
    Fixture f;
    f.w().openHubAction()->trigger();
    auto* dialog = waitForChild<HubDownloadDialog>(f.w());
    REQUIRE(dialog);
    dialog->setModelId(QStringLiteral("bench/big"));
    QSignalSpy listed(dialog, &HubDownloadDialog::listed);
    dialog->listFiles();
    REQUIRE(waitUntil([&] { return listed.count() > 0; }, 60000));
    QTest::qWait(300);
    dialog->grab().save(dir + QStringLiteral("/hub-listed.png"));
    dialog->startDownload();
    REQUIRE(waitUntil([&] { return dialog->bytesDone() > (100 << 20); }, 60000));
    QTest::qWait(50);
    QGuiApplication::primaryScreen()->grabWindow(0).save(dir + QStringLiteral("/hub-progress.png"));
    dialog->cancel();
    REQUIRE(waitUntil([&] { return !dialog->isBusy(); }, 60000));
    // File → Models… with a model beside the interrupted one: hub-models.png.
    attnviz::hub::DownloadOptions o;
    o.repo_id = "tiny/model";
    attnviz::hub::download_model(o);
    dialog->close();
    f.w().modelsAction()->trigger();
    auto* models = waitForChild<ModelsDialog>(f.w());
    REQUIRE(models);
    models->selectRevision(QStringLiteral("tiny/model"), QStringLiteral("main"));
    QTest::qWait(300);
    models->grab().save(dir + QStringLiteral("/hub-models.png"));
}
