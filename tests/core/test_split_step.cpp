// The training step split across threads (core/train/split_step.hpp): the whole
// batch's loss and gradients, masks that depend on the seed and not on the
// threads' timing, and when a step is split at all.
#include "catch_torch.hpp"

#include <cstdint>
#include <map>
#include <random>
#include <stdexcept>
#include <utility>

#include <ATen/Parallel.h>

#include "core/model/fused_gru.hpp"
#include "core/train/split_step.hpp"
#include "core/text/text.hpp"
#include "core/text/vocab.hpp"
#include "test_support.hpp"

using namespace attnviz;
using attnviz::testing::ThreadCount;
using attnviz::testing::tiny_config;

namespace {

// 70 rows of lengths 1..9 in no order: parts of 35, 24 or 18 rows.
Batch ragged_rows(int64_t src_vocab, int64_t tgt_vocab) {
    std::mt19937 rng(5);
    std::vector<int64_t> src_lens, tgt_lens;
    for (int i = 0; i < 70; ++i) {
        src_lens.push_back(1 + static_cast<int64_t>(rng() % 9));
        tgt_lens.push_back(1 + static_cast<int64_t>(rng() % 9));
    }
    const auto r = attnviz::testing::ragged_batch(src_lens, tgt_lens, src_vocab, tgt_vocab, 13);
    Batch b;
    b.src = r.src;
    b.src_len = r.src_len;
    b.tgt_in = r.tgt_in;
    b.tgt_out = r.tgt_out;
    b.tgt_len = r.tgt_out.ne(Vocab::pad_id).sum(1);
    return b;
}

Seq2Seq double_model(double dropout) {
    auto c = tiny_config(Scoring::additive);
    c.dropout = dropout;
    Seq2Seq m(c);
    m->to(torch::kDouble);
    m->train();
    return m;
}

std::map<std::string, torch::Tensor> step_grads(Seq2Seq& m, const Batch& b, int parts, double* loss) {
    m->zero_grad();
    *loss = split_loss_backward(*m, b, 1.0, parts);
    std::map<std::string, torch::Tensor> out;
    for (const auto& p : m->named_parameters()) out[p.key()] = p.value().grad().clone();
    return out;
}

}  // namespace

TEST_CASE("a batch split into parts gives the whole batch's loss and every gradient", "[split][train]") {
    ThreadCount threads(2);
    auto m = double_model(0.0);
    const Batch b = ragged_rows(12, 11);
    double whole = 0;
    const auto ref = step_grads(m, b, 1, &whole);
    for (int parts : {2, 3}) {
        INFO(parts << " parts");
        double split = 0;
        const auto got = step_grads(m, b, parts, &split);
        CHECK(split == Approx(whole).epsilon(1e-12));
        for (const auto& [name, g] : ref) {
            INFO(name);
            REQUIRE(got.at(name).defined());
            CHECK(torch::allclose(got.at(name), g, 1e-10, 1e-12));
        }
    }
}

TEST_CASE("a split step's dropout masks follow the seed and each token's place in the batch", "[split][train]") {
    ThreadCount threads(2);
    auto m = double_model(0.3);
    const Batch b = ragged_rows(12, 11);
    auto run = [&](uint64_t seed, int parts) {
        torch::manual_seed(seed);
        double loss = 0;
        return std::make_pair(step_grads(m, b, parts, &loss), loss);
    };
    const auto [whole, whole_loss] = run(21, 1);
    // Split into 2 or 3 parts, on two threads in whatever order: the masks are the
    // whole batch's, so the loss and gradients are too (to rounding).
    for (int parts : {2, 3}) {
        INFO(parts << " parts");
        const auto [split, split_loss] = run(21, parts);
        CHECK(split_loss == Approx(whole_loss).epsilon(1e-12));
        for (const auto& [name, g] : whole) {
            INFO(name);
            CHECK(torch::allclose(split.at(name), g, 1e-10, 1e-12));
        }
    }
    // The same seed gives bitwise the same split step every time.
    const auto [first, first_loss] = run(21, 2);
    for (int i = 0; i < 4; ++i) {
        const auto [again, again_loss] = run(21, 2);
        CHECK(again_loss == first_loss);
        for (const auto& [name, g] : first) CHECK(torch::equal(again.at(name), g));
    }
    // The masks are real: another seed, another loss; no dropout, another loss again.
    CHECK(run(22, 2).second != first_loss);
    auto plain = double_model(0.0);
    double plain_loss = 0;
    step_grads(plain, b, 2, &plain_loss);
    CHECK(plain_loss != first_loss);
}

TEST_CASE("validation split into parts adds up to the whole batch's loss, tokens and correct predictions",
          "[split][train]") {
    ThreadCount threads(2);
    auto m = double_model(0.3);  // eval mode below: no dropout, whatever the config says
    m->eval();
    const Batch b = ragged_rows(12, 11);
    const ValidationSums whole = split_validation_sums(*m, b, 1);
    // The plain computation, written out: mean cross-entropy over real tokens.
    torch::NoGradGuard no_grad;
    const auto logits = m->forward(b.src, b.src_len, b.tgt_in);
    const auto mask = b.tgt_out.ne(Vocab::pad_id);
    const double tokens = mask.sum().item<double>();
    CHECK(whole.tokens == tokens);
    CHECK(whole.loss == Approx(masked_cross_entropy(logits, b.tgt_out, Vocab::pad_id).item<double>() * tokens));
    CHECK(whole.correct == logits.argmax(-1).eq(b.tgt_out).logical_and(mask).sum().item<double>());
    for (int parts : {2, 3}) {
        INFO(parts << " parts");
        const ValidationSums split = split_validation_sums(*m, b, parts);
        CHECK(split.tokens == whole.tokens);
        CHECK(split.correct == whole.correct);
        CHECK(split.loss == Approx(whole.loss).epsilon(1e-12));
    }
    Seq2Seq unfused(tiny_config(Scoring::additive));
    unfused->set_fused_decoder(false);
    CHECK_THROWS_AS(split_validation_sums(*unfused, b, 2), std::logic_error);
}

TEST_CASE("hashed dropout masks keep the asked share, scaled, and differ by seed, mask and token", "[split][train]") {
    DropoutStream stream{12345, {}};
    std::vector<uint64_t> keys;
    for (int64_t row = 0; row < 40; ++row)
        for (int64_t t = 0; t < 10; ++t) keys.push_back(dropout_key(row, t));
    const double keep = 0.7;
    const auto mask = hashed_dropout_mask(stream, 1, keys, 256, keep, torch::TensorOptions().dtype(torch::kDouble));
    REQUIRE(mask.sizes() == torch::IntArrayRef({400, 256}));
    const auto kept = mask.ne(0);
    CHECK(kept.to(torch::kDouble).mean().item<double>() == Approx(keep).margin(0.01));  // 102,400 draws
    CHECK(torch::allclose(mask.masked_select(kept), torch::full({1}, 1.0 / keep, torch::kDouble), 1e-6, 0));
    // Same inputs, same mask; another seed, mask id or token: about as many
    // agreements as independent draws give (keep^2 + (1-keep)^2 = 0.58).
    CHECK(torch::equal(mask, hashed_dropout_mask(stream, 1, keys, 256, keep, torch::TensorOptions().dtype(torch::kDouble))));
    auto agreement = [&](const torch::Tensor& other) { return mask.ne(0).eq(other.ne(0)).to(torch::kDouble).mean().item<double>(); };
    const DropoutStream other_seed{12346, {}};
    const auto opt = torch::TensorOptions().dtype(torch::kDouble);
    CHECK(agreement(hashed_dropout_mask(other_seed, 1, keys, 256, keep, opt)) == Approx(0.58).margin(0.01));
    CHECK(agreement(hashed_dropout_mask(stream, 2, keys, 256, keep, opt)) == Approx(0.58).margin(0.01));
    std::vector<uint64_t> shifted(keys.begin() + 1, keys.end());
    shifted.push_back(dropout_key(40, 0));
    const auto next = hashed_dropout_mask(stream, 1, shifted, 256, keep, opt);
    CHECK(mask.narrow(0, 1, 399).ne(0).eq(next.narrow(0, 0, 399).ne(0)).all().item<bool>());  // a token's mask is its own
    CHECK(agreement(next) == Approx(0.58).margin(0.01));
}

namespace {
/// How many elements a mask keeps, and a hash of where (their row-major indices).
std::pair<int64_t, uint64_t> fingerprint(const torch::Tensor& mask) {
    const auto flat = mask.contiguous().view(-1);
    const auto* m = flat.data_ptr<float>();
    int64_t kept = 0;
    uint64_t print = 0;
    for (int64_t i = 0; i < flat.numel(); ++i)
        if (m[i] != 0.0f) {
            ++kept;
            print = print * 31 + static_cast<uint64_t>(i);
        }
    return {kept, print};
}
}  // namespace

TEST_CASE("hashed dropout masks are the same numbers on every CPU and in every version, one attention head's too",
          "[split][train]") {
    // A seeded run draws the same masks wherever it runs: these fingerprints come from the
    // first, scalar version of the hash (before the AVX-512 build of its loop, 2026-11-27).
    const DropoutStream stream{12345, {}};
    std::vector<uint64_t> keys;
    for (int64_t row = 0; row < 40; ++row)
        for (int64_t t = 0; t < 10; ++t) keys.push_back(dropout_key(row, t));
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat);
    CHECK(fingerprint(hashed_dropout_mask(stream, 1, keys, 256, 0.7, f32)) ==
          std::make_pair<int64_t, uint64_t>(71595, 17457922845118517737ULL));
    CHECK(fingerprint(hashed_dropout_mask(stream, 1, keys, 7, 0.7, f32)) ==
          std::make_pair<int64_t, uint64_t>(1977, 4360081488426075061ULL));
    CHECK(fingerprint(hashed_dropout_mask(stream, (3 << 8) | 2, keys, 7, 0.7, f32)) ==
          std::make_pair<int64_t, uint64_t>(1927, 5611361763810611718ULL));

    // Attention weights' masks, [B, heads, queries, keys] at once: head h is mask (which << 8) | h.
    const auto heads = hashed_dropout_head_masks(stream, 3, keys, 4, 10, 7, 0.7, f32);
    REQUIRE(heads.sizes() == torch::IntArrayRef({40, 4, 10, 7}));
    for (int64_t h = 0; h < 4; ++h) {
        INFO("head " << h);
        CHECK(torch::equal(heads.select(1, h).reshape({400, 7}),
                           hashed_dropout_mask(stream, (3 << 8) | static_cast<uint64_t>(h), keys, 7, 0.7, f32)));
    }
    CHECK(fingerprint(heads.select(1, 2)) == std::make_pair<int64_t, uint64_t>(1927, 5611361763810611718ULL));
    CHECK_THROWS_AS(hashed_dropout_head_masks(stream, 3, keys, 4, 7, 7, 0.7, f32), std::logic_error);
}

TEST_CASE("a training step is split only on the CPU, with threads, rows and fused nodes enough", "[split][train]") {
    Seq2Seq gru(tiny_config(Scoring::additive));
    const torch::Device cpu(torch::kCPU);
    CHECK(split_step_parts(*gru, cpu, 128, 1.0, 2) == 2);
    CHECK(split_step_parts(*gru, cpu, 128, 1.0, 8) == 128 / split_step_min_rows);
    CHECK(split_step_parts(*gru, cpu, 2 * split_step_min_rows - 1, 1.0, 2) == 1);
    CHECK(split_step_parts(*gru, cpu, 128, 1.0, 1) == 1);
    CHECK(split_step_parts(*gru, torch::Device(torch::kCUDA), 128, 1.0, 2) == 1);
    // Randomness outside the fused nodes' masks (scheduled sampling, nn::GRU's or
    // nn::LSTM's dropout) would depend on the threads' order: no split.
    CHECK(split_step_parts(*gru, cpu, 128, 0.5, 2) == 1);
    auto bi = tiny_config(Scoring::additive);
    bi.bidirectional = true;
    CHECK(split_step_parts(*Seq2Seq(bi), cpu, 128, 1.0, 2) == 1);
    auto lstm = tiny_config(Scoring::additive);
    lstm.cell = CellType::lstm;
    CHECK(split_step_parts(*Seq2Seq(lstm), cpu, 128, 1.0, 2) == 1);
    Seq2Seq unfused(tiny_config(Scoring::additive));
    unfused->set_fused_decoder(false);
    CHECK(split_step_parts(*unfused, cpu, 128, 1.0, 2) == 1);
    CHECK_THROWS_AS(split_loss_backward(*unfused, ragged_rows(12, 11), 1.0, 2), std::logic_error);
}
