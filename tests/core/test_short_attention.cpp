// The short-sequence attention kernel (core/model/short_attention.hpp) against attend(),
// the reference: values and gradients with padding, causal masks, packed rows and hashed
// dropout; its limits; and the Transformer's training loss through it against attend()'s
// (a batch in parts through it: test_transformer.cpp).
#include "catch_torch.hpp"

#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <stdexcept>

#include "core/model/families.hpp"
#include "core/model/short_attention.hpp"
#include "core/model/transformer_model.hpp"
#include "test_support.hpp"
#include "tiny_transformer.hpp"

using namespace attnviz;
using attnviz::testing::ragged_batch;
using attnviz::testing::ThreadCount;

namespace {

/// [B, T, h·dh] -> [B, h, T, dh]
torch::Tensor heads_of(const torch::Tensor& x, int64_t h) {
    return x.view({x.size(0), x.size(1), h, -1}).permute({0, 2, 1, 3});
}

/// One case: a [B, Tq] query grid and a [B, Tk] key grid (for self-attention the same), some
/// positions absent from the token rows, key lengths, the causal mask and a dropout mask.
struct Case {
    int64_t B = 3, h = 2, dh = 4, Tq = 5, Tk = 6;
    bool self = false, causal = false, key_len = true, dropout = true;
};

void compare(const Case& c, uint64_t seed) {
    INFO("self " << c.self << " causal " << c.causal << " key_len " << c.key_len << " dropout " << c.dropout);
    torch::manual_seed(static_cast<int64_t>(seed));
    const int64_t d = c.h * c.dh, Tk = c.self ? c.Tq : c.Tk;
    // The projections' outputs on the grids: self [B, T, 3d] (Q, K, V side by side); cross
    // queries [B, Tq, d] and keys and values [B, Tk, 2d].
    auto qgrid = torch::randn({c.B, c.Tq, c.self ? 3 * d : d}, torch::requires_grad());
    auto kvgrid = c.self ? qgrid : torch::randn({c.B, Tk, 2 * d}, torch::requires_grad());
    // Which positions are token rows: key 0 always (every query sees a key), the rest at random.
    std::mt19937 rng(static_cast<uint32_t>(seed));
    auto present = [&](int64_t T) {
        auto p = torch::ones({c.B, T}, torch::kBool);
        for (int64_t b = 0; b < c.B; ++b)
            for (int64_t t = 1; t < T; ++t) p[b][t] = rng() % 4 != 0;
        return p;
    };
    const auto q_present = present(c.Tq);
    const auto k_present = c.self ? q_present : present(Tk);
    auto rows_of = [](const torch::Tensor& p) {  // packed row of each present position, -1 elsewhere
        auto map = torch::full(p.sizes(), -1, torch::kInt64);
        const auto idx = p.reshape(-1).nonzero().squeeze(1);
        map.view(-1).index_copy_(0, idx, torch::arange(idx.numel(), torch::kInt64));
        return std::make_pair(map, idx);
    };
    const auto [q_rows, q_idx] = rows_of(q_present);
    const auto [k_rows, k_idx] = rows_of(k_present);
    const auto q_src = qgrid.reshape({c.B * c.Tq, -1}).index_select(0, q_idx);
    const auto kv_src = c.self ? q_src : kvgrid.reshape({c.B * Tk, -1}).index_select(0, k_idx);

    ShortAttentionOptions o;
    o.heads = c.h;
    o.width = d;
    o.q_column = 0;
    o.k_column = c.self ? d : 0;
    o.v_column = c.self ? 2 * d : d;
    o.q_rows = q_rows;
    o.k_rows = k_rows;
    o.causal = c.causal;
    auto bias = torch::zeros({c.B, 1, c.Tq, Tk});
    bias.masked_fill_(k_present.logical_not().view({c.B, 1, 1, Tk}), -std::numeric_limits<float>::infinity());
    if (c.key_len) {
        o.key_len = torch::randint(1, Tk + 1, {c.B}, torch::kInt64);
        const auto beyond = torch::arange(Tk).view({1, -1}) >= o.key_len.view({-1, 1});
        bias.masked_fill_(beyond.view({c.B, 1, 1, Tk}), -std::numeric_limits<float>::infinity());
    }
    if (c.causal)
        bias.masked_fill_(torch::ones({c.Tq, Tk}, torch::kBool).triu(1).view({1, 1, c.Tq, Tk}),
                          -std::numeric_limits<float>::infinity());
    DropoutStream stream;
    stream.seed = seed;
    Dropout dropout;
    dropout.p = c.dropout ? 0.3 : 0.0;
    dropout.stream = &stream;
    o.dropout = dropout.head_mask(c.B, c.h, c.Tq, Tk, 7);

    const auto out = short_attention(q_src, kv_src, o);  // [Nq, d]
    REQUIRE(out.sizes() == torch::IntArrayRef({q_idx.numel(), d}));

    // attend() on the grids, through the same dropout (its mask is the same hashed one).
    AttendOptions ao;
    ao.bias = bias;
    ao.dropout = &dropout;
    ao.which = 7;
    const auto q = heads_of(qgrid.narrow(2, 0, d), c.h);
    const auto k = heads_of(kvgrid.narrow(2, o.k_column, d), c.h);
    const auto v = heads_of(kvgrid.narrow(2, o.v_column, d), c.h);
    const auto ref_grid = attend(q, k, v, ao).out.permute({0, 2, 1, 3}).reshape({c.B * c.Tq, d});
    const auto ref = ref_grid.index_select(0, q_idx);
    CHECK(torch::allclose(out, ref, 1e-5, 1e-6));
    if (c.dropout) CHECK(o.dropout.eq(0).any().item<bool>());  // some weights were dropped

    // Gradients: of a random projection of the output, with respect to both grids.
    const auto R = torch::randn_like(ref);
    auto grads_of = [&](const torch::Tensor& y) {
        auto g = torch::autograd::grad({(y * R).sum()}, c.self ? std::vector<torch::Tensor>{qgrid}
                                                               : std::vector<torch::Tensor>{qgrid, kvgrid});
        return g;
    };
    const auto got = grads_of(out);
    const auto want = grads_of(ref);
    for (size_t i = 0; i < got.size(); ++i) {
        INFO("gradient " << i);
        CHECK(torch::allclose(got[i], want[i], 1e-4, 1e-6));
        CHECK(got[i].abs().sum().item<float>() > 0.0f);
    }
}

/// How many nodes of y's autograd graph have `name` in their name.
int graph_nodes(const torch::Tensor& y, const std::string& name) {
    std::vector<torch::autograd::Node*> todo{y.grad_fn().get()};
    std::set<torch::autograd::Node*> seen;
    int n = 0;
    while (!todo.empty()) {
        auto* node = todo.back();
        todo.pop_back();
        if (!node || !seen.insert(node).second) continue;
        if (node->name().find(name) != std::string::npos) ++n;
        for (const auto& e : node->next_edges()) todo.push_back(e.function.get());
    }
    return n;
}

}  // namespace

TEST_CASE("short_attention gives attend()'s values and gradients: padding, causal masks, packed rows, dropout",
          "[transformer][short]") {
    uint64_t seed = 1;
    for (const bool self : {false, true})
        for (const bool causal : {false, true})
            for (const bool key_len : {false, true})
                for (const bool dropout : {false, true}) {
                    Case c;
                    c.self = self;
                    c.causal = causal;
                    c.key_len = key_len;
                    c.dropout = dropout;
                    compare(c, seed++);
                }
    // Longer, wider: 4 heads of 16 over 9 and 12 positions, and more rows than one parallel chunk.
    Case wide;
    wide.B = 40;
    wide.h = 4;
    wide.dh = 16;
    wide.Tq = 9;
    wide.Tk = 12;
    ThreadCount threads(2);
    compare(wide, 100);
    wide.self = true;
    wide.causal = true;
    compare(wide, 101);
}

TEST_CASE("short_attention: a query that sees no key gets output 0, and inputs that do not fit are refused",
          "[transformer][short]") {
    const int64_t d = 4;
    auto src = torch::randn({4, 3 * d});
    ShortAttentionOptions o;
    o.heads = 2;
    o.width = d;
    o.k_column = d;
    o.v_column = 2 * d;
    o.q_rows = torch::tensor({0, 1, 2, 3}, torch::kInt64).view({2, 2});
    o.k_rows = o.q_rows.clone();
    o.key_len = torch::tensor({0, 2}, torch::kInt64);  // row 0 sees no key
    auto out = short_attention(src, src, o);
    CHECK(out.narrow(0, 0, 2).abs().max().item<float>() == 0.0f);
    CHECK(out.narrow(0, 2, 2).abs().max().item<float>() > 0.0f);
    CHECK_FALSE(out.isnan().any().item<bool>());

    auto refused = [&](const std::function<void(ShortAttentionOptions&)>& spoil, const torch::Tensor& s) {
        ShortAttentionOptions bad = o;
        spoil(bad);
        CHECK_THROWS_AS(short_attention(s, s, bad), std::invalid_argument);
    };
    refused([](ShortAttentionOptions&) {}, src.to(torch::kDouble));                // not float32
    refused([](ShortAttentionOptions& b) { b.heads = 3; }, src);                     // heads do not divide the width
    refused([](ShortAttentionOptions& b) { b.v_column = 2 * d + 1; }, src);          // values past the last column
    refused([](ShortAttentionOptions& b) { b.q_rows = b.q_rows + 1; }, src);          // a row past the end
    refused([](ShortAttentionOptions& b) { b.k_rows = b.k_rows.to(torch::kInt32); }, src);
    refused([](ShortAttentionOptions& b) { b.key_len = torch::tensor({1}, torch::kInt64); }, src);
    refused([](ShortAttentionOptions& b) { b.dropout = torch::ones({2, 2, 2, 3}); }, src);  // not [B, h, Tq, Tk]
}

TEST_CASE("the Transformer's training loss through short_attention equals attend()'s: loss, every gradient, "
          "validation",
          "[transformer][short][packed]") {
    auto c = testing::tiny_transformer_config(13, 11, 4);
    c.dropout = 0.3;
    auto net = std::dynamic_pointer_cast<TransformerImpl>(build_network(c));
    REQUIRE(net);
    net->train();
    DropoutStream stream;
    stream.seed = 5;
    auto run = [&](const testing::RandomBatch& b, AttentionKernel kernel, double* loss) {
        LossOptions o;
        o.dropout = &stream;
        o.attention = kernel;
        net->zero_grad();
        auto l = net->loss(b.src, b.src_len, b.tgt_in, b.tgt_out, o);
        // The kernel ran where asked: 2 encoder blocks' self-attention, 2 decoder blocks' two.
        CHECK(graph_nodes(l, "ShortAttention") == (kernel == AttentionKernel::automatic ? 6 : 0));
        l.backward();
        *loss = l.item<double>();
        std::map<std::string, torch::Tensor> g;
        for (const auto& p : net->named_parameters()) g[p.key()] = p.value().grad().clone();
        return g;
    };
    auto check = [&](const std::vector<int64_t>& src_lens, const std::vector<int64_t>& tgt_lens) {
        const auto r = ragged_batch(src_lens, tgt_lens, c.src_vocab, c.tgt_vocab, 17);
        const auto& b = r;
        double fast = 0, ref = 0;
        const auto got = run(b, AttentionKernel::automatic, &fast);
        const auto want = run(b, AttentionKernel::reference, &ref);
        CHECK(fast == Approx(ref).epsilon(1e-5));
        for (const auto& [name, g] : want) {
            INFO(name);
            CHECK(torch::allclose(got.at(name), g, 1e-3, 1e-5));
        }
        // Validation (eval, no dropout) reads the same logits either way.
        net->eval();
        {
            torch::NoGradGuard no_grad;
            const auto v = net->real_token_logits(r.src, r.src_len, r.tgt_in, r.tgt_out);
            const auto grid = net->EncoderDecoder::real_token_logits(r.src, r.src_len, r.tgt_in, r.tgt_out);
            CHECK(torch::allclose(v.logits, grid.logits, 1e-4, 1e-5));
        }
        net->train();
    };
    SECTION("mostly padding: packed rows") { check({5, 2, 4, 1, 3}, {4, 2, 3, 1, 4}); }
    SECTION("nearly full: the grid") { check({5, 5, 4, 5, 5}, {4, 4, 4, 3, 4}); }
}
