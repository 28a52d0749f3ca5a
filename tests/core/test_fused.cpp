// The fused decoder (core/model/fused_decoder.cpp), which trains every GRU model,
// against the step-by-step autograd decoder it replaces, and against finite
// differences where dropout makes the two draw different masks.
#include "catch_torch.hpp"

#include <map>

#include "core/model/fused_gru.hpp"
#include "core/model/rnn_model.hpp"
#include "core/text/text.hpp"
#include "core/text/vocab.hpp"
#include "test_support.hpp"

using namespace attnviz;
using attnviz::testing::RandomBatch;
using attnviz::testing::tiny_config;

namespace {

const std::vector<Scoring> k_all = {Scoring::additive, Scoring::dot, Scoring::scaled_dot, Scoring::general,
                                    Scoring::none};

// Rows with different source and target lengths, in no particular order, so
// the fused path has to sort, shrink the batch step by step and unsort.
RandomBatch ragged_batch(int64_t src_vocab, int64_t tgt_vocab) {
    const std::vector<int64_t> src_lens{5, 2, 4, 1, 3}, tgt_lens{2, 5, 1, 4, 5};
    return attnviz::testing::ragged_batch(src_lens, tgt_lens, src_vocab, tgt_vocab, 5);
}

// Runs with gradients on (the fused path only serves training); backward when asked.
double loss_of(Seq2Seq& model, const RandomBatch& b, uint64_t seed, bool backward, torch::Tensor* logits = nullptr) {
    torch::manual_seed(seed);  // the same dropout masks on every call
    auto out = model->forward(b.src, b.src_len, b.tgt_in);
    if (logits) *logits = out;
    auto loss = masked_cross_entropy(out, b.tgt_out, Vocab::pad_id);
    if (backward) loss.backward();
    return loss.item<double>();
}

struct Run {
    double loss = 0;
    torch::Tensor logits;
    std::map<std::string, torch::Tensor> grads;
};

Run run(Seq2Seq& model, const RandomBatch& b, bool fused, uint64_t seed = 1) {
    model->set_fused_decoder(fused);
    model->zero_grad();
    Run r;
    r.loss = loss_of(model, b, seed, true, &r.logits);
    for (const auto& p : model->named_parameters())
        r.grads[p.key()] = p.value().grad().defined() ? p.value().grad().clone() : torch::Tensor();
    return r;
}

// vocab: 0 = tiny_config's small vocabularies (fewer entries than the batch has
// tokens: the embedding is folded into layer 0's product), else this size for
// both sides (more entries than tokens: embeddings are looked up per token).
ModelConfig double_config(Scoring scoring, int64_t layers, bool bidirectional, int64_t vocab = 0) {
    auto cfg = vocab > 0 ? tiny_config(scoring, vocab, vocab) : tiny_config(scoring);
    cfg.num_layers = layers;
    cfg.bidirectional = bidirectional;
    cfg.dropout = 0.0;
    return cfg;
}

// generic_gates: the fused nodes' backward gate arithmetic with ATen ops
// (GateArithmetic::generic, CUDA's) instead of the CPU loop.
void check_same_as_autograd(const char* what, int64_t vocab = 0, bool generic_gates = false) {
    for (auto scoring : k_all) {
        for (int64_t layers : {1, 2, 3}) {
            for (int direction : {0, 1, 2}) {  // left to right, reversed source, bidirectional
                const bool bidirectional = direction == 2;
                if (bidirectional && (scoring == Scoring::dot || scoring == Scoring::scaled_dot)) continue;
                INFO(what << ": scoring " << to_string(scoring) << ", " << layers << " layers, "
                          << (direction == 0 ? "left to right" : direction == 1 ? "reversed source" : "bidirectional"));
                auto cfg = double_config(scoring, layers, bidirectional, vocab);
                cfg.reverse_source = direction == 1;
                Seq2Seq model(cfg);
                model->to(torch::kDouble);
                model->train();
                model->set_fused_generic_gates(generic_gates);
                auto b = ragged_batch(cfg.src_vocab, cfg.tgt_vocab);
                const Run ref = run(model, b, false), fused = run(model, b, true);
                CHECK(fused.loss == Approx(ref.loss).epsilon(1e-12));
                // Logits agree at every real target position.
                auto valid = b.tgt_out.ne(Vocab::pad_id).unsqueeze(-1).expand_as(ref.logits);
                CHECK(torch::allclose(fused.logits.masked_select(valid), ref.logits.masked_select(valid), 1e-10,
                                      1e-12));
                for (const auto& [name, g] : ref.grads) {
                    INFO("parameter " << name);
                    const auto& fg = fused.grads.at(name);
                    REQUIRE(g.defined() == fg.defined());
                    if (!g.defined()) continue;
                    CHECK(torch::allclose(fg, g, 1e-8, 1e-11));
                }
            }
        }
    }
}

}  // namespace

TEST_CASE("fused decoder: same loss, logits and gradients as step-by-step autograd", "[fused]") {
    check_same_as_autograd("CPU loop, embedding folded");  // vocabularies of 11-12, 17-18 tokens per side
    check_same_as_autograd("CPU loop, embeddings looked up", 40);
}

TEST_CASE("fused decoder: the device-independent gate arithmetic (CUDA's) agrees too", "[fused]") {
    check_same_as_autograd("generic gates", 0, /*generic_gates=*/true);
}

TEST_CASE("fused decoder in evaluation (no dropout, no gradients): same loss and logits", "[fused]") {
    for (auto scoring : k_all) {
        INFO("scoring " << to_string(scoring));
        auto cfg = tiny_config(scoring);
        cfg.dropout = 0.3;  // must be off in evaluation
        Seq2Seq model(cfg);
        model->eval();
        auto b = ragged_batch(cfg.src_vocab, cfg.tgt_vocab);
        torch::NoGradGuard no_grad;
        auto logits = [&](bool fused) {
            model->set_fused_decoder(fused);
            return model->forward(b.src, b.src_len, b.tgt_in);
        };
        auto ref = logits(false), fused = logits(true);
        auto valid = b.tgt_out.ne(Vocab::pad_id).unsqueeze(-1).expand_as(ref);
        CHECK(torch::allclose(fused.masked_select(valid), ref.masked_select(valid), 1e-5, 1e-6));
        CHECK(masked_cross_entropy(fused, b.tgt_out, Vocab::pad_id).item<double>() ==
              Approx(masked_cross_entropy(ref, b.tgt_out, Vocab::pad_id).item<double>()).epsilon(1e-5));
    }
}

TEST_CASE("fused decoder with dropout: gradients match finite differences", "[fused]") {
    for (auto scoring : {Scoring::additive, Scoring::general, Scoring::none}) {
        INFO("scoring " << to_string(scoring));
        auto cfg = double_config(scoring, 2, false);
        cfg.dropout = 0.3;
        Seq2Seq model(cfg);
        model->to(torch::kDouble);
        model->train();
        auto b = ragged_batch(cfg.src_vocab, cfg.tgt_vocab);
        const uint64_t seed = 11;
        const Run analytic = run(model, b, true, seed);
        // Dropout is really on: another seed gives another loss.
        CHECK(run(model, b, true, seed + 1).loss != Approx(analytic.loss).epsilon(1e-9));

        torch::manual_seed(99);
        const double eps = 1e-6;
        int checked = 0;
        for (auto& item : model->named_parameters()) {
            auto p = item.value();
            const auto& g = analytic.grads.at(item.key());
            REQUIRE(g.defined());
            auto flat = p.view({-1});
            for (int k = 0; k < 3; ++k) {
                const int64_t i = torch::randint(flat.numel(), {1}, torch::kLong).item<int64_t>();
                auto set = [&](double v) {
                    torch::NoGradGuard no_grad;
                    flat[i] = v;
                };
                const double orig = flat[i].item<double>();
                set(orig + eps);
                const double up = loss_of(model, b, seed, false);
                set(orig - eps);
                const double down = loss_of(model, b, seed, false);
                set(orig);
                const double numeric = (up - down) / (2 * eps);
                const double exact = g.view({-1})[i].item<double>();
                INFO("parameter " << item.key() << "[" << i << "]: analytic " << exact << ", numeric " << numeric);
                CHECK(std::abs(numeric - exact) <= 1e-6 + 1e-5 * std::abs(exact));
                ++checked;
            }
        }
        CHECK(checked > 30);
    }
}

TEST_CASE("fused decoder: inputs it cannot take are refused with a message", "[fused]") {
    FusedDecoderInputs in;
    in.h0 = torch::zeros({1, 2, 4});
    in.tokens = torch::zeros({3}, torch::kLong);
    in.embedding = torch::zeros({5, 4});
    FusedDecoderOptions opts;
    opts.steps = {2, 1};
    CHECK_THROWS_WITH(fused_gru_decoder(in, opts), Catch::Contains("one set of GRU weights per layer"));
    in.w_ih = {torch::zeros({12, 8})};
    in.w_hh = {torch::zeros({12, 4})};
    in.b_ih = {torch::zeros({12})};
    in.b_hh = {torch::zeros({12})};
    opts.steps = {1, 2};
    CHECK_THROWS_WITH(fused_gru_decoder(in, opts), Catch::Contains("non-increasing"));
    opts.steps = {2, 2};
    CHECK_THROWS_WITH(fused_gru_decoder(in, opts), Catch::Contains("steps sum to 4"));
}
