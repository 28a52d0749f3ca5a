// Offscreen tests of pretrained Hugging Face model folders in the app (issue 38): a folder opens
// wherever a model is accepted (File → Open model folder's openCheckpoint, drag and drop, the
// recent files), translates as the core does (and so as transformers does: tests/pretrained),
// fills the language lists of a multilingual model, shows every layer and head, fine-tunes on
// the corpus with Train, and a folder that is not a model is an error the window survives.
// The models are tools/make_hf_fixtures.py's (the CTest fixture hf_fixtures makes them with the
// .venv's transformers); without them the tests say so and pass.
// LibTorch's c10 logging defines a CHECK macro of its own: include everything
// that pulls in LibTorch first, then let Catch2 define CHECK last.
#include <QComboBox>
#include <QDir>
#include <QDropEvent>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QLabel>
#include <QMimeData>
#include <QPainter>
#include <QSignalSpy>
#include <QStatusBar>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>
#include <QUrl>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/config/pretrained_config.hpp"
#include "core/decode/translation_model.hpp"
#include "ui/analysis/HeadsPanel.hpp"
#include "ui/compare/ComparePanel.hpp"
#include "ui/heatmap/MapSelector.hpp"
#include "ui/heatmap/ModelView.hpp"
#include "ui/heatmap/PositionBiasView.hpp"
#include "ui/training/FineTuneLanguages.hpp"
#include "core/model/t5_model.hpp"
#include "core/text/pretrained_tokenizer.hpp"

#include "catch_torch.hpp"  // not <catch2/catch.hpp>: a unity batch (see there)

#include "ui_fixture.hpp"

using namespace ui_testing;

namespace {

const QString kHfFolders = QStringLiteral(ATTNVIZ_HF_FIXTURES);

/// The fixture models are there (else a warning: the tests pass without checking anything).
bool hfFoldersPresent() {
    if (QFileInfo::exists(kHfFolders + QStringLiteral("/reference.json"))) return true;
    WARN("no pretrained fixtures at " << kHfFolders.toStdString()
                                      << " (tools/make_hf_fixtures.py needs transformers in the .venv); skipping");
    return false;
}

/// A copy of the fixture folder `name` inside `dir`, to change without touching the fixture.
QString copyHfFolder(const QString& name, const QTemporaryDir& dir) {
    const QString folder = dir.filePath(name);
    REQUIRE(QDir().mkpath(folder));
    for (const QString& file : QDir(kHfFolders + QLatin1Char('/') + name).entryList(QDir::Files))
        REQUIRE(QFile::copy(kHfFolders + QLatin1Char('/') + name + QLatin1Char('/') + file, folder + QLatin1Char('/') + file));
    return folder;
}

/// What transformers computed with the fixture models (tools/make_hf_fixtures.py).
const nlohmann::json& hfReference() {
    static const nlohmann::json j = [] {
        std::ifstream in((kHfFolders + QStringLiteral("/reference.json")).toStdString());
        return nlohmann::json::parse(in);
    }();
    return j;
}

/// The reference entry of `text` for a model ("marian", "m2m100").
const nlohmann::json& hfSample(const char* model, const std::string& text) {
    for (const auto& e : hfReference()[model])
        if (e["text"] == text) return e;
    FAIL("no reference entry for " << text);
    return hfReference();
}

/// The number of single-head panels of the model view (not the means nor the rollout).
int hfHeadPanels(const ModelView* view) {
    int heads = 0;
    for (int i = 0; i < view->panelCount(); ++i)
        if (view->panelChoice(i).head >= 0) ++heads;
    return heads;
}

const std::string kHfSentence = "I am a small frog.";

/// Whether the T5 fixture is there (tools/hf_fixtures_t5.py); a warning when it is not.
bool t5FolderPresent() {
    if (!hfFoldersPresent()) return false;
    if (QFileInfo::exists(kHfFolders + QStringLiteral("/t5/config.json"))) return true;
    WARN("no T5 fixture (tools/hf_fixtures_t5.py); skipping");
    return false;
}

}  // namespace

TEST_CASE("pretrained: a Hugging Face folder opens, translates as the core does and shows every layer and head",
          "[ui][pretrained][hf]") {
    if (!hfFoldersPresent()) return;
    Fixture f;
    const QString folder = kHfFolders + QStringLiteral("/marian");
    REQUIRE(f.w().openFile(folder));
    const TranslationModelPtr model = f.controller().latestModel();
    REQUIRE(model);
    REQUIRE(model->config().is_pretrained());
    CHECK(f.controller().initialModel() == model);
    CHECK(f.w().currentModel() == model);
    CHECK(f.w().recentFiles().value(0) == QDir::cleanPath(QFileInfo(folder).absoluteFilePath()));
    CHECK(f.w().statusBar()->currentMessage().contains(QStringLiteral("fine-tune")));
    // The form shows the pretrained family; Train fine-tunes at fine-tuning's learning rate and batch.
    CHECK(f.w().settingsPanel()->modelConfig().is_pretrained());
    CHECK(f.w().settingsPanel()->isValid());
    CHECK(f.w().settingsPanel()->trainConfig().lr == Approx(5e-5));
    CHECK(f.w().settingsPanel()->trainConfig().batch_size == 16);
    CHECK(f.w().trainAction()->isEnabled());

    // The beams of the generation config, and the translation the core makes with its defaults.
    TranslatePanel* panel = f.w().translatePanel();
    const DecodeOptions defaults = model->decode_defaults();
    REQUIRE(defaults.beam_size > 1);
    CHECK(panel->decodeOptions().beam_size == defaults.beam_size);
    CHECK(panel->decodeOptions().max_length == defaults.max_length);
    f.translate(QString::fromStdString(kHfSentence));
    auto t = panel->translation();
    REQUIRE(t);
    REQUIRE_FALSE(t->empty());
    DecodeOptions same = defaults;
    same.top_k = 5;
    same.beam_tree = true;
    const Translation core = model->translate({kHfSentence}, same).at(0);
    REQUIRE_FALSE(core.empty());
    CHECK(t->best().ids == core.best().ids);
    CHECK(t->best().text == core.best().text);

    // Greedy: transformers' own greedy output (tools/make_hf_fixtures.py recorded it).
    panel->setBeamWidth(1);
    f.translate(QString::fromStdString(kHfSentence));
    t = panel->translation();
    REQUIRE(t);
    REQUIRE_FALSE(t->empty());
    CHECK(t->best().text == hfSample("marian", kHfSentence)["greedy_text"].get<std::string>());

    // The model view: every layer × head of each kind, as config.json says.
    const PretrainedConfig& c = model->config().pretrained->model;
    const AttentionRecord& record = t->best().attention;
    CHECK(record.layer_count(AttentionKind::cross) == c.decoder_layers);
    CHECK(record.head_count(AttentionKind::cross) == c.decoder_heads);
    QTabWidget* tabs = panel->viewTabs();
    const int modelTab = tabs->count() - 1;
    REQUIRE(tabs->isTabVisible(modelTab));
    tabs->setCurrentIndex(modelTab);
    QApplication::processEvents();
    ModelView* view = panel->modelView();
    CHECK(view->kind() == AttentionKind::cross);
    CHECK(view->layers() == c.decoder_layers);
    CHECK(view->heads() == c.decoder_heads);
    CHECK(hfHeadPanels(view) == c.decoder_layers * c.decoder_heads);
    panel->mapSelector()->setChoice(MapChoice{AttentionKind::encoder_self, 0, 0});
    QApplication::processEvents();
    CHECK(view->kind() == AttentionKind::encoder_self);
    CHECK(hfHeadPanels(view) == c.encoder_layers * c.encoder_heads);
    panel->mapSelector()->setChoice(MapChoice{AttentionKind::decoder_self, 0, 0});
    QApplication::processEvents();
    CHECK(view->kind() == AttentionKind::decoder_self);
    CHECK(hfHeadPanels(view) == c.decoder_layers * c.decoder_heads);

    // Compare models takes a folder too (its "Add model" menu's folder entry).
    ComparePanel* compare = f.w().comparePanel();
    const int before = compare->modelCount();
    QSignalSpy added(compare, &ComparePanel::checkpointAdded);
    compare->addCheckpoint(folder);
    REQUIRE(waitUntil([&] { return added.count() > 0; }, 20000));
    CHECK(compare->modelCount() == before + 1);
    CHECK(compare->modelLabel(before) == QStringLiteral("marian"));
}

TEST_CASE("pretrained: a multilingual model's language lists are filled from it and choose the target",
          "[ui][pretrained][hf]") {
    if (!hfFoldersPresent()) return;
    Fixture f;
    REQUIRE(f.w().openFile(kHfFolders + QStringLiteral("/m2m100")));
    const TranslationModelPtr model = f.controller().latestModel();
    REQUIRE(model);
    TranslatePanel* panel = f.w().translatePanel();
    QComboBox* source = panel->sourceLanguageBox();
    QComboBox* target = panel->targetLanguageBox();
    CHECK(source->isVisibleTo(panel));
    CHECK(target->isVisibleTo(panel));
    CHECK(source->count() == 1 + int(model->source_languages().size()));  // "default", then the codes
    CHECK(target->count() == 1 + int(model->target_languages().size()));
    // tokenizer_config.json's src_lang and tgt_lang are chosen at first.
    CHECK(source->currentText() == QStringLiteral("en"));
    CHECK(target->currentText() == QStringLiteral("fr"));
    CHECK(panel->decodeOptions().target_lang == "fr");

    panel->setBeamWidth(1);
    f.translate(QString::fromStdString(kHfSentence));
    auto t = panel->translation();
    REQUIRE(t);
    REQUIRE_FALSE(t->empty());
    CHECK(t->best().text == hfSample("m2m100", kHfSentence)["greedy_text"].get<std::string>());
    const std::vector<int64_t> french = t->best().ids;

    // Another target: its code is the first token written.
    const int german = target->findData(QStringLiteral("de"));
    REQUIRE(german >= 0);
    target->setCurrentIndex(german);
    CHECK(panel->decodeOptions().target_lang == "de");
    f.translate(QString::fromStdString(kHfSentence));
    t = panel->translation();
    REQUIRE(t);
    REQUIRE_FALSE(t->empty());
    REQUIRE_FALSE(french.empty());
    REQUIRE_FALSE(t->best().ids.empty());
    CHECK(t->best().ids.front() != french.front());
    DecodeOptions de = model->decode_defaults();
    de.beam_size = 1;
    de.target_lang = "de";
    CHECK(t->best().ids == model->translate({kHfSentence}, de).at(0).best().ids);

    // A Marian model has no source choice; its targets are its >>xxx<< codes, none chosen at first
    // (the sentence as typed, as transformers reads it).
    REQUIRE(f.w().openFile(kHfFolders + QStringLiteral("/marian")));
    CHECK_FALSE(source->isVisibleTo(panel));
    const TranslationModelPtr marian = f.controller().latestModel();
    REQUIRE(marian);
    CHECK(target->isVisibleTo(panel) == !marian->target_languages().empty());
    CHECK(panel->decodeOptions().target_lang.empty());
}

TEST_CASE("pretrained: a folder that is not a model is an error and the window stays usable",
          "[ui][pretrained][hf]") {
    if (!hfFoldersPresent()) return;
    Fixture f;
    const QString folder = kHfFolders + QStringLiteral("/marian");
    REQUIRE(f.w().openFile(folder));
    const TranslationModelPtr opened = f.controller().latestModel();
    REQUIRE(opened);

    QTemporaryDir dir;
    // No config.json: the message says what a model folder holds.
    const QString empty = dir.filePath(QStringLiteral("empty"));
    REQUIRE(QDir().mkpath(empty));
    CHECK_FALSE(f.w().openFile(empty));
    CHECK(f.w().lastError().contains(QStringLiteral("config.json")));
    // An unknown model_type: the message names the supported ones.
    const QString bert = dir.filePath(QStringLiteral("bert"));
    REQUIRE(QDir().mkpath(bert));
    {
        QFile config(bert + QStringLiteral("/config.json"));
        REQUIRE(config.open(QIODevice::WriteOnly));
        config.write(R"({"model_type": "bert", "vocab_size": 10, "d_model": 8})");
    }
    CHECK_FALSE(f.w().openFile(bert));
    INFO(f.w().lastError().toStdString());
    CHECK(f.w().lastError().contains(QStringLiteral("bert")));
    CHECK(f.w().lastError().contains(QStringLiteral("marian")));

    // Nothing changed: the opened model stays, translates, and the actions work.
    CHECK(f.controller().latestModel() == opened);
    CHECK(f.w().currentModel() == opened);
    CHECK_FALSE(f.w().recentFiles().contains(QDir::cleanPath(bert)));
    CHECK(f.w().openModelFolderAction()->isEnabled());
    CHECK(f.w().trainAction()->isEnabled());
    f.translate(QString::fromStdString(kHfSentence));
    REQUIRE(f.w().translatePanel()->translation());
    CHECK_FALSE(f.w().translatePanel()->translation()->empty());

    // A folder dropped on the window opens as a model, as File → Open model folder… does.
    Fixture g;
    QMimeData mime;
    mime.setUrls({QUrl::fromLocalFile(kHfFolders + QStringLiteral("/m2m100"))});
    QDropEvent drop(QPointF(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
    QObject* target = &g.w();
    target->event(&drop);  // as a drag ending on the window delivers it (sendEvent wants a drag under way)
    REQUIRE(g.controller().latestModel());
    CHECK(g.controller().latestModel()->config().is_pretrained());
    CHECK(g.w().recentFiles().value(0).endsWith(QStringLiteral("/m2m100")));
}

TEST_CASE("pretrained: generation settings attnviz does not apply are named in the status line when the folder opens",
          "[ui][pretrained][hf]") {
    if (!hfFoldersPresent()) return;
    QTemporaryDir dir;
    const QString folder = copyHfFolder(QStringLiteral("marian"), dir);
    {
        std::ifstream in((folder + QStringLiteral("/generation_config.json")).toStdString());
        nlohmann::json g = nlohmann::json::parse(in);
        g["do_sample"] = true;
        g["diversity_penalty"] = 0.5;
        g["num_beam_groups"] = 2;
        std::ofstream((folder + QStringLiteral("/generation_config.json")).toStdString()) << g.dump();
    }
    Fixture f;
    REQUIRE(f.w().openFile(folder));
    const QString message = f.w().statusBar()->currentMessage();
    INFO(message.toStdString());
    CHECK(message.contains(QStringLiteral("fine-tune")));
    CHECK(message.contains(QStringLiteral("do_sample, diversity_penalty, num_beam_groups")));
    CHECK(message.contains(QStringLiteral("does not apply")));
    // The fixture itself names none.
    Fixture g;
    REQUIRE(g.w().openFile(kHfFolders + QStringLiteral("/marian")));
    CHECK_FALSE(g.w().statusBar()->currentMessage().contains(QStringLiteral("does not apply")));
}

TEST_CASE("pretrained: Train fine-tunes the opened model on the corpus, starting from its own loss",
          "[ui][pretrained][hf]") {
    if (!hfFoldersPresent()) return;
    Fixture f(/*epochs=*/1, /*maxBatches=*/3);
    REQUIRE(f.w().openFile(kHfFolders + QStringLiteral("/marian")));
    const TranslationModelPtr pretrained = f.controller().latestModel();
    REQUIRE(pretrained);
    f.train();  // the corpus panel's toy-french, cut by the model's own tokenizer
    INFO(f.w().lastError().toStdString());
    const TranslationModelPtr tuned = f.controller().latestModel();
    REQUIRE(tuned);
    CHECK(tuned != pretrained);
    CHECK(tuned->config().is_pretrained());
    CHECK(tuned->tokenizer_ptr() == pretrained->tokenizer_ptr());
    const TrainHistory h = f.controller().history();
    CHECK(h.global_step == 3);
    REQUIRE(h.start.has_value());  // the first validation point: the pretrained model's own loss
    CHECK(std::isfinite(h.start->val_loss));
    CHECK(f.controller().runLabel().contains(QStringLiteral("fine-tune")));
    // Train again starts from the folder's weights, not from the tuned ones.
    CHECK(f.controller().initialModel() == pretrained);
    f.translate(QString::fromStdString(kHfSentence));
    REQUIRE(f.w().translatePanel()->translation());
    CHECK(f.w().translatePanel()->translationModel() == tuned);
}

namespace {

/// The NLLB fixture copied into dir with a tokenizer_config.json naming no target language
/// (tgt_lang null), as a hub model may have it. Returns the folder.
QString nllbWithoutTarget(const QTemporaryDir& dir) {
    const QString folder = dir.filePath(QStringLiteral("nllb-no-tgt"));
    REQUIRE(QDir().mkpath(folder));
    const QDir fixture(kHfFolders + QStringLiteral("/nllb"));
    for (const QString& name : fixture.entryList(QDir::Files))
        REQUIRE(QFile::copy(fixture.filePath(name), folder + QLatin1Char('/') + name));
    const std::string path = (folder + QStringLiteral("/tokenizer_config.json")).toStdString();
    std::ifstream in(path);
    nlohmann::json config = nlohmann::json::parse(in);
    in.close();
    REQUIRE(config.contains("tgt_lang"));
    config["tgt_lang"] = nullptr;
    std::ofstream(path) << config.dump(2);
    return folder;
}

}  // namespace

TEST_CASE("pretrained: Train fine-tunes a multilingual model on the languages chosen, and asks for a target first",
          "[ui][pretrained][hf][languages]") {
    if (!hfFoldersPresent()) return;
    // The NLLB fixture with a tokenizer_config.json naming no target language (tgt_lang null), as a hub
    // model may have it: Train must be told the pair, as attnviz-cli train --target-lang is.
    QTemporaryDir dir;
    const QString folder = nllbWithoutTarget(dir);
    Fixture f(/*epochs=*/1, /*maxBatches=*/2);
    REQUIRE(f.w().openFile(folder));
    const TranslationModelPtr pretrained = f.controller().latestModel();
    REQUIRE(pretrained);
    FineTuneLanguages* languages = f.w().fineTuneLanguages();
    REQUIRE(languages);
    TranslatePanel* panel = f.w().translatePanel();
    // Shown in the Setup dock beside the corpus, the Translate tab's lists: no target yet.
    CHECK(languages->isVisibleTo(&f.w()));
    CHECK(languages->targetBox()->count() == panel->targetLanguageBox()->count());
    CHECK(languages->targetLanguage().isEmpty());
    CHECK(languages->effectiveSource() == QStringLiteral("eng_Latn"));

    // Train refuses, saying where to choose, and starts nothing.
    REQUIRE(f.waitCorpus());
    f.w().trainAction()->trigger();
    CHECK_FALSE(f.controller().isActive());
    INFO(f.w().lastError().toStdString());
    CHECK(f.w().lastError().contains(QStringLiteral("target language")));
    CHECK(f.w().lastError().contains(QStringLiteral("Fine-tune languages")));
    CHECK(f.controller().latestModel() == pretrained);

    // Chosen in the Setup dock: the Translate tab's list follows, and the note names the pair.
    const int german = languages->targetBox()->findData(QStringLiteral("deu_Latn"));
    REQUIRE(german > 0);
    languages->targetBox()->setCurrentIndex(german);
    CHECK(panel->targetLanguageBox()->currentData().toString() == QStringLiteral("deu_Latn"));
    CHECK(panel->decodeOptions().target_lang == "deu_Latn");
    CHECK(languages->noteLabel()->text().contains(QStringLiteral("eng_Latn → deu_Latn")));
    CHECK(languages->problem().isEmpty());

    f.train();
    const TranslationModelPtr toGerman = f.controller().latestModel();
    REQUIRE(toGerman);
    REQUIRE(toGerman != pretrained);
    // The session's model was tuned on the pair: its tokenizer's languages are it (the trainer puts
    // their codes on the pairs), its run is named by it, and it writes German's code first untold.
    REQUIRE(toGerman->tokenizer().pretrained());
    CHECK(toGerman->tokenizer().pretrained()->default_target_language() == "deu_Latn");
    CHECK(toGerman->tokenizer().pretrained()->default_source_language() == "eng_Latn");
    CHECK(f.controller().runLabel().contains(QStringLiteral("eng_Latn → deu_Latn")));
    DecodeOptions greedy = toGerman->decode_defaults();
    greedy.beam_size = 1;
    greedy.max_length = 4;
    DecodeOptions asked = greedy;
    asked.target_lang = "deu_Latn";
    const Translation untold = toGerman->translate({kHfSentence}, greedy).at(0);
    REQUIRE_FALSE(untold.empty());
    CHECK(untold.best().tokens.front() == toGerman->translate({kHfSentence}, asked).at(0).best().tokens.front());
    const TrainHistory german_history = f.controller().history();
    REQUIRE(german_history.start.has_value());

    // Another target chosen in the Translate tab: the Setup dock follows, and the next fine-tune is on
    // that pair -- its first validation point (the pretrained model's loss on the coded pairs) differs.
    const int french = panel->targetLanguageBox()->findData(QStringLiteral("fra_Latn"));
    REQUIRE(french > 0);
    panel->targetLanguageBox()->setCurrentIndex(french);
    CHECK(languages->targetLanguage() == QStringLiteral("fra_Latn"));
    f.train();
    const TranslationModelPtr toFrench = f.controller().latestModel();
    REQUIRE(toFrench);
    REQUIRE(toFrench != toGerman);
    CHECK(toFrench->tokenizer().pretrained()->default_target_language() == "fra_Latn");
    const TrainHistory french_history = f.controller().history();
    REQUIRE(french_history.start.has_value());
    CHECK(french_history.start->val_loss != Approx(german_history.start->val_loss).epsilon(1e-4));

    // A Marian model's target is a token in its sources: no fine-tune languages to show.
    REQUIRE(f.w().openFile(kHfFolders + QStringLiteral("/marian")));
    CHECK_FALSE(languages->isVisibleTo(&f.w()));
}

TEST_CASE("pretrained: Heads measures a multilingual model on the Translate tab's languages, and asks for a target first",
          "[ui][pretrained][hf][languages]") {
    if (!hfFoldersPresent()) return;
    // The NLLB fixture naming no target language (tgt_lang null): heads scores coded pairs, so it
    // needs the pair, as attnviz-cli heads --target-lang does.
    QTemporaryDir dir;
    const QString folder = nllbWithoutTarget(dir);
    Fixture f(/*epochs=*/1, /*maxBatches=*/2);
    REQUIRE(f.w().openFile(folder));
    REQUIRE(f.waitCorpus());
    HeadsPanel* heads = f.w().headsPanel();
    heads->sentencesBox()->setValue(4);
    heads->pruneBox()->setChecked(false);
    QSignalSpy done(heads, &HeadsPanel::headsMeasured);
    QSignalSpy failed(heads, &HeadsPanel::measureFailed);
    // No target chosen: refused at once, saying where to choose; nothing runs.
    heads->measureButton()->click();
    REQUIRE(failed.count() == 1);
    CHECK(failed.front().front().toString().contains(QStringLiteral("“to” list")));
    CHECK_FALSE(heads->busy());

    // Each target chosen in the Translate tab: measured on that pair, with importances of its own.
    auto measureTo = [&](const QString& code) {
        TranslatePanel* panel = f.w().translatePanel();
        const int index = panel->targetLanguageBox()->findData(code);
        REQUIRE(index > 0);
        panel->targetLanguageBox()->setCurrentIndex(index);
        const int before = done.count();
        failed.clear();
        heads->measureButton()->click();
        REQUIRE(waitUntil([&] { return done.count() > before || failed.count() > 0; }, 300000));  // a state
        if (failed.count() > 0) FAIL(failed.front().front().toString().toStdString());
        std::vector<double> importance;
        for (const HeadStats& h : heads->heads()) importance.push_back(h.importance);
        REQUIRE_FALSE(importance.empty());
        return importance;
    };
    const std::vector<double> german = measureTo(QStringLiteral("deu_Latn"));
    const std::vector<double> french = measureTo(QStringLiteral("fra_Latn"));
    REQUIRE(german.size() == french.size());
    CHECK(german != french);
}

// By hand, with an opus-mt-sized Marian folder (tools/bench_pretrained.py WORK builds one as
// WORK/marian; 6 + 6 layers of 8 heads: 144 maps a translation):
//   ATTNVIZ_MARIAN_DIR=WORK/marian attnviz_tests_ui "[modelview-speed-144]"
// How late a 5 ms GUI timer's ticks come while the model view redraws per translation and per kind.
TEST_CASE("model view: an opus-mt-sized model's 144 maps, GUI timer lateness", "[.][modelview-speed-144]") {
    const QString folder = qEnvironmentVariable("ATTNVIZ_MARIAN_DIR");
    if (folder.isEmpty()) {
        WARN("set ATTNVIZ_MARIAN_DIR to an opus-mt-sized Marian folder");
        return;
    }
    // A random model never ends its output: the same folder (links) with outputs of at most 24 tokens.
    QTemporaryDir capped;
    for (const QFileInfo& entry : QDir(folder).entryInfoList(QDir::Files)) {
        const QString to = capped.filePath(entry.fileName());
        if (entry.fileName() != QStringLiteral("generation_config.json")) {
            REQUIRE(QFile::link(entry.absoluteFilePath(), to));
            continue;
        }
        std::ifstream in(entry.absoluteFilePath().toStdString());
        nlohmann::json g = nlohmann::json::parse(in);
        g["max_length"] = 25;
        std::ofstream(to.toStdString()) << g.dump();
    }
    Fixture f;
    REQUIRE(f.w().openFile(capped.path()));
    f.w().tabs()->setCurrentIndex(MainWindow::TranslateTab);
    TranslatePanel* panel = f.w().translatePanel();
    panel->setBeamWidth(1);
    QTabWidget* tabs = panel->viewTabs();
    const QStringList sentences = {QStringLiteral("the red car is fast"), QStringLiteral("a small dog sees the car"),
                                   QStringLiteral("the blue bird is slow"), QStringLiteral("the dog sees a red bird")};
    f.translate(sentences.front());  // LibTorch's first use, not measured
    tabs->setCurrentIndex(tabs->count() - 1);
    const AttentionRecord& record = panel->translation()->best().attention;
    const int maps = int(record.maps.size());
    auto* timed = qobject_cast<TimedApplication*>(qApp);
    REQUIRE(timed);
    timed->takeLongest(nullptr);
    timed->setTiming(true);
    TickMeter ticks;
    QElapsedTimer wall;
    wall.start();
    ticks.start();
    int redraws = 0;
    for (int round = 0; round < 2; ++round)
        for (const QString& s : sentences) {
            f.translate(s);
            ++redraws;
            QTest::qWait(50);
            redraws += showEachKind(panel);
        }
    ticks.stop();
    timed->setTiming(false);
    QString longestWhat;
    const TimedApplication::EventCost longest = timed->takeLongest(&longestWhat);
    REQUIRE(ticks.lateness.size() > 100);
    std::printf("{\"bench\": \"modelview-speed-144\", \"maps\": %d, \"panels\": %d, \"redraws\": %d, \"seconds\": %.1f, "
                "\"ticks\": %zu, \"lateness_ms\": {\"median\": %.2f, \"p99\": %.2f, \"max\": %.1f}, "
                "\"longest_event\": {\"ms\": %.1f, \"cpu_ms\": %.1f, \"what\": \"%s\"}, \"cores\": %d}\n",
                maps, panel->modelView()->panelCount(), redraws, wall.elapsed() / 1000.0, ticks.lateness.size(),
                ticks.quantile(0.5), ticks.quantile(0.99), ticks.worst(), longest.wallMs, longest.cpuMs,
                qPrintable(longestWhat), QThread::idealThreadCount());
    CHECK(ticks.quantile(0.99) < 16.0);
}

TEST_CASE("pretrained: a T5 model shows each head's position bias beside its map and lists its task prefixes",
          "[ui][pretrained][hf][t5]") {
    if (!t5FolderPresent()) return;
    Fixture f;
    REQUIRE(f.w().openFile(kHfFolders + QStringLiteral("/t5")));
    const TranslationModelPtr model = f.controller().latestModel();
    REQUIRE(model);
    TranslatePanel* panel = f.w().translatePanel();
    // The task prefixes: one item per task after the placeholder; choosing one puts it before the text.
    auto* tasks = panel->findChild<QComboBox*>(QStringLiteral("taskPrefix"));
    REQUIRE(tasks != nullptr);
    CHECK(tasks->isVisibleTo(panel));
    REQUIRE(tasks->count() == 3);
    panel->lineEdit()->setText(QStringLiteral("I am a small frog."));
    const int de = tasks->findText(QStringLiteral("translation_en_to_de"));
    REQUIRE(de > 0);
    Q_EMIT tasks->activated(de);
    CHECK(panel->lineEdit()->text() == QStringLiteral("translate English to German: I am a small frog."));
    Q_EMIT tasks->activated(tasks->findText(QStringLiteral("summarization")));
    CHECK(panel->lineEdit()->text() == QStringLiteral("summarize: I am a small frog."));  // replaced, not stacked

    // Greedy: transformers' own output; then the bias of the chosen self-attention head beside its map.
    panel->setBeamWidth(1);
    const std::string text = "translate English to German: I am a small frog.";
    f.translate(QString::fromStdString(text));
    auto t = panel->translation();
    REQUIRE(t);
    REQUIRE_FALSE(t->empty());
    CHECK(t->best().text == hfSample("t5", text)["greedy_text"].get<std::string>());
    auto* side = panel->findChild<PositionBiasView*>(QStringLiteral("positionBiasView"));
    auto* under = panel->findChild<PositionBiasView*>(QStringLiteral("modelPositionBiasView"));
    REQUIRE(side != nullptr);
    REQUIRE(under != nullptr);
    const auto curves = position_bias_curves(*model->network(), model->config().pretrained->model.t5->relative_max_distance);
    for (const auto kind : {AttentionKind::encoder_self, AttentionKind::decoder_self}) {
        panel->mapSelector()->setChoice(MapChoice{kind, 1, 2});
        QApplication::processEvents();
        CHECK(side->isVisibleTo(panel));
        CHECK(side->kind() == kind);
        CHECK(side->head() == 2);
        const auto want = std::find_if(curves.begin(), curves.end(),
                                       [&](const PositionBiasCurve& c) { return c.kind == kind && c.head == 2; });
        REQUIRE(want != curves.end());
        CHECK(side->chosenCurve() == want->bias);
        CHECK(under->chosenCurve() == want->bias);
    }
    panel->mapSelector()->setChoice(MapChoice{AttentionKind::cross, 1, 0});
    QApplication::processEvents();
    CHECK_FALSE(side->isVisibleTo(panel));  // cross-attention has no position bias

    // Another family: neither the bias nor the prefixes.
    REQUIRE(f.w().openFile(kHfFolders + QStringLiteral("/marian")));
    QApplication::processEvents();
    CHECK_FALSE(tasks->isVisibleTo(panel));
    panel->mapSelector()->setChoice(MapChoice{AttentionKind::encoder_self, 0, 0});
    QApplication::processEvents();
    CHECK_FALSE(side->isVisibleTo(panel));
}

TEST_CASE("pretrained: each self-attention thumbnail of a T5 model view carries its head's position-bias strip",
          "[ui][pretrained][hf][t5]") {
    if (!t5FolderPresent()) return;
    Fixture f;
    REQUIRE(f.w().openFile(kHfFolders + QStringLiteral("/t5")));
    const TranslationModelPtr model = f.controller().latestModel();
    REQUIRE(model);
    TranslatePanel* panel = f.w().translatePanel();
    panel->setBeamWidth(1);
    f.translate(QStringLiteral("translate English to German: I am a small frog."));
    panel->viewTabs()->setCurrentIndex(panel->viewTabs()->count() - 1);  // "Model view", as a user sees it
    ModelView* view = panel->modelView();
    const int64_t span = std::min<int64_t>(model->config().pretrained->model.t5->relative_max_distance, 512);
    const auto curves = position_bias_curves(*model->network(), span);
    for (const auto kind : {AttentionKind::encoder_self, AttentionKind::decoder_self}) {
        INFO(to_string(kind));
        panel->mapSelector()->setChoice(MapChoice{kind, 0, 0});
        QApplication::processEvents();
        REQUIRE(view->kind() == kind);
        REQUIRE(view->panelCount() > 0);
        // The whole picture as the export draws it (the scroll area shows part of it in the test's small
        // window); the widget draws it centred, so a rectangle of the widget moves left by that margin.
        QImage shot(view->contentSize(), QImage::Format_RGB32);
        shot.fill(Qt::white);
        {
            QPainter painter(&shot);
            view->paintContent(painter);
        }
        const QPoint centred(std::max(0, (view->width() - view->contentSize().width()) / 2), 0);
        int strips = 0;
        for (int i = 0; i < view->panelCount(); ++i) {
            const MapChoice c = view->panelChoice(i);
            const std::vector<float> bias = view->panelBias(i);
            if (c.head == MapChoice::kRollout) {  // the rollout mixes layers: no one bias
                CHECK(bias.empty());
                CHECK(view->biasStripRect(i).isNull());
                continue;
            }
            // The head's curve, or the mean of the kind's heads under a layer's mean; the decoder's causal half.
            std::vector<float> want;
            int n = 0;
            for (const auto& curve : curves)
                if (curve.kind == kind && (c.head < 0 || curve.head == c.head)) {
                    if (want.empty()) want.assign(curve.bias.size(), 0.0f);
                    for (size_t d = 0; d < want.size(); ++d) want[d] += curve.bias[d];
                    ++n;
                }
            REQUIRE(n > 0);
            for (float& v : want) v /= float(n);
            if (kind == AttentionKind::decoder_self) want.resize(size_t(span) + 1);
            REQUIRE(bias.size() == want.size());
            for (size_t d = 0; d < want.size(); ++d) CHECK(bias[d] == Approx(want[d]).margin(1e-5));
            const QRect strip = view->biasStripRect(i).translated(-centred);
            REQUIRE_FALSE(strip.isNull());
            CHECK(view->panelRect(i).contains(view->biasStripRect(i)));
            ++strips;
            // Painted: red where the head adds most, blue where it takes most away (both signs in these curves).
            const auto column = [&](size_t d) {  // the middle pixel column of distance index d, inside the border
                const int w = strip.width() - 2, m = int(bias.size());
                REQUIRE(m <= w);  // a column per distance or more (the fixture's spans are short)
                return strip.left() + 1 + (2 * int(d) + 1) * w / (2 * m);
            };
            const size_t top = size_t(std::max_element(bias.begin(), bias.end()) - bias.begin());
            const size_t low = size_t(std::min_element(bias.begin(), bias.end()) - bias.begin());
            const QColor hot = shot.pixelColor(column(top), strip.center().y());
            CHECK(hot.red() > hot.blue());
            if (bias[low] < 0) {
                const QColor cold = shot.pixelColor(column(low), strip.center().y());
                CHECK(cold.blue() > cold.red());
            }
            CHECK(view->panelToolTip(i).contains(QStringLiteral("position bias")));
        }
        CHECK(strips == view->panelCount() - 1);
        const QByteArray dir = qgetenv("ATTNVIZ_SCREENSHOT_DIR");
        if (!dir.isEmpty()) {
            QDir().mkpath(QString::fromLocal8Bit(dir));
            shot.save(QString::fromLocal8Bit(dir) + QStringLiteral("/modelview-t5-%1.png").arg(qs(to_string(kind))));
        }
    }
    // Cross-attention has no position bias: no strips, and the thumbnails take their old height.
    panel->mapSelector()->setChoice(MapChoice{AttentionKind::cross, 0, 0});
    QApplication::processEvents();
    REQUIRE(view->kind() == AttentionKind::cross);
    for (int i = 0; i < view->panelCount(); ++i) {
        CHECK(view->panelBias(i).empty());
        CHECK(view->biasStripRect(i).isNull());
    }
}

TEST_CASE("pretrained: Save refuses a checkpoint inside the model folder it was opened from, and keeps the folder",
          "[ui][pretrained][hf]") {
    // Issue 48: the CLI refused an output among a model folder's files; the app wrote there.
    if (!hfFoldersPresent()) return;
    QTemporaryDir dir;
    const QString folder = copyHfFolder(QStringLiteral("marian"), dir);
    QFile config(folder + QStringLiteral("/config.json"));
    REQUIRE(config.open(QIODevice::ReadOnly));
    const QByteArray before = config.readAll();
    config.close();
    Fixture f;
    REQUIRE(f.w().openFile(folder));
    for (const QString& inside : {folder + QStringLiteral("/config.json"), folder + QStringLiteral("/mine.attnviz"),
                                  folder + QStringLiteral("/./model.safetensors")}) {
        INFO(inside.toStdString());
        CHECK_FALSE(f.w().saveCheckpointTo(inside));
        CHECK(f.w().lastError().contains(QStringLiteral("inside the model folder")));
    }
    REQUIRE(config.open(QIODevice::ReadOnly));
    CHECK(config.readAll() == before);
    CHECK_FALSE(QFileInfo::exists(folder + QStringLiteral("/mine.attnviz")));
    // Beside the folder is fine, and the window goes on.
    const QString beside = dir.filePath(QStringLiteral("marian.attnviz"));
    QSignalSpy saved(&f.controller(), &TrainingController::saveFinished);
    REQUIRE(f.w().saveCheckpointTo(beside));
    REQUIRE(waitUntil([&] { return saved.count() > 0; }, 20000));
    CHECK(saved.at(0).at(0).toBool());
    CHECK(QFileInfo::exists(beside));
}
