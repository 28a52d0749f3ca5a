// Offscreen tests of subwords in the GUI: the corpus panel's level selector offers
// them, the settings form has their parameters, and the translate view shows a
// subword model's pieces or merges them into words (said above the heatmap and in exports),
// the attribution beside it too, and corpus agreement opens sentences as typed.
// LibTorch's c10 logging defines a CHECK macro of its own: include everything
// that pulls in LibTorch first, then let Catch2 define CHECK last.
#include <QCheckBox>
#include <QComboBox>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTableWidget>
#include <QTemporaryDir>
#include <nlohmann/json.hpp>

#include "core/analysis/subword_merge.hpp"
#include "core/data/tasks.hpp"
#include "core/train/train.hpp"
#include "ui/analysis/AgreementPanel.hpp"
#include "ui/analysis/AttributionView.hpp"
#include "ui/training/CorpusPanel.hpp"
#include "ui/common/Format.hpp"
#include "ui/heatmap/HeatmapWidget.hpp"
#include "ui/training/SettingsPanel.hpp"
#include "ui/translate/TranslatePanel.hpp"

#include "catch_torch.hpp"  // not <catch2/catch.hpp>: a unity batch (see there)

#include "ui_fixture.hpp"

using namespace ui_testing;

namespace {

/// A small subword model on toy-french (BPE, 90 pieces: words really split).
TranslationModelPtr subwordModel() {
    TaskOptions o;
    o.num_pairs = 300;
    Corpus c = task_corpus(TaskKind::toy_french, o);
    c.level = TokenLevel::subword;
    TrainConfig t;
    t.epochs = 2;
    t.batch_size = 32;
    t.device = "cpu";
    t.eval_sample = 0;
    t.subword_vocab = 90;
    t.subword_model = SubwordModel::bpe;
    ModelConfig m;
    m.embed_size = 16;
    m.hidden_size = 32;
    Trainer trainer(prepare_data(c, t), m, t);
    REQUIRE(trainer.run() == StopReason::finished);
    return trainer.snapshot();
}

}  // namespace

TEST_CASE("the corpus level selector and the settings form offer subwords", "[ui][subword]") {
    Fixture f;
    bool offered = false;
    for (QComboBox* box : f.w().corpusPanel()->findChildren<QComboBox*>())
        offered = offered || box->findData(int(TokenLevel::subword)) >= 0;
    CHECK(offered);
    // The registry's subword parameters have editors in the settings form, which set the configuration.
    SettingsPanel* settings = f.w().settingsPanel();
    auto* vocab = settings->findChild<QSpinBox*>(QStringLiteral("subword_vocab"));
    auto* algorithm = settings->findChild<QComboBox*>(QStringLiteral("subword_model"));
    REQUIRE(vocab);
    REQUIRE(algorithm);
    CHECK(vocab->minimum() == 50);
    vocab->setValue(777);
    algorithm->setCurrentIndex(algorithm->findText(QStringLiteral("BPE")));
    CHECK(settings->trainConfig().subword_vocab == 777);
    CHECK(settings->trainConfig().subword_model == SubwordModel::bpe);
}

TEST_CASE("translate view: a subword model's pieces, or merged words, on the heatmap and in exports",
          "[ui][subword][heatmap]") {
    Fixture f;
    TranslatePanel* panel = f.w().translatePanel();
    f.w().tabs()->setCurrentIndex(MainWindow::TranslateTab);
    CHECK(panel->mergeSubwordsBox()->isHidden());  // a word-level window: nothing to merge
    panel->setModel(subwordModel());
    CHECK_FALSE(panel->mergeSubwordsBox()->isHidden());

    f.translate(QStringLiteral("the red car"));
    auto t = panel->translation();
    REQUIRE(t);
    REQUIRE_FALSE(t->empty());
    const size_t pieces = t->src_tokens.size();
    CHECK(pieces > 4);  // "the red car" + <eos> comes in more pieces than words
    CHECK(panel->heatmap()->columns() == int(pieces));
    CHECK(panel->heatmap()->heatmapData().title.contains(QStringLiteral("subword pieces")));
    CHECK(panel->shownTranslation() == t);

    panel->setMergeSubwords(true);
    CHECK(panel->heatmap()->columns() == 4);  // the, red, car, <eos>
    CHECK(panel->heatmap()->heatmapData().source == QStringList({"the", "red", "car", "<eos>"}));
    CHECK(panel->heatmap()->heatmapData().title.contains(QStringLiteral("columns summed, rows averaged")));
    for (const auto& row : panel->heatmap()->heatmapData().weights) {
        double sum = 0;
        for (float w : row) sum += w;
        CHECK(sum == Approx(1.0).epsilon(1e-5));
    }
    REQUIRE(panel->shownTranslation());
    CHECK(panel->shownTranslation()->merged == merged_words_note);

    // The export takes what is shown.
    QTemporaryDir dir;
    const QString json = dir.filePath(QStringLiteral("merged.json"));
    REQUIRE(f.w().exportHeatmapTo(json, 1.0));
    const auto j = nlohmann::json::parse(readFile(json));
    CHECK(j.at("merged") == merged_words_note);
    CHECK(j.at("source").size() == 4);

    // The attribution beside it shows the same words, computed once per piece: switching back
    // and forth recomputes nothing.
    AttributionView* attribution = panel->attributionView();
    REQUIRE(waitUntil([&] { return attribution->attribution() && !attribution->busy(); }, 30000));
    const auto perPiece = attribution->attribution();
    CHECK(perPiece->source.size() == pieces);
    REQUIRE(attribution->shownAttribution());
    CHECK(attribution->heatmap()->heatmapData().source == QStringList({"the", "red", "car", "<eos>"}));
    CHECK(attribution->heatmap()->rows() == panel->heatmap()->rows());
    CHECK(attribution->heatmap()->heatmapData().title.contains(QStringLiteral("a word's pieces summed")));
    const SentenceAttribution words = merge_subwords(*perPiece, t->unknown);
    const auto* shownScores = attribution->shownAttribution()->steps.at(0).find(attribution->method());
    REQUIRE(shownScores);
    CHECK(shownScores->source == words.steps.at(0).find(attribution->method())->source);
    const QString attributionJson = dir.filePath(QStringLiteral("attribution.json"));
    QString error;
    REQUIRE(attribution->exportTo(attributionJson, 1.0, &error));
    CHECK(nlohmann::json::parse(readFile(attributionJson)).at("source").size() == 4);

    panel->setMergeSubwords(false);
    CHECK(panel->heatmap()->columns() == int(pieces));
    CHECK(attribution->attribution() == perPiece);  // not recomputed
    CHECK(attribution->heatmap()->columns() == int(pieces));
    CHECK(attribution->heatmap()->rows() == panel->heatmap()->rows());
}

TEST_CASE("corpus agreement on a subword model: rows show and open the sentence as typed, not its pieces",
          "[ui][subword][agreement]") {
    app();
    const TranslationModelPtr model = subwordModel();
    TaskOptions o;
    o.num_pairs = 20;
    auto corpus = std::make_shared<Corpus>(task_corpus(TaskKind::toy_french, o));
    corpus->level = TokenLevel::subword;
    AgreementPanel panel;
    panel.setModel(model);
    panel.setCorpus(corpus);
    panel.setMethods({AttributionMethod::saliency});
    panel.maxSentences()->setValue(3);
    QSignalSpy finished(&panel, &AgreementPanel::finished);
    panel.start();
    REQUIRE(waitUntil([&] { return finished.count() > 0; }, 60000));
    REQUIRE(panel.table()->rowCount() == 3);
    QSignalSpy activated(&panel, &AgreementPanel::sentenceActivated);
    for (int r = 0; r < 3; ++r) {
        const size_t index = size_t(panel.table()->item(r, 0)->data(Qt::DisplayRole).toDouble()) - 1;
        const std::vector<std::string> words = corpus->pairs.at(index).src;
        const std::vector<std::string> pieces = model->tokenizer().split_words(words);
        REQUIRE(pieces.size() > words.size());  // the model reads these words in pieces
        const QString text = panel.table()->item(r, 1)->text();
        CHECK(text == qs(detokenize(words, TokenLevel::word)));
        CHECK_FALSE(text.contains(QString::fromUtf8("\xE2\x96\x81")));
        CHECK(panel.table()->item(r, 1)->toolTip().contains(toQStringList(pieces).join(QLatin1Char(' '))));
        Q_EMIT panel.table()->cellDoubleClicked(r, 1);
        REQUIRE(activated.count() == r + 1);
        const QString sent = activated.back().at(0).toString();
        CHECK(sent == text);
        // What the Translate tab gets cuts into the same pieces the row was computed on.
        CHECK(model->tokenizer().encode(sent.toStdString()) == pieces);
    }
}
