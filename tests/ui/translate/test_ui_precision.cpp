// Offscreen tests of the Translate tab's Precision setting (issue 49 item 1; the CLI's
// --precision): the choice is remembered across restarts; int8 translates a Transformer with a
// converted copy of the model (made on the worker thread) and says so, while the model that is
// trained and saved stays fp32; a new model or another precision drops the copy; the RNN falls
// back to fp32 and the status line says why, once. Every wait is for a state, never a duration.
// LibTorch's c10 logging defines a CHECK macro of its own: include everything
// that pulls in LibTorch first, then let Catch2 define CHECK last.
#include <QComboBox>
#include <QFileInfo>
#include <QLabel>
#include <QSignalSpy>
#include <QStatusBar>
#include <QTemporaryDir>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/model/inference_precision.hpp"
#include "ui/heatmap/HeatmapWidget.hpp"
#include "ui/translate/PrecisionCopy.hpp"
#include "ui/translate/TranslatePanel.hpp"

#include "catch_torch.hpp"  // not <catch2/catch.hpp>: a unity batch (see there)

#include "ui_fixture.hpp"

using namespace ui_testing;

namespace {

/// A small Transformer (2 blocks of 4 heads, 32 wide) for the precision tests.
ModelConfig precisionTestTransformer() {
    ModelConfig m;
    m.arch = ModelArch::transformer;
    m.hidden_size = 32;
    m.num_layers = 2;
    m.num_heads = 4;
    m.ffn_size = 32;
    return m;
}

/// The same weights as `model` in a model object of their own (what a new snapshot or a model
/// opened again is to the panel).
TranslationModelPtr sameWeightsAgain(const TranslationModelPtr& model) {
    Network copy = model->clone_network(torch::kCPU);
    return std::make_shared<const TranslationModel>(copy, model->src_vocab_ptr(), model->tgt_vocab_ptr(),
                                                    model->tokenizer_ptr(), model->trained_with(), model->history(),
                                                    model->corpus_name());
}

/// Waits for the translation of `panel`'s next answer after `trigger` runs.
void translatedAfter(TranslatePanel* panel, const std::function<void()>& trigger) {
    QSignalSpy ready(panel, &TranslatePanel::translationReady);
    trigger();
    REQUIRE(waitUntil([&] { return ready.count() > 0; }, 120000));  // generous: a state, not a speed
}

}  // namespace

TEST_CASE("precision: the Translate tab's setting is fp32 by default and remembered across restarts",
          "[ui][precision]") {
    app();
    QSettings().clear();
    {
        TranslatePanel panel;
        CHECK(panel.precision() == InferencePrecision::fp32);
        REQUIRE(panel.precisionBox()->count() == 3);
        CHECK(panel.precisionBox()->itemData(0).toString() == QStringLiteral("fp32"));
        CHECK(panel.precisionBox()->itemData(1).toString() == QStringLiteral("int8"));
        CHECK(panel.precisionBox()->itemData(2).toString() == QStringLiteral("bf16"));
        // What each does, and that the model trained and saved stays fp32.
        const QString tip = panel.precisionBox()->toolTip();
        CHECK(tip.contains(QStringLiteral("3×")));
        CHECK(tip.contains(QStringLiteral("native bf16")));
        CHECK(tip.contains(QStringLiteral("GPU")));
        CHECK(tip.contains(QStringLiteral("stays fp32")));
        panel.setPrecision(InferencePrecision::int8);
        CHECK(panel.precision() == InferencePrecision::int8);
    }
    CHECK(QSettings().value(QStringLiteral("translate/precision")).toString() == QStringLiteral("int8"));
    {
        TranslatePanel again;  // the app started again
        CHECK(again.precision() == InferencePrecision::int8);
        again.setPrecision(InferencePrecision::bf16);
    }
    TranslatePanel third;
    CHECK(third.precision() == InferencePrecision::bf16);
    // A value the app does not know (an edited settings file) reads as fp32.
    QSettings().setValue(QStringLiteral("translate/precision"), QStringLiteral("fp4"));
    TranslatePanel edited;
    CHECK(edited.precision() == InferencePrecision::fp32);
    QSettings().clear();
}

TEST_CASE("precision: int8 translates a Transformer with a converted copy, the trained model stays fp32 and "
          "trainable, a new model or precision drops the copy",
          "[ui][precision][transformer]") {
    Fixture f(2);
    f.w().settingsPanel()->setModelConfig(precisionTestTransformer());
    f.train();
    f.w().tabs()->setCurrentIndex(MainWindow::TranslateTab);
    TranslatePanel* panel = f.w().translatePanel();
    const TranslationModelPtr model = panel->model();
    REQUIRE(model);
    REQUIRE(model->config().is_transformer());
    REQUIRE(inference_precision(*model->network()) == InferencePrecision::fp32);
    const QString sentence = QStringLiteral("the red car sees a black dog");

    // fp32: the model itself translates.
    f.translate(sentence);
    CHECK(panel->translationPrecision() == InferencePrecision::fp32);
    CHECK(panel->translationModel() == model);
    CHECK_FALSE(panel->heatmap()->heatmapData().title.contains(QStringLiteral("int8")));
    const std::string fp32Text = panel->translation()->best().text;

    // int8: the shown sentence is translated again, by a converted copy.
    translatedAfter(panel, [&] { panel->setPrecision(InferencePrecision::int8); });
    REQUIRE(panel->translation());
    REQUIRE_FALSE(panel->translation()->empty());
    CHECK_FALSE(panel->translation()->best().tokens.empty());
    CHECK(panel->translation()->input == sentence.toStdString());
    CHECK(panel->translationPrecision() == InferencePrecision::int8);
    const TranslationModelPtr converted = panel->translationModel();
    REQUIRE(converted);
    CHECK(converted != model);
    CHECK(inference_precision(*converted->network()) == InferencePrecision::int8);
    CHECK(panel->heatmap()->heatmapData().title.contains(QStringLiteral("int8")));
    CHECK_FALSE(panel->precisionNote()->isVisible());  // no fallback
    REQUIRE(panel->precisionCopy());
    CHECK(panel->precisionCopy()->converted());
    CHECK(panel->precisionCopy()->model() == model);
    INFO("fp32: " << fp32Text << ", int8: " << panel->translation()->best().text);

    // The model the window trains and saves is untouched: fp32, trainable, saved as it was.
    CHECK(inference_precision(*model->network()) == InferencePrecision::fp32);
    CHECK_NOTHROW(check_trainable_precision(*model->network(), "training"));
    CHECK_NOTHROW(model->clone_network(torch::kCPU));
    CHECK(inference_precision(*f.controller().latestModel()->network()) == InferencePrecision::fp32);
    QTemporaryDir dir;
    const QString saved = dir.filePath(QStringLiteral("after-int8.attnviz"));
    CHECK(f.w().saveCheckpointTo(saved));
    CHECK(QFileInfo(saved).size() > 0);
    // The heatmap's JSON says which weights the maps came from, as the CLI's attention file does.
    const QString json = dir.filePath(QStringLiteral("int8.json"));
    REQUIRE(f.w().exportHeatmapTo(json, 1.0));
    {
        std::ifstream in(json.toStdString());
        const nlohmann::json j = nlohmann::json::parse(in);
        CHECK(j.at("decode").at("precision") == "int8");
    }
    // fp32 again: the model itself, as before the int8 translation.
    translatedAfter(panel, [&] { panel->setPrecision(InferencePrecision::fp32); });
    CHECK(panel->translationModel() == model);
    CHECK(panel->translation()->best().text == fp32Text);

    // The copy is kept for the next translations of the same model at the same precision...
    translatedAfter(panel, [&] { panel->setPrecision(InferencePrecision::int8); });
    const std::weak_ptr<const PrecisionCopy> copy = panel->precisionCopy();
    const std::weak_ptr<const TranslationModel> firstCopy = panel->translationModel();
    REQUIRE_FALSE(firstCopy.expired());
    f.translate(QStringLiteral("the red car is fast"));
    CHECK(panel->translationModel() == firstCopy.lock());
    CHECK(panel->precisionCopy() == copy.lock());

    // ... and dropped when the model changes: a new copy of the new model translates next.
    const TranslationModelPtr next = sameWeightsAgain(model);
    panel->setModel(next);
    CHECK(panel->precisionCopy() == nullptr);
    CHECK(copy.expired());  // the cache itself is freed at once
    f.translate(sentence);
    CHECK(panel->translationPrecision() == InferencePrecision::int8);
    CHECK(panel->precisionCopy()->model() == next);
    CHECK(panel->translationModel() != firstCopy.lock());
    CHECK(inference_precision(*next->network()) == InferencePrecision::fp32);
    // The old copy's weights go once the views that showed its translation let go of it.
    CHECK(waitUntil([&] { return firstCopy.expired(); }, 60000));

    // Another precision: the int8 copy goes, bf16 translates.
    const std::weak_ptr<const TranslationModel> int8Copy = panel->translationModel();
    translatedAfter(panel, [&] { panel->setPrecision(InferencePrecision::bf16); });
    CHECK(panel->translationPrecision() == InferencePrecision::bf16);
    CHECK(inference_precision(*panel->translationModel()->network()) == InferencePrecision::bf16);
    CHECK(panel->heatmap()->heatmapData().title.contains(QStringLiteral("bf16")));
    CHECK(waitUntil([&] { return int8Copy.expired(); }, 60000));
    CHECK(inference_precision(*next->network()) == InferencePrecision::fp32);
}

TEST_CASE("precision: the RNN falls back to fp32 with int8, and the status line says why once", "[ui][precision]") {
    Fixture f(1);
    f.train();
    f.w().tabs()->setCurrentIndex(MainWindow::TranslateTab);
    TranslatePanel* panel = f.w().translatePanel();
    REQUIRE(panel->model());
    REQUIRE(panel->model()->config().arch == ModelArch::rnn);
    QSignalSpy said(panel, &TranslatePanel::statusMessage);
    panel->setPrecision(InferencePrecision::int8);
    // Known before any translation: the note beside the setting.
    CHECK(panel->precisionNote()->isVisible());
    CHECK(panel->precisionNote()->toolTip().contains(QStringLiteral("RNN")));
    f.translate(QStringLiteral("the red car is fast"));
    REQUIRE(panel->translation());
    CHECK_FALSE(panel->translation()->empty());
    CHECK(panel->translationPrecision() == InferencePrecision::fp32);
    CHECK(panel->translationModel() == panel->model());
    CHECK_FALSE(panel->heatmap()->heatmapData().title.contains(QStringLiteral("int8")));
    REQUIRE(said.count() == 1);
    CHECK(said.at(0).at(0).toString().contains(QStringLiteral("RNN")));
    CHECK(f.w().statusBar()->currentMessage().contains(QStringLiteral("fp32")));
    // Once: not again for the next sentence, nor for a new snapshot of the same kind of model.
    f.translate(QStringLiteral("the black dog is slow"));
    panel->setModel(sameWeightsAgain(panel->model()));
    f.translate(QStringLiteral("the red car is fast"));
    CHECK(said.count() == 1);
    CHECK(panel->translationPrecision() == InferencePrecision::fp32);
}
