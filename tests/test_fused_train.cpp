// The training step's fused parts against what they replace: the output layer
// fused with its cross-entropy (core/fused_output.hpp) against Linear +
// masked_cross_entropy.
#include "catch_torch.hpp"

#include <cmath>
#include <map>

#include "core/fused_output.hpp"
#include "core/model.hpp"
#include "core/text.hpp"
#include "test_support.hpp"

using namespace attnviz;
using attnviz::testing::tiny_config;

namespace F = torch::nn::functional;

namespace {

// Rows of different source and target lengths in no particular order, padded.
attnviz::testing::RandomBatch ragged(int64_t src_vocab, int64_t tgt_vocab) {
    const std::vector<int64_t> src_lens{3, 5, 1, 4}, tgt_lens{4, 1, 5, 2};
    const int64_t B = 4, S = 5, T = 5;
    torch::manual_seed(21);
    attnviz::testing::RandomBatch r;
    r.src = torch::zeros({B, S}, torch::kLong);
    r.tgt_in = torch::zeros({B, T}, torch::kLong);
    r.tgt_out = torch::zeros({B, T}, torch::kLong);
    for (int64_t b = 0; b < B; ++b) {
        r.src[b].narrow(0, 0, src_lens[b]) = torch::randint(4, src_vocab, {src_lens[b]}, torch::kLong);
        r.src[b][src_lens[b] - 1] = Vocab::eos_id;
        auto out = torch::randint(4, tgt_vocab, {tgt_lens[b]}, torch::kLong);
        out[tgt_lens[b] - 1] = Vocab::eos_id;
        r.tgt_out[b].narrow(0, 0, tgt_lens[b]) = out;
        r.tgt_in[b][0] = Vocab::bos_id;
        if (tgt_lens[b] > 1) r.tgt_in[b].narrow(0, 1, tgt_lens[b] - 1) = out.narrow(0, 0, tgt_lens[b] - 1);
    }
    r.src_len = torch::tensor(src_lens, torch::kLong);
    return r;
}

std::map<std::string, torch::Tensor> grads_of(Seq2Seq& model) {
    std::map<std::string, torch::Tensor> out;
    for (const auto& p : model->named_parameters())
        out[p.key()] = p.value().grad().defined() ? p.value().grad().clone() : torch::Tensor();
    return out;
}

// x [N, H], weight [V, H], bias [V] in double, requiring gradients.
struct OutputLayer {
    torch::Tensor x, weight, bias;
    explicit OutputLayer(int64_t N = 7, int64_t H = 5, int64_t V = 9) {
        torch::manual_seed(4);
        auto opt = torch::TensorOptions().dtype(torch::kDouble);
        x = torch::randn({N, H}, opt).requires_grad_();
        weight = torch::randn({V, H}, opt).requires_grad_();
        bias = torch::randn({V}, opt).requires_grad_();
    }
    void zero_grad() {
        for (auto* t : {&x, &weight, &bias}) t->mutable_grad() = torch::Tensor();
    }
};

}  // namespace

TEST_CASE("fused output layer and cross-entropy: same loss and gradients as Linear + cross_entropy", "[fused]") {
    OutputLayer o;
    const int64_t ignore = 0;
    // Rows 2 and 5 are ignored (padding), like pads in a batch.
    const auto targets = torch::tensor(std::vector<int64_t>{3, 1, 0, 8, 4, 0, 2}, torch::kLong);
    auto ref = F::cross_entropy(torch::addmm(o.bias, o.x, o.weight.t()), targets,
                                F::CrossEntropyFuncOptions().ignore_index(ignore));
    ref.backward();
    const auto gx = o.x.grad().clone(), gw = o.weight.grad().clone(), gb = o.bias.grad().clone();
    o.zero_grad();
    auto fused = fused_output_cross_entropy(o.x, o.weight, o.bias, targets, ignore);
    CHECK(fused.item<double>() == Approx(ref.item<double>()).epsilon(1e-13));
    (fused * 3.0).backward();  // an upstream factor reaches every gradient
    CHECK(torch::allclose(o.x.grad(), 3 * gx, 1e-12, 1e-14));
    CHECK(torch::allclose(o.weight.grad(), 3 * gw, 1e-12, 1e-14));
    CHECK(torch::allclose(o.bias.grad(), 3 * gb, 1e-12, 1e-14));
    // Ignored rows get no gradient at all.
    CHECK(o.x.grad()[2].abs().max().item<double>() == 0.0);
    CHECK(o.x.grad()[5].abs().max().item<double>() == 0.0);
}

TEST_CASE("fused output layer and cross-entropy: gradients match finite differences", "[fused]") {
    OutputLayer o(6, 4, 11);
    const auto targets = torch::tensor(std::vector<int64_t>{10, 1, 5, 5, 0, 7}, torch::kLong);
    auto loss_value = [&] {
        torch::NoGradGuard no_grad;
        return fused_output_cross_entropy(o.x, o.weight, o.bias, targets, 0).item<double>();
    };
    fused_output_cross_entropy(o.x, o.weight, o.bias, targets, 0).backward();
    const double eps = 1e-6;
    int checked = 0;
    for (auto* t : {&o.x, &o.weight, &o.bias}) {
        auto flat = t->view({-1});
        const auto g = t->grad().view({-1}).clone();
        for (int64_t i = 0; i < flat.numel(); i += 3) {
            const double orig = flat[i].item<double>();
            auto set = [&](double v) {
                torch::NoGradGuard no_grad;
                flat[i] = v;
            };
            set(orig + eps);
            const double up = loss_value();
            set(orig - eps);
            const double down = loss_value();
            set(orig);
            const double numeric = (up - down) / (2 * eps), exact = g[i].item<double>();
            INFO("element " << i << ": analytic " << exact << ", numeric " << numeric);
            CHECK(std::abs(numeric - exact) <= 1e-7 + 1e-6 * std::abs(exact));
            ++checked;
        }
    }
    CHECK(checked > 20);
}

TEST_CASE("fused output layer and cross-entropy: every row ignored, a second backward, bad shapes", "[fused]") {
    OutputLayer o(3, 4, 5);
    auto all_pad = torch::zeros({3}, torch::kLong);
    auto nan_loss = fused_output_cross_entropy(o.x, o.weight, o.bias, all_pad, 0);
    CHECK(std::isnan(nan_loss.item<double>()));  // as cross_entropy: 0 / 0
    nan_loss.backward();
    CHECK(o.weight.grad().abs().max().item<double>() == 0.0);

    auto loss = fused_output_cross_entropy(o.x, o.weight, o.bias, torch::tensor({1L, 2L, 3L}), 0);
    loss.backward(/*gradient=*/{}, /*retain_graph=*/true);
    CHECK_THROWS_WITH(loss.backward(), Catch::Contains("backward can run only once"));

    CHECK_THROWS_WITH(fused_output_cross_entropy(o.x, o.weight.t(), o.bias, all_pad, 0),
                      Catch::Contains("expected x [N, H], weight [V, H]"));
    CHECK_THROWS_WITH(fused_output_cross_entropy(o.x, o.weight, o.bias, torch::zeros({2}, torch::kLong), 0),
                      Catch::Contains("expected targets [3] long"));
}

TEST_CASE("Seq2Seq::loss: the fused output layer gives forward()'s masked cross-entropy and its gradients",
          "[fused]") {
    for (auto scoring : {Scoring::additive, Scoring::dot, Scoring::none}) {
        for (double dropout : {0.0, 0.3}) {
            INFO("scoring " << to_string(scoring) << ", dropout " << dropout);
            auto cfg = tiny_config(scoring, 13, 40);  // more target words than tokens: looked-up embeddings
            cfg.dropout = dropout;
            Seq2Seq model(cfg);
            model->to(torch::kDouble);
            model->train();
            const auto b = ragged(cfg.src_vocab, cfg.tgt_vocab);
            torch::manual_seed(5);  // the same dropout masks in both
            auto ref = masked_cross_entropy(model->forward(b.src, b.src_len, b.tgt_in), b.tgt_out, Vocab::pad_id);
            ref.backward();
            const auto ref_grads = grads_of(model);
            model->zero_grad();
            torch::manual_seed(5);
            auto fused = model->loss(b.src, b.src_len, b.tgt_in, b.tgt_out);
            fused.backward();
            CHECK(fused.item<double>() == Approx(ref.item<double>()).epsilon(1e-12));
            for (const auto& [name, g] : grads_of(model)) {
                INFO("parameter " << name);
                REQUIRE(g.defined() == ref_grads.at(name).defined());
                if (g.defined()) CHECK(torch::allclose(g, ref_grads.at(name), 1e-9, 1e-12));
            }
        }
    }
}

TEST_CASE("Seq2Seq::loss without the fused path is masked_cross_entropy of forward()", "[fused]") {
    auto cfg = tiny_config(Scoring::additive);
    cfg.cell = CellType::lstm;
    cfg.dropout = 0.0;
    Seq2Seq model(cfg);
    const auto b = ragged(cfg.src_vocab, cfg.tgt_vocab);
    const double ref =
        masked_cross_entropy(model->forward(b.src, b.src_len, b.tgt_in), b.tgt_out, Vocab::pad_id).item<double>();
    CHECK(model->loss(b.src, b.src_len, b.tgt_in, b.tgt_out).item<double>() == Approx(ref).epsilon(1e-6));
}

