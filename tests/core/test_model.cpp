// Model properties that must hold for every scoring function and cell.
#include "catch_torch.hpp"

#include <ATen/Context.h>

#include <thread>

#include "core/io/error.hpp"
#include "core/model/device.hpp"
#include "core/model/rnn_model.hpp"
#include "test_support.hpp"

using namespace attnviz;
using attnviz::testing::random_batch;
using attnviz::testing::tiny_config;

namespace {
const std::vector<Scoring> k_attending = {Scoring::additive, Scoring::dot, Scoring::scaled_dot, Scoring::general};
}

TEST_CASE("attention rows sum to 1 and padding gets exactly 0, for every scoring function", "[model]") {
    for (auto scoring : k_attending) {
        for (auto cell : {CellType::gru, CellType::lstm}) {
            INFO("scoring " << to_string(scoring) << ", cell " << to_string(cell));
            auto cfg = tiny_config(scoring);
            cfg.cell = cell;
            Seq2Seq model(cfg);
            model->eval();
            auto b = random_batch({5, 3, 1, 4}, 6, cfg.src_vocab, cfg.tgt_vocab);
            torch::Tensor attn;
            auto logits = model->forward_with_attention(b.src, b.src_len, b.tgt_in, &attn);
            CHECK(logits.sizes() == torch::IntArrayRef({4, 6, cfg.tgt_vocab}));
            REQUIRE(attn.sizes() == torch::IntArrayRef({4, 6, 5}));
            CHECK(torch::allclose(attn.sum(-1), torch::ones({4, 6}), 1e-5, 1e-6));
            for (int64_t i = 0; i < 4; ++i) {
                const int64_t len = b.src_len[i].item<int64_t>();
                if (len < 5) CHECK(attn[i].narrow(1, len, 5 - len).abs().max().item<float>() == 0.0f);
                CHECK(attn[i].narrow(1, 0, len).min().item<float>() > 0.0f);
            }
        }
    }
}

TEST_CASE("a bidirectional encoder gives keys of twice the hidden size", "[model]") {
    for (auto scoring : {Scoring::additive, Scoring::general, Scoring::none}) {
        auto cfg = tiny_config(scoring);
        cfg.bidirectional = true;
        Seq2Seq model(cfg);
        auto b = random_batch({4, 2}, 3, cfg.src_vocab, cfg.tgt_vocab);
        auto enc = model->encode_states(b.src, b.src_len);
        CHECK(enc.outputs.sizes() == torch::IntArrayRef({2, 4, 32}));
        CHECK(enc.h0.sizes() == torch::IntArrayRef({2, 2, 16}));
        CHECK(enc.final_ctx.sizes() == torch::IntArrayRef({2, 32}));
        // Padded encoder outputs are zero (the encoder is run on packed sequences).
        CHECK(enc.outputs[1].narrow(0, 2, 2).abs().max().item<float>() == 0.0f);
    }
}

TEST_CASE("dot scoring with a bidirectional encoder is a configuration error", "[model]") {
    auto cfg = tiny_config(Scoring::dot);
    cfg.bidirectional = true;
    CHECK_THROWS_AS(Seq2Seq(cfg), ConfigError);
    CHECK_THROWS_WITH(cfg.validate(), Catch::Contains("bidirectional"));
}

TEST_CASE("gradients reach every parameter, for every scoring function", "[model]") {
    for (auto scoring : {Scoring::additive, Scoring::dot, Scoring::scaled_dot, Scoring::general, Scoring::none}) {
        for (bool bidir : {false, true}) {
            if (bidir && (scoring == Scoring::dot || scoring == Scoring::scaled_dot)) continue;
            INFO("scoring " << to_string(scoring) << ", bidirectional " << bidir);
            auto cfg = tiny_config(scoring);
            cfg.bidirectional = bidir;
            cfg.cell = bidir ? CellType::lstm : CellType::gru;
            Seq2Seq model(cfg);
            auto b = random_batch({5, 3, 2}, 4, cfg.src_vocab, cfg.tgt_vocab);
            auto loss = masked_cross_entropy(model->forward(b.src, b.src_len, b.tgt_in), b.tgt_out, 0);
            loss.backward();
            for (const auto& p : model->named_parameters()) {
                INFO("parameter " << p.key());
                REQUIRE(p.value().grad().defined());
                CHECK(p.value().grad().abs().sum().item<double>() > 0.0);
            }
        }
    }
}

TEST_CASE("step() and forward() agree under teacher forcing", "[model]") {
    auto cfg = tiny_config(Scoring::additive);
    Seq2Seq model(cfg);
    model->eval();
    auto b = random_batch({4, 3}, 5, cfg.src_vocab, cfg.tgt_vocab);
    torch::NoGradGuard ng;
    auto logits = model->forward(b.src, b.src_len, b.tgt_in);
    auto enc = model->encode_states(b.src, b.src_len);
    auto state = model->init_state(enc);
    for (int64_t t = 0; t < 5; ++t) {
        auto out = model->step(b.tgt_in.select(1, t), state, enc);
        CHECK(torch::allclose(out.logits, logits.select(1, t), 1e-5, 1e-5));
        REQUIRE(out.maps.size() == 1);  // the RNN's one cross map
        CHECK(out.maps[0].id == AttentionMapId{AttentionKind::cross, 0, 0});
        CHECK(torch::allclose(torch::softmax(out.maps[0].scores, -1), out.maps[0].weights));
    }
}

TEST_CASE("initial weights depend on the seed alone, init schemes differ", "[model]") {
    auto cfg = tiny_config(Scoring::additive);
    Seq2Seq a(cfg), b(cfg);
    torch::manual_seed(123);  // the global stream must not matter
    Seq2Seq c(cfg);
    auto pa = a->parameters(), pb = b->parameters(), pc = c->parameters();
    for (size_t i = 0; i < pa.size(); ++i) {
        CHECK(torch::equal(pa[i], pb[i]));
        CHECK(torch::equal(pa[i], pc[i]));
    }
    cfg.init = InitScheme::uniform;
    Seq2Seq u(cfg);
    for (const auto& p : u->parameters()) CHECK(p.abs().max().item<double>() <= 0.08 + 1e-9);
    cfg.init = InitScheme::orthogonal;
    Seq2Seq o(cfg);
    for (const auto& p : o->named_parameters()) {
        if (p.key().find("weight_hh") == std::string::npos) continue;
        auto block = p.value().narrow(0, 0, cfg.hidden_size);
        CHECK(torch::allclose(block.matmul(block.t()), torch::eye(cfg.hidden_size), 1e-4, 1e-4));
    }
}

namespace {
// reset_parameters() as it was before it went by module, matching names: the
// reference that keeps every seed's initial weights (and checkpoints' runs)
// reproducible.
void init_by_name(Seq2Seq& model) {
    torch::NoGradGuard no_grad;
    const auto& cfg = model->config();
    for (auto& item : model->named_parameters()) {
        const std::string& name = item.key();
        auto& p = item.value();
        const bool embedding = name.find("embedding") != std::string::npos;
        const bool weight = name.find("weight") != std::string::npos;
        const bool rnn = name.find("rnn") != std::string::npos;
        const bool recurrent = name.find("weight_hh") != std::string::npos;
        switch (cfg.init) {
        case InitScheme::uniform:
            p.uniform_(-0.08, 0.08);
            break;
        case InitScheme::xavier:
            if (weight && rnn) torch::nn::init::xavier_uniform_(p);
            break;
        case InitScheme::orthogonal:
            if (weight && recurrent) {
                for (int64_t g = 0; g * cfg.hidden_size < p.size(0); ++g)
                    torch::nn::init::orthogonal_(p.narrow(0, g * cfg.hidden_size, cfg.hidden_size));
            } else if (weight && !embedding) {
                torch::nn::init::xavier_uniform_(p);
            } else if (!weight) {
                p.zero_();
            }
            break;
        }
    }
}
}  // namespace

TEST_CASE("initialisation by module draws the same weights as the name-matching rule it replaced", "[model]") {
    for (auto init : {InitScheme::xavier, InitScheme::uniform, InitScheme::orthogonal}) {
        for (auto cell : {CellType::gru, CellType::lstm}) {
            for (int64_t layers : {1, 2, 3}) {
                for (bool bidir : {false, true}) {
                    for (auto scoring : {Scoring::additive, Scoring::dot, Scoring::scaled_dot, Scoring::general,
                                         Scoring::none}) {
                        if (bidir && (scoring == Scoring::dot || scoring == Scoring::scaled_dot)) continue;
                        INFO(to_string(init) << ", " << to_string(cell) << ", " << layers << " layers, "
                                             << (bidir ? "bidirectional" : "unidirectional") << ", "
                                             << to_string(scoring));
                        auto cfg = tiny_config(scoring);
                        cfg.init = init;
                        cfg.cell = cell;
                        cfg.num_layers = layers;
                        cfg.bidirectional = bidir;
                        cfg.attention_size = 12;
                        Seq2Seq by_module(cfg), by_name(cfg);
                        torch::manual_seed(42);
                        by_module->reset_parameters();
                        torch::manual_seed(42);
                        init_by_name(by_name);
                        auto expected = by_name->named_parameters();
                        for (const auto& p : by_module->named_parameters()) {
                            INFO("parameter " << p.key());
                            CHECK(torch::equal(p.value(), expected[p.key()]));
                        }
                    }
                }
            }
        }
    }
}

TEST_CASE("masked cross-entropy ignores padding", "[model]") {
    auto logits = torch::randn({2, 3, 7});
    auto target = torch::tensor({{4, 5, 0}, {6, 0, 0}}, torch::kLong);
    auto loss = masked_cross_entropy(logits, target, 0).item<double>();
    double manual = 0;
    auto lp = torch::log_softmax(logits, -1);
    manual -= lp[0][0][4].item<double>() + lp[0][1][5].item<double>() + lp[1][0][6].item<double>();
    CHECK(loss == Approx(manual / 3).epsilon(1e-5));
}

TEST_CASE("scoring, cell and init names round-trip and reject unknown names", "[model]") {
    for (auto s : {Scoring::additive, Scoring::dot, Scoring::scaled_dot, Scoring::general, Scoring::none})
        CHECK(scoring_from_string(to_string(s)) == s);
    CHECK_THROWS_WITH(scoring_from_string("cosine"), Catch::Contains("additive"));
    CHECK(cell_from_string("lstm") == CellType::lstm);
    CHECK(init_from_string("orthogonal") == InitScheme::orthogonal);
    auto cfg = tiny_config(Scoring::general);
    cfg.bidirectional = true;
    auto back = ModelConfig::from_json(cfg.to_json());
    CHECK(back.to_json() == cfg.to_json());
}

TEST_CASE("the RNN from embeddings computes what it computes from ids (attribution's path)", "[model][attribution]") {
    for (auto variant : {0, 1, 2, 3, 4}) {
        auto cfg = tiny_config(Scoring::additive);
        if (variant == 1) cfg.cell = CellType::lstm;
        if (variant == 2) cfg.bidirectional = true;
        if (variant == 3) cfg.reverse_source = true;
        if (variant == 4) cfg.source_steps = 7;
        INFO("variant " << variant);
        Seq2Seq model(cfg);
        model->eval();
        torch::NoGradGuard ng;
        auto b = random_batch({5, 3, 6}, 4, cfg.src_vocab, cfg.tgt_vocab);
        const auto ids = model->forward(b.src, b.src_len, b.tgt_in);
        const auto from_emb =
            model->forward_embedded(model->embed_source(b.src), b.src_len, model->embed_target(b.tgt_in));
        CHECK(torch::allclose(ids, from_emb, 1e-5, 1e-5));
    }
}

TEST_CASE("an intervention replaces the step's attention, and the map shows what was used", "[model][intervention]") {
    auto cfg = tiny_config(Scoring::additive);
    Seq2Seq model(cfg);
    model->eval();
    torch::NoGradGuard ng;
    auto b = random_batch({5, 3}, 2, cfg.src_vocab, cfg.tgt_vocab);
    const auto enc = model->encode(b.src, b.src_len);
    const auto tokens = b.tgt_in.select(1, 0);
    auto plain_cache = model->start(*enc);
    const StepOutput plain = model->step(tokens, *plain_cache, *enc);
    // The weights it would use anyway: the same step.
    AttentionIntervention same;
    same.cross_weights = plain.maps[0].weights;
    auto cache = model->start(*enc);
    const StepOutput again = model->step(tokens, *cache, *enc, &same);
    CHECK(torch::allclose(again.logits, plain.logits, 1e-6, 1e-6));
    // Uniform over the real positions: another context, other logits, and the map says so.
    AttentionIntervention uniform;
    uniform.cross_weights = enc->mask.to(torch::kFloat) / b.src_len.unsqueeze(1).to(torch::kFloat);
    cache = model->start(*enc);
    const StepOutput changed = model->step(tokens, *cache, *enc, &uniform);
    CHECK(torch::allclose(changed.maps[0].weights, uniform.cross_weights));
    CHECK_FALSE(torch::allclose(changed.logits, plain.logits, 1e-4, 1e-4));
    // Switching the only head off: a zero context.
    AttentionIntervention off;
    off.heads_off.push_back(AttentionMapId{});
    cache = model->start(*enc);
    const StepOutput silent = model->step(tokens, *cache, *enc, &off);
    CHECK(silent.context.abs().max().item<float>() == 0.0f);
}

// cuDNN's RNNs refuse backward outside training mode ("cudnn RNN backward can only be called
// in training mode", seen on an H100 with `attribute --device cuda`), so the RNN's
// differentiable pass for attribution switches cuDNN off while it runs. The switch is
// process-wide: guards nest and overlap across threads, and the last one restores it.
TEST_CASE("the cuDNN guard keeps cuDNN off while any guard lives and restores the user's choice", "[model][device]") {
    auto& ctx = at::globalContext();
    const bool before = ctx.userEnabledCuDNN();
    ctx.setUserEnabledCuDNN(true);
    {
        CudnnOffGuard outer;
        CHECK_FALSE(ctx.userEnabledCuDNN());
        {
            CudnnOffGuard inner;
            CHECK_FALSE(ctx.userEnabledCuDNN());
        }
        CHECK_FALSE(ctx.userEnabledCuDNN());  // the outer guard still lives
        bool seen_in_thread = true;
        std::thread t([&] {
            CudnnOffGuard other;
            seen_in_thread = ctx.userEnabledCuDNN();
        });
        t.join();
        CHECK_FALSE(seen_in_thread);
        CHECK_FALSE(ctx.userEnabledCuDNN());
    }
    CHECK(ctx.userEnabledCuDNN());
    // A user who had switched cuDNN off keeps it off.
    ctx.setUserEnabledCuDNN(false);
    { CudnnOffGuard g; }
    CHECK_FALSE(ctx.userEnabledCuDNN());
    ctx.setUserEnabledCuDNN(before);
}

TEST_CASE("the RNN's embedded pass is differentiable in evaluation mode", "[model][attribution]") {
    auto cfg = tiny_config(Scoring::additive);
    Seq2Seq model(cfg);
    model->eval();
    auto batch = random_batch({5, 3}, 4, cfg.src_vocab, cfg.tgt_vocab);
    auto src_emb = model->embed_source(batch.src).detach().requires_grad_(true);
    auto tgt_emb = model->embed_target(batch.tgt_in).detach().requires_grad_(true);
    const auto logits = model->forward_embedded(src_emb, batch.src_len, tgt_emb);
    const auto g = torch::autograd::grad({logits.logsumexp(-1).sum()}, {src_emb, tgt_emb});
    CHECK(g[0].abs().sum().item<double>() > 0);
    CHECK(g[1].abs().sum().item<double>() > 0);
    CHECK(at::globalContext().userEnabledCuDNN() == true);
}
