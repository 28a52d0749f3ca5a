// Alignments of a real model: evaluate_alignment forces the references and
// scores the attention argmax; the trainer reports it per epoch where the
// corpus knows its true alignment.
#include "catch_torch.hpp"

#include <cmath>

#include "core/analysis/alignment.hpp"
#include "core/analysis/alignment_eval.hpp"
#include "core/decode/translation.hpp"
#include "core/io/error.hpp"
#include "core/data/tasks.hpp"
#include "core/train/train.hpp"
#include "test_support.hpp"

using namespace attnviz;

namespace {
TranslationModelPtr untrained(Scoring scoring, bool reverse_source, const Vocab& src, const Vocab& tgt) {
    auto cfg = testing::tiny_config(scoring, static_cast<int64_t>(src.size()), static_cast<int64_t>(tgt.size()));
    cfg.num_layers = 1;
    cfg.reverse_source = reverse_source;
    return testing::as_model(Seq2Seq(cfg), src, tgt);
}
}  // namespace

TEST_CASE("evaluate_alignment scores the forced references' attention argmax", "[alignment][forced]") {
    TaskOptions t;
    t.num_pairs = 20;
    Corpus corpus = task_corpus(TaskKind::toy_french, t);
    std::vector<std::vector<std::string>> src, tgt;
    for (const auto& p : corpus.pairs) {
        src.push_back(p.src);
        tgt.push_back(p.tgt);
    }
    const Vocab sv = Vocab::build(src), tv = Vocab::build(tgt);
    corpus.pairs[3].alignment.reset();  // a pair without gold is left out
    for (const bool reverse_source : {false, true}) {
        INFO("reverse_source " << reverse_source);
        const auto model = untrained(Scoring::additive, reverse_source, sv, tv);
        DecodeOptions o;
        o.batch_size = 7;  // several chunks
        const AlignmentScore s = evaluate_alignment(*model, corpus.pairs, o);
        CHECK(s.sentences == corpus.pairs.size() - 1);
        // By hand: force each reference, argmax per real target row, score against the gold.
        const auto forced = model->force_tokens(src, tgt, ForceMode::reference, o);
        AlignmentScore expected;
        for (size_t i = 0; i < corpus.pairs.size(); ++i) {
            if (i == 3) continue;
            const auto& h = forced[i].best();
            REQUIRE(h.attention.weights().size() == tgt[i].size() + 1);  // the reference and <eos>
            AlignmentLinks a;
            for (size_t r = 0; r < tgt[i].size(); ++r) {
                const auto& row = h.attention.weights()[r];
                const auto best = std::max_element(row.begin(), row.end()) - row.begin();
                if (static_cast<size_t>(best) < src[i].size()) a.add(static_cast<int>(best), static_cast<int>(r));
            }
            expected += score_alignment(a, *corpus.pairs[i].alignment);
        }
        CHECK(s.predicted == expected.predicted);
        CHECK(s.predicted_sure == expected.predicted_sure);
        CHECK(s.correct_tokens == expected.correct_tokens);
        CHECK(s.gold_tokens == expected.gold_tokens);
        CHECK(s.accuracy() == expected.accuracy());
        CHECK(s.aer() == expected.aer());
    }
    // No attention, or no gold: nothing measured.
    CHECK(evaluate_alignment(*untrained(Scoring::none, false, sv, tv), corpus.pairs, {}).sentences == 0);
    for (auto& p : corpus.pairs) p.alignment.reset();
    const AlignmentScore none = evaluate_alignment(*untrained(Scoring::additive, false, sv, tv), corpus.pairs, {});
    CHECK(none.sentences == 0);
    CHECK(std::isnan(none.accuracy()));
    CHECK(std::isnan(none.aer()));
}

TEST_CASE("force_tokens is force on text already split", "[alignment][forced]") {
    const Vocab sv = Vocab::build({{"a", "b", "c"}}), tv = Vocab::build({{"x", "y"}});
    const auto model = untrained(Scoring::additive, false, sv, tv);
    const auto a = model->force({{"a b c", "y x"}, {"c", "x x y"}}, ForceMode::reference);
    const auto b = model->force_tokens({{"a", "b", "c"}, {"c"}}, {{"y", "x"}, {"x", "x", "y"}}, ForceMode::reference);
    REQUIRE(b.size() == 2);
    for (size_t i = 0; i < 2; ++i) {
        CHECK(a[i].best().tokens == b[i].best().tokens);
        CHECK(a[i].best().attention.weights() == b[i].best().attention.weights());
    }
    CHECK_THROWS_AS(model->force_tokens({{"a"}}, {}, ForceMode::reference), ConfigError);
}

TEST_CASE("the trainer reports alignment per epoch for a task, NaN for a corpus without gold", "[alignment][train]") {
    TrainConfig c;
    c.epochs = 2;
    c.batch_size = 32;
    c.device = "cpu";
    c.eval_sample = 50;
    ModelConfig m;
    m.embed_size = 8;
    m.hidden_size = 16;
    TaskOptions t;
    t.num_pairs = 200;
    t.max_len = 5;
    Trainer task(prepare_data(task_corpus(TaskKind::reverse, t), c), m, c);
    REQUIRE(task.run() == StopReason::finished);
    for (const auto& e : task.history().epochs) {
        CHECK(e.val_align_accuracy >= 0.0);
        CHECK(e.val_align_accuracy <= 1.0);
        CHECK(e.val_aer >= 0.0);
        CHECK(e.val_aer <= 1.0);
    }
    // The same pairs as a TSV corpus (no alignment known).
    Corpus tsv = task_corpus(TaskKind::reverse, t);
    for (auto& p : tsv.pairs) p.alignment.reset();
    Trainer plain(prepare_data(tsv, c), m, c);
    REQUIRE(plain.run() == StopReason::finished);
    for (const auto& e : plain.history().epochs) {
        CHECK(std::isnan(e.val_align_accuracy));
        CHECK(std::isnan(e.val_aer));
        CHECK(std::isfinite(e.val_accuracy));
    }
}
