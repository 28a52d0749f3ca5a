// Offscreen test of opening a checkpoint of the old format (version 1): the
// window asks before converting it, Cancel leaves everything as it was,
// Upgrade writes NAME-v2.ckpt beside it and opens that.
// LibTorch's c10 logging defines a CHECK macro of its own: include everything
// that pulls in LibTorch first, then let Catch2 define CHECK last.
#include <QFile>
#include <QFileInfo>
#include <QTemporaryDir>

#include "core/checkpoint.hpp"

#undef CHECK
#include <catch2/catch.hpp>

#include "ui_fixture.hpp"

using namespace ui_testing;

TEST_CASE("gui: an old-format checkpoint asks before it is upgraded and opened", "[ui][checkpoint]") {
    Fixture f;
    QTemporaryDir dir;
    const QString old = dir.filePath(QStringLiteral("old.ckpt"));
    REQUIRE(QFile::copy(QStringLiteral(ATTNVIZ_TEST_DATA "/checkpoint_v1_tiny.ckpt"), old));
    const QString upgraded = dir.filePath(QStringLiteral("old-v2.ckpt"));

    f.upgradeLegacy = false;
    CHECK_FALSE(f.w().openFile(old));
    CHECK(f.legacyPrompts == 1);
    CHECK_FALSE(QFileInfo::exists(upgraded));
    CHECK_FALSE(f.controller().latestModel());

    f.upgradeLegacy = true;
    REQUIRE(f.w().openFile(old));
    CHECK(f.legacyPrompts == 2);
    REQUIRE(QFileInfo::exists(upgraded));
    CHECK(detect_model_file(upgraded.toStdString()) == ModelFileKind::checkpoint);
    REQUIRE(f.controller().latestModel());
    CHECK(f.controller().latestModel()->history().epochs_done == 1);
    CHECK(f.controller().checkpointPath() == upgraded);
    CHECK(f.w().recentFiles().contains(upgraded));
}
