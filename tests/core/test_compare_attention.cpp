// Two models' attention on one sentence: B is forced on A's output so the rows
// line up, and the difference is A minus B cell by cell.
#include "catch_torch.hpp"

#include <cmath>

#include "core/analysis/attention_compare.hpp"
#include "test_support.hpp"

using namespace attnviz;

namespace {
Vocab src_vocab() { return Vocab::build({{"a", "b", "c", "d"}}); }
Vocab tgt_vocab() { return Vocab::build({{"x", "y", "z", "w"}}); }

TranslationModelPtr model(Scoring scoring, uint64_t seed) {
    const Vocab src = src_vocab(), tgt = tgt_vocab();
    auto cfg = testing::tiny_config(scoring, static_cast<int64_t>(src.size()), static_cast<int64_t>(tgt.size()));
    cfg.seed = seed;
    Seq2Seq net(cfg);
    torch::NoGradGuard ng;
    for (auto& p : net->named_parameters())  // sharper outputs: varied, confident choices
        if (p.key().rfind("dense", 0) == 0) p.value().mul_(4.0);
    return testing::as_model(net, src, tgt);
}
}  // namespace

TEST_CASE("comparing a model with itself: the same output and no difference at all", "[compare-attention]") {
    auto m = model(Scoring::additive, 3);
    const auto c = compare_attention(*m, *m, "a b c d");
    REQUIRE(c.comparable);
    CHECK(c.note.empty());
    CHECK(c.same_output);
    REQUIRE(c.difference.size() == c.a.best().attention.weights().size());
    CHECK(c.max_abs_difference == 0.0);  // forcing a model's own output reproduces its attention exactly
    CHECK(c.mean_abs_difference == 0.0);
}

TEST_CASE("comparing two models: B reads A's output, the difference is A minus B per cell", "[compare-attention]") {
    auto a = model(Scoring::additive, 3), b = model(Scoring::dot, 11);
    for (const std::string sentence : {"a b c d", "d d a", "c"}) {
        const auto c = compare_attention(*a, *b, sentence);
        REQUIRE(c.comparable);
        const Hypothesis& ha = c.a.best();
        const Hypothesis& hb = c.b_on_a.best();
        // B was given A's tokens (without a final <eos>, reference mode adds one).
        for (size_t t = 0; t + 1 < ha.tokens.size(); ++t) CHECK(hb.tokens[t] == ha.tokens[t]);
        REQUIRE(c.difference.size() == ha.attention.weights().size());
        double sum = 0;
        for (size_t t = 0; t < c.difference.size(); ++t) {
            REQUIRE(c.difference[t].size() == c.a.src_tokens.size());
            double row = 0;
            for (size_t s = 0; s < c.difference[t].size(); ++s) {
                CHECK(c.difference[t][s] == Approx(ha.attention.weights()[t][s] - hb.attention.weights()[t][s]).margin(1e-7));
                row += c.difference[t][s];
                sum += std::abs(c.difference[t][s]);
            }
            CHECK(row == Approx(0.0).margin(1e-5));  // both rows sum to 1
        }
        CHECK(c.mean_abs_difference ==
              Approx(sum / double(c.difference.size() * c.a.src_tokens.size())).margin(1e-9));
        CHECK(c.max_abs_difference > 0.0);
        CHECK(c.same_output == (ha.tokens == c.b.best().tokens));
    }
}

TEST_CASE("comparing with a model without attention, or an empty sentence, says why not", "[compare-attention]") {
    auto a = model(Scoring::additive, 3), none = model(Scoring::none, 5);
    const auto c = compare_attention(*a, *none, "a b");
    CHECK_FALSE(c.comparable);
    CHECK(c.difference.empty());
    CHECK(c.note.find("no attention") != std::string::npos);
    CHECK_FALSE(c.b.empty());  // B still translated
    const auto empty = compare_attention(*a, *a, "");
    CHECK_FALSE(empty.comparable);
    CHECK(empty.note.find("empty") != std::string::npos);
}
