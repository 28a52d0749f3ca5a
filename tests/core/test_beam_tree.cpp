// The beam search tree and what beam search records per step: the tree's
// finished leaves are the N-best list, per-step log-probabilities, ranks and
// top-k match greedy decoding at beam width 1, prefixes are continued by beam
// search, and trees read back from JSON.
#include "catch_torch.hpp"

#include <cmath>
#include <functional>

#include <nlohmann/json.hpp>

#include "core/decode/beam_tree.hpp"
#include "core/decode/translation.hpp"
#include "core/decode/beam.hpp"
#include "core/decode/greedy.hpp"
#include "core/io/error.hpp"
#include "test_support.hpp"

using namespace attnviz;

namespace {
struct Fixture {
    Vocab src = Vocab::build({{"a", "b", "c", "d"}});
    Vocab tgt = Vocab::build({{"x", "y", "z", "w"}});
    TranslationModelPtr model;
    explicit Fixture(Scoring scoring = Scoring::additive) {
        auto cfg = testing::tiny_config(scoring, static_cast<int64_t>(src.size()), static_cast<int64_t>(tgt.size()));
        cfg.seed = 5;
        Seq2Seq net(cfg);
        torch::NoGradGuard ng;
        for (auto& p : net->named_parameters())  // sharper outputs: beams that differ from greedy
            if (p.key().rfind("dense", 0) == 0) p.value().mul_(4.0);
        model = testing::as_model(net, src, tgt);
    }
};
const std::vector<std::string> k_sentences = {"a b c", "d", "c c a b", "", "b a d d c"};

/// The tree's structure: ids in order, parents kept and one step up, at most K kept per step.
void check_structure(const BeamTree& tree, int64_t K) {
    std::vector<int64_t> kept_per_step(static_cast<size_t>(tree.steps()), 0);
    for (const auto& n : tree.nodes) {
        REQUIRE(n.id == &n - tree.nodes.data());
        if (n.parent >= 0) {
            CHECK(tree.node(n.parent).status == BeamNode::Status::kept);
            CHECK(tree.node(n.parent).step == n.step - 1);
            CHECK(n.log_prob == tree.node(n.parent).log_prob + n.token_log_prob);
        } else {
            CHECK(n.step == 0);
        }
        if (n.status == BeamNode::Status::kept) ++kept_per_step[static_cast<size_t>(n.step)];
        if (n.status != BeamNode::Status::kept) CHECK(tree.children(n.id).empty());
        CHECK(n.attention.size() == (tree.attention_available ? tree.source.size() : 0));
    }
    for (auto k : kept_per_step) CHECK(k <= K);
}
}  // namespace

TEST_CASE("beam tree: the finished leaves, best first, are the N-best list with the same scores", "[beam_tree]") {
    Fixture f;
    for (int64_t K : {1, 2, 3, 5})
        for (double alpha : {0.0, 0.6, 1.0})
            for (int64_t batch : {1, 8}) {
                DecodeOptions o;
                o.beam_size = o.num_hypotheses = K;
                o.length_penalty = alpha;
                o.max_length = 7;
                o.batch_size = batch;
                auto plain = f.model->translate(k_sentences, o);
                o.beam_tree = true;
                auto out = f.model->translate(k_sentences, o);
                for (size_t i = 0; i < k_sentences.size(); ++i) {
                    INFO("beam " << K << ", penalty " << alpha << ", batch " << batch << ", sentence " << i);
                    const Translation& t = out[i];
                    if (t.empty()) {
                        CHECK(t.beam_tree == nullptr);
                        continue;
                    }
                    REQUIRE(t.beam_tree != nullptr);
                    const BeamTree& tree = *t.beam_tree;
                    CHECK(plain[i].beam_tree == nullptr);
                    CHECK(tree.source == t.src_tokens);
                    check_structure(tree, K);
                    REQUIRE(tree.finished.size() >= t.hypotheses.size());
                    REQUIRE(t.hypotheses.size() == plain[i].hypotheses.size());
                    for (size_t r = 0; r < t.hypotheses.size(); ++r) {
                        const Hypothesis& h = t.hypotheses[r];
                        CHECK(h.ids == plain[i].hypotheses[r].ids);  // recording changes nothing
                        CHECK(h.log_prob == plain[i].hypotheses[r].log_prob);
                        const BeamNode& leaf = tree.node(tree.finished[r]);
                        CHECK(leaf.status == BeamNode::Status::finished);
                        CHECK(leaf.log_prob == h.log_prob);
                        CHECK(leaf.score == h.score);
                        const Hypothesis p = tree.partial_hypothesis(leaf.id);
                        CHECK(p.ids == h.ids);
                        CHECK(p.tokens == h.tokens);
                        CHECK(p.text == h.text);
                        CHECK(p.step_log_prob == h.step_log_prob);
                        CHECK(p.rank == h.rank);
                        CHECK(p.attention.weights() == h.attention.weights());
                    }
                    for (size_t r = 1; r < tree.finished.size(); ++r)
                        CHECK(tree.node(tree.finished[r]).score <= tree.node(tree.finished[r - 1]).score);
                }
            }
}

TEST_CASE("beam tree: at beam width 1 the tree's best path is greedy decoding", "[beam_tree]") {
    Fixture f;
    DecodeOptions o;
    o.max_length = 6;
    o.top_k = 3;
    auto greedy = f.model->translate(k_sentences, o);
    o.beam_tree = true;  // beam search at width 1
    auto beam = f.model->translate(k_sentences, o);
    for (size_t i = 0; i < k_sentences.size(); ++i) {
        INFO("sentence " << i);
        if (greedy[i].empty()) continue;
        const Hypothesis& g = greedy[i].best();
        const Hypothesis& b = beam[i].best();
        CHECK(b.ids == g.ids);
        CHECK(b.log_prob == g.log_prob);
        CHECK(b.step_log_prob == g.step_log_prob);
        CHECK(b.rank == g.rank);
        CHECK(b.attention.weights() == g.attention.weights());
        CHECK(b.attention.scores() == g.attention.scores());
        REQUIRE(b.top_k.size() == g.top_k.size());
        for (size_t s = 0; s < g.top_k.size(); ++s) {
            REQUIRE(b.top_k[s].size() == g.top_k[s].size());
            for (size_t k = 0; k < g.top_k[s].size(); ++k) {
                CHECK(b.top_k[s][k].id == g.top_k[s][k].id);
                CHECK(b.top_k[s][k].prob == g.top_k[s][k].prob);
            }
            CHECK(g.top_k[s][0].id == g.ids[s]);  // greedy: top-1 is the chosen token
        }
        // Each step looked at 2 candidates; the greedy path is kept all along.
        const BeamTree& tree = *beam[i].beam_tree;
        check_structure(tree, 1);
        for (int64_t id : tree.path(tree.finished.at(0))) CHECK(tree.node(id).rank == 0);
    }
}

TEST_CASE("beam search records step log-probabilities, token ranks and top-k", "[beam_tree]") {
    Fixture f;
    DecodeOptions o;
    o.beam_size = 4;
    o.num_hypotheses = 4;
    o.top_k = 5;
    o.max_length = 8;
    auto out = f.model->translate(k_sentences, o);
    bool saw_lower_rank = false;
    for (const auto& t : out)
        for (const auto& h : t.hypotheses) {
            REQUIRE(h.step_log_prob.size() == h.ids.size());
            REQUIRE(h.rank.size() == h.ids.size());
            REQUIRE(h.top_k.size() == h.ids.size());
            double sum = 0;
            for (size_t s = 0; s < h.ids.size(); ++s) {
                sum += h.step_log_prob[s];
                const auto& cands = h.top_k[s];
                REQUIRE(cands.size() == 5);
                double psum = 0;
                int64_t more = 0;
                for (size_t k = 0; k < cands.size(); ++k) {
                    psum += cands[k].prob;
                    if (k > 0) CHECK(cands[k].prob <= cands[k - 1].prob);
                    if (cands[k].id == h.ids[s]) CHECK(cands[k].prob == Approx(std::exp(h.step_log_prob[s])).margin(1e-6));
                    more += cands[k].prob > std::exp(h.step_log_prob[s]) + 1e-6 ? 1 : 0;
                }
                CHECK(psum <= 1.0 + 1e-5);
                CHECK(std::min<int64_t>(h.rank[s], 5) == more);
                if (h.rank[s] < 5) CHECK(cands[static_cast<size_t>(h.rank[s])].id == h.ids[s]);
                saw_lower_rank = saw_lower_rank || h.rank[s] > 0;
            }
            CHECK(sum == Approx(h.log_prob).margin(1e-5));
            CHECK(h.forced_steps == 0);
        }
    CHECK(saw_lower_rank);  // the N-best list holds tokens the model did not rank first
}

TEST_CASE("prefix decoding with beam search continues the prefix N ways", "[beam_tree]") {
    Fixture f;
    const std::vector<std::pair<std::string, std::string>> pairs = {
        {"c c a b", "w x"}, {"a", "y"}, {"b a d", ""}, {"d d", "x y z w x"}};
    DecodeOptions o;
    o.max_length = 4;
    o.top_k = 2;
    auto greedy = f.model->force(pairs, ForceMode::prefix, o);
    o.beam_tree = true;  // beam search at width 1: the same as greedy
    auto beam1 = f.model->force(pairs, ForceMode::prefix, o);
    for (size_t i = 0; i < pairs.size(); ++i) {
        INFO("pair " << i);
        const Hypothesis &g = greedy[i].best(), &b = beam1[i].best();
        CHECK(b.ids == g.ids);
        CHECK(b.log_prob == g.log_prob);
        CHECK(b.step_log_prob == g.step_log_prob);
        CHECK(b.rank == g.rank);
        CHECK(b.attention.weights() == g.attention.weights());
        CHECK(b.forced_steps == g.forced_steps);
        CHECK(b.first_divergence == g.first_divergence);
    }
    o.beam_size = o.num_hypotheses = 3;
    for (bool tree : {false, true}) {
        o.beam_tree = tree;
        auto out = f.model->force(pairs, ForceMode::prefix, o);
        for (size_t i = 0; i < pairs.size(); ++i) {
            INFO("pair " << i << ", tree " << tree);
            const auto prefix = f.tgt.encode(tokenize_words(pairs[i].second));
            REQUIRE(out[i].hypotheses.size() == 3);
            for (const auto& h : out[i].hypotheses) {
                REQUIRE(h.ids.size() > prefix.size());  // the prefix and at least one more token
                CHECK(std::equal(prefix.begin(), prefix.end(), h.ids.begin()));
                CHECK(h.forced_steps == static_cast<int64_t>(prefix.size()));
                CHECK(static_cast<int64_t>(h.ids.size()) <= std::max<int64_t>(o.max_length, h.forced_steps + 1));
                for (size_t s = prefix.size(); s < h.ids.size(); ++s) CHECK(h.ids[s] != Vocab::pad_id);
            }
            CHECK(out[i].hypotheses[0].score >= out[i].hypotheses[2].score);
            if (!tree) continue;
            const BeamTree& t = *out[i].beam_tree;
            check_structure(t, 3);
            for (const auto& n : t.nodes) {
                CHECK(n.forced == (n.step < static_cast<int64_t>(prefix.size())));
                if (n.forced) CHECK(n.status == BeamNode::Status::kept);
            }
        }
    }
    // A reference is one path: beam settings do not change how it is scored.
    o.beam_tree = false;
    auto ref_beam = f.model->force(pairs, ForceMode::reference, o);
    auto ref_greedy = f.model->force(pairs, ForceMode::reference, DecodeOptions{});
    for (size_t i = 0; i < pairs.size(); ++i) {
        CHECK(ref_beam[i].hypotheses.size() == 1);
        CHECK(ref_beam[i].best().ids == ref_greedy[i].best().ids);
        CHECK(ref_beam[i].best().log_prob == ref_greedy[i].best().log_prob);
        CHECK(ref_beam[i].beam_tree == nullptr);
    }
    CHECK_THROWS_AS(f.model->force({{"a", "x <bos>"}}, ForceMode::prefix, o), ConfigError);
}

TEST_CASE("beam tree files parse back, and malformed ones are refused with the reason", "[beam_tree]") {
    for (Scoring scoring : {Scoring::additive, Scoring::none}) {
        Fixture f(scoring);
        DecodeOptions o;
        o.beam_size = 3;
        o.num_hypotheses = 2;
        o.beam_tree = true;
        auto out = f.model->translate({"a b c", "d d"}, o);
        nlohmann::json file = nlohmann::json::array();
        for (const auto& t : out) file.push_back(t.beam_tree->to_json());
        auto back = parse_beam_trees(file.dump(1));
        REQUIRE(back.size() == 2);
        for (size_t i = 0; i < back.size(); ++i) {
            const BeamTree &a = *out[i].beam_tree, &b = back[i];
            CHECK(b.source == a.source);
            CHECK(b.level == a.level);
            CHECK(b.beam_size == 3);
            CHECK(b.num_hypotheses == 2);
            CHECK(b.length_penalty == a.length_penalty);
            CHECK(b.attention_available == (scoring != Scoring::none));
            CHECK(b.finished == a.finished);
            REQUIRE(b.nodes.size() == a.nodes.size());
            for (size_t n = 0; n < a.nodes.size(); ++n) {
                const BeamNode &x = a.nodes[n], &y = b.nodes[n];
                CHECK((y.id == x.id && y.parent == x.parent && y.step == x.step && y.token == x.token &&
                       y.token_id == x.token_id && y.status == x.status && y.rank == x.rank &&
                       y.token_rank == x.token_rank && y.forced == x.forced));
                CHECK(y.token_log_prob == x.token_log_prob);  // exactly: numbers read back as written
                CHECK(y.log_prob == x.log_prob);
                CHECK(y.score == x.score);
                CHECK(y.attention == x.attention);
            }
            CHECK(b.partial_hypothesis(b.finished[0]).text == out[i].best().text);
        }
    }

    Fixture f;
    DecodeOptions o;
    o.beam_size = 2;
    o.beam_tree = true;
    const nlohmann::json good = f.model->translate({"a b"}, o)[0].beam_tree->to_json();
    auto refused = [&](const std::function<void(nlohmann::json&)>& spoil, const std::string& reason) {
        nlohmann::json j = good;
        spoil(j);
        INFO("expected: " << reason);
        try {
            parse_beam_trees(j.dump());
            FAIL("accepted");
        } catch (const FileError& e) {
            CHECK_THAT(e.what(), Catch::Matchers::Contains(reason));
        }
    };
    refused([](nlohmann::json& j) { j["format"] = "attnviz-attention"; }, "expected \"attnviz-beam-tree\"");
    refused([](nlohmann::json& j) { j["version"] = 7; }, "version 7");
    refused([](nlohmann::json& j) { j["nodes"][1].erase("score"); }, "node 1: missing \"score\"");
    refused([](nlohmann::json& j) { j["nodes"][0]["status"] = "alive"; }, "node 0: \"status\" is 'alive'");
    refused([](nlohmann::json& j) { j["nodes"][0]["parent"] = 3; }, "node 0: parent 3 does not come before it");
    refused([](nlohmann::json& j) { j["nodes"][2]["attention"] = {0.5}; }, "node 2: 1 attention weights");
    refused([](nlohmann::json& j) { j["finished"].push_back(0); }, "are finished but");
    refused([](nlohmann::json& j) { j["nodes"][0]["token_log_prob"] = "high"; }, "\"token_log_prob\" is 'high'");
    // Numbers out of their field's range (fuzz_beam_tree: "rank": 1e69 was converted to an
    // integer, undefined behaviour) or not whole are refused, not converted.
    refused([](nlohmann::json& j) { j["nodes"][0]["rank"] = 1.11e69; }, "node 0: \"rank\" is 1.11e+69, expected an integer");
    refused([](nlohmann::json& j) { j["nodes"][0]["rank"] = 1.5; }, "\"rank\" is 1.5");
    refused([](nlohmann::json& j) { j["nodes"][0]["token_id"] = UINT64_MAX; }, "\"token_id\" is 18446744073709551615");
    refused([](nlohmann::json& j) { j["nodes"][0]["token_log_prob"] = -1e300; }, "\"token_log_prob\" is -1e+300");
    refused([](nlohmann::json& j) { j["nodes"][1]["attention"][0] = 1e300; }, "node 1: \"attention\"");
    refused([](nlohmann::json& j) { j["version"] = 4294967297LL; }, "\"version\" is 4294967297");
    refused([](nlohmann::json& j) { j["finished"][0] = 2e19; }, "\"finished\"");
    CHECK_THROWS_AS(parse_beam_trees("[{"), FileError);
    CHECK_THROWS_WITH(BeamTree{}.node(0), Catch::Matchers::Contains("no node 0"));
}
