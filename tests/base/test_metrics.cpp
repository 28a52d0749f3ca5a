// Metrics: corpus BLEU against sacreBLEU, d2l's bleu, accuracies.
#include "catch_torch.hpp"

#include <cmath>

#include "core/io/error.hpp"
#include "core/analysis/metrics.hpp"
#include "core/text/text.hpp"

using namespace attnviz;
using Corpus2 = std::vector<std::vector<std::string>>;

namespace {

Corpus2 split(const std::vector<std::string>& lines) {
    Corpus2 out;
    for (const auto& l : lines) out.push_back(tokenize_words(l));
    return out;
}

void check_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs, double score,
                std::vector<double> precisions, double bp, size_t hyp_len, size_t ref_len) {
    const BleuResult r = corpus_bleu(split(hyps), split(refs));
    CHECK(r.score == Approx(score).epsilon(1e-12).margin(1e-12));
    REQUIRE(r.precisions.size() == 4);
    for (size_t n = 0; n < 4; ++n) CHECK(r.precisions[n] == Approx(precisions[n]).epsilon(1e-12).margin(1e-12));
    CHECK(r.brevity_penalty == Approx(bp).epsilon(1e-12));
    CHECK(r.hyp_len == hyp_len);
    CHECK(r.ref_len == ref_len);
}

const std::string papineni_ref = "It is a guide to action that ensures that the military will forever heed Party commands .";
const std::string papineni_c1 =
    "It is a guide to action which ensures that the military always obeys the commands of the party .";
const std::string papineni_c2 = "It is to insure the troops forever hearing the activity guidebook that party direct .";

}  // namespace

// Expected values come from sacreBLEU 2.6.0:
//   sacrebleu.corpus_bleu(hyps, [refs], tokenize='none')  (smooth_method='exp', max order 4)
// printing .score, .precisions, .bp, .sys_len, .ref_len.
TEST_CASE("corpus_bleu equals sacreBLEU (tokenize='none')", "[metrics][bleu]") {
    SECTION("perfect match") {
        check_bleu({"the cat sat on the mat", "a b c d e"}, {"the cat sat on the mat", "a b c d e"}, 100.0,
                   {100, 100, 100, 100}, 1.0, 11, 11);
    }
    SECTION("orders without a match use exp smoothing") {
        check_bleu({"the cat sat on mat today"}, {"the cat is on the mat"}, 19.304869754804482,
                   {66.66666666666667, 20.0, 12.5, 8.333333333333334}, 1.0, 6, 6);
    }
    SECTION("brevity penalty") {
        check_bleu({"the cat sat on"}, {"the cat sat on the mat"}, 60.653065971263366, {100, 100, 100, 100},
                   0.6065306597126334, 4, 6);
    }
    SECTION("Papineni et al.'s candidates 1 and 2") {
        check_bleu({papineni_c1}, {papineni_ref}, 39.67088290836578,
                   {63.1578947368421, 44.44444444444444, 35.294117647058826, 25.0}, 1.0, 19, 17);
        check_bleu({papineni_c2}, {papineni_ref}, 6.2915855898775845,
                   {46.666666666666664, 7.142857142857143, 3.8461538461538463, 2.0833333333333335},
                   0.8751733190429475, 15, 17);
    }
    SECTION("Papineni et al.'s clipped counts (the the the ...)") {
        check_bleu({"the the the the the the the"}, {"The cat is on the mat ."}, 6.567274736060395,
                   {14.285714285714286, 8.333333333333334, 5.0, 3.125}, 1.0, 7, 7);
    }
    SECTION("a corpus: statistics are summed before the score") {
        check_bleu({papineni_c1, papineni_c2, "the cat sat on", "il est mouillé ."},
                   {papineni_ref,
                    "It is the guiding principle which guarantees the military forces always being under the "
                    "command of the Party .",
                    "the cat sat on the mat", "il est calme ."},
                   26.901964943285318, {57.142857142857146, 34.21052631578947, 23.529411764705884, 16.666666666666668},
                   0.909156442876713, 42, 46);
    }
    SECTION("no match at all") { check_bleu({"x y z w"}, {"a b c d"}, 0.0, {0, 0, 0, 0}, 1.0, 4, 4); }
    SECTION("fewer than four tokens in all: no 4-grams, score 0") {
        check_bleu({"a b c", "d"}, {"a b c", "d"}, 0.0, {100, 100, 100, 0}, 1.0, 4, 4);
    }
}

TEST_CASE("corpus_bleu edge cases", "[metrics][bleu]") {
    const BleuResult empty = corpus_bleu({{}}, {{"a", "b"}});
    CHECK(empty.score == 0.0);
    CHECK(empty.brevity_penalty == 0.0);
    CHECK(corpus_bleu({}, {}).score == 0.0);
    CHECK_THROWS_AS(corpus_bleu({{"a"}}, {}), Error);
    const BleuResult bigram = corpus_bleu({{"a", "b", "c"}}, {{"a", "b", "d"}}, 2);
    REQUIRE(bigram.precisions.size() == 2);
    CHECK(bigram.score == Approx(100.0 * std::sqrt(2.0 / 3.0 * 1.0 / 2.0)));
}

TEST_CASE("d2l_bleu reproduces d2l's bleu()", "[metrics][d2l]") {
    // Values from d2l's bleu() (shared/bench/d2l_reference.py) run in Python.
    CHECK(d2l_bleu("il est mouillé .", "il est calme .", 2) == Approx(0.6580370064762462).epsilon(1e-12));
    CHECK(d2l_bleu("va !", "va !", 2) == 1.0);
    CHECK(d2l_bleu("je suis chez moi .", "je suis chez moi .", 2) == 1.0);
    CHECK(d2l_bleu("il est", "il est calme .", 2) == Approx(0.36787944117144233).epsilon(1e-12));
    CHECK(d2l_bleu("a b c d", "a b x d", 3) == 0.0);
    CHECK(d2l_bleu("a", "a b", 4) == Approx(0.36787944117144233).epsilon(1e-12));
    CHECK(d2l_bleu("", "il est", 2) == 0.0);
    CHECK(d2l_bleu("a a a a", "a b", 2) == 0.0);
    CHECK(d2l_bleu("b a", "a b", 2) == 0.0);
}

TEST_CASE("exact_match and token_accuracy", "[metrics]") {
    const Corpus2 hyp = {{"a", "b", "c"}, {"x", "y"}, {"p"}, {}};
    const Corpus2 ref = {{"a", "b", "c"}, {"x", "z"}, {"p", "q"}, {"r"}};
    CHECK(exact_match(hyp, ref) == Approx(0.25));
    // right positions: 3 + 1 + 1 + 0 of 3 + 2 + 2 + 1 reference tokens
    CHECK(token_accuracy(hyp, ref) == Approx(5.0 / 8.0));
    CHECK(token_accuracy({{"a", "b", "extra"}}, {{"a", "b"}}) == 1.0);
    CHECK(exact_match({}, {}) == 0.0);
    CHECK(token_accuracy({}, {}) == 0.0);
    CHECK_THROWS_AS(exact_match(hyp, {}), Error);
    CHECK_THROWS_AS(token_accuracy(hyp, {}), Error);
}
