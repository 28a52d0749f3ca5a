// Offscreen test of opening a checkpoint of the old format (version 1): the
// window asks before converting it, Cancel leaves everything as it was,
// Upgrade writes NAME-v2.ckpt beside it and opens that; a damaged one is an error.
// LibTorch's c10 logging defines a CHECK macro of its own: include everything
// that pulls in LibTorch first, then let Catch2 define CHECK last.
#include <QFile>
#include <QFileInfo>
#include <QStatusBar>
#include <QTemporaryDir>

#include "core/persist/checkpoint.hpp"
#include "core/persist/d2l_interop.hpp"

#include "catch_torch.hpp"  // not <catch2/catch.hpp>: a unity batch (see there)

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

    // A damaged old file is an error, not a question.
    const QString damaged = dir.filePath(QStringLiteral("damaged.ckpt"));
    REQUIRE(QFile::copy(old, damaged));
    {
        QFile file(damaged);
        REQUIRE(file.open(QIODevice::ReadWrite));
        file.seek(file.size() / 2);
        const char byte = file.peek(1).at(0);
        file.write(QByteArray(1, static_cast<char>(byte ^ 0x21)));
    }
    CHECK_FALSE(f.w().openFile(damaged));
    CHECK(f.legacyPrompts == 2);
    CHECK(f.w().lastError().contains(QStringLiteral("corrupt")));
    CHECK_FALSE(QFileInfo::exists(dir.filePath(QStringLiteral("damaged-v2.ckpt"))));
}

TEST_CASE("gui: a model in d2l's safetensors layout opens by its content and translates as exported",
          "[ui][checkpoint][d2l]") {
    QTemporaryDir dir;
    // Saved under a name that says nothing: Open must judge the file by its bytes.
    const QString path = dir.filePath(QStringLiteral("exported.bin"));
    std::string expected;
    {
        Fixture f(/*epochs=*/1, /*maxBatches=*/3);
        f.train();
        REQUIRE(f.controller().latestModel());
        export_d2l(*f.controller().latestModel(), path.toStdString());
        f.translate(QStringLiteral("the dog sees a black cat"));
        expected = f.w().translatePanel()->translation()->best().text;
    }
    REQUIRE(detect_model_file(path.toStdString()) == ModelFileKind::safetensors);
    Fixture g;
    REQUIRE(g.w().openFile(path));
    REQUIRE(g.controller().latestModel());
    g.translate(QStringLiteral("the dog sees a black cat"));
    CHECK(g.w().translatePanel()->translation()->best().text == expected);
    CHECK(g.legacyPrompts == 0);
}

TEST_CASE("gui: opening a model trained on a file says when the corpus panel holds another corpus",
          "[ui][checkpoint]") {
    QTemporaryDir dir;
    const QString tsv = dir.filePath(QStringLiteral("pairs.tsv"));
    {
        QFile file(tsv);
        REQUIRE(file.open(QIODevice::WriteOnly));
        const char* words[] = {"red", "blue", "green", "small", "big", "old"};
        const char* mots[] = {"rouge", "bleu", "vert", "petit", "grand", "vieux"};
        for (int i = 0; i < 120; ++i)
            file.write(QStringLiteral("the %1 %2 .\tle %3 %4 .\n")
                           .arg(QLatin1String(words[i % 6]), QLatin1String(words[(i / 6) % 6]),
                                QLatin1String(mots[(i / 6) % 6]), QLatin1String(mots[i % 6]))
                           .toUtf8());
    }
    const QString model = dir.filePath(QStringLiteral("on-file.ckpt"));
    {
        Fixture f(/*epochs=*/1, /*maxBatches=*/2);
        f.w().corpusPanel()->loadFile(tsv);
        REQUIRE(f.waitCorpus());
        REQUIRE(f.w().corpusPanel()->filePath() == tsv);
        f.train();
        REQUIRE(f.w().saveCheckpointTo(model));
    }
    Fixture g;  // its corpus panel holds the built-in task
    REQUIRE(g.w().openFile(model));
    const QString other = g.w().statusBar()->currentMessage();
    INFO(other.toStdString());
    CHECK(other.contains(QStringLiteral("Continue trains on the corpus panel's")));
    CHECK(other.contains(QStringLiteral("open pairs.tsv there")));
    CHECK(g.w().corpusPanel()->isTask());  // nothing is loaded behind the user's back

    // With the same file in the panel there is nothing to say.
    g.w().corpusPanel()->loadFile(tsv);
    REQUIRE(g.waitCorpus());
    REQUIRE(g.w().openFile(model));
    const QString same = g.w().statusBar()->currentMessage();
    INFO(same.toStdString());
    CHECK(same.contains(QStringLiteral("on pairs.tsv")));
    CHECK_FALSE(same.contains(QStringLiteral("Continue trains")));
}
