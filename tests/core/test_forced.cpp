// "Why this word?": top-k candidates per step and forced decoding (a reference
// scored teacher-forced, or a prefix the model continues).
#include "catch_torch.hpp"

#include <cmath>

#include "core/decode/translation.hpp"
#include "core/io/error.hpp"
#include "test_support.hpp"

using namespace attnviz;

namespace {
struct Fixture {
    Vocab src = Vocab::build({{"a", "b", "c", "d"}});
    Vocab tgt = Vocab::build({{"x", "y", "z", "w"}});
    TranslationModelPtr model;
    Fixture() {
        auto cfg = testing::tiny_config(Scoring::additive, static_cast<int64_t>(src.size()), static_cast<int64_t>(tgt.size()));
        Seq2Seq net(cfg);
        torch::NoGradGuard ng;
        for (auto& p : net->named_parameters())  // sharper outputs: varied, confident choices
            if (p.key().rfind("dense", 0) == 0) p.value().mul_(4.0);
        model = testing::as_model(net, src, tgt);
    }
};
const std::vector<std::string> k_sentences = {"a b c", "d", "c c a b", "b a"};

std::string join(const std::vector<std::string>& tokens, size_t n) {
    std::string s;
    for (size_t i = 0; i < n && i < tokens.size(); ++i) s += (s.empty() ? "" : " ") + tokens[i];
    return s;
}
}  // namespace

TEST_CASE("top-k: the first candidate is the greedy token, probabilities descend", "[forced]") {
    Fixture f;
    DecodeOptions o;
    o.top_k = 5;
    o.max_length = 8;
    auto out = f.model->translate(k_sentences, o);
    for (const auto& t : out) {
        const auto& h = t.best();
        REQUIRE(h.top_k.size() == h.ids.size());
        for (size_t s = 0; s < h.ids.size(); ++s) {
            const auto& cands = h.top_k[s];
            REQUIRE(cands.size() == 5);
            CHECK(cands[0].id == h.ids[s]);
            CHECK(cands[0].token == h.tokens[s]);
            CHECK(std::log(cands[0].prob) == Approx(h.step_log_prob[s]).margin(1e-5));
            double sum = 0;
            for (size_t k = 0; k < cands.size(); ++k) {
                sum += cands[k].prob;
                if (k > 0) CHECK(cands[k].prob <= cands[k - 1].prob);
                CHECK(cands[k].id != Vocab::pad_id);
                CHECK(cands[k].id != Vocab::bos_id);
            }
            CHECK(sum <= 1.0 + 1e-5);
            CHECK(h.rank[s] == 0);
        }
    }
    // Off by default; the same translations either way.
    auto plain = f.model->translate(k_sentences, DecodeOptions{});
    CHECK(plain[0].best().top_k.empty());
    CHECK(plain[0].best().ids == f.model->translate(k_sentences, o)[0].best().ids);
    o.top_k = 101;
    CHECK_THROWS_AS(f.model->translate(k_sentences, o), ConfigError);
}

TEST_CASE("forcing the model's own greedy output gives exactly its log-probability and attention", "[forced]") {
    Fixture f;
    DecodeOptions o;
    o.max_length = 8;
    auto greedy = f.model->translate(k_sentences, o);
    std::vector<std::pair<std::string, std::string>> pairs;
    for (size_t i = 0; i < k_sentences.size(); ++i) {
        const auto& h = greedy[i].best();
        REQUIRE(h.ids.back() == Vocab::eos_id);  // the test needs finished outputs
        pairs.push_back({k_sentences[i], join(h.tokens, h.tokens.size() - 1)});
    }
    auto forced = f.model->force(pairs, ForceMode::reference, o);
    for (size_t i = 0; i < pairs.size(); ++i) {
        INFO(pairs[i].first << " -> " << pairs[i].second);
        const auto& g = greedy[i].best();
        const auto& h = forced[i].best();
        CHECK(h.ids == g.ids);
        CHECK(h.log_prob == g.log_prob);
        CHECK(h.attention.weights() == g.attention.weights());
        CHECK(h.attention.scores() == g.attention.scores());
        CHECK(h.forced_steps == static_cast<int64_t>(g.ids.size()));
        CHECK(h.first_divergence == -1);
        for (auto r : h.rank) CHECK(r == 0);
    }
}

TEST_CASE("forcing another reference: log-probabilities, ranks and the first divergence", "[forced]") {
    Fixture f;
    DecodeOptions o;
    o.top_k = 3;
    auto greedy = f.model->translate({"a b c"}, o)[0].best();
    // A reference that agrees with the model on its first token, then differs.
    const std::string first = greedy.tokens[0] == "<eos>" ? "x" : greedy.tokens[0];
    const std::string other = greedy.tokens.size() > 1 && greedy.tokens[1] == "y" ? "z" : "y";
    auto out = f.model->force({{"a b c", first + " " + other + " w"}}, ForceMode::reference, o);
    const auto& h = out[0].best();
    REQUIRE(h.tokens == std::vector<std::string>{first, other, "w", "<eos>"});
    CHECK(h.forced_steps == 4);
    REQUIRE(h.rank.size() == 4);
    double sum = 0;
    for (size_t s = 0; s < 4; ++s) {
        sum += h.step_log_prob[s];
        CHECK(h.step_log_prob[s] <= 0);
        CHECK(h.attention.weights()[s].size() == 4);  // a b c <eos>
        // The rank is the number of candidates more probable than the given token.
        int64_t more = 0;
        for (const auto& c : h.top_k[s]) more += c.prob > std::exp(h.step_log_prob[s]) + 1e-7 ? 1 : 0;
        CHECK(std::min<int64_t>(h.rank[s], 3) == more);
    }
    CHECK(h.log_prob == Approx(sum));
    int64_t expected = -1;
    for (size_t s = 0; s < 4 && expected < 0; ++s)
        if (h.rank[s] > 0) expected = static_cast<int64_t>(s);
    CHECK(h.first_divergence == expected);
    if (greedy.tokens[0] != "<eos>") CHECK(h.rank[0] == 0);
    // Words outside the target vocabulary are forced as <unk>, like any other token.
    auto unk = f.model->force({{"a", "x zebra"}}, ForceMode::reference, o)[0].best();
    CHECK(unk.tokens == std::vector<std::string>{"x", "<unk>", "<eos>"});
}

TEST_CASE("prefix mode: the given tokens, then the model's own greedy continuation", "[forced]") {
    Fixture f;
    DecodeOptions o;
    o.max_length = 10;
    auto out = f.model->force({{"c c a b", "w x"}}, ForceMode::prefix, o);
    const auto& h = out[0].best();
    REQUIRE(h.ids.size() >= 3);
    CHECK(h.tokens[0] == "w");
    CHECK(h.tokens[1] == "x");
    CHECK(h.forced_steps == 2);
    for (size_t s = 2; s < h.rank.size(); ++s) CHECK(h.rank[s] == 0);  // chosen by the model
    CHECK((h.ids.back() == Vocab::eos_id || static_cast<int64_t>(h.ids.size()) == o.max_length));
    // The continuation is what the model chooses after that prefix: forcing the whole
    // output as a reference finds no divergence after the prefix.
    if (h.ids.back() == Vocab::eos_id) {
        auto again = f.model->force({{"c c a b", join(h.tokens, h.tokens.size() - 1)}}, ForceMode::reference, o)[0].best();
        CHECK(again.ids == h.ids);
        CHECK(again.log_prob == h.log_prob);
    }
    // A prefix longer than max_length still fits (max_length stretches), then one more step.
    o.max_length = 2;
    auto longer = f.model->force({{"a", "x y z w"}}, ForceMode::prefix, o)[0].best();
    CHECK(longer.forced_steps == 4);
    CHECK(longer.ids.size() == 5);
}
