// The training step's fused parts against what they replace: the output layer
// fused with its cross-entropy (core/model/fused_output.hpp) against Linear +
// masked_cross_entropy, and clipping + Adam in one pass (core/optim/fused_adam.hpp)
// against clip_grad_norm_ + torch::optim::Adam.
#include "catch_torch.hpp"

#include <cmath>
#include <map>

#include "core/optim/adadelta.hpp"
#include "core/optim/fused_adam.hpp"
#include "core/model/fused_output.hpp"
#include "core/model/rnn_model.hpp"
#include "core/text/text.hpp"
#include "core/text/vocab.hpp"
#include "test_support.hpp"

using namespace attnviz;
using attnviz::testing::tiny_config;

namespace F = torch::nn::functional;

namespace {

// Rows of different source and target lengths in no particular order, padded.
attnviz::testing::RandomBatch ragged(int64_t src_vocab, int64_t tgt_vocab) {
    const std::vector<int64_t> src_lens{3, 5, 1, 4}, tgt_lens{4, 1, 5, 2};
    return attnviz::testing::ragged_batch(src_lens, tgt_lens, src_vocab, tgt_vocab, 21);
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

// --- clipping + Adam ---------------------------------------------------------

namespace {

// Parameters of several shapes (one non-contiguous: a transposed view's
// storage, so the ATen fallback runs too) with gradients drawn per step.
struct Params {
    std::vector<torch::Tensor> p;
    Params(torch::ScalarType type, bool with_strided) {
        torch::manual_seed(8);
        auto opt = torch::TensorOptions().dtype(type);
        p.push_back(torch::randn({6, 5}, opt).requires_grad_());
        p.push_back(torch::randn({7}, opt).requires_grad_());
        p.push_back(torch::randn({3, 4, 2}, opt).requires_grad_());
        if (with_strided) p.push_back(torch::randn({4, 6}, opt).t().requires_grad_());
        p.push_back(torch::randn({5}, opt).requires_grad_());  // never gets a gradient
    }
    Params clone() const {
        Params c = *this;
        for (auto& t : c.p) t = t.detach().clone(at::MemoryFormat::Preserve).requires_grad_();  // same strides
        return c;
    }
    std::vector<torch::Tensor> trained() const { return {p.begin(), p.end() - 1}; }
    void set_grads(int step, double size) {
        torch::manual_seed(100 + step);
        for (auto& t : p) t.mutable_grad() = torch::Tensor();
        for (auto& t : trained()) {
            auto g = torch::randn(t.sizes(), t.options()) * size;
            if (!t.is_contiguous()) g = g.t().contiguous().t();
            t.mutable_grad() = g;
        }
    }
};

void check_same_adam(torch::ScalarType type, torch::optim::AdamOptions options, double rtol, double atol) {
    Params ref(type, true);
    Params fused = ref.clone();
    torch::optim::Adam ref_adam(ref.p, options), fused_adam(fused.p, options);
    const double max_norm = 1.0;
    for (int step = 0; step < 8; ++step) {
        // Large gradients (clipped) on even steps, small ones (not clipped) on odd steps.
        const double size = step % 2 == 0 ? 3.0 : 0.01;
        ref.set_grads(step, size);
        fused.set_grads(step, size);
        const double ref_norm = torch::nn::utils::clip_grad_norm_(ref.p, max_norm);
        ref_adam.step();
        const double norm = clip_and_adam_step(fused_adam, ClipAdamOptions{max_norm});
        INFO("step " << step);
        CHECK(norm == Approx(ref_norm).epsilon(1e-6));
        for (size_t i = 0; i < ref.p.size(); ++i) {
            INFO("parameter " << i);
            CHECK(torch::allclose(fused.p[i], ref.p[i], rtol, atol));
            CHECK(fused.p[i].strides() == ref.p[i].strides());
        }
    }
    // Same state, kept in LibTorch's own AdamParamState objects (what checkpoints save).
    for (size_t i = 0; i < ref.p.size(); ++i) {
        auto r = ref_adam.state().find(ref.p[i].unsafeGetTensorImpl());
        auto f = fused_adam.state().find(fused.p[i].unsafeGetTensorImpl());
        REQUIRE((r == ref_adam.state().end()) == (f == fused_adam.state().end()));
        if (r == ref_adam.state().end()) continue;  // the parameter without gradients has none
        const auto& rs = static_cast<const torch::optim::AdamParamState&>(*r->second);
        const auto& fs = dynamic_cast<const torch::optim::AdamParamState&>(*f->second);
        CHECK(fs.step() == rs.step());
        CHECK(torch::allclose(fs.exp_avg(), rs.exp_avg(), rtol, atol));
        CHECK(torch::allclose(fs.exp_avg_sq(), rs.exp_avg_sq(), rtol, atol * atol));
        CHECK(fs.max_exp_avg_sq().defined() == rs.max_exp_avg_sq().defined());
    }
}

}  // namespace

TEST_CASE("clip_and_adam_step: same weights and state as clip_grad_norm_ + torch::optim::Adam", "[fused]") {
    SECTION("double") { check_same_adam(torch::kDouble, torch::optim::AdamOptions(0.01), 1e-12, 1e-14); }
    SECTION("float") { check_same_adam(torch::kFloat, torch::optim::AdamOptions(0.01), 1e-5, 1e-6); }
    SECTION("weight decay") {
        check_same_adam(torch::kDouble, torch::optim::AdamOptions(0.005).weight_decay(0.1), 1e-12, 1e-14);
    }
    SECTION("amsgrad") {
        check_same_adam(torch::kDouble, torch::optim::AdamOptions(0.02).amsgrad(true), 1e-12, 1e-14);
    }
}

TEST_CASE("clip_and_adam_step: its state saves, loads and goes on with torch::optim::Adam", "[fused]") {
    Params a(torch::kDouble, false);
    Params b = a.clone();
    torch::optim::Adam adam_a(a.p, torch::optim::AdamOptions(0.01)), adam_b(b.p, torch::optim::AdamOptions(0.01));
    for (int step = 0; step < 3; ++step) {
        a.set_grads(step, 1.0);
        b.set_grads(step, 1.0);
        clip_and_adam_step(adam_a, ClipAdamOptions{0.5});
        torch::nn::utils::clip_grad_norm_(b.p, 0.5);
        adam_b.step();
    }
    // a's state through an archive into a fresh Adam over a copy of a's weights.
    Params c = a.clone();
    torch::optim::Adam adam_c(c.p, torch::optim::AdamOptions(0.01));
    {
        torch::serialize::OutputArchive out;
        adam_a.save(out);
        std::ostringstream os;
        out.save_to(os);
        const std::string bytes = os.str();
        torch::serialize::InputArchive in;
        in.load_from(bytes.data(), bytes.size());
        adam_c.load(in);
    }
    b.set_grads(3, 1.0);
    c.set_grads(3, 1.0);
    adam_b.step();
    adam_c.step();  // LibTorch's own step on the restored state
    for (size_t i = 0; i < b.p.size(); ++i) CHECK(torch::allclose(c.p[i], b.p[i], 1e-12, 1e-14));
}

TEST_CASE("clip_and_adam_step: a non-finite gradient norm changes nothing", "[fused]") {
    Params ps(torch::kFloat, false);
    torch::optim::Adam adam(ps.p, torch::optim::AdamOptions(0.01));
    ps.set_grads(0, 1.0);
    ps.p[0].mutable_grad()[1][2] = std::numeric_limits<float>::infinity();
    std::vector<torch::Tensor> before, grads;
    for (const auto& t : ps.p) before.push_back(t.detach().clone());
    for (const auto& t : ps.trained()) grads.push_back(t.grad().clone());
    CHECK(std::isinf(clip_and_adam_step(adam, ClipAdamOptions{1.0})));
    for (size_t i = 0; i < ps.p.size(); ++i) CHECK(torch::equal(ps.p[i], before[i]));
    for (size_t i = 0; i < grads.size(); ++i) CHECK(torch::equal(ps.trained()[i].grad(), grads[i]));
    CHECK(adam.state().empty());
}

// --- the training step as Trainer::train_batch takes it ----------------------

namespace {

std::vector<torch::Tensor> copies(const std::vector<torch::Tensor>& ps) {
    std::vector<torch::Tensor> out;
    for (const auto& p : ps) out.push_back(p.detach().clone());
    return out;
}

// SGD (with momentum) and attnviz's Adadelta through clip_and_step against
// clip_grad_norm_ + step: the very same calls, so the very same weights.
template <typename Make>
void check_old_path(Make make) {
    Params ref(torch::kDouble, true);
    Params mine = ref.clone();
    auto ref_opt = make(ref.p);
    auto my_opt = make(mine.p);
    for (int step = 0; step < 6; ++step) {
        const double size = step % 2 == 0 ? 3.0 : 0.01;  // clipped, then not
        ref.set_grads(step, size);
        mine.set_grads(step, size);
        const double ref_norm = torch::nn::utils::clip_grad_norm_(ref.p, 1.0);
        ref_opt->step();
        CHECK(clip_and_step(*my_opt, mine.p, 1.0) == ref_norm);
        for (size_t i = 0; i < ref.p.size(); ++i) CHECK(torch::equal(mine.p[i], ref.p[i]));
    }
}

}  // namespace

TEST_CASE("clip_and_step: optimisers other than Adam keep clip_grad_norm_ + step", "[fused]") {
    SECTION("SGD") {
        check_old_path([](const std::vector<torch::Tensor>& ps) {
            return std::make_unique<torch::optim::SGD>(ps, torch::optim::SGDOptions(0.1).momentum(0.9));
        });
    }
    SECTION("Adadelta") {
        check_old_path([](const std::vector<torch::Tensor>& ps) {
            return std::make_unique<attnviz::Adadelta>(ps, AdadeltaOptions(1.0));
        });
    }
}

TEST_CASE("clip_and_step: Adam takes the fused step", "[fused]") {
    Params a(torch::kFloat, false);
    Params b = a.clone();
    torch::optim::Adam adam_a(a.p, torch::optim::AdamOptions(0.01)), adam_b(b.p, torch::optim::AdamOptions(0.01));
    for (int step = 0; step < 3; ++step) {
        a.set_grads(step, 2.0);
        b.set_grads(step, 2.0);
        const double na = clip_and_step(adam_a, a.p, 0.5);
        const double nb = clip_and_adam_step(adam_b, ClipAdamOptions{0.5});
        CHECK(na == nb);
        for (size_t i = 0; i < a.p.size(); ++i) CHECK(torch::equal(a.p[i], b.p[i]));
    }
}

TEST_CASE("clip_and_step: a non-finite gradient leaves every optimiser's weights unchanged", "[fused]") {
    for (int kind = 0; kind < 3; ++kind) {
        INFO("optimiser " << kind);
        Params ps(torch::kFloat, false);
        std::unique_ptr<torch::optim::Optimizer> opt;
        if (kind == 0) opt = std::make_unique<torch::optim::Adam>(ps.p, torch::optim::AdamOptions(0.01));
        if (kind == 1) opt = std::make_unique<torch::optim::SGD>(ps.p, torch::optim::SGDOptions(0.1));
        if (kind == 2) opt = std::make_unique<attnviz::Adadelta>(ps.p, AdadeltaOptions(1.0));
        ps.set_grads(0, 1.0);
        ps.p[1].mutable_grad()[3] = std::nan("");
        const auto before = copies(ps.p);
        CHECK(std::isnan(clip_and_step(*opt, ps.p, 1.0)));
        for (size_t i = 0; i < ps.p.size(); ++i) CHECK(torch::equal(ps.p[i], before[i]));
    }
}

TEST_CASE("training steps of a model: loss() + clip_and_step against forward + masked_cross_entropy + "
          "clip_grad_norm_ + Adam",
          "[fused]") {
    // max_norm 0.05 clips every step of this model; 1e6 never does.
    for (double max_norm : {0.05, 1e6}) {
        INFO("max_norm " << max_norm);
        auto cfg = tiny_config(Scoring::additive, 13, 40);
        cfg.dropout = 0.2;
        Seq2Seq fused(cfg), ref(cfg);
        fused->to(torch::kDouble);
        ref->to(torch::kDouble);
        {
            torch::NoGradGuard no_grad;
            auto fp = fused->parameters(), rp = ref->parameters();
            for (size_t i = 0; i < fp.size(); ++i) rp[i].copy_(fp[i]);
        }
        fused->train();
        ref->train();
        torch::optim::Adam fused_adam(fused->parameters(), torch::optim::AdamOptions(0.01));
        torch::optim::Adam ref_adam(ref->parameters(), torch::optim::AdamOptions(0.01));
        const auto b = ragged(cfg.src_vocab, cfg.tgt_vocab);
        bool clipped = false;
        for (int step = 0; step < 4; ++step) {
            INFO("step " << step);
            torch::manual_seed(30 + step);  // the same dropout masks in both
            auto ref_loss = masked_cross_entropy(ref->forward(b.src, b.src_len, b.tgt_in), b.tgt_out, Vocab::pad_id);
            ref_adam.zero_grad();
            ref_loss.backward();
            const double ref_norm = torch::nn::utils::clip_grad_norm_(ref->parameters(), max_norm);
            ref_adam.step();
            torch::manual_seed(30 + step);
            auto loss = fused->loss(b.src, b.src_len, b.tgt_in, b.tgt_out);
            fused_adam.zero_grad();
            loss.backward();
            const double norm = clip_and_step(fused_adam, fused->parameters(), max_norm);
            clipped = clipped || norm > max_norm;
            CHECK(loss.item<double>() == Approx(ref_loss.item<double>()).epsilon(1e-11));
            CHECK(norm == Approx(ref_norm).epsilon(1e-10));
            auto fp = fused->named_parameters(), rp = ref->named_parameters();
            for (const auto& item : fp) {
                INFO("parameter " << item.key());
                CHECK(torch::allclose(item.value(), rp[item.key()], 1e-10, 1e-12));
                auto& fs = static_cast<torch::optim::AdamParamState&>(
                    *fused_adam.state().at(item.value().unsafeGetTensorImpl()));
                auto& rs = static_cast<torch::optim::AdamParamState&>(
                    *ref_adam.state().at(rp[item.key()].unsafeGetTensorImpl()));
                CHECK(fs.step() == rs.step());
                CHECK(torch::allclose(fs.exp_avg(), rs.exp_avg(), 1e-9, 1e-13));
                CHECK(torch::allclose(fs.exp_avg_sq(), rs.exp_avg_sq(), 1e-9, 1e-16));
            }
        }
        CHECK(clipped == (max_norm < 1));  // the clipping did run in the clipped case and not in the other
    }
}
