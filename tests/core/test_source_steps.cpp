// ModelConfig::source_steps, d2l's num_steps on the source side: sources are
// pad_or_trim'd to N steps, the encoder runs over the padding (its final state
// comes after the pads) and attention stays masked to each sentence.
#include "catch_torch.hpp"

#include <map>

#include "core/decode/translation.hpp"
#include "core/io/error.hpp"
#include "core/model/rnn_model.hpp"
#include "test_support.hpp"

using namespace attnviz;
using attnviz::testing::RandomBatch;
using attnviz::testing::tiny_config;

namespace {

ModelConfig steps_config(int64_t steps, bool bidirectional = false, bool reverse = false, int64_t layers = 2) {
    auto cfg = tiny_config(Scoring::additive);
    cfg.source_steps = steps;
    cfg.bidirectional = bidirectional;
    cfg.reverse_source = reverse;
    cfg.num_layers = layers;
    return cfg;
}

torch::Tensor full_lengths(int64_t B, int64_t S) { return torch::full({B}, S, torch::kLong); }

}  // namespace

TEST_CASE("source_steps: the encoder reads the padding, the mask keeps to the sentence", "[model][source_steps]") {
    for (bool fused : {true, false}) {
        INFO((fused ? "fused encoder" : "packed encoder"));
        Seq2Seq with_steps(steps_config(6)), natural(steps_config(0));  // same seed: same weights
        with_steps->eval();
        natural->eval();
        with_steps->set_fused_decoder(fused);
        natural->set_fused_decoder(fused);
        torch::NoGradGuard no_grad;
        auto b = testing::random_batch({3, 6, 2}, 4, 12, 11);  // 6 wide
        auto enc = with_steps->encode_states(b.src, b.src_len);
        // Reading the pads as tokens is what source_steps does to the RNN ...
        auto as_tokens = natural->encode_states(b.src, full_lengths(3, 6));
        CHECK(torch::allclose(enc.outputs, as_tokens.outputs, 1e-6, 1e-6));
        CHECK(torch::allclose(enc.h0, as_tokens.h0, 1e-6, 1e-6));
        // ... while attention only sees the sentence.
        CHECK(torch::equal(enc.src_len, b.src_len));
        CHECK(torch::equal(enc.mask, torch::arange(6).unsqueeze(0) < b.src_len.unsqueeze(1)));
        // A short row's final state differs from the natural-length one; the full row's does not.
        auto nat = natural->encode_states(b.src, b.src_len);
        CHECK_FALSE(torch::allclose(enc.h0.select(1, 0), nat.h0.select(1, 0), 1e-4, 1e-4));
        CHECK(torch::allclose(enc.h0.select(1, 1), nat.h0.select(1, 1), 1e-6, 1e-6));
    }
}

TEST_CASE("source_steps: a batch of another width is padded or cut like pad_or_trim", "[model][source_steps]") {
    Seq2Seq model(steps_config(6));
    model->eval();
    torch::NoGradGuard no_grad;
    // Narrower: padded to 6 columns.
    auto narrow = testing::random_batch({4, 2}, 3, 12, 11);  // 4 wide
    auto padded = torch::constant_pad_nd(narrow.src, {0, 2}, Vocab::pad_id);
    auto a = model->encode_states(narrow.src, narrow.src_len), b = model->encode_states(padded, narrow.src_len);
    CHECK(a.outputs.size(1) == 6);
    CHECK(torch::allclose(a.outputs, b.outputs, 1e-6, 1e-6));
    CHECK(torch::allclose(a.h0, b.h0, 1e-6, 1e-6));
    // Wider: cut to 6 columns; a long row loses its <eos> and its length is 6.
    auto wide = testing::random_batch({8, 3}, 3, 12, 11);  // 8 wide
    auto c = model->encode_states(wide.src, wide.src_len), d = model->encode_states(wide.src.narrow(1, 0, 6), wide.src_len.clamp_max(6));
    CHECK(c.outputs.size(1) == 6);
    CHECK(torch::equal(c.src_len, torch::tensor({6, 3}, torch::kLong)));
    CHECK(torch::allclose(c.outputs, d.outputs, 1e-6, 1e-6));
    CHECK(torch::allclose(c.h0, d.h0, 1e-6, 1e-6));
}

TEST_CASE("source_steps: fused training agrees with step-by-step autograd, padded and cut", "[fused][source_steps]") {
    for (int64_t steps : {7, 3}) {  // wider than the batch (5) and narrower
        for (int direction : {0, 1, 2}) {
            INFO("source_steps " << steps << ", direction " << direction);
            auto cfg = steps_config(steps, direction == 2, direction == 1);
            Seq2Seq model(cfg);
            model->to(torch::kDouble);
            model->train();
            auto b = testing::random_batch({5, 2, 4}, 4, cfg.src_vocab, cfg.tgt_vocab);
            auto run = [&](bool fused) {
                model->set_fused_decoder(fused);
                model->zero_grad();
                auto logits = model->forward(b.src, b.src_len, b.tgt_in);
                auto loss = masked_cross_entropy(logits, b.tgt_out, Vocab::pad_id);
                loss.backward();
                std::map<std::string, torch::Tensor> grads;
                for (const auto& p : model->named_parameters()) grads[p.key()] = p.value().grad().clone();
                return std::make_tuple(loss.item<double>(), logits.detach(), grads);
            };
            const auto [ref_loss, ref_logits, ref_grads] = run(false);
            const auto [loss, logits, grads] = run(true);
            CHECK(loss == Approx(ref_loss).epsilon(1e-12));
            CHECK(torch::allclose(logits, ref_logits, 1e-10, 1e-12));
            for (const auto& [name, g] : ref_grads) {
                INFO("parameter " << name);
                CHECK(torch::allclose(grads.at(name), g, 1e-8, 1e-11));
            }
        }
    }
}

TEST_CASE("source_steps in decoding: sources cut to N, attention rows cover what was read", "[decode][source_steps]") {
    Vocab src = Vocab::build({{"a", "b", "c", "d"}}), tgt = Vocab::build({{"x", "y", "z"}});
    auto cfg = tiny_config(Scoring::additive, static_cast<int64_t>(src.size()), static_cast<int64_t>(tgt.size()));
    cfg.source_steps = 3;
    auto tm = testing::as_model(Seq2Seq(cfg), src, tgt);
    cfg.source_steps = 0;
    auto natural = testing::as_model(Seq2Seq(cfg), src, tgt);

    DecodeOptions greedy, beam;
    greedy.max_length = 6;
    beam.max_length = 6;
    beam.beam_size = 3;
    beam.num_hypotheses = 2;
    for (const auto* o : {&greedy, &beam}) {
        INFO("beam size " << o->beam_size);
        auto out = tm->translate({"a b c d", "a", "a b c d d q"}, *o);
        CHECK(out[0].src_tokens == std::vector<std::string>{"a", "b", "c"});  // <eos> cut off
        CHECK(out[1].src_tokens == std::vector<std::string>{"a", "<eos>"});
        CHECK(out[2].unknown.empty());  // "q" lies past the 3 steps the model reads
        for (const auto& t : out)
            for (const auto& h : t.hypotheses)
                for (const auto& row : h.attention.weights()) CHECK(row.size() == t.src_tokens.size());
        // Both long sentences are read as "a b c": the same translation.
        CHECK(out[0].best().ids == out[2].best().ids);
        // The same numbers up to float rounding: a BLAS may round rows of one batch differently
        // (MKL's AVX2 kernels do: rows 0 and 2 here differed in the seventh digit).
        const auto &w0 = out[0].best().attention.weights(), &w2 = out[2].best().attention.weights();
        REQUIRE(w0.size() == w2.size());
        for (size_t i = 0; i < w0.size(); ++i) {
            REQUIRE(w0[i].size() == w2[i].size());
            for (size_t j = 0; j < w0[i].size(); ++j) CHECK(w0[i][j] == Approx(w2[i][j]).margin(1e-6));
        }
        // One by one gives what the batch gave (every batch is N wide).
        auto alone = tm->translate({"a"}, *o);
        CHECK(alone[0].best().ids == out[1].best().ids);
        const auto &a = alone[0].best().step_log_prob, &b = out[1].best().step_log_prob;
        REQUIRE(a.size() == b.size());
        for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).margin(1e-5));
    }
    // The decoder starts from the state after the pads: not the natural model's start.
    auto padded = tm->translate({"a"}, greedy), plain = natural->translate({"a"}, greedy);
    CHECK(padded[0].best().step_log_prob[0] != plain[0].best().step_log_prob[0]);

    // Forced decoding records one row per given token over the same N positions.
    auto forced = tm->force({{"a b c d", "x y"}}, ForceMode::reference);
    REQUIRE(forced[0].best().attention.weights().size() == 3);  // x y <eos>
    for (const auto& row : forced[0].best().attention.weights()) CHECK(row.size() == 3);
}

TEST_CASE("source_steps round-trips through the model's JSON and is range-checked", "[model][source_steps]") {
    ModelConfig c;
    c.source_steps = 9;
    CHECK(ModelConfig::from_json(c.to_json()).source_steps == 9);
    CHECK(ModelConfig::from_json(ModelConfig{}.to_json()).source_steps == 0);
    c.source_steps = -1;
    CHECK_THROWS_AS(c.validate(), ConfigError);
}
