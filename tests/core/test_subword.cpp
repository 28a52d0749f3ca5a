// Subwords: the SentencePiece tokenizer, merging pieces back into words, and
// subword models that train, save, reload and translate the same.
#include "catch_torch.hpp"

#include <cmath>
#include <filesystem>
#include <numeric>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/io/base64.hpp"
#include "core/persist/model_file.hpp"
#include "core/persist/checkpoint.hpp"
#include "core/io/error.hpp"
#include "core/analysis/attribution.hpp"
#include "core/analysis/export.hpp"
#include "core/analysis/subword_merge.hpp"
#include "core/data/tasks.hpp"
#include "core/text/tokenizer.hpp"
#include "core/train/train.hpp"
#include "test_support.hpp"
#include "test_text_fixtures.hpp"

using namespace attnviz;
using Tokens = std::vector<std::string>;

namespace {

const std::string B = "\xE2\x96\x81";  // "▁"

std::vector<std::string> normalized_sentences(const Corpus& c) {
    std::vector<std::string> out;
    for (const auto& p : c.pairs) {
        out.push_back(detokenize(p.src, TokenLevel::word));
        out.push_back(detokenize(p.tgt, TokenLevel::word));
    }
    return out;
}

TsvOptions subword_tsv() {
    TsvOptions o;
    o.level = TokenLevel::subword;
    return o;
}

}  // namespace

TEST_CASE("base64 round-trips every byte and rejects bad text", "[subword]") {
    std::string all;
    for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
    for (size_t n : {0, 1, 2, 3, 4, 5, 255, 256}) CHECK(base64_decode(base64_encode(all.substr(0, n))) == all.substr(0, n));
    CHECK(base64_encode("Man") == "TWFu");
    CHECK(base64_encode("Ma") == "TWE=");
    CHECK(base64_encode("M") == "TQ==");
    CHECK_THROWS_AS(base64_decode("TWF"), FileError);
    CHECK_THROWS_AS(base64_decode("TW!u"), FileError);
    CHECK_THROWS_AS(base64_decode("T=Fu"), FileError);
}

TEST_CASE("a SentencePiece model trains in memory and cuts normalised text into pieces", "[subword]") {
    const Corpus corpus = read_tsv(testing::test_data_path("eng-rus.tsv"), subword_tsv());
    // Corpora of level subword are read as normalised words; the model splits them later.
    CHECK(corpus.pairs.at(4).tgt == Tokens{"привет", "!"});
    for (const SubwordModel algorithm : {SubwordModel::unigram, SubwordModel::bpe}) {
        INFO(to_string(algorithm));
        SubwordOptions o;
        o.vocab_size = 150;
        o.algorithm = algorithm;
        const auto tok = Tokenizer::train_subword(normalized_sentences(corpus), o);
        CHECK(tok->level() == TokenLevel::subword);
        CHECK(tok->piece_count() > 100);
        CHECK(tok->piece_count() <= 150);
        const Tokens pieces = tok->encode("Привет, мир!");
        REQUIRE(!pieces.empty());
        CHECK(pieces.front().compare(0, B.size(), B) == 0);  // the first piece begins a word
        CHECK(tok->decode(pieces) == "привет , мир !");      // normalised text comes back
        CHECK(tok->split_words({"привет", "!"}) == tok->encode("привет !", false));
        // Deterministic: the same text gives the same model.
        CHECK(Tokenizer::train_subword(normalized_sentences(corpus), o)->model_proto() == tok->model_proto());
    }
}

TEST_CASE("subword training refuses a vocabulary smaller than the alphabet", "[subword]") {
    const Corpus corpus = read_tsv(testing::test_data_path("eng-ell.tsv"), subword_tsv());
    SubwordOptions o;
    o.vocab_size = 20;
    CHECK_THROWS_AS(Tokenizer::train_subword(normalized_sentences(corpus), o), ConfigError);
    CHECK_THROWS_WITH(Tokenizer::train_subword(normalized_sentences(corpus), o), Catch::Contains("--subword-vocab"));
    CHECK_THROWS_AS(Tokenizer::train_subword({}, SubwordOptions{}), ConfigError);
}

TEST_CASE("tokenizer JSON round trip keeps the SentencePiece model", "[subword]") {
    const Corpus corpus = read_tsv(testing::test_data_path("eng-ell.tsv"), subword_tsv());
    SubwordOptions o;
    o.vocab_size = 160;
    o.algorithm = SubwordModel::bpe;
    const auto tok = Tokenizer::train_subword(normalized_sentences(corpus), o);
    const nlohmann::json j = tok->to_json();
    CHECK(j.at("level") == "subword");
    CHECK(j.at("type") == "sentencepiece");
    CHECK(j.at("algorithm") == "bpe");
    const auto back = Tokenizer::from_json(nlohmann::json::parse(j.dump()));
    CHECK(back->model_proto() == tok->model_proto());
    CHECK(back->encode("Ο ΔΡΟΜΟΣ.") == tok->encode("Ο ΔΡΟΜΟΣ."));
    CHECK(Tokenizer::from_json({{"level", "word"}})->level() == TokenLevel::word);
    CHECK(Tokenizer::from_json({{"level", "char"}})->level() == TokenLevel::character);
    CHECK_THROWS_AS(Tokenizer::from_json({{"level", "subword"}, {"type", "sentencepiece"}, {"model", "AAAA"}}), FileError);
    CHECK_THROWS_AS(Tokenizer::from_json({{"level", "bytes"}}), FileError);
    nlohmann::json wrong = j;
    wrong["algorithm"] = "wordpiece";
    CHECK_THROWS_WITH(Tokenizer::from_json(wrong), Catch::Contains("unigram, bpe"));
    CHECK_THROWS_AS(Tokenizer::for_level(TokenLevel::subword), ConfigError);
}

TEST_CASE("word and character tokenizers behave as tokenize and prepare_source", "[subword]") {
    const auto word = Tokenizer::for_level(TokenLevel::word);
    const auto chars = Tokenizer::for_level(TokenLevel::character);
    for (const std::string s : {"Hello, World!", "ПРИВЕТ, мир.", "  Ça  va ? "}) {
        CHECK(word->encode(s) == prepare_source(s, TokenLevel::word));
        CHECK(chars->encode(s) == prepare_source(s, TokenLevel::character));
        CHECK(word->encode(s, false) == prepare_source(s, TokenLevel::word, false));
    }
    CHECK(word->split_words({"a", "b"}) == Tokens{"a", "b"});
    CHECK(word->decode({"il", "est", "."}) == "il est .");
    CHECK(detokenize({B + "при", "вет", B + ",", B + "мир"}, TokenLevel::subword) == "привет , мир");
}

TEST_CASE("subword pieces group into words", "[subword][merge]") {
    const WordGroups g = group_subwords({B + "при", "вет", B, ",", B + "мир", "<eos>"});
    CHECK(g.words == Tokens{"привет", ",", "мир", "<eos>"});
    CHECK(g.members == std::vector<std::vector<size_t>>{{0, 1}, {2, 3}, {4}, {5}});
    // An <unk> takes the place of the piece it stood for.
    const WordGroups u = group_subwords({B + "a", "<unk>", "<unk>", "b", "<eos>"}, {"xy", B + "zz"});
    CHECK(u.words == Tokens{"a<unk>", "<unk>b", "<eos>"});
    // Without that knowledge, specials stand alone; nothing continues them.
    CHECK(group_subwords({B + "a", "<unk>", "b"}).words == Tokens{"a", "<unk>", "b"});
}

TEST_CASE("merged attention: rows still sum to 1, columns keep their mass", "[subword][merge]") {
    torch::manual_seed(5);
    const auto weights = torch::softmax(torch::randn({5, 6}), 1);
    std::vector<std::vector<float>> a(5, std::vector<float>(6));
    for (int r = 0; r < 5; ++r)
        for (int c = 0; c < 6; ++c) a[r][c] = weights[r][c].item<float>();
    const WordGroups src = group_subwords({B + "при", "вет", B + "мир", "ок", "!", "<eos>"});
    const WordGroups tgt = group_subwords({B + "hel", "lo", B + "world", B + "!", "<eos>"});
    REQUIRE(src.words.size() == 3);
    REQUIRE(tgt.words.size() == 4);
    const auto m = merge_attention(a, tgt, src);
    REQUIRE(m.size() == 4);
    for (const auto& row : m) {
        REQUIRE(row.size() == 3);
        CHECK(std::accumulate(row.begin(), row.end(), 0.0) == Approx(1.0).epsilon(1e-6));
    }
    // Row 0 is the mean of piece rows 0 and 1; column 1 the sum of piece columns 2, 3 and 4.
    CHECK(m[0][1] == Approx((a[0][2] + a[0][3] + a[0][4] + a[1][2] + a[1][3] + a[1][4]) / 2).epsilon(1e-6));
    CHECK(m[2][0] == Approx(a[3][0] + a[3][1]).epsilon(1e-6));
    // Rows not merged: each merged column's total is its pieces' total.
    const WordGroups one_per_row = group_subwords({B + "a", B + "b", B + "c", B + "d", "<eos>"});
    const auto cols = merge_attention(a, one_per_row, src);
    for (size_t c = 0; c < src.members.size(); ++c) {
        double merged = 0, pieces = 0;
        for (size_t r = 0; r < 5; ++r) {
            merged += cols[r][c];
            for (size_t s : src.members[c]) pieces += a[r][s];
        }
        CHECK(merged == Approx(pieces).epsilon(1e-6));
    }
    CHECK_THROWS_AS(merge_attention(a, src, src), Error);  // 6 groups' pieces for 5 rows
}

// Decoder self-attention's key j is the decoder's input j: <bos>, then output piece j-1. Merged,
// its columns are <bos> and the output words but the last, as the views label them.
TEST_CASE("merged decoder self-attention: keys are the decoder's inputs, one place after the outputs",
          "[subword][merge]") {
    Translation t;
    t.src_tokens = {B + "le", B + "chat", "<eos>"};
    Hypothesis h;
    h.tokens = {B + "le", B + "ch", "at", "<eos>"};
    AttentionMap cross{AttentionMapId{}, AttentionMatrix(4, std::vector<float>(3, 1.0f / 3)), {}};
    AttentionMap self{AttentionMapId{AttentionKind::decoder_self, 0, 0},
                      {{1.0f}, {0.5f, 0.5f}, {0.2f, 0.3f, 0.5f}, {0.1f, 0.2f, 0.3f, 0.4f}}, {}};
    h.attention.maps = {cross, self};
    t.hypotheses = {h};
    const auto merged = merge_subwords(t);
    const auto& mh = merged.hypotheses.at(0);
    REQUIRE(mh.tokens == Tokens{"le", "chat", "<eos>"});
    const auto& w = mh.attention.maps.at(1).weights;
    REQUIRE(w.size() == 3);
    // Columns: <bos> (key 0), "le" (key 1), "chat" (keys 2 and 3).
    CHECK(w[0] == std::vector<float>{1.0f, 0.0f, 0.0f});
    CHECK(w[1][0] == Approx((0.5 + 0.2) / 2));  // "chat" = pieces 1 and 2: rows averaged
    CHECK(w[1][1] == Approx((0.5 + 0.3) / 2));
    CHECK(w[1][2] == Approx(0.5 / 2));
    CHECK(w[2][0] == Approx(0.1));
    CHECK(w[2][1] == Approx(0.2));
    CHECK(w[2][2] == Approx(0.7));  // before: 0.4, the <eos> query's own input counted as "<eos>"
    // An output cut inside a word: the last word's earlier piece is a key, but not a column.
    h.tokens = {B + "le", B + "ch", "at"};
    h.attention.maps = {AttentionMap{AttentionMapId{}, AttentionMatrix(3, std::vector<float>(3, 1.0f / 3)), {}},
                        AttentionMap{self.id, {{1.0f}, {0.5f, 0.5f}, {0.2f, 0.3f, 0.5f}}, {}}};
    t.hypotheses = {h};
    const auto cut = merge_subwords(t).hypotheses.at(0);
    REQUIRE(cut.tokens == Tokens{"le", "chat"});
    REQUIRE(cut.attention.maps.at(1).weights.size() == 2);
    CHECK(cut.attention.maps.at(1).weights[1].size() == 2);  // <bos>, "le"
    CHECK(cut.attention.maps.at(1).weights[1][1] == Approx((0.5 + 0.3) / 2));
}

namespace {

/// A toy-french corpus read as subwords (task sentences are normalised words already).
Corpus toy_subword_corpus(size_t pairs) {
    TaskOptions t;
    t.num_pairs = pairs;
    t.seed = 4;
    Corpus c = task_corpus(TaskKind::toy_french, t);
    c.level = TokenLevel::subword;
    return c;
}

TrainConfig subword_train_config(int epochs) {
    TrainConfig c;
    c.epochs = epochs;
    c.batch_size = 32;
    c.lr = 0.01;
    c.device = "cpu";
    c.seed = 2;
    c.eval_sample = 0;
    c.subword_vocab = 90;  // small: the task's words really split into pieces
    c.subword_model = SubwordModel::bpe;
    return c;
}

ModelConfig small_model() {
    ModelConfig m;
    m.embed_size = 24;
    m.hidden_size = 48;
    return m;
}

}  // namespace

TEST_CASE("prepare_data trains the subword model on the training pairs and cuts every pair", "[subword]") {
    const TrainConfig c = subword_train_config(1);
    const TrainingData d = prepare_data(toy_subword_corpus(300), c);
    REQUIRE(d.tokenizer);
    CHECK(d.level == TokenLevel::subword);
    CHECK(d.tokenizer->level() == TokenLevel::subword);
    CHECK(d.tokenizer->subword_options().vocab_size == 90);
    CHECK(d.tokenizer->subword_options().algorithm == SubwordModel::bpe);
    size_t split_words = 0;
    for (const auto& p : d.train) {
        REQUIRE(!p.src.empty());
        CHECK(p.src.front().compare(0, B.size(), B) == 0);  // every sentence starts a word
        for (const auto& piece : p.src) split_words += piece.compare(0, B.size(), B) != 0;
        CHECK_FALSE(p.alignment.has_value());
    }
    CHECK(split_words > 0);  // with 90 pieces some words come in several
    // The source vocabulary holds pieces, not words.
    CHECK(d.src_vocab.size() <= 90 + 4);
    // A given tokenizer is used as it is (a model to continue or evaluate).
    const TrainingData again = prepare_data(toy_subword_corpus(300), c, d.tokenizer);
    CHECK(again.tokenizer == d.tokenizer);
    CHECK(again.train.front().src == d.train.front().src);
    CHECK_THROWS_AS(prepare_data(toy_subword_corpus(300), c, Tokenizer::for_level(TokenLevel::word)), ConfigError);
}

TEST_CASE("a subword model learns, and its checkpoint brings back the same SentencePiece model and translations",
          "[subword][checkpoint][learning]") {
    const TrainConfig c = subword_train_config(6);
    Trainer trainer(prepare_data(toy_subword_corpus(600), c), small_model(), c);
    REQUIRE(trainer.run() == StopReason::finished);
    const auto& epochs = trainer.history().epochs;
    INFO("train loss " << epochs.front().train_loss << " -> " << epochs.back().train_loss);
    CHECK(epochs.back().train_loss < 0.6 * epochs.front().train_loss);

    const TranslationModelPtr model = trainer.snapshot();
    REQUIRE(model->level() == TokenLevel::subword);
    const auto dir = std::filesystem::temp_directory_path() / ("attnviz-subword-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "subword.attnviz").string();
    save_model(*model, path);
    const TranslationModelPtr back = load_model(path);
    testing::remove_tree(dir);
    REQUIRE(back->level() == TokenLevel::subword);
    CHECK(back->tokenizer().model_proto() == model->tokenizer().model_proto());
    CHECK(back->tokenizer().subword_options().algorithm == SubwordModel::bpe);
    CHECK(back->src_vocab() == model->src_vocab());

    // Training sentences (every piece known) and one with other case and punctuation.
    const auto& train = trainer.data().train;
    const std::vector<std::string> inputs = {model->tokenizer().decode(train.at(0).src),
                                             model->tokenizer().decode(train.at(1).src), "The Dog!"};
    const auto before = model->translate(inputs);
    const auto after = back->translate(inputs);
    for (size_t i = 0; i < inputs.size(); ++i) {
        INFO(inputs[i] << " -> " << before[i].best().text);
        CHECK(before[i].src_tokens == after[i].src_tokens);
        CHECK(before[i].best().tokens == after[i].best().tokens);
        CHECK(before[i].best().text == after[i].best().text);
        CHECK(before[i].best().attention.weights() == after[i].best().attention.weights());
        // Output text is the pieces joined: no "▁" left, words separated by spaces.
        CHECK(before[i].best().text.find(B) == std::string::npos);
    }

    // Merged into words: one column per source word (<eos> included), rows still sum to 1.
    const Translation merged = merge_subwords(before[0]);
    CHECK(merged.merged == merged_words_note);
    Tokens words = tokenize_words(inputs[0]);
    words.push_back("<eos>");
    CHECK(merged.src_tokens == words);
    CHECK(merged.src_tokens.size() < before[0].src_tokens.size());  // some word came in pieces
    for (const auto& row : merged.best().attention.weights())
        CHECK(std::accumulate(row.begin(), row.end(), 0.0) == Approx(1.0).epsilon(1e-5));
    CHECK(detokenize(merged.best().tokens, TokenLevel::word).find(before[0].best().text) == 0);
    // Exports say they are merged.
    CHECK(attention_json(merged).at("merged") == merged_words_note);
    CHECK_FALSE(attention_json(before[0]).contains("merged"));
    const AttentionTable table = parse_attention_csv(attention_csv(merged));
    CHECK(table.merged == merged_words_note);
    CHECK(table.source == merged.src_tokens);
    CHECK(parse_attention_csv(attention_csv(before[0])).merged.empty());

    // Attributions merge the same way: the same words, rows and attention as the merged
    // heatmap, a word's value its pieces' summed log p, additive methods summed over the
    // pieces, saliency's columns the norm over a word's pieces.
    AttributionOptions all;
    all.methods = all_attribution_methods();
    all.ig_steps = 8;
    const SentenceAttribution pieces = attribute(*model, before[0], all);
    const SentenceAttribution words_attr = merge_subwords(pieces, before[0].unknown);
    CHECK(words_attr.source == merged.src_tokens);
    CHECK(words_attr.output == merged.best().tokens);
    REQUIRE(words_attr.steps.size() == merged.best().tokens.size());
    CHECK((words_attr.methods == pieces.methods));
    const WordGroups src_groups = group_subwords(pieces.source, before[0].unknown);
    const WordGroups tgt_groups = group_subwords(pieces.output);
    const auto merged_weights = merged.best().attention.weights();
    for (size_t w = 0; w < words_attr.steps.size(); ++w) {
        const StepAttribution& step = words_attr.steps[w];
        CHECK(step.token == merged.best().tokens[w]);
        CHECK(step.log_prob == Approx(merged.best().step_log_prob.at(w)).margin(1e-4));
        REQUIRE(step.attention.size() == merged_weights[w].size());
        for (size_t c = 0; c < step.attention.size(); ++c) CHECK(step.attention[c] == Approx(merged_weights[w][c]).margin(1e-6));
        for (const AttributionMethod m : pieces.methods) {
            const AttributionScores* got = step.find(m);
            REQUIRE(got);
            REQUIRE(got->source.size() == src_groups.members.size());
            CHECK(got->target.empty());
            for (size_t c = 0; c < src_groups.members.size(); ++c) {
                double want = 0;
                for (const size_t r : tgt_groups.members[w]) {
                    double column = 0;
                    for (const size_t p : src_groups.members[c]) {
                        const double v = pieces.steps[r].find(m)->source.at(p);
                        column += m == AttributionMethod::saliency ? v * v : v;
                    }
                    want += m == AttributionMethod::saliency ? std::sqrt(column) : column;
                }
                CHECK(got->source[c] == Approx(want).margin(1e-5));
            }
        }
    }
}
