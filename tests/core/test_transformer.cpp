// d2l's Transformer behind the family seam: parameter names, shapes and masks of
// every attention map, cached decoding against recomputing the prefix, the
// teacher-forced loss, interventions, and training in parts.
#include "catch_torch.hpp"

#include <functional>
#include <map>
#include <random>

#include "core/io/error.hpp"
#include "core/model/families.hpp"
#include "core/model/transformer_model.hpp"
#include "core/persist/parameter_names.hpp"
#include "core/train/split_step.hpp"
#include "test_support.hpp"
#include "tiny_transformer.hpp"

using namespace attnviz;
using attnviz::testing::ragged_batch;
using attnviz::testing::test_device;
using attnviz::testing::ThreadCount;

namespace {

ModelConfig tiny_transformer(int64_t layers = 2, int64_t heads = 4) {
    ModelConfig c = testing::tiny_transformer_config(13, 11, heads);
    c.num_layers = layers;
    return c;
}

std::shared_ptr<TransformerImpl> build(const ModelConfig& c) {
    auto net = std::dynamic_pointer_cast<TransformerImpl>(build_network(c));
    REQUIRE(net);
    return net;
}

/// Feeds tgt_in's columns one step at a time; logits [B, T, V].
torch::Tensor step_logits(EncoderDecoder& net, const torch::Tensor& src, const torch::Tensor& src_len,
                          const torch::Tensor& tgt_in, std::vector<StepOutput>* steps = nullptr) {
    auto enc = net.encode(src, src_len);
    auto cache = net.start(*enc);
    std::vector<torch::Tensor> out;
    for (int64_t t = 0; t < tgt_in.size(1); ++t) {
        auto s = net.step(tgt_in.select(1, t), *cache, *enc);
        out.push_back(s.logits);
        if (steps) steps->push_back(std::move(s));
    }
    return torch::stack(out, 1);
}

}  // namespace

TEST_CASE("a Transformer's parameters are d2l's state_dict, in order, with the table's shapes", "[transformer]") {
    for (int64_t layers : {1, 3}) {
        auto c = tiny_transformer(layers, 2);
        auto net = build(c);
        const auto table = parameter_names(c);
        const auto named = net->named_parameters();
        REQUIRE(named.size() == table.size());
        for (size_t i = 0; i < table.size(); ++i) {
            INFO(table[i].module);
            CHECK(named[i].key() == table[i].module);
            CHECK(table[i].file == table[i].module);  // the module names are d2l's own
            CHECK(named[i].value().sizes().vec() == table[i].shape);
        }
        CHECK(table.front().file == "encoder.embedding.weight");
        CHECK(table[1].file == "encoder.blks.block0.attention.W_q.weight");
        CHECK(table.back().file == "decoder.dense.bias");
        CHECK(named.contains("decoder.blks.block0.attention2.W_o.weight"));
        CHECK(named.contains("decoder.blks.block0.addnorm3.ln.bias"));
        CHECK_FALSE(named.contains("decoder.blks.block0.attention1.W_q.bias"));  // no biases in W_q..W_o
        CHECK(named["encoder.blks.block0.ffn.dense1.weight"].sizes() == torch::IntArrayRef({24, 16}));
        CHECK(net->named_buffers().size() == 0);  // the positional table is no state of its own
    }
}

TEST_CASE("a Transformer's configuration is checked: heads divide the width, RNN settings stay default",
          "[transformer]") {
    auto c = tiny_transformer();
    c.num_heads = 3;
    CHECK_THROWS_WITH(c.validate(), Catch::Contains("multiple of its heads"));
    c = tiny_transformer();
    c.cell = CellType::lstm;
    CHECK_THROWS_WITH(c.validate(), Catch::Contains("--cell applies to the RNN only"));
    c = tiny_transformer();
    c.embed_size = 32;
    CHECK_THROWS_WITH(c.validate(), Catch::Contains("--hidden wide"));
    ModelConfig rnn;
    rnn.num_heads = 8;
    CHECK_THROWS_WITH(rnn.validate(), Catch::Contains("--heads applies to the Transformer only"));
    CHECK_THROWS_AS(TransformerImpl(rnn), ConfigError);
}

TEST_CASE("cached one-token steps give the logits of the whole prefix recomputed", "[transformer]") {
    auto c = tiny_transformer();
    auto net = build(c);
    net->eval();
    torch::NoGradGuard no_grad;
    const auto b = ragged_batch({5, 2, 7, 1}, {6, 3, 6, 2}, c.src_vocab, c.tgt_vocab, 11);
    const auto whole = net->forward(b.src, b.src_len, b.tgt_in);  // causal mask, all positions at once
    const auto cached = step_logits(*net, b.src, b.src_len, b.tgt_in);
    REQUIRE(cached.sizes() == whole.sizes());
    CHECK((cached - whole).abs().max().item<float>() < 1e-5);
    // And a row alone, without the batch's padding, gives its own logits.
    const auto alone = net->forward(b.src.narrow(0, 1, 1).narrow(1, 0, 2), b.src_len.narrow(0, 1, 1),
                                    b.tgt_in.narrow(0, 1, 1).narrow(1, 0, 3));
    CHECK((alone[0] - whole[1].narrow(0, 0, 3)).abs().max().item<float>() < 1e-5);
}

TEST_CASE("every step records the primary map, then every cross and decoder self-attention head", "[transformer]") {
    auto c = tiny_transformer(2, 4);
    auto net = build(c);
    net->eval();
    torch::NoGradGuard no_grad;
    const auto b = ragged_batch({5, 3}, {4, 4}, c.src_vocab, c.tgt_vocab, 3);
    std::vector<StepOutput> steps;
    step_logits(*net, b.src, b.src_len, b.tgt_in, &steps);
    for (size_t t = 0; t < steps.size(); ++t) {
        const auto& maps = steps[t].maps;
        REQUIRE(maps.size() == 1 + 2 * 2 * 4);
        CHECK(maps[0].id == (AttentionMapId{AttentionKind::cross, 1, -1}));
        CHECK(maps[1].id == (AttentionMapId{AttentionKind::cross, 0, 0}));
        CHECK(maps[9].id == (AttentionMapId{AttentionKind::decoder_self, 0, 0}));
        CHECK(maps[16].id == (AttentionMapId{AttentionKind::decoder_self, 1, 3}));
        // The primary map is the mean of the last layer's cross heads.
        auto mean = (maps[5].weights + maps[6].weights + maps[7].weights + maps[8].weights) / 4;
        CHECK((maps[0].weights - mean).abs().max().item<float>() < 1e-6);
        for (size_t m = 1; m < maps.size(); ++m) {
            INFO("step " << t << ", " << describe(maps[m].id));
            const auto& w = maps[m].weights;
            CHECK(torch::allclose(w.sum(-1), torch::ones({2}), 1e-5, 1e-6));
            if (maps[m].id.kind == AttentionKind::cross) {
                REQUIRE(w.sizes() == torch::IntArrayRef({2, 5}));
                CHECK(w[1].narrow(0, 3, 2).abs().max().item<float>() == 0.0f);  // no weight on padding
                CHECK(std::isinf(maps[m].scores[1][4].item<float>()));
                CHECK(w[1].narrow(0, 0, 3).min().item<float>() > 0.0f);
            } else {
                // Decoder self-attention: the steps so far, itself included (nothing above the diagonal).
                REQUIRE(w.sizes() == torch::IntArrayRef({2, static_cast<int64_t>(t) + 1}));
            }
            // Raw scores: q·k/√dh, whose softmax is the weights.
            CHECK(torch::allclose(torch::softmax(maps[m].scores, -1), w, 1e-5, 1e-6));
        }
    }
    // The encoding holds every head's encoder self-attention over the real source.
    auto enc = net->encode(b.src, b.src_len);
    const auto source = enc->source_maps(1, 3);
    REQUIRE(source.size() == 2 * 4);
    CHECK(source[5].id == (AttentionMapId{AttentionKind::encoder_self, 1, 1}));
    for (const auto& m : source) {
        REQUIRE(m.weights.size() == 3);
        for (const auto& row : m.weights) {
            REQUIRE(row.size() == 3);
            CHECK(row[0] + row[1] + row[2] == Approx(1.0f).margin(1e-5));
        }
        CHECK(m.scores.size() == 3);
    }
}

TEST_CASE("the decoder's self-attention over a whole target is causal", "[transformer]") {
    auto c = tiny_transformer();
    auto net = build(c);
    net->eval();
    torch::NoGradGuard no_grad;
    const auto b = ragged_batch({4, 4}, {5, 5}, c.src_vocab, c.tgt_vocab, 8);
    // Changing a later target token leaves every earlier position's logits as they were.
    auto changed = b.tgt_in.clone();
    changed[0][3] = (changed[0][3].item<int64_t>() + 1 - 4) % (c.tgt_vocab - 4) + 4;
    const auto a = net->forward(b.src, b.src_len, b.tgt_in);
    const auto d = net->forward(b.src, b.src_len, changed);
    CHECK((a[0].narrow(0, 0, 3) - d[0].narrow(0, 0, 3)).abs().max().item<float>() == 0.0f);
    CHECK((a[0].narrow(0, 3, 2) - d[0].narrow(0, 3, 2)).abs().max().item<float>() > 0.0f);
}

TEST_CASE("d2l's predict_step positions: every decoded token at position 0", "[transformer]") {
    auto c = tiny_transformer();
    auto net = build(c);
    c.d2l_decode_positions = true;
    auto d2l = build(c);
    copy_weights(*d2l, *net);
    net->eval();
    d2l->eval();
    torch::NoGradGuard no_grad;
    const auto b = ragged_batch({4, 3}, {3, 3}, c.src_vocab, c.tgt_vocab, 2);
    const auto ours = step_logits(*net, b.src, b.src_len, b.tgt_in);
    const auto theirs = step_logits(*d2l, b.src, b.src_len, b.tgt_in);
    CHECK((ours.select(1, 0) - theirs.select(1, 0)).abs().max().item<float>() == 0.0f);  // both at position 0
    CHECK((ours.select(1, 2) - theirs.select(1, 2)).abs().max().item<float>() > 1e-4);
    // Training (teacher forcing) is the same for both: true positions.
    CHECK((net->forward(b.src, b.src_len, b.tgt_in) - d2l->forward(b.src, b.src_len, b.tgt_in)).abs().max()
              .item<float>() == 0.0f);
}

TEST_CASE("the Transformer's loss is the masked cross-entropy of its logits, and reaches every weight",
          "[transformer]") {
    auto c = tiny_transformer();
    auto net = build(c);
    net->eval();  // no dropout: the two computations see the same network
    const auto b = ragged_batch({5, 2, 4}, {4, 2, 3}, c.src_vocab, c.tgt_vocab, 4);
    const auto loss = net->loss(b.src, b.src_len, b.tgt_in, b.tgt_out);
    const auto ref = masked_cross_entropy(net->forward(b.src, b.src_len, b.tgt_in), b.tgt_out, Vocab::pad_id);
    CHECK(loss.item<float>() == Approx(ref.item<float>()).epsilon(1e-6));
    loss.backward();
    for (const auto& p : net->named_parameters()) {
        INFO(p.key());
        REQUIRE(p.value().grad().defined());
        CHECK(p.value().grad().abs().sum().item<float>() > 0.0f);
    }
}

TEST_CASE("validation reads the real tokens' logits without the padding, equal to forward()'s there",
          "[transformer][packed]") {
    auto c = tiny_transformer();
    auto net = build(c);
    net->eval();
    // 9 of 20 source places and 8 of 16 target places real: the packed layout (under 80% full).
    const auto r = ragged_batch({5, 1, 2, 1}, {4, 1, 1, 2}, c.src_vocab, c.tgt_vocab, 6);
    const TokenLogits packed = net->real_token_logits(r.src, r.src_len, r.tgt_in, r.tgt_out);
    const TokenLogits grid = net->EncoderDecoder::real_token_logits(r.src, r.src_len, r.tgt_in, r.tgt_out);
    const auto real = r.tgt_out.ne(Vocab::pad_id).sum().item<int64_t>();
    REQUIRE(packed.targets.numel() == real);
    REQUIRE(packed.logits.sizes() == torch::IntArrayRef({real, c.tgt_vocab}));
    CHECK(torch::equal(packed.targets, grid.targets));  // the same tokens in the same order
    CHECK(torch::allclose(packed.logits, grid.logits, 1e-4, 1e-5));
    CHECK(torch::equal(grid.targets, r.tgt_out.masked_select(r.tgt_out.ne(Vocab::pad_id))));

    // Validation's sums from them: the masked cross-entropy of forward(), and its accuracy.
    Batch b;
    b.src = r.src;
    b.src_len = r.src_len;
    b.tgt_in = r.tgt_in;
    b.tgt_out = r.tgt_out;
    const ValidationSums sums = split_validation_sums(*net, b, 1);
    torch::NoGradGuard no_grad;
    const auto logits = net->forward(r.src, r.src_len, r.tgt_in);
    const auto mask = r.tgt_out.ne(Vocab::pad_id);
    CHECK(sums.tokens == real);
    CHECK(sums.loss == Approx(masked_cross_entropy(logits, r.tgt_out, Vocab::pad_id).item<double>() * real).epsilon(1e-5));
    CHECK(sums.correct == logits.argmax(-1).eq(r.tgt_out).logical_and(mask).sum().item<double>());
}

TEST_CASE("training's loss packs the real tokens and equals the padded grid's, dropout masks and gradients included",
          "[transformer][packed][device]") {
    const auto dev = test_device();
    INFO("device " << dev);
    auto c = tiny_transformer();
    c.dropout = 0.3;
    auto net = build(c);
    net->to(dev, torch::kDouble);
    net->train();
    DropoutStream stream;
    LossOptions o;
    o.dropout = &stream;
    Dropout d;
    d.p = c.dropout;
    d.stream = &stream;
    auto gradients = [&](const std::function<torch::Tensor()>& loss_of, double* loss) {
        net->zero_grad();
        auto l = loss_of();
        l.backward();
        *loss = l.item<double>();
        std::map<std::string, torch::Tensor> out;
        for (const auto& p : net->named_parameters()) out[p.key()] = p.value().grad().clone();
        return out;
    };
    // extra: columns of padding past the longest row, as d2l's fixed steps add. The decoder input
    // carries tokens past each row's end (d2l's [:-1] slice keeps <eos>), which no real token reads.
    auto check = [&](const std::vector<int64_t>& src_lens, const std::vector<int64_t>& tgt_lens, int64_t extra,
                     bool packs, TokenPacking packing = TokenPacking::when_padded) {
        o.packing = packing;  // when_padded: packs on a GPU too (automatic keeps a GPU's grid)
        const auto r = ragged_batch(src_lens, tgt_lens, c.src_vocab, c.tgt_vocab, 31);
        const int64_t B = r.src.size(0);
        const auto src = torch::cat({r.src, torch::zeros({B, extra}, torch::kLong)}, 1).to(dev);
        auto tgt_in = torch::cat({r.tgt_in, torch::zeros({B, extra}, torch::kLong)}, 1).to(dev);
        const auto tgt_out = torch::cat({r.tgt_out, torch::zeros({B, extra}, torch::kLong)}, 1).to(dev);
        const auto src_len = r.src_len.to(dev);
        tgt_in.masked_fill_(tgt_out.eq(Vocab::pad_id), 5);
        const auto layout = TokenLayout::packing(src_len, src.size(1), dev);
        CHECK(layout.packed() == packs);
        if (packs) CHECK(layout.index.device() == dev);
        stream.seed = 11;
        double packed = 0, padded = 0, other = 0;
        const auto got = gradients([&] { return net->loss(src, src_len, tgt_in, tgt_out, o); }, &packed);
        const auto ref = gradients(
            [&] {
                const auto enc = net->encode_embedded(net->embed_source(src), src_len, d, /*keep=*/false);
                REQUIRE_FALSE(enc.layout.packed());
                const auto h = net->decode_embedded(net->embed_target(tgt_in), enc, d);  // [B, T, d]: every position
                return masked_cross_entropy(net->decoder->dense->forward(h), tgt_out, Vocab::pad_id);
            },
            &padded);
        CHECK(packed == Approx(padded).epsilon(1e-12));
        for (const auto& [name, g] : ref) {
            INFO(name);
            CHECK(torch::allclose(got.at(name), g, 1e-9, 1e-11));
        }
        // The masks matter (so the equality above is the packed masks matching the grid's).
        stream.seed = 12;
        gradients([&] { return net->loss(src, src_len, tgt_in, tgt_out, o); }, &other);
        CHECK(other != Approx(packed).epsilon(1e-6));
    };
    SECTION("mostly padding: packed") { check({5, 2, 4, 1, 3}, {4, 2, 3, 1, 4}, 3, true); }
    SECTION("mostly padding, packing off: the grid") {
        check({5, 2, 4, 1, 3}, {4, 2, 3, 1, 4}, 3, true, TokenPacking::never);
    }
    SECTION("nearly full: the grid as it is") { check({5, 5, 4, 5, 5}, {4, 4, 4, 3, 4}, 0, false); }
}

TEST_CASE("a token layout packs the first len positions of each row and puts them back with zeros",
          "[packed][device]") {
    const auto dev = test_device();
    const auto layout = TokenLayout::prefix(torch::tensor({2, 0, 3}, torch::kLong).to(dev), 3, dev);
    REQUIRE(layout.packed());
    CHECK(layout.index.device() == dev);
    CHECK(layout.host_index.device() == torch::Device(torch::kCPU));
    CHECK(layout.host_index.equal(torch::tensor({0, 1, 6, 7, 8}, torch::kLong)));
    CHECK(layout.index.cpu().equal(layout.host_index));
    const auto x = torch::arange(18, torch::TensorOptions(torch::kFloat).device(dev)).view({3, 3, 2});
    const auto p = layout.pack(x);
    CHECK(p.sizes() == torch::IntArrayRef({5, 2}));
    const auto back = layout.grid(p);
    CHECK(back.device() == dev);
    const auto real = torch::tensor({1, 1, 0, 0, 0, 0, 1, 1, 1}, torch::kFloat).view({3, 3, 1});
    CHECK(back.cpu().equal(x.cpu() * real));
    const TokenLayout dense;
    CHECK(dense.pack(x).equal(x));
    CHECK(dense.grid(x).equal(x));
    // Packing pays only where padding is a fifth of the grid or more.
    CHECK(TokenLayout::packing(torch::tensor({2, 0, 3}, torch::kLong), 3, torch::kCPU).packed());
    CHECK_FALSE(TokenLayout::packing(torch::tensor({3, 3, 3, 2, 3}, torch::kLong), 3, torch::kCPU).packed());
    CHECK(TokenLayout::packing(torch::tensor({3, 3, 3, 2, 3}, torch::kLong), 3, torch::kCPU, 0.95).packed());
}

TEST_CASE("an intervention replaces the cross weights of every head and switches heads off", "[transformer]") {
    auto c = tiny_transformer();
    auto net = build(c);
    net->eval();
    torch::NoGradGuard no_grad;
    const auto b = ragged_batch({4, 2}, {2, 2}, c.src_vocab, c.tgt_vocab, 6);
    auto enc = net->encode(b.src, b.src_len);
    auto plain_cache = net->start(*enc);
    const auto plain = net->step(b.tgt_in.select(1, 0), *plain_cache, *enc);
    AttentionIntervention look;
    look.cross_weights = torch::zeros({2, 4});
    look.cross_weights[0][3] = 1;
    look.cross_weights[1][0] = 1;
    auto cache = net->start(*enc);
    const auto moved = net->step(b.tgt_in.select(1, 0), *cache, *enc, &look);
    for (const auto& m : moved.maps)
        if (m.id.kind == AttentionKind::cross) CHECK(torch::equal(m.weights, look.cross_weights));
    CHECK((moved.logits - plain.logits).abs().max().item<float>() > 1e-4);
    AttentionIntervention off;
    for (int l = 0; l < 2; ++l) off.heads_off.push_back({AttentionKind::cross, l, -1});
    auto cache2 = net->start(*enc);
    const auto blind = net->step(b.tgt_in.select(1, 0), *cache2, *enc, &off);
    // Without cross-attention the source cannot matter: both rows see the same token alone.
    AttentionIntervention off_one;
    off_one.heads_off.push_back({AttentionKind::cross, 1, 2});
    auto cache3 = net->start(*enc);
    const auto one = net->step(b.tgt_in.select(1, 0), *cache3, *enc, &off_one);
    CHECK((one.logits - plain.logits).abs().max().item<float>() > 0.0f);
    CHECK((one.logits - blind.logits).abs().max().item<float>() > 0.0f);
    CHECK((blind.logits[0] - blind.logits[1]).abs().max().item<float>() < 1e-5);
}

TEST_CASE("a Transformer batch trained in parts gives the whole batch's loss and gradients, dropout included",
          "[transformer][split][short]") {
    ThreadCount threads(2);
    auto c = tiny_transformer();
    c.dropout = 0.3;
    auto net = build(c);
    // double: attend() (short_attention is float32 only), equal to rounding; float: short_attention
    // on the CPU, equal to float rounding (the parts' products have other shapes).
    const bool in_double = GENERATE(true, false);
    INFO((in_double ? "double" : "float"));
    const double loss_eps = in_double ? 1e-12 : 1e-5, rtol = in_double ? 1e-9 : 1e-3, atol = in_double ? 1e-11 : 1e-5;
    if (in_double) net->to(torch::kDouble);
    net->train();
    REQUIRE(net->trains_in_parts(1.0));
    REQUIRE_FALSE(net->trains_in_parts(0.5));
    std::mt19937 rng(9);
    std::vector<int64_t> src_lens, tgt_lens;
    for (int i = 0; i < 70; ++i) {
        src_lens.push_back(1 + static_cast<int64_t>(rng() % 8));
        tgt_lens.push_back(1 + static_cast<int64_t>(rng() % 8));
    }
    const auto r = ragged_batch(src_lens, tgt_lens, c.src_vocab, c.tgt_vocab, 21);
    Batch b;
    b.src = r.src;
    b.src_len = r.src_len;
    b.tgt_in = r.tgt_in;
    b.tgt_out = r.tgt_out;
    auto grads = [&](int parts, double* loss) {
        net->zero_grad();
        torch::manual_seed(77);  // the step's dropout seed
        *loss = split_loss_backward(*net, b, 1.0, parts);
        std::map<std::string, torch::Tensor> out;
        for (const auto& p : net->named_parameters()) out[p.key()] = p.value().grad().clone();
        return out;
    };
    double whole = 0, split = 0;
    const auto ref = grads(1, &whole);
    const auto got = grads(2, &split);
    CHECK(split == Approx(whole).epsilon(loss_eps));
    for (const auto& [name, g] : ref) {
        INFO(name);
        CHECK(torch::allclose(got.at(name), g, rtol, atol));
    }
    // Another step seed draws other masks.
    net->zero_grad();
    torch::manual_seed(78);
    CHECK(split_loss_backward(*net, b, 1.0, 2) != Approx(whole).epsilon(1e-9));
}
