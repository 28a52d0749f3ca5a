// Greedy decoding: what it returns for the GUI and the CLI.
#include "catch_torch.hpp"

#include <cmath>

#include "core/decode/translation.hpp"
#include "core/io/error.hpp"
#include "test_support.hpp"

using namespace attnviz;

namespace {
struct Fixture {
    Vocab src = Vocab::build({{"a", "b", "c", "d"}});
    Vocab tgt = Vocab::build({{"x", "y", "z"}});
    Seq2Seq model{nullptr};
    explicit Fixture(Scoring scoring = Scoring::additive) {
        auto cfg = testing::tiny_config(scoring, static_cast<int64_t>(src.size()), static_cast<int64_t>(tgt.size()));
        model = Seq2Seq(cfg);
        tm = testing::as_model(model, src, tgt);
    }
    TranslationModelPtr tm;
};
}  // namespace

TEST_CASE("greedy decoding returns tokens with one attention row per output step", "[decode]") {
    Fixture f;
    DecodeOptions o;
    o.max_length = 7;
    auto out = f.tm->translate({"a b c", "d"}, o);
    REQUIRE(out.size() == 2);
    for (const auto& t : out) {
        REQUIRE(t.hypotheses.size() == 1);
        const auto& h = t.best();
        CHECK(h.tokens.size() == h.ids.size());
        CHECK(h.tokens.size() <= 7);
        CHECK(h.attention.weights().size() == h.tokens.size());
        CHECK(h.attention.scores().size() == h.tokens.size());
        CHECK(h.context_norm.size() == h.tokens.size());
        for (size_t s = 0; s < h.attention.weights().size(); ++s) {
            REQUIRE(h.attention.weights()[s].size() == t.src_tokens.size());
            double sum = 0, z = 0;
            for (float w : h.attention.weights()[s]) sum += w;
            CHECK(sum == Approx(1.0).epsilon(1e-5));
            // The weights are the softmax of the raw scores.
            for (float r : h.attention.scores()[s]) z += std::exp(r);
            CHECK(h.attention.weights()[s][0] == Approx(std::exp(h.attention.scores()[s][0]) / z).epsilon(1e-4));
        }
        for (const auto& tok : h.tokens) {
            CHECK(tok != "<pad>");
            CHECK(tok != "<bos>");
        }
    }
    CHECK(out[0].src_tokens == std::vector<std::string>{"a", "b", "c", "<eos>"});
    CHECK(out[0].input == "a b c");
}

TEST_CASE("an empty input gives an empty result, not a crash", "[decode]") {
    Fixture f;
    auto out = f.tm->translate({"", "   ", "a"});
    REQUIRE(out.size() == 3);
    CHECK(out[0].empty());
    CHECK(out[1].empty());
    CHECK_FALSE(out[2].empty());
}

TEST_CASE("unknown words map to <unk> and are reported", "[decode]") {
    Fixture f;
    auto out = f.tm->translate({"a zebra b"});
    CHECK(out[0].src_tokens == std::vector<std::string>{"a", "<unk>", "b", "<eos>"});
    CHECK(out[0].unknown == std::vector<std::string>{"zebra"});
}

TEST_CASE("batched decoding equals one-by-one decoding", "[decode]") {
    Fixture f;
    std::vector<std::string> sentences = {"a b c d", "b", "c c a", "d a"};
    DecodeOptions batched, single;
    batched.batch_size = 4;
    single.batch_size = 1;
    auto a = f.tm->translate(sentences, batched);
    auto b = f.tm->translate(sentences, single);
    for (size_t i = 0; i < sentences.size(); ++i) {
        CHECK(a[i].best().ids == b[i].best().ids);
        CHECK(a[i].best().log_prob == Approx(b[i].best().log_prob).epsilon(1e-4));
    }
}

TEST_CASE("without attention there are no attention rows", "[decode]") {
    Fixture f(Scoring::none);
    auto out = f.tm->translate({"a b"});
    CHECK_FALSE(out[0].attention_available);
    CHECK(out[0].best().attention.weights().empty());
    CHECK(out[0].best().context_norm.size() == out[0].best().tokens.size());
}

TEST_CASE("bad decode options are configuration errors", "[decode]") {
    Fixture f;
    DecodeOptions o;
    o.max_length = 0;
    CHECK_THROWS_AS(f.tm->translate({"a"}, o), ConfigError);
    o = DecodeOptions{};
    o.beam_size = 2;
    o.num_hypotheses = 3;
    CHECK_THROWS_AS(f.tm->translate({"a"}, o), ConfigError);
}
