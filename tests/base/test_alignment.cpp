// Alignments: links, hard alignments from attention, Pharaoh files, AER and
// accuracy against hand-computed values, attention statistics, and gold
// alignments travelling with their pairs.
#include "catch_torch.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <ostream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/analysis/alignment.hpp"
#include "core/decode/translation.hpp"
#include "core/io/error.hpp"
#include "core/config/history.hpp"
#include "core/data/tasks.hpp"

namespace attnviz {
// For Catch's messages (LibTorch's operator<< for vectors needs one for the elements).
std::ostream& operator<<(std::ostream& os, const AlignmentLinks& links) { return os << "[" << to_pharaoh(links) << "]"; }
}  // namespace attnviz

using namespace attnviz;

namespace {
AlignmentLinks links(std::initializer_list<AlignmentLink> ls) {
    AlignmentLinks out;
    for (const auto& l : ls) out.add(l.src, l.tgt, l.sure);
    return out;
}
// Gold: sure 0-0 and 1-1, possible 1-2.
AlignmentLinks gold_example() { return links({{0, 0, true}, {1, 1, true}, {1, 2, false}}); }
}  // namespace

TEST_CASE("alignment links stay sorted and unique, sure wins over possible", "[alignment]") {
    AlignmentLinks a;
    a.add(2, 0);
    a.add(0, 1, false);
    a.add(0, 0);
    a.add(0, 1, true);  // the same position pair again, now sure
    a.add(2, 0, false);  // possible again: stays sure
    REQUIRE(a.size() == 3);
    CHECK(a.links()[0] == AlignmentLink{0, 0, true});
    CHECK(a.links()[1] == AlignmentLink{0, 1, true});
    CHECK(a.links()[2] == AlignmentLink{2, 0, true});
    CHECK(a.contains(2, 0));
    CHECK_FALSE(a.contains(0, 2));
    CHECK(a.transposed().contains(0, 2));
    CHECK_THROWS_AS(a.add(-1, 0), Error);

    const AlignmentLinks g = gold_example();
    CHECK(g.size() == 3);
    CHECK(g.sure_count() == 2);
    CHECK(g.contains(1, 2));
    CHECK_FALSE(g.contains_sure(1, 2));
    CHECK(links_from_positions({2, -1, 0}) == links({{2, 0, true}, {0, 2, true}}));
}

TEST_CASE("AER, precision, recall and accuracy match the formulas on hand-built examples", "[alignment]") {
    const AlignmentLinks gold = gold_example();  // S = {0-0, 1-1}, P = S + {1-2}
    // A = {0-0, 2-1, 1-2}: |A| = 3, |S| = 2, A and S = {0-0} (1), A and P = {0-0, 1-2} (2).
    // AER = 1 - (1 + 2) / (3 + 2) = 0.4; precision 2/3; recall 1/2.
    // Target tokens with gold links: 0, 1, 2. Token 0: 0-0 gold; token 1: 2-1 not; token 2:
    // 1-2 possible, counts. Accuracy 2/3.
    const AlignmentScore s = score_alignment(links({{0, 0, true}, {2, 1, true}, {1, 2, true}}), gold);
    CHECK(s.predicted == 3);
    CHECK(s.sure == 2);
    CHECK(s.predicted_sure == 1);
    CHECK(s.predicted_possible == 2);
    CHECK(s.aer() == Approx(0.4));
    CHECK(s.precision() == Approx(2.0 / 3.0));
    CHECK(s.recall() == Approx(0.5));
    CHECK(s.gold_tokens == 3);
    CHECK(s.correct_tokens == 2);
    CHECK(s.accuracy() == Approx(2.0 / 3.0));

    // The gold's sure links exactly: AER 0. All of P (possible links too): still 0, since
    // AER = 1 - (|S| + |P|) / (|P| + |S|).
    CHECK(score_alignment(links({{0, 0, true}, {1, 1, true}}), gold).aer() == 0.0);
    CHECK(score_alignment(gold, gold).aer() == 0.0);
    // Nothing predicted: 1 - 0 / (0 + 2) = 1; precision undefined; no token correct.
    const AlignmentScore none = score_alignment(AlignmentLinks{}, gold);
    CHECK(none.aer() == 1.0);
    CHECK(std::isnan(none.precision()));
    CHECK(none.accuracy() == 0.0);
    // A token with a right and a wrong link is not correct (threshold alignments).
    CHECK(score_alignment(links({{0, 0, true}, {1, 0, true}}), links({{0, 0, true}})).accuracy() == 0.0);
    // Nothing on either side: undefined.
    CHECK(std::isnan(score_alignment(AlignmentLinks{}, AlignmentLinks{}).aer()));

    // Corpus level sums the counts (not the sentence AERs). Sentence 2: A = {0-0}, S = {0-0, 1-1}:
    // |A| 1, |S| 2, A and S 1, A and P 1. Totals: |A| 4, |S| 4, A and S 2, A and P 3:
    // AER = 1 - 5/8 = 0.375 (the mean of 0.4 and 1/3 would be 0.3667).
    const AlignmentScore corpus = score_alignments(
        {links({{0, 0, true}, {2, 1, true}, {1, 2, true}}), links({{0, 0, true}})},
        {gold, links({{0, 0, true}, {1, 1, true}})});
    CHECK(corpus.sentences == 2);
    CHECK(corpus.aer() == Approx(0.375));
    CHECK(corpus.accuracy() == Approx(3.0 / 5.0));  // 2 of 3, then 1 of 2
    CHECK_THROWS_AS(score_alignments({gold}, {}), Error);
}

TEST_CASE("hard alignments: argmax per step, threshold, <eos> left out", "[alignment]") {
    // Two source words + <eos>, two output words + <eos>.
    const std::vector<std::vector<float>> att = {{0.7f, 0.2f, 0.1f},   // word 0 -> source 0
                                                 {0.1f, 0.3f, 0.6f},   // argmax on <eos>: no link
                                                 {0.1f, 0.1f, 0.8f}};  // the <eos> step
    CHECK(hard_alignment(att, 2, 2) == links({{0, 0, true}}));
    CHECK(hard_alignment(att, 2, 2, 0.25f) == links({{0, 0, true}, {1, 1, true}}));
    CHECK(hard_alignment(att, 3, 3) == links({{0, 0, true}, {2, 1, true}, {2, 2, true}}));
    CHECK(hard_alignment(att, 2, 2, 0.95f).empty());

    Translation t;
    t.src_tokens = {"a", "b", "<eos>"};
    Hypothesis h;
    h.tokens = {"x", "y", "<eos>"};
    h.attention.at({}).weights = att;
    t.hypotheses = {h};
    CHECK(hard_alignment(t) == links({{0, 0, true}}));
    HardAlignmentOptions with_eos;
    with_eos.include_eos = true;
    CHECK(hard_alignment(t, 0, with_eos) == hard_alignment(att, 3, 3));
    // A hypothesis cut at max_length has no <eos>: every row counts.
    t.hypotheses[0].tokens = {"x", "y", "z"};
    CHECK(hard_alignment(t) == links({{0, 0, true}}));
    CHECK_THROWS_AS(hard_alignment(t, 1), Error);
    t.attention_available = false;
    CHECK_THROWS_AS(hard_alignment(t), Error);
}

TEST_CASE("alignments from a chosen layer and heads: one head, a layer's mean, a list averaged", "[alignment]") {
    // Two layers of two cross heads (a Transformer's record), and the primary mean of the last layer.
    Translation t;
    t.src_tokens = {"a", "b", "<eos>"};
    Hypothesis h;
    h.tokens = {"x", "y", "<eos>"};
    const AttentionMatrix diag = {{0.8f, 0.1f, 0.1f}, {0.1f, 0.8f, 0.1f}, {0.1f, 0.1f, 0.8f}};
    const AttentionMatrix anti = {{0.1f, 0.8f, 0.1f}, {0.8f, 0.1f, 0.1f}, {0.1f, 0.1f, 0.8f}};
    const AttentionMatrix flat = {{0.4f, 0.3f, 0.3f}, {0.3f, 0.4f, 0.3f}, {0.3f, 0.3f, 0.4f}};
    h.attention.at({AttentionKind::cross, 1, -1}).weights = flat;
    h.attention.at({AttentionKind::cross, 0, 0}).weights = diag;
    h.attention.at({AttentionKind::cross, 0, 1}).weights = anti;
    h.attention.at({AttentionKind::cross, 1, 0}).weights = diag;
    h.attention.at({AttentionKind::cross, 1, 1}).weights = anti;
    t.hypotheses = {h};
    const AttentionRecord& r = t.best().attention;
    CHECK(r.layer_count(AttentionKind::cross) == 2);
    CHECK(r.head_count(AttentionKind::cross) == 2);
    CHECK(r.layer_count(AttentionKind::encoder_self) == 0);
    // Default: the last layer's mean, i.e. the primary map as recorded.
    CHECK(r.select(HeadSelection{}) == flat);
    CHECK(hard_alignment(t) == links({{0, 0, true}, {1, 1, true}}));
    HardAlignmentOptions o;
    o.heads = HeadSelection::parse(0, "1");
    CHECK(hard_alignment(t, 0, o) == links({{1, 0, true}, {0, 1, true}}));
    o.heads = HeadSelection::parse(0, "mean");  // layer 0 has no mean recorded: averaged here
    const AttentionMatrix mean0 = r.select(o.heads);
    CHECK(mean0[0][0] == Approx(0.45f));
    CHECK(mean0[0][1] == Approx(0.45f));
    CHECK(mean0[2][2] == Approx(0.8f));
    CHECK(r.select(HeadSelection::parse(0, "0,1")) == mean0);
    CHECK(HeadSelection::parse(-1, "0,1").describe() == "cross, last layer, heads 0,1");
    CHECK(HeadSelection::parse(0, "mean").describe() == "cross, layer 0, mean of heads");
    CHECK_THROWS_WITH(r.select(HeadSelection::parse(2, "mean")), Catch::Contains("2 layers of 2 heads"));
    CHECK_THROWS_WITH(r.select(HeadSelection::parse(0, "3")), Catch::Contains("head 3"));
    // The RNN's one map is every selection of layer 0 (or the last).
    Hypothesis rnn;
    rnn.attention.at({}).weights = diag;
    CHECK(rnn.attention.select(HeadSelection{}) == diag);
    CHECK(rnn.attention.select(HeadSelection::parse(0, "0")) == diag);
}

TEST_CASE("attention rollout multiplies the layers' head means with the residual as attention to oneself",
          "[alignment]") {
    AttentionRecord r;
    // Layer 0: every position reads position 0; layer 1: every position reads the one before (causal rows).
    r.at({AttentionKind::decoder_self, 0, 0}).weights = {{1.0f}, {1.0f, 0.0f}, {1.0f, 0.0f, 0.0f}};
    r.at({AttentionKind::decoder_self, 1, 0}).weights = {{1.0f}, {1.0f, 0.0f}, {0.0f, 1.0f, 0.0f}};
    const AttentionMatrix roll = r.rollout(AttentionKind::decoder_self);
    // A0' = [[1,0,0],[.5,.5,0],[.5,0,.5]], A1' = [[1,0,0],[.5,.5,0],[0,.5,.5]]; R = A1' A0'.
    const AttentionMatrix expected = {{1.0f, 0.0f, 0.0f}, {0.75f, 0.25f, 0.0f}, {0.5f, 0.25f, 0.25f}};
    REQUIRE(roll.size() == 3);
    for (size_t q = 0; q < 3; ++q)
        for (size_t k = 0; k < 3; ++k) CHECK(roll[q][k] == Approx(expected[q][k]));
    for (const auto& row : roll) CHECK(row[0] + row[1] + row[2] == Approx(1.0f));
    CHECK(r.rollout(AttentionKind::encoder_self).empty());
    CHECK_THROWS_AS(r.rollout(AttentionKind::cross), ConfigError);
}

TEST_CASE("Pharaoh lines: write, parse back, possible links, 1-based input", "[alignment][pharaoh]") {
    const AlignmentLinks gold = gold_example();
    CHECK(to_pharaoh(gold) == "0-0 1-1 1p2");
    CHECK(to_pharaoh(AlignmentLinks{}).empty());
    const std::vector<AlignmentLinks> all = {gold, AlignmentLinks{}, links({{3, 0, true}, {0, 4, true}})};
    const std::string text = to_pharaoh(all);
    CHECK(text == "0-0 1-1 1p2\n\n0-4 3-0\n");
    CHECK(parse_pharaoh(text, "round-trip") == all);

    // 1-based, '?' for possible, CRLF, a BOM, extra spaces, no final newline.
    const auto one = parse_pharaoh("\xEF\xBB\xBF" "1-1  2-2 2?3\r\n\r\n1-5\t4-1", "gold.txt", PharaohBase::one);
    REQUIRE(one.size() == 3);
    CHECK(one[0] == gold);
    CHECK(one[1].empty());
    CHECK(one[2] == all[2]);
    // Each line's links in any order; duplicates merge.
    CHECK(parse_pharaoh("1p2 0-0 1-1 0-0\n", "g")[0] == gold);

    // A file on disk.
    const std::string path = "/tmp/attnviz_pharaoh_" + std::to_string(::getpid()) + ".txt";
    std::ofstream(path) << text;
    CHECK(read_pharaoh(path) == all);
    std::remove(path.c_str());
    CHECK_THROWS_WITH(read_pharaoh(path), Catch::Contains("cannot open") && Catch::Contains(path));
}

TEST_CASE("malformed Pharaoh input names the file, the line and what was expected", "[alignment][pharaoh]") {
    for (const std::string bad : {"0-", "a-1", "0:1", "-1-2", "0-1-2", "0-1p", "01", "1 - 2", "0-x"}) {
        INFO(bad);
        CHECK_THROWS_AS(parse_pharaoh("0-0\n" + bad + "\n", "gold.txt"), FileError);
        CHECK_THROWS_WITH(parse_pharaoh("0-0\n" + bad + "\n", "gold.txt"),
                          Catch::StartsWith("gold.txt:2: ") && Catch::Contains("expected 'i-j'"));
    }
    CHECK_THROWS_WITH(parse_pharaoh("1-1 0-2\n", "g.a", PharaohBase::one),
                      Catch::Contains("g.a:1") && Catch::Contains("position 0 in a 1-based file"));
}

TEST_CASE("attention statistics: entropy, maximum weight and coverage", "[alignment][stats]") {
    // A uniform row over 4 has entropy ln 4 and maximum 1/4; a one-hot row 0 and 1.
    const AttentionStats s = attention_stats({{0.25f, 0.25f, 0.25f, 0.25f}, {0.0f, 1.0f, 0.0f, 0.0f},
                                              {0.5f, 0.5f, 0.0f, 0.0f}});
    REQUIRE(s.entropy.size() == 3);
    CHECK(s.entropy[0] == Approx(std::log(4.0)));
    CHECK(s.entropy[1] == 0.0f);
    CHECK(s.entropy[2] == Approx(std::log(2.0)));
    CHECK(s.max_weight == std::vector<float>{0.25f, 1.0f, 0.5f});
    // Coverage: the column sums over all steps.
    CHECK(s.coverage == std::vector<float>{0.75f, 1.75f, 0.25f, 0.25f});
    const AttentionStats empty = attention_stats({});
    CHECK(empty.entropy.empty());
    CHECK(empty.coverage.empty());
}

TEST_CASE("built-in tasks carry their true alignment through filtering and the split", "[alignment][data]") {
    TaskOptions o;
    o.num_pairs = 50;
    const auto generated = generate_task(TaskKind::toy_french, o);
    const Corpus corpus = task_corpus(TaskKind::toy_french, o);
    REQUIRE(corpus.pairs.size() == generated.size());
    for (size_t i = 0; i < generated.size(); ++i) {
        REQUIRE(corpus.pairs[i].alignment.has_value());
        // The positions without the final <eos> step.
        std::vector<int> words(generated[i].alignment.begin(), generated[i].alignment.end() - 1);
        CHECK(*corpus.pairs[i].alignment == links_from_positions(words));
    }
    auto [train, val] = split_train_val(filter_by_length(corpus.pairs, 100), 0.2, 3);
    REQUIRE(!val.empty());
    for (const auto& p : val) {
        REQUIRE(p.alignment.has_value());
        // Each kept pair still has its own alignment: find it in the corpus.
        bool found = false;
        for (const auto& q : corpus.pairs)
            found = found || (q.src == p.src && q.tgt == p.tgt && q.alignment == p.alignment);
        CHECK(found);
    }
    // A TSV corpus knows none.
    const Corpus tsv = parse_tsv("a b\tc d\n", "x.tsv");
    CHECK_FALSE(tsv.pairs[0].alignment.has_value());
}

TEST_CASE("epoch reports keep alignment figures in JSON, and old histories load", "[alignment][history]") {
    TrainHistory h;
    EpochReport e;
    e.epoch = 1;
    e.val_loss = 1.0;
    e.val_align_accuracy = 0.75;
    e.val_aer = 0.25;
    h.epochs.push_back(e);
    EpochReport unmeasured;  // a TSV corpus: NaN, written as null
    unmeasured.epoch = 2;
    unmeasured.val_loss = 0.5;
    CHECK(std::isnan(unmeasured.val_align_accuracy));
    h.epochs.push_back(unmeasured);
    const nlohmann::json j = h.to_json();
    CHECK(j["epochs"][0]["val_align_accuracy"] == 0.75);
    CHECK(j["epochs"][1]["val_aer"].is_null());
    const TrainHistory back = TrainHistory::from_json(nlohmann::json::parse(j.dump()));
    CHECK(back.epochs[0].val_align_accuracy == 0.75);
    CHECK(back.epochs[0].val_aer == 0.25);
    CHECK(std::isnan(back.epochs[1].val_align_accuracy));
    // A history from before alignments were measured has neither key.
    nlohmann::json old = j;
    for (auto& ep : old["epochs"]) {
        ep.erase("val_align_accuracy");
        ep.erase("val_aer");
    }
    const TrainHistory old_back = TrainHistory::from_json(old);
    CHECK(std::isnan(old_back.epochs[0].val_align_accuracy));
    CHECK(std::isnan(old_back.epochs[0].val_aer));
}
