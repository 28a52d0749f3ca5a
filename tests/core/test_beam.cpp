// Beam search against greedy decoding and against exhaustive enumeration.
#include "catch_torch.hpp"

#include <cmath>
#include <functional>

#include "core/decode/translation.hpp"
#include "core/decode/beam.hpp"
#include "core/decode/greedy.hpp"
#include "test_support.hpp"

using namespace attnviz;

namespace {
struct Tiny {
    Vocab src = Vocab::build({{"a", "b", "c"}});
    Vocab tgt = Vocab::build({{"x", "y"}});  // outputs: <eos> <unk> x y
    Seq2Seq model{nullptr};
    Tiny() {
        auto cfg = testing::tiny_config(Scoring::additive, static_cast<int64_t>(src.size()), static_cast<int64_t>(tgt.size()));
        cfg.seed = 11;
        model = Seq2Seq(cfg);
        model->eval();
        // Sharpen the output layer so that greedy and the best sequence differ sometimes.
        torch::NoGradGuard ng;
        for (auto& p : model->named_parameters())
            if (p.key().rfind("dense", 0) == 0) p.value().mul_(6.0);
        tm = testing::as_model(model, src, tgt);
    }
    TranslationModelPtr tm;  ///< the same network, as every translation sees it
    // Log-probability of a whole output sequence under teacher forcing.
    double sequence_logp(const std::vector<std::string>& source, const std::vector<int64_t>& ids) {
        torch::NoGradGuard ng;
        std::vector<int64_t> src_ids;
        for (const auto& s : source) src_ids.push_back(src.id(s));
        src_ids.push_back(Vocab::eos_id);
        auto s = torch::tensor(src_ids).unsqueeze(0);
        auto enc = model->encode_states(s, torch::tensor({static_cast<int64_t>(src_ids.size())}));
        auto state = model->init_state(enc);
        auto tok = torch::tensor({Vocab::bos_id});
        double total = 0;
        for (auto id : ids) {
            auto out = model->step(tok, state, enc);
            total += torch::log_softmax(out.logits, -1)[0][id].item<double>();
            tok = torch::tensor({id});
        }
        return total;
    }
};
}  // namespace

TEST_CASE("beam width 1 gives exactly the greedy result", "[beam]") {
    Tiny t;
    std::vector<std::vector<std::string>> sources = {{"a", "b"}, {"c"}, {"b", "b", "a", "c"}};
    DecodeOptions o;
    o.max_length = 6;
    auto greedy = greedy_decode(t.tm->search_model(), sources, o);
    auto beam = beam_decode(t.tm->search_model(), sources, o);
    for (size_t i = 0; i < sources.size(); ++i) {
        CHECK(beam[i].best().ids == greedy[i].best().ids);
        CHECK(beam[i].best().log_prob == Approx(greedy[i].best().log_prob).epsilon(1e-5));
        CHECK(beam[i].best().attention.weights() == greedy[i].best().attention.weights());
    }
}

TEST_CASE("a wide beam finds the best sequence of exhaustive enumeration", "[beam]") {
    Tiny t;
    const int64_t max_len = 4;
    const std::vector<int64_t> outputs = {Vocab::eos_id, Vocab::unk_id, 4, 5};
    for (const auto& source : std::vector<std::vector<std::string>>{{"a", "b"}, {"c", "a", "a"}, {"b"}}) {
        // Enumerate every sequence that ends in <eos> within max_len, or reaches max_len.
        double best = -1e30;
        std::vector<int64_t> best_ids;
        std::function<void(std::vector<int64_t>&)> walk = [&](std::vector<int64_t>& prefix) {
            for (auto id : outputs) {
                prefix.push_back(id);
                if (id == Vocab::eos_id || static_cast<int64_t>(prefix.size()) == max_len) {
                    const double lp = t.sequence_logp(source, prefix);
                    if (lp > best) {
                        best = lp;
                        best_ids = prefix;
                    }
                } else {
                    walk(prefix);
                }
                prefix.pop_back();
            }
        };
        std::vector<int64_t> prefix;
        walk(prefix);
        DecodeOptions o;
        o.max_length = max_len;
        o.beam_size = 64;  // more than the 4^3 live prefixes
        o.num_hypotheses = 5;
        o.length_penalty = 0.0;
        auto r = beam_decode(t.tm->search_model(), {source}, o);
        INFO("source " << source.size() << " tokens");
        CHECK(r[0].best().ids == best_ids);
        CHECK(r[0].best().log_prob == Approx(best).epsilon(1e-4));
        // N-best: sorted by score, each score the sum of its step log-probabilities.
        REQUIRE(r[0].hypotheses.size() == 5);
        for (size_t i = 0; i < r[0].hypotheses.size(); ++i) {
            const auto& h = r[0].hypotheses[i];
            CHECK(h.log_prob == Approx(t.sequence_logp(source, h.ids)).epsilon(1e-4));
            if (i > 0) CHECK(h.score <= r[0].hypotheses[i - 1].score);
            CHECK(h.attention.weights().size() == h.ids.size());
        }
    }
}

TEST_CASE("length normalisation divides by length^penalty", "[beam]") {
    Tiny t;
    DecodeOptions o;
    o.beam_size = 4;
    o.num_hypotheses = 3;
    o.length_penalty = 1.0;
    auto r = beam_decode(t.tm->search_model(), {{"a", "c"}}, o);
    for (const auto& h : r[0].hypotheses)
        CHECK(h.score == Approx(h.log_prob / static_cast<double>(h.ids.size())).epsilon(1e-6));
}

TEST_CASE("beam search is batched: together equals one by one", "[beam]") {
    Tiny t;
    std::vector<std::vector<std::string>> sources = {{"a", "b"}, {"c"}, {"b", "b", "a"}, {}, {"a"}};
    DecodeOptions together, alone;
    together.beam_size = alone.beam_size = 3;
    together.num_hypotheses = alone.num_hypotheses = 2;
    together.batch_size = 8;
    alone.batch_size = 1;
    auto a = beam_decode(t.tm->search_model(), sources, together);
    auto b = beam_decode(t.tm->search_model(), sources, alone);
    REQUIRE(a.size() == sources.size());
    CHECK(a[3].empty());
    for (size_t i = 0; i < sources.size(); ++i) {
        REQUIRE(a[i].hypotheses.size() == b[i].hypotheses.size());
        for (size_t k = 0; k < a[i].hypotheses.size(); ++k) CHECK(a[i].hypotheses[k].ids == b[i].hypotheses[k].ids);
    }
}
