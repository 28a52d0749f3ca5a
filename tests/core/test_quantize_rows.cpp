// quantize_rows_int8 (core/model/inference_precision.hpp): the per-row int8 of every int8 weight
// and of each embedding lookup read from a model file, against the tensor expression it replaced.
#include "catch_torch.hpp"

#include <cmath>

#include "core/model/inference_precision.hpp"

using namespace attnviz;

TEST_CASE("per-row int8 quantization gives the tensor expression's numbers, NaN as 0",
          "[precision_inference][quantize]") {
    torch::manual_seed(7);
    // Rows of every scale (zero, tiny, ordinary, huge), halves that round to even, a row wider than
    // a parallel chunk, float16 input.
    auto w = torch::randn({300, 257}) * torch::logspace(-30, 30, 300).unsqueeze(1).to(torch::kFloat);
    w[0].zero_();
    w[1] = torch::arange(257).to(torch::kFloat) * 0.5f - 64.0f;  // -64, -63.5, ...: with 127 last, scale 1
    w[1][256] = 127.0f;
    w[2].fill_(1e-39f);                                           // subnormal: the 1e-12 floor
    const auto reference = [](const torch::Tensor& x) {
        auto scale = (x.abs().amax(1) / 127.0).clamp_min(1e-12);
        auto q = torch::round(x / scale.unsqueeze(1)).clamp(-127, 127).to(torch::kChar);
        return std::make_pair(q, scale.to(torch::kFloat));
    };
    for (const auto& x : {w, torch::randn({3, 70000}), w.to(torch::kHalf).to(torch::kFloat)}) {
        const auto [q, scale] = quantize_rows_int8(x);
        const auto [want_q, want_scale] = reference(x);
        CHECK(torch::equal(scale, want_scale));
        CHECK(torch::equal(q, want_q));
    }
    const auto [q1, s1] = quantize_rows_int8(w);
    CHECK(s1[1].item<float>() == 1.0f);
    CHECK(q1[1][1].item<int>() == -64);  // -63.5: half to even
    CHECK(q1[1][3].item<int>() == -62);  // -62.5
    CHECK(torch::equal(q1[0], torch::zeros({257}, torch::kChar)));
    // A NaN spreads to its row's scale, as amax does; its values become 0 (not a cast of NaN).
    auto bad = torch::ones({2, 5});
    bad[1][2] = std::nanf("");
    const auto [q, scale] = quantize_rows_int8(bad);
    CHECK(scale[0].item<float>() == 1.0f / 127.0f);
    CHECK(std::isnan(scale[1].item<float>()));
    CHECK(torch::equal(q[1], torch::zeros({5}, torch::kChar)));
    CHECK(torch::equal(q[0], torch::full({5}, 127, torch::kChar)));
}

TEST_CASE("per-row u8 activations for oneDNN give the tensor expression's numbers in 8 and in 7 bits, NaN as the zero point",
          "[precision_inference][quantize]") {
    torch::manual_seed(11);
    auto x = torch::randn({200, 129}) * torch::logspace(-20, 20, 200).unsqueeze(1).to(torch::kFloat);
    x[0].zero_();
    x[1] = torch::arange(129).to(torch::kFloat) - 64.0f;  // -64 .. 64: 127/64 steps, halves among them
    const auto reference = [](const torch::Tensor& v) {
        auto top = v.abs().amax(1).clamp_min(1e-30);
        auto steps = (127.0f / top).unsqueeze(1);
        auto q = (torch::round(v * steps).clamp(-127, 127) + 128).to(torch::kByte);
        return std::make_pair(q, top);
    };
    for (const auto& v : {x, torch::randn({2, 70000}), torch::randn({50, 129}).to(torch::kHalf).to(torch::kFloat)}) {
        const auto [q, top] = quantize_rows_u8(v);
        const auto [want_q, want_top] = reference(v);
        CHECK(torch::equal(top, want_top));
        CHECK(torch::equal(q, want_q));
    }
    const auto [q1, top1] = quantize_rows_u8(x);
    CHECK(torch::equal(q1[0], torch::full({129}, 128, torch::kByte)));  // a row of zeros: the zero point
    CHECK(q1[1][0].item<int>() == 1);                                    // -max is 127 steps below it
    CHECK(q1[1][128].item<int>() == 255);
    auto bad = torch::ones({2, 4});
    bad[1][1] = std::nanf("");
    const auto [q, top] = quantize_rows_u8(bad);
    CHECK(top[1].item<float>() == 1.0f);  // the NaN left out of the maximum
    CHECK(q[1][1].item<int>() == 128);
    CHECK(q[1][0].item<int>() == 255);
    // 7 bits (int8_activation_steps() on a CPU without VNNI): 63 steps each side of 64, within 1..127.
    const auto [q7, top7] = quantize_rows_u8(x, 63);
    const auto want7 = (torch::round(x * (63.0f / x.abs().amax(1).clamp_min(1e-30)).unsqueeze(1)).clamp(-63, 63) + 64)
                           .to(torch::kByte);
    CHECK(torch::equal(top7, top1));
    CHECK(torch::equal(q7, want7));
    CHECK(q7.max().item<int>() == 127);
    CHECK(q7[0].eq(64).all().item<bool>());
    CHECK(q7[1][0].item<int>() == 1);
    CHECK_THROWS_AS(quantize_rows_u8(x, 0), std::invalid_argument);
    CHECK_THROWS_AS(quantize_rows_u8(x, 128), std::invalid_argument);
    const int steps = int8_activation_steps();
    CHECK((steps == 127 || steps == 63));
}
