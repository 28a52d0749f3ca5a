// A beam step's candidates read straight from the log-probabilities (core/decode/beam_candidates.hpp)
// against torch's (logp + prev).view(B, K*V).topk(2K): the same totals, tokens and order; dead
// beams and done sentences; ties, NaN and too few finite totals left to torch; one and two threads.
// And the step's logits made final (core/model/attention_blocks.hpp) in place, as out of place, and
// the self-attention cache grown a position a step and reordered without torch::cat.
#include "catch_torch.hpp"

#include <cmath>
#include <limits>
#include <vector>

#include "core/decode/beam_candidates.hpp"
#include "core/decode/search.hpp"
#include "core/model/attention_blocks.hpp"
#include "test_support.hpp"

using namespace attnviz;
using attnviz::testing::ThreadCount;

namespace {

constexpr float k_dead = -std::numeric_limits<float>::infinity();

/// torch's way, as the beam search took it before (and still takes it where the order is not decided).
struct TorchCandidates {
    torch::Tensor total, index, step_lp;
};

TorchCandidates torch_candidates(const torch::Tensor& logp, std::vector<float> prev, int64_t K) {
    const int64_t B = logp.size(0) / K, V = logp.size(1);
    auto p = torch::from_blob(prev.data(), {B * K, 1}, torch::kFloat).clone();
    auto total = (logp + p).view({B, K * V});
    auto index = std::get<1>(total.topk(std::min<int64_t>(2 * K, K * V), 1));
    return {total.gather(1, index), index, logp.view({B, K * V}).gather(1, index)};
}

/// Log-probabilities of B*K rows over V tokens, some masked to -inf as the generation rules do.
torch::Tensor log_probs(int64_t rows, int64_t V) {
    auto logp = torch::log_softmax(torch::randn({rows, V}) * 3, -1);
    if (V > 2) logp.index_fill_(1, torch::tensor({int64_t{0}, int64_t{2}}), k_dead);
    return logp.contiguous();
}

}  // namespace

TEST_CASE("best_extensions gives topk's candidates over logp + beam log P: totals, tokens and order, "
          "dead beams and done sentences, one and two threads",
          "[decode][beam]") {
    torch::manual_seed(11);
    for (const int threads : {1, 2}) {
        ThreadCount guard(threads);
        for (const auto& [B, K, V] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
                 {1, 4, 59}, {3, 4, 1000}, {32, 4, 5003}, {2, 1, 300}, {4, 6, 130}, {1, 5, 64}}) {
            auto logp = log_probs(B * K, V);
            std::vector<float> prev(static_cast<size_t>(B * K));
            for (auto& p : prev) p = -std::abs(torch::randn({1}).item<float>()) * 10;
            prev[1 % prev.size()] = k_dead;  // a beam not live (the first step: only beam 0 is)
            if (B > 2)  // a done sentence: none of its beams live
                for (int64_t k = 0; k < K; ++k) prev[static_cast<size_t>(K + k)] = k_dead;
            const auto got = best_extensions(logp, prev, K);
            REQUIRE(got.has_value());
            const auto want = torch_candidates(logp, prev, K);
            REQUIRE(got->total.sizes() == want.total.sizes());
            for (int64_t b = 0; b < B; ++b) {
                if (B > 2 && b == 1) {  // not looked at: -inf
                    CHECK(got->total[b].eq(k_dead).all().item<bool>());
                    continue;
                }
                CHECK(torch::equal(got->index[b], want.index[b]));
                CHECK(torch::equal(got->total[b], want.total[b]));  // the same float sums, bit for bit
                CHECK(torch::equal(got->step_lp[b], want.step_lp[b]));
            }
        }
    }
}

TEST_CASE("best_extensions leaves the order to torch where values tie, a value is NaN or a sentence has "
          "too few finite totals",
          "[decode][beam]") {
    torch::manual_seed(12);
    const int64_t K = 4, V = 200;
    std::vector<float> prev{0.f, -1.f, -2.f, -3.f};
    SECTION("two of the best totals tie (two tokens with one logit)") {
        auto logits = torch::randn({K, V});
        logits[0][7] = 20.f, logits[0][9] = 20.f;
        CHECK_FALSE(best_extensions(torch::log_softmax(logits, -1).contiguous(), prev, K).has_value());
    }
    SECTION("ties across beams: the same value in two rows with the same log P") {
        auto logp = log_probs(K, V);
        logp[1][5] = 0.f, logp[2][5] = 0.f;
        std::vector<float> same{k_dead, -1.f, -1.f, k_dead};
        CHECK_FALSE(best_extensions(logp, same, K).has_value());
    }
    SECTION("a tie below the candidates does not matter") {
        auto logp = log_probs(K, V);
        logp[3][10] = -80.f, logp[3][11] = -80.f;
        const auto got = best_extensions(logp, prev, K);
        REQUIRE(got.has_value());
        CHECK(torch::equal(got->index, torch_candidates(logp, prev, K).index));
    }
    SECTION("NaN in a live row") {
        auto logp = log_probs(K, V);
        logp[2][100] = std::numeric_limits<float>::quiet_NaN();
        CHECK_FALSE(best_extensions(logp, prev, K).has_value());
    }
    SECTION("fewer finite totals than candidates + 1") {
        auto logp = torch::full({K, V}, k_dead);
        for (int64_t v = 0; v < 5; ++v) logp[0][v] = -static_cast<float>(v) - 1.f;
        std::vector<float> first{0.f, k_dead, k_dead, k_dead};
        CHECK_FALSE(best_extensions(logp, first, K).has_value());
    }
    SECTION("a vocabulary too small for 2K + 1 totals, a tensor not on the CPU's float layout") {
        CHECK_FALSE(best_extensions(log_probs(K, 2), prev, K).has_value());
        CHECK_FALSE(best_extensions(log_probs(K, V).to(torch::kDouble), prev, K).has_value());
        CHECK_FALSE(best_extensions(log_probs(V, K).t(), prev, K).has_value());
    }
}

TEST_CASE("count_greater counts a row's values above a value as torch's gt and sum do", "[decode][beam]") {
    torch::manual_seed(13);
    auto row = torch::randn({1031});
    row[5] = -std::numeric_limits<float>::infinity();
    for (const float value : {-10.f, -0.5f, 0.f, row[17].item<float>(), 3.f}) {
        const int64_t want = row.gt(value).sum().item<int64_t>();
        CHECK(count_greater(row.data_ptr<float>(), row.size(0), value) == want);
    }
}

TEST_CASE("finish_logits adds the bias and closes <bos> in place without a gradient, out of place with one, "
          "the values of logits + bias then index_fill",
          "[decode][beam]") {
    torch::manual_seed(14);
    const float floor = -std::numeric_limits<float>::infinity();
    auto logits = torch::randn({6, 50});
    auto bias = torch::randn({1, 50});
    const auto want = (logits + bias.view({-1})).index_fill(-1, torch::tensor({int64_t{1}}), floor);
    {
        torch::NoGradGuard no_grad;
        auto copy = logits.clone();
        const auto got = finish_logits(copy, bias, 1, floor);
        CHECK(torch::equal(got, want));
        CHECK(got.data_ptr() == copy.data_ptr());  // no second [rows, V] tensor
        // An all-zero bias (Marian's final_logits_bias) adds nothing.
        auto again = logits.clone();
        CHECK(torch::equal(finish_logits(again, torch::zeros({1, 50}), 1, floor),
                           logits.index_fill(-1, torch::tensor({int64_t{1}}), floor)));
        // Half logits and a float bias: float, as logits + bias gives them.
        CHECK(finish_logits(logits.to(torch::kHalf), bias, 1, floor).scalar_type() == torch::kFloat);
    }
    auto leaf = logits.clone().requires_grad_(true);
    auto got = finish_logits(leaf * 1.0, bias, 1, floor);
    CHECK(torch::equal(got.detach(), want));
    got.index({torch::indexing::Slice(), 0}).sum().backward();
    CHECK(leaf.grad().index({torch::indexing::Slice(), 0}).eq(1).all().item<bool>());
}

TEST_CASE("GrowingSteps holds what torch::cat of the steps holds, reorders as index_select, copies share "
          "nothing, and a recorded gradient flows through it",
          "[decode][beam]") {
    torch::manual_seed(15);
    const int64_t B = 3, h = 2, dh = 5;
    GrowingSteps grown;
    CHECK_FALSE(grown.filled().defined());
    torch::Tensor cat;
    for (int64_t step = 0; step < 30; ++step) {  // past the first room of 8 positions and its regrowths
        const auto x = torch::randn({B, h, step == 0 ? 2 : 1, dh});
        cat = cat.defined() ? torch::cat({cat, x}, 2) : x;
        const auto got = grown.append(x);
        REQUIRE(torch::equal(got, cat));
        if (step % 7 == 3) {  // a beam's reordering
            const auto rows = torch::tensor({int64_t{2}, int64_t{0}, int64_t{0}});
            grown.select(rows);
            cat = cat.index_select(0, rows);
            REQUIRE(torch::equal(grown.filled(), cat));
        }
    }
    CHECK(grown.steps() == cat.size(2));
    GrowingSteps copy = grown;
    copy.append(torch::ones({B, h, 1, dh}));
    grown.append(torch::zeros({B, h, 1, dh}));
    CHECK(torch::equal(grown.filled().narrow(2, 0, cat.size(2)), cat));
    CHECK(grown.filled().select(2, cat.size(2)).eq(0).all().item<bool>());
    CHECK(copy.filled().select(2, cat.size(2)).eq(1).all().item<bool>());

    // The same rows: nothing moves; more rows than before; a row that is not there.
    const auto before = grown.filled().clone();
    grown.select(torch::arange(B));
    CHECK(torch::equal(grown.filled(), before));
    grown.select(torch::tensor({int64_t{1}, int64_t{1}, int64_t{0}, int64_t{2}}));
    CHECK(torch::equal(grown.filled(), before.index_select(0, torch::tensor({int64_t{1}, int64_t{1}, int64_t{0}, int64_t{2}}))));
    CHECK_THROWS_AS(grown.select(torch::tensor({int64_t{4}})), std::out_of_range);

    // Scheduled sampling trains through steps: no position written in place under autograd.
    auto w = torch::randn({B, h, 1, dh}, torch::requires_grad());
    GrowingSteps trained;
    torch::Tensor loss = torch::zeros({});
    for (int step = 0; step < 3; ++step) loss = loss + trained.append(w * (step + 1)).sum();
    loss.backward();
    CHECK(torch::allclose(w.grad(), torch::full({B, h, 1, dh}, 1.0 * 3 + 2 * 2 + 3 * 1)));
}

TEST_CASE("GrowingSteps reorders a cache of many rows on one and on two threads as index_select does",
          "[decode][beam]") {
    torch::manual_seed(16);
    const int64_t B = 64, h = 8, dh = 64;
    const auto rows = torch::randint(0, B, {B}, torch::kLong);
    for (const int threads : {1, 2}) {
        const ThreadCount count(threads);
        GrowingSteps grown;
        torch::Tensor cat;
        for (int64_t step = 0; step < 40; ++step) {  // 10 KB runs: the copy splits across threads
            const auto x = torch::randn({B, h, 1, dh});
            cat = cat.defined() ? torch::cat({cat, x}, 2) : x;
            grown.append(x);
        }
        grown.select(rows);
        CHECK(torch::equal(grown.filled(), cat.index_select(0, rows)));
    }
}

TEST_CASE("GrowingSteps reorders in place only the rows that change: cycles, rows copied into others, "
          "and a buffer someone holds a view of is left as it was",
          "[decode][beam]") {
    torch::manual_seed(18);
    const int64_t B = 12, h = 3, dh = 4;
    auto fill = [&](GrowingSteps& g) {
        torch::Tensor cat;
        for (int64_t step = 0; step < 5; ++step) {
            const auto x = torch::randn({B, h, 1, dh});
            cat = cat.defined() ? torch::cat({cat, x}, 2) : x;
            g.append(x);
        }
        return cat;
    };
    auto ids = [](std::vector<int64_t> v) { return torch::tensor(v, torch::kLong); };
    // A cycle 0 -> 1 -> 2 -> 0, a swap, one row into three others, a row moved and its own source
    // moved, the beams' usual pattern (each sentence's first row into its other rows), a random one.
    const std::vector<torch::Tensor> orders = {
        ids({1, 2, 0, 3, 4, 5, 6, 7, 8, 9, 10, 11}), ids({0, 1, 2, 3, 5, 4, 6, 7, 8, 9, 10, 11}),
        ids({0, 0, 0, 0, 4, 5, 6, 7, 8, 9, 10, 11}), ids({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 10}),
        ids({0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8}), torch::randint(0, B, {B}, torch::kLong)};
    for (const int threads : {1, 2}) {
        const ThreadCount count(threads);
        for (const auto& rows : orders) {
            GrowingSteps grown;
            auto cat = fill(grown);
            const void* buffer = grown.filled().data_ptr();
            grown.select(rows);
            CHECK(grown.filled().data_ptr() == buffer);  // moved in place
            CHECK(torch::equal(grown.filled(), cat.index_select(0, rows)));
            // Twice more, as beam search's steps do, an append between.
            const auto x = torch::randn({B, h, 1, dh});
            grown.append(x);
            cat = torch::cat({cat.index_select(0, rows), x}, 2);
            grown.select(rows.flip(0));
            CHECK(torch::equal(grown.filled(), cat.index_select(0, rows.flip(0))));
        }
    }
    // A view held elsewhere keeps what it showed: the reordered rows go to a new buffer.
    GrowingSteps grown;
    const auto cat = fill(grown);
    const auto view = grown.filled();
    grown.select(orders[0]);
    CHECK(torch::equal(view, cat));
    CHECK(torch::equal(grown.filled(), cat.index_select(0, orders[0])));
}

TEST_CASE("output_log_probs writes over a step's logits held by nothing else, the values torch's "
          "log_softmax gives, and leaves logits held elsewhere alone",
          "[decode][beam]") {
    torch::manual_seed(17);
    const auto logits = torch::randn({6, 50}) * 4;
    auto want = torch::log_softmax(logits, -1);
    want.index_fill_(1, torch::tensor({Vocab::pad_id, Vocab::bos_id}), k_dead);
    auto own = logits.clone();
    const void* memory = own.data_ptr();
    const auto got = output_log_probs(std::move(own));
    CHECK(got.data_ptr() == memory);  // in place
    CHECK(torch::equal(got, want));
    const auto held = logits.clone();
    const auto copy = output_log_probs(held);  // held here too: a new tensor
    CHECK(copy.data_ptr() != held.data_ptr());
    CHECK(torch::equal(held, logits));
    CHECK(torch::equal(copy, want));
    const auto wide = logits.to(torch::kDouble);  // another type: converted, not written over
    CHECK(torch::allclose(output_log_probs(wide.clone()), want, 1e-6, 1e-6));
    const auto view = logits.clone();
    CHECK(output_log_probs(view.narrow(0, 1, 3)).data_ptr() != view.data_ptr());  // part of a larger buffer
    CHECK(torch::equal(view, logits));
}
