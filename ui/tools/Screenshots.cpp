#include "ui/tools/Screenshots.hpp"

#include <QDir>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QLineEdit>
#include <QTabWidget>
#include <QTimer>

#include "ui/compare/ComparePanel.hpp"
#include "ui/training/CorpusPanel.hpp"
#include "ui/heatmap/HeatmapWidget.hpp"
#include "ui/training/LossChart.hpp"
#include "ui/window/MainWindow.hpp"
#include "ui/training/ProbePanel.hpp"
#include "ui/training/SettingsPanel.hpp"
#include "ui/translate/TranslatePanel.hpp"
#include "core/model/rnn_model.hpp"
#include "core/train/train.hpp"

namespace attnviz::ui {

bool waitUntil(const std::function<bool()>& pred, int timeoutMs) {
    QElapsedTimer timer;
    timer.start();
    while (!pred()) {
        if (timer.elapsed() > timeoutMs) return false;
        QEventLoop loop;
        QTimer::singleShot(20, &loop, &QEventLoop::quit);
        loop.exec();
    }
    return true;
}

QStringList takeScreenshots(MainWindow& w, const ScreenshotOptions& options, QString* error) {
    QStringList written;
    auto fail = [&](const QString& message) {
        if (error) *error = message;
        return QStringList();
    };
    QDir dir(options.directory);
    if (!dir.exists() && !QDir().mkpath(options.directory)) return fail(QObject::tr("cannot create %1").arg(options.directory));
    auto save = [&](QWidget* widget, const QString& name) {
        const QString path = dir.filePath(name);
        if (widget->grab().save(path, "PNG")) written << path;
    };

    w.setErrorDialogsEnabled(false);
    w.setUnsavedPrompt([] { return QMessageBox::Discard; });  // a screenshot run keeps no model
    w.resize(1400, 900);
    w.show();
    w.corpusPanel()->selectTask(TaskKind::toy_french);
    w.tabs()->setCurrentIndex(MainWindow::CurvesTab);
    waitUntil([&] { return !w.corpusPanel()->busy(); }, 30000);  // the corpus is read in the background
    waitUntil([] { return false; }, 300);  // let the first layout and paint happen

    TrainingController* c = w.controller();
    // Train until the model is good (validation exact match) or the time is up, then stop.
    int epochs = 0;
    double accuracy = 0;
    auto epochWatch = QObject::connect(c, &TrainingController::epochFinished, [&](const EpochReport& r, qint64) {
        epochs = r.epoch;
        accuracy = r.val_accuracy;
    });
    auto trainRun = [&] {
        epochs = 0;
        accuracy = 0;
        w.startTraining();
        if (!c->isActive()) return false;
        waitUntil([&] { return !c->isActive() || (epochs >= options.minEpochs && accuracy >= options.targetAccuracy); },
                  options.trainSeconds * 1000);
        if (c->isActive()) {
            c->stop();
            waitUntil([&] { return !c->isActive(); }, 30000);
        }
        return true;
    };
    if (!trainRun()) return fail(QObject::tr("training did not start: %1").arg(w.lastError()));
    const int firstRunEpochs = std::max(1, epochs);
    waitUntil([] { return false; }, 300);
    save(&w, QStringLiteral("training.png"));
    save(w.lossChart()->chartView(), QStringLiteral("curves.png"));

    TranslatePanel* t = w.translatePanel();
    w.tabs()->setCurrentIndex(MainWindow::TranslateTab);
    t->setBeamWidth(3);
    const QString sentence = options.sentence.isEmpty() ? w.corpusPanel()->examples().value(0) : options.sentence;
    bool ready = false;
    auto connection = QObject::connect(t, &TranslatePanel::translationReady, [&] { ready = true; });
    t->translateText(sentence);
    waitUntil([&] { return ready; }, 20000);
    QObject::disconnect(connection);
    // Pick the output row that shows the adjective/noun crossing best: the third step.
    t->heatmap()->setSelectedRow(std::min(2, t->heatmap()->rows() - 1));
    waitUntil([] { return false; }, 300);
    save(&w, QStringLiteral("translate.png"));
    if (w.exportHeatmapTo(dir.filePath(QStringLiteral("heatmap.png")), 2.0)) written << dir.filePath(QStringLiteral("heatmap.png"));

    // "Why this word?": the model's own output with its second and third words swapped
    // (for toy-french: the adjective before the noun), scored as a reference.
    if (t->translation() && !t->translation()->empty()) {
        auto tokens = t->translation()->best().tokens;
        if (!tokens.empty() && tokens.back() == "<eos>") tokens.pop_back();
        if (tokens.size() >= 3) std::swap(tokens[1], tokens[2]);
        QStringList words;
        for (const auto& tok : tokens) words << QString::fromStdString(tok);
        t->setBeamWidth(1);
        bool forced = false;
        auto forcedConnection = QObject::connect(t, &TranslatePanel::forcedReady, [&] { forced = true; });
        t->referenceEdit()->setText(words.join(QLatin1Char(' ')));
        t->translateText(sentence);
        waitUntil([&] { return forced; }, 20000);
        QObject::disconnect(forcedConnection);
        waitUntil([] { return false; }, 300);
        save(&w, QStringLiteral("forced.png"));
        t->referenceEdit()->clear();
    }

    // The beam search tree of the same sentence, its best leaf selected.
    {
        t->setBeamWidth(3);
        bool treeReady = false;
        auto treeConnection = QObject::connect(t, &TranslatePanel::translationReady, [&] { treeReady = true; });
        t->translateText(sentence);
        waitUntil([&] { return treeReady; }, 20000);
        QObject::disconnect(treeConnection);
        t->viewTabs()->setCurrentIndex(1);
        waitUntil([] { return false; }, 300);
        save(&w, QStringLiteral("beamtree.png"));
        t->viewTabs()->setCurrentIndex(0);
    }

    w.tabs()->setCurrentIndex(MainWindow::ProbeTab);
    waitUntil([] { return false; }, 300);
    save(&w, QStringLiteral("probe.png"));

    if (options.compare) {
        // Keep the additive run and train the no-attention baseline next to it.
        w.lossChart()->keepRun();
        ModelConfig m = w.settingsPanel()->modelConfig();
        m.scoring = Scoring::none;
        w.settingsPanel()->setModelConfig(m);
        TrainConfig t = w.settingsPanel()->trainConfig();
        t.epochs = firstRunEpochs;  // the same number of epochs as the additive run
        w.settingsPanel()->setTrainConfig(t);
        w.tabs()->setCurrentIndex(MainWindow::CurvesTab);
        waitUntil([&] { return !w.corpusPanel()->loading(); }, 30000);
        trainRun();
        waitUntil([] { return false; }, 300);
        save(&w, QStringLiteral("compare.png"));
        // Additive against dot-product attention on one sentence (a no-attention model has
        // no heatmap to compare): train the dot-product model, then compare it with the kept
        // additive run.
        m.scoring = Scoring::dot;
        w.settingsPanel()->setModelConfig(m);
        trainRun();
        ComparePanel* cp = w.comparePanel();
        w.tabs()->setCurrentIndex(MainWindow::CompareTab);
        cp->setSentence(sentence);
        cp->setChoices(1, 0);  // the first kept run (additive) against the current model (dot)
        bool compared = false;
        auto compareConnection = QObject::connect(cp, &ComparePanel::compared, [&] { compared = true; });
        cp->compare();
        waitUntil([&] { return compared; }, 20000);
        QObject::disconnect(compareConnection);
        waitUntil([] { return false; }, 300);
        save(&w, QStringLiteral("compare-models.png"));
    }
    QObject::disconnect(epochWatch);

    if (options.subwords) {
        // The same task cut into subwords: a small BPE vocabulary, so that words really
        // split, trained here on the GUI thread (the window waits), then one heatmap of
        // pieces and one with the pieces merged into words.
        const auto corpus = w.corpusPanel()->corpus();
        if (!corpus) return fail(QObject::tr("no corpus for the subword model"));
        Corpus words = *corpus;
        words.level = TokenLevel::subword;  // task sentences are normalised words already
        TrainConfig tc = w.settingsPanel()->trainConfig();
        tc.subword_vocab = 100;
        tc.subword_model = SubwordModel::bpe;
        tc.epochs = firstRunEpochs + 2;  // pieces make longer sequences: a little more training
        ModelConfig mc = w.settingsPanel()->modelConfig();
        mc.scoring = Scoring::additive;
        try {
            Trainer trainer(prepare_data(words, tc), mc, tc);
            trainer.run();
            t->setModel(trainer.snapshot());
        } catch (const std::exception& e) {
            return fail(QObject::tr("subword training failed: %1").arg(QString::fromStdString(e.what())));
        }
        w.tabs()->setCurrentIndex(MainWindow::TranslateTab);
        t->setBeamWidth(1);
        for (const bool merge : {false, true}) {
            t->setMergeSubwords(merge);
            bool done = false;
            auto subwordConnection = QObject::connect(t, &TranslatePanel::translationReady, [&] { done = true; });
            t->translateText(sentence);
            waitUntil([&] { return done; }, 20000);
            QObject::disconnect(subwordConnection);
            waitUntil([] { return false; }, 300);
            const QString path = dir.filePath(merge ? QStringLiteral("subwords-merged.png") : QStringLiteral("subwords.png"));
            if (w.exportHeatmapTo(path, 1.5)) written << path;
        }
        t->setMergeSubwords(false);
    }
    return written;
}

}  // namespace attnviz::ui
