// attend_heads' own loops for a decoder step's few queries (attend_heads_in_loops): the outputs,
// weights and scores ATen's batched products and softmax give, for the shapes the families'
// steps pass (a cache's strided keys, T5's position bias, masks, beam groups sharing keys,
// switched-off heads, every key masked), and ATen's path wherever the loops do not apply.
#include "catch_torch.hpp"

#include <cmath>
#include <limits>
#include <vector>

#include "core/model/attention_blocks.hpp"

using namespace attnviz;

namespace {

constexpr float k_step_inf = std::numeric_limits<float>::infinity();

/// attend_heads through ATen: the same call with q recording a gradient, which the loops leave alone.
AttendedHeads through_aten_heads(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scaling,
                           const torch::Tensor& bias, bool keep, const torch::Tensor& keep_heads = {},
                           bool zero_empty_rows = false) {
    torch::AutoGradMode grad(true);
    const auto qg = q.detach().clone().requires_grad_(true);
    REQUIRE_FALSE(attend_heads_in_loops(qg, k, v, bias, false, {}, keep_heads));
    auto out = attend_heads(qg, k, v, scaling, bias, 0.0, false, keep, {}, keep_heads, zero_empty_rows);
    out.merged = out.merged.detach();
    if (keep) {
        out.weights = out.weights.detach();
        out.scores = out.scores.detach();
    }
    return out;
}

/// Within float rounding: scores of random 64-wide heads reach ~20, and a score's last bit moves a
/// peaked softmax's weight by ~2e-6 (the maps' own bound against transformers is 1e-5).
void check_same_heads(const AttendedHeads& got, const AttendedHeads& want, bool keep) {
    REQUIRE(got.merged.sizes() == want.merged.sizes());
    INFO("largest difference " << (got.merged - want.merged).abs().nan_to_num(0.0).max().item<double>());
    CHECK(torch::allclose(got.merged, want.merged, 1e-5, 2e-5, /*equal_nan=*/true));
    REQUIRE(got.weights.defined() == keep);
    REQUIRE(got.scores.defined() == keep);
    if (!keep) return;
    REQUIRE(got.weights.sizes() == want.weights.sizes());
    CHECK(torch::allclose(got.weights, want.weights, 1e-5, 2e-5, /*equal_nan=*/true));
    CHECK(torch::allclose(got.scores, want.scores, 1e-5, 1e-5, /*equal_nan=*/true));
}

/// Keys or values [B, h, T, dh] as a growing cache holds them: the first T positions of a longer buffer.
torch::Tensor cached_positions(int64_t B, int64_t h, int64_t T, int64_t dh) {
    return torch::randn({B, h, T + 5, dh}).narrow(2, 0, T);
}

}  // namespace

TEST_CASE("attend_heads' loops give ATen's outputs, weights and scores for a decoder step's queries",
          "[attention][decode]") {
    torch::manual_seed(11);
    torch::NoGradGuard no_grad;
    const int64_t B = 2, H = 3;
    for (const int64_t dh : {5, 16, 64})
        for (const int64_t Tq : {1, 4})
            for (const int64_t Tk : {1, 7, 256}) {
                INFO("dh " << dh << ", " << Tq << " queries, " << Tk << " keys");
                const auto q = torch::randn({B, H, Tq, dh});
                const auto k = cached_positions(B, H, Tk, dh), v = cached_positions(B, H, Tk, dh);
                // T5's position bias [1, h, Tq, Tk]; a key mask [B, 1, 1, Tk]; both; none.
                const auto position = torch::randn({1, H, Tq, Tk});
                auto mask = torch::zeros({B, 1, 1, Tk});
                if (Tk > 1) mask.select(0, 1).select(-1, Tk - 1).fill_(-k_step_inf);
                for (const auto& bias : {torch::Tensor(), position, mask, position + mask}) {
                    REQUIRE(attend_heads_in_loops(q, k, v, bias, false, {}, {}));
                    for (const double scaling : {1.0, 0.125})
                        for (const bool keep : {false, true})
                            check_same_heads(attend_heads(q, k, v, scaling, bias, 0.0, false, keep),
                                       through_aten_heads(q, k, v, scaling, bias, keep), keep);
                }
                // Switched-off heads.
                const auto heads = torch::tensor({1.0F, 0.0F, 1.0F});
                REQUIRE(attend_heads_in_loops(q, k, v, mask, false, {}, heads));
                check_same_heads(attend_heads(q, k, v, 0.5, mask, 0.0, false, true, {}, heads),
                           through_aten_heads(q, k, v, 0.5, mask, true, heads), true);
            }
}

TEST_CASE("attend_heads' loops: a row with every key masked gets softmax's NaN, or nothing when asked",
          "[attention][decode]") {
    torch::manual_seed(12);
    torch::NoGradGuard no_grad;
    const auto q = torch::randn({2, 2, 1, 8}), k = torch::randn({2, 2, 3, 8}), v = torch::randn({2, 2, 3, 8});
    auto bias = torch::zeros({2, 1, 1, 3});
    bias.select(0, 0).fill_(-k_step_inf);  // row 0: every key erased
    for (const bool zero : {false, true}) {
        const auto got = attend_heads(q, k, v, 1.0, bias, 0.0, false, true, {}, {}, zero);
        check_same_heads(got, through_aten_heads(q, k, v, 1.0, bias, true, {}, zero), true);
        CHECK(got.weights.select(0, 0).isnan().all().item<bool>() == !zero);
        CHECK(torch::isfinite(got.merged.select(0, 1)).all().item<bool>());
        if (zero) CHECK(got.merged.select(0, 0).abs().sum().item<float>() == 0.0F);
    }
}

TEST_CASE("attend_heads' loops serve a beam's rows sharing their sentence's keys as a copy per row",
          "[attention][decode][beam]") {
    torch::manual_seed(13);
    torch::NoGradGuard no_grad;
    const int64_t G = 2, g = 4, H = 2, S = 6, dh = 8;
    const auto q = torch::randn({G * g, H, 1, dh});
    const auto k = torch::randn({G, H, S, dh}), v = torch::randn({G, H, S, dh});
    const auto kk = k.repeat_interleave(g, 0), vv = v.repeat_interleave(g, 0);
    auto bias = torch::zeros({G * g, 1, 1, S});
    bias.narrow(0, g, g).select(-1, S - 1).fill_(-k_step_inf);
    const auto grouped = attend_heads(q, k, v, 0.25, bias, 0.0, false, true);
    check_same_heads(grouped, through_aten_heads(q, kk, vv, 0.25, bias, true), true);
}

TEST_CASE("attend_heads leaves to ATen what its loops do not take, with the same values", "[attention][decode]") {
    torch::manual_seed(14);
    torch::NoGradGuard no_grad;
    const auto q = torch::randn({1, 2, 1, 8}), k = torch::randn({1, 2, 257, 8}), v = torch::randn({1, 2, 257, 8});
    CHECK_FALSE(attend_heads_in_loops(q, k, v, {}, false, {}, {}));                       // a long source
    CHECK_FALSE(attend_heads_in_loops(q.to(torch::kDouble), k.to(torch::kDouble), v.to(torch::kDouble), {}, false, {},
                                      {}));                                                // not float
    const auto k4 = k.narrow(2, 0, 4), v4 = v.narrow(2, 0, 4);
    CHECK(attend_heads_in_loops(q, k4, v4, {}, false, {}, {}));
    CHECK_FALSE(attend_heads_in_loops(q, k4, v4, {}, true, {}, {}));                      // dropout
    CHECK_FALSE(attend_heads_in_loops(q, k4, v4, {}, false, torch::ones({1, 1, 1, 4}) / 4, {}));  // weights given
    CHECK_FALSE(attend_heads_in_loops(q, k4, v4, torch::zeros({1, 2, 1, 4}, torch::kDouble), false, {}, {}));
    CHECK_FALSE(attend_heads_in_loops(q, k4, v4, torch::zeros({3, 1, 1, 4}), false, {}, {}));  // does not broadcast
    CHECK_FALSE(attend_heads_in_loops(torch::randn({1, 2, 17, 8}), k4, v4, {}, false, {}, {}));  // many queries
    CHECK_FALSE(attend_heads_in_loops(q, k4.transpose(2, 3).contiguous().transpose(2, 3), v4, {}, false, {}, {}));
    // The long source through ATen, as before.
    const auto out = attend_heads(q, k, v, 1.0, {}, 0.0, false, true);
    CHECK(torch::allclose(out.weights.sum(-1), torch::ones({1, 2, 1}), 1e-5, 1e-5));
}
