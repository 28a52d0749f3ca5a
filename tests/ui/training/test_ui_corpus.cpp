// Offscreen tests of the corpus panel: two-file parallel text, the layout
// detected shown in the summary, and a large file read with a progress bar
// that Cancel stops (the previous corpus stays); closing the panel mid-read
// stops the reader and leaves no background work behind.
// With ATTNVIZ_SCREENSHOT_DIR set, the panel is also saved as PNGs there.
#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QElapsedTimer>
#include <QImage>
#include <QPainter>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>
#include <QThreadPool>
#include <QTimer>
#include <atomic>
#include <fstream>
#include <memory>

#include "core/data/corpus_reader.hpp"
#include "core/data/training_data.hpp"
#include "ui/common/Background.hpp"
#include "ui/training/CorpusPanel.hpp"
#include "ui/window/MainWindow.hpp"
#include "ui/training/SettingsPanel.hpp"
#include "ui/tools/Screenshots.hpp"

#include "catch_torch.hpp"  // not <catch2/catch.hpp>: a unity batch (see there)

#include "ui_fixture.hpp"

using namespace attnviz;
using namespace attnviz::ui;
using namespace ui_testing;

namespace {

void saveScreenshot(QWidget* widget, const char* name) {
    const QByteArray dir = qgetenv("ATTNVIZ_SCREENSHOT_DIR");
    if (dir.isEmpty()) return;
    QDir().mkpath(QString::fromLocal8Bit(dir));
    widget->grab().save(QString::fromLocal8Bit(dir) + QLatin1Char('/') + QLatin1String(name));
}

QWidget* corpusBox(MainWindow& w) {
    // The group box around the panel, with its title, as a user sees it.
    QWidget* box = w.corpusPanel()->parentWidget();
    return box ? box : w.corpusPanel();
}

}  // namespace

TEST_CASE("parallel text opens from two files, and the layout detected is shown", "[ui][corpus]") {
    Fixture f;
    QTemporaryDir dir;
    const QString en = tempPath(dir, "train.en"), fr = tempPath(dir, "train.fr");
    {
        std::ofstream a(en.toStdString()), b(fr.toStdString());
        for (int i = 0; i < 300; ++i) {
            a << "I see " << i % 11 << " cats .\n";
            b << "Je vois " << i % 11 << " chats .\n";
        }
    }
    QSignalSpy changed(f.w().corpusPanel(), &CorpusPanel::corpusChanged);
    REQUIRE(f.w().openParallelFiles(en, fr));
    REQUIRE(waitUntil([&] { return changed.count() > 0; }, 30000));
    REQUIRE(f.waitCorpus());
    CorpusPanel* panel = f.w().corpusPanel();
    CHECK(panel->corpus()->layout == CorpusLayout::parallel);
    CHECK(panel->corpus()->pairs.size() == 300);
    CHECK(panel->filePath() == QFileInfo(en).absoluteFilePath());
    CHECK(panel->targetFilePath() == QFileInfo(fr).absoluteFilePath());
    CHECK(panel->sourceKey() == QStringLiteral("parallel:") + QFileInfo(en).absoluteFilePath() + QLatin1Char('\n') +
                                    QFileInfo(fr).absoluteFilePath());
    CHECK(panel->summaryText().contains(QStringLiteral("layout: parallel text, one sentence per line")));
    CHECK(panel->summaryText().startsWith(QStringLiteral("<b>300</b> pairs · no skipped lines<br>")));
    CHECK(panel->sourceVocabSize() == 4 + 11 + 4);
    CHECK(panel->findChild<QComboBox*>()->currentText() == QStringLiteral("Files: train.en + train.fr"));

    // A Tatoeba-Challenge file: detected, and said so.
    const QString challenge = tempPath(dir, "eng-fra.txt");
    {
        std::ofstream c(challenge.toStdString());
        for (int i = 0; i < 200; ++i) c << "eng\tfra\tI see " << i % 7 << " dogs .\tJe vois " << i % 7 << " chiens .\n";
    }
    QSignalSpy statusMessages(f.w().statusBar(), &QStatusBar::messageChanged);
    REQUIRE(f.w().openCorpusFile(challenge));
    REQUIRE(waitUntil([&] { return changed.count() > 1; }, 30000));
    REQUIRE(f.waitCorpus());
    CHECK(panel->corpus()->layout == CorpusLayout::challenge);
    CHECK(panel->summaryText().contains(QStringLiteral("Tatoeba-Challenge")));
    CHECK(panel->summaryText().contains(QStringLiteral("source = column 3 (eng)")));
    CHECK(panel->targetFilePath().isEmpty());
    // The status bar said the same in plain text: "lang<TAB>lang<TAB>...", not "lang&lt;TAB&gt;...".
    QString status;
    for (const auto& args : statusMessages)
        if (args.at(0).toString().contains(QStringLiteral("Tatoeba-Challenge"))) status = args.at(0).toString();
    INFO(status.toStdString());
    CHECK(status.contains(QStringLiteral("<TAB>")));
    CHECK_FALSE(status.contains(QStringLiteral("&lt;")));
    CHECK_FALSE(status.contains(QStringLiteral("&gt;")));
    saveScreenshot(corpusBox(f.w()), "corpus-detected.png");

    // The columns chosen by language swap the sides.
    panel->setColumns(QStringLiteral("fra,eng"));
    REQUIRE(waitUntil([&] { return changed.count() > 2; }, 30000));
    REQUIRE(f.waitCorpus());
    CHECK(panel->corpus()->pairs.front().src.front() == "je");

    // A bad file: an error, the previous corpus stays.
    const QString four = tempPath(dir, "four.tsv");
    std::ofstream(four.toStdString()) << "Go.\tVa !\tx\ty\n";
    QSignalSpy failed(panel, &CorpusPanel::loadFailed);
    panel->setColumns(QString());
    REQUIRE(f.waitCorpus());
    f.w().openCorpusFile(four);
    REQUIRE(waitUntil([&] { return failed.count() > 0; }, 30000));
    CHECK(failed.at(0).at(0).toString().contains(QStringLiteral("line 1 has 4 columns")));
    CHECK(panel->corpus()->layout == CorpusLayout::challenge);
}

TEST_CASE("a large corpus shows reading progress, and Cancel keeps the previous corpus", "[ui][corpus][progress]") {
    Fixture f;
    QTemporaryDir dir;
    // The corpus in use: a small Tatoeba-Challenge file, so the summary shows a detected layout.
    const QString small = tempPath(dir, "eng-fra-small.txt");
    {
        std::ofstream c(small.toStdString());
        for (int i = 0; i < 500; ++i) c << "eng\tfra\tI see " << i % 7 << " dogs .\tJe vois " << i % 7 << " chiens .\n";
    }
    CorpusPanel* panel = f.w().corpusPanel();
    f.w().openCorpusFile(small);
    REQUIRE(waitUntil([&] { return !panel->busy() && panel->corpus()->layout == CorpusLayout::challenge; }, 30000));
    const auto previous = panel->corpus();
    const QString previousKey = panel->sourceKey();

    const QString big = tempPath(dir, "eng-fra-big.txt");
    {
        std::ofstream c(big.toStdString());
        for (int i = 0; i < 1500000; ++i)
            c << "eng\tfra\tsentence " << i % 5000 << " number " << i << " .\tphrase " << i % 5000 << " numéro " << i
              << " .\n";
    }
    QSignalSpy changed(panel, &CorpusPanel::corpusChanged);
    QSignalSpy cancelled(panel, &CorpusPanel::loadCancelled);
    REQUIRE(f.w().openCorpusFile(big));
    CHECK(panel->loading());
    auto* bar = panel->findChild<QProgressBar*>();
    QPushButton* cancel = nullptr;
    for (auto* b : panel->findChildren<QPushButton*>())
        if (b->text() == QStringLiteral("Cancel")) cancel = b;
    REQUIRE(bar);
    REQUIRE(cancel);
    // The bar fills as bytes are read (polled every 100 ms).
    REQUIRE(waitUntil([&] { return bar->maximum() == 1000 && bar->value() > 0; }, 30000));
    REQUIRE(panel->loading());  // still reading (or summarising): 80 MB take a while
    CHECK(bar->isVisible());
    CHECK(cancel->isVisible());
    CHECK(panel->progressValue() > 0);
    CHECK(panel->corpus() == previous);  // the previous corpus stays while the new one loads
    if (!qEnvironmentVariableIsEmpty("ATTNVIZ_SCREENSHOT_DIR")) {  // a fuller bar for the picture
        waitUntil([&] { return bar->value() > 300 || !panel->loading(); }, 20000);
        saveScreenshot(corpusBox(f.w()), "corpus-loading.png");
    }

    QTest::mouseClick(cancel, Qt::LeftButton);
    CHECK(cancelled.count() == 1);
    CHECK_FALSE(panel->loading());
    CHECK_FALSE(panel->busy());
    CHECK_FALSE(bar->isVisible());
    CHECK(panel->corpus() == previous);
    CHECK(panel->sourceKey() == previousKey);
    CHECK(panel->progressValue() == -1);
    QTest::qWait(1500);  // whatever the stopped reader returns is never delivered
    CHECK(changed.count() == 0);
    CHECK(panel->corpus() == previous);
    CHECK(f.w().trainAction()->isEnabled());
}

TEST_CASE("closing the corpus panel mid-read stops the reader and leaves no work running", "[ui][corpus][shutdown]") {
    // A job that outlived its panel kept reading after the window closed, and one
    // still running when the process exited raced the destruction of static objects
    // (a test that ended right after starting a load crashed now and then).
    app();
    QTemporaryDir dir;
    const QString big = tempPath(dir, "eng-fra-close.txt");
    {
        std::ofstream c(big.toStdString());
        for (int i = 0; i < 800000; ++i) c << "sentence " << i % 5000 << " number " << i << " .\tphrase " << i << " .\n";
    }
    auto* panel = new CorpusPanel;
    REQUIRE(waitUntil([&] { return !panel->busy(); }, 30000));  // whatever it loads first
    panel->loadFile(big);
    REQUIRE(waitUntil([&] { return panel->progressValue() > 0; }, 30000));
    REQUIRE(panel->loading());  // mid-read: 30 MB take several seconds
    QElapsedTimer clock;
    clock.start();
    delete panel;
    const qint64 closing = clock.elapsed();
    // Nothing left behind: the pool thread only returns the finished job (microseconds), where
    // a reader left running would still have most of the 30 MB to tokenise.
    CHECK(backgroundPool()->waitForDone(200));
    CHECK(closing < 3000);  // the reader stopped at its next chunk instead of finishing the file
}

TEST_CASE("a background channel waits for its running work when it goes away", "[ui][shutdown]") {
    app();
    auto finished = std::make_shared<std::atomic<bool>>(false);
    auto delivered = std::make_shared<std::atomic<bool>>(false);
    {
        LatestOnly channel;
        std::atomic<bool> started{false};
        channel.run<int>(
            [&started, finished] {
                started = true;
                QThread::msleep(300);
                *finished = true;
                return 1;
            },
            [delivered](int) { *delivered = true; }, [](const QString&) {});
        while (!started) QThread::msleep(1);
    }
    CHECK(*finished);    // the destructor waited for it
    QTest::qWait(100);   // and its answer is never delivered to the channel that is gone
    CHECK_FALSE(*delivered);
    CHECK(backgroundPool()->waitForDone(200));
}

TEST_CASE("painting never waits behind background work", "[ui][stall]") {
    app();
    // Qt 6.4 splits the GUI thread's larger blended fills (96 rows or more of a translucent
    // colour or a gradient) across its global thread pool and waits for them; work of ours
    // queued on that pool would hold every such paint until it finished.
    const int threads = std::max(QThreadPool::globalInstance()->maxThreadCount(), 2);
    std::vector<std::unique_ptr<LatestOnly>> channels;
    std::atomic<int> started{0};
    std::atomic<bool> release{false};
    for (int i = 0; i < threads + 1; ++i) {
        channels.push_back(std::make_unique<LatestOnly>());
        channels.back()->run<int>(
            [&] {
                ++started;
                for (int k = 0; k < 400 && !release; ++k) QThread::msleep(5);  // a long job: 2 s at most
                return 0;
            },
            [](int) {}, [](const QString&) {});
    }
    REQUIRE(waitUntil([&] { return started >= std::min(threads, 2); }, 5000));
    QImage image(900, 900, QImage::Format_ARGB32_Premultiplied);
    QElapsedTimer clock;
    clock.start();
    {
        QPainter p(&image);
        p.fillRect(image.rect(), QColor(255, 0, 0, 128));
        p.setPen(QPen(Qt::black, 1));
        p.drawLine(10, 0, 10, 899);
    }
    const qint64 paintMs = clock.elapsed();
    release = true;
    channels.clear();  // each waits for its job
    CHECK(paintMs < 1000);  // not the 2 s the jobs hold their threads
    CHECK(image.pixelColor(10, 450) == QColor(Qt::black));
}

TEST_CASE("a large corpus is read off the GUI thread and summarised as training will see it", "[ui][corpus]") {
    Fixture f(/*epochs=*/1, /*maxBatches=*/1);
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("big.tsv"));
    {
        std::ofstream out(path.toStdString());
        uint64_t x = 12345;
        auto word = [&](int vocab) {  // a skewed vocabulary: many words are rare
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            const uint64_t r = (x >> 33) % uint64_t(vocab);
            return "w" + std::to_string(r * r / uint64_t(vocab));
        };
        for (int i = 0; i < 120000; ++i) {
            for (int k = 0; k < 6; ++k) out << word(6000) << (k < 5 ? " " : "\t");
            for (int k = 0; k < 6; ++k) out << word(6000) << (k < 5 ? " " : "\n");
        }
    }
    TrainConfig t = f.w().settingsPanel()->trainConfig();
    t.min_freq = 2;
    f.w().settingsPanel()->setTrainConfig(t);
    REQUIRE(f.waitCorpus());
    const auto oldCorpus = f.w().corpusPanel()->corpus();

    QSignalSpy changed(f.w().corpusPanel(), &CorpusPanel::corpusChanged);
    int ticks = 0;
    QTimer ticker;
    ticker.setInterval(10);
    QObject::connect(&ticker, &QTimer::timeout, [&] { ++ticks; });
    ticker.start();
    QElapsedTimer clock;
    clock.start();
    REQUIRE(f.w().openCorpusFile(path));
    const qint64 callMs = clock.elapsed();
    CHECK(callMs < 200);  // the call only starts the work
    CHECK(f.w().corpusPanel()->loading());
    CHECK(f.w().corpusPanel()->corpus() == oldCorpus);  // the previous corpus stays until the new one is ready
    CHECK_FALSE(f.w().trainAction()->isEnabled());
    REQUIRE(waitUntil([&] { return changed.count() > 0; }, 60000));
    const qint64 loadMs = clock.elapsed();
    const int ticksWhileLoading = ticks;
    ticker.stop();
    std::printf("[ui] 120000-line corpus: call %lld ms, ready after %lld ms, %d GUI timer ticks meanwhile\n",
                static_cast<long long>(callMs), static_cast<long long>(loadMs), ticksWhileLoading);
    CHECK(ticksWhileLoading >= loadMs / 10 / 4);  // the GUI thread kept serving its timer
    REQUIRE(f.waitCorpus());

    // The numbers shown are prepare_data's on the same corpus and settings.
    const Corpus corpus = read_tsv(path.toStdString());
    TrainingData expected = prepare_data(corpus, f.w().settingsPanel()->trainConfig());
    const CorpusSummary* s = f.w().corpusPanel()->summary();
    REQUIRE(s);
    CHECK(s->pairs == 120000);
    CHECK(s->train_pairs == expected.train.size());
    CHECK(s->val_pairs == expected.val.size());
    CHECK(f.w().corpusPanel()->sourceVocabSize() == int(expected.src_vocab.size()));
    CHECK(f.w().corpusPanel()->targetVocabSize() == int(expected.tgt_vocab.size()));
    CHECK(f.w().corpusPanel()->summaryText().contains(QString::number(expected.src_vocab.size())));

    // A data setting changes: the summary is recomputed in the background.
    QSignalSpy summarised(f.w().corpusPanel(), &CorpusPanel::summaryChanged);
    t = f.w().settingsPanel()->trainConfig();
    t.min_freq = 5;
    f.w().settingsPanel()->setTrainConfig(t);
    CHECK(f.w().corpusPanel()->busy());
    REQUIRE(waitUntil([&] { return summarised.count() > 0; }, 60000));
    expected = prepare_data(corpus, f.w().settingsPanel()->trainConfig());
    CHECK(f.w().corpusPanel()->sourceVocabSize() == int(expected.src_vocab.size()));
    CHECK(f.w().corpusPanel()->targetVocabSize() == int(expected.tgt_vocab.size()));

    // ... and they are what training reports.
    QSignalSpy prepared(&f.controller(), &TrainingController::prepared);
    f.train();
    REQUIRE(prepared.count() == 1);
    const auto info = prepared.at(0).at(0).value<SessionInfo>();
    CHECK(int(info.src_vocab) == f.w().corpusPanel()->sourceVocabSize());
    CHECK(int(info.tgt_vocab) == f.w().corpusPanel()->targetVocabSize());
    CHECK(info.train_pairs == s->train_pairs);
}
