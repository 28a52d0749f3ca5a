// The few-row linear (core/model/small_linear.hpp) against ATen's: values for every row count
// it takes, widths that are no multiple of its runs, one and two threads; a row's values the
// same whatever rows come with it; and the cases it leaves to ATen.
#include "catch_torch.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "core/model/mkl_dispatch.hpp"
#include "core/model/small_linear.hpp"
#include "test_support.hpp"

using namespace attnviz;
using attnviz::testing::ThreadCount;

TEST_CASE("few_rows_linear gives linear's values with its bias for 1 to 9 rows, any width, one or two threads "
          "(a decoder step's projections and a beam's output projection)",
          "[decode][beam]") {
    torch::manual_seed(10);
    for (const int threads : {1, 2}) {
        ThreadCount guard(threads);
        for (const auto& [out, in] : std::vector<std::pair<int64_t, int64_t>>{{512, 512}, {2048, 512}, {513, 2048}, {7, 37}, {130, 8}, {5000, 64}, {4099, 512}, {1037, 37}}) {
            const auto w = torch::randn({out, in});
            const auto b = torch::randn({out});
            for (int64_t rows = 1; rows <= k_small_linear_rows + 1; ++rows) {
                CAPTURE(threads, out, in, rows);
                const auto x = torch::randn({rows, 1, in});  // [beam, one step, d], as a decoder step has it
                const auto got = few_rows_linear(x, w, b);
                const auto want = torch::nn::functional::linear(x, w, b);
                REQUIRE(got.sizes() == want.sizes());
                CHECK(torch::allclose(got, want, 1e-5, 1e-4));
                CHECK(torch::allclose(few_rows_linear(x.squeeze(1), w), torch::nn::functional::linear(x.squeeze(1), w),
                                      1e-5, 1e-4));
            }
        }
    }
}

TEST_CASE("few_rows_linear gives linear's values for 9 to 33 rows (a typed sentence's encoder), any width, "
          "one or two threads",
          "[decode]") {
    torch::manual_seed(14);
    for (const int threads : {1, 2}) {
        ThreadCount guard(threads);
        for (const auto& [out, in] : std::vector<std::pair<int64_t, int64_t>>{{768, 768}, {130, 3072}, {7, 37}, {1037, 64}, {200, 1031}}) {
            const auto w = torch::randn({out, in});
            const auto b = torch::randn({out});
            for (int64_t rows = k_small_linear_rows + 1; rows <= k_tiled_linear_rows + 1; ++rows) {
                CAPTURE(threads, out, in, rows);
                const auto x = torch::randn({1, rows, in});  // [batch, tokens, d], as an encoder has it
                CHECK(few_rows_linear_applies(x[0], w) == (rows <= k_tiled_linear_rows && few_rows_linear_applies(x[0].narrow(0, 0, 1), w)));
                const auto got = few_rows_linear(x, w, b);
                const auto want = torch::nn::functional::linear(x, w, b);
                REQUIRE(got.sizes() == want.sizes());
                CHECK(torch::allclose(got, want, 1e-5, 1e-4));
            }
        }
    }
}

TEST_CASE("few_rows_linear: a row's values do not depend on the rows computed with it, nor on the threads",
          "[decode]") {
    torch::manual_seed(11);
    // Widths whose kernels differ by the row count (768, 1,024: one weight row at a time for 2-4
    // rows, dots otherwise) must give the same sums, to the bit, as those whose kernel does not.
    for (const int64_t in : {300, 768, 1024, 1031}) {
        CAPTURE(in);
        const auto w = torch::randn({1000, in});
        const auto x = torch::randn({k_tiled_linear_rows, in});
        torch::Tensor all;
        {
            ThreadCount one(1);
            all = few_rows_linear(x, w);
        }
        // 1-8 rows: one weight row against them; 9-32: tiles of 4 or 3 rows x 3 features.
        for (int64_t rows = 1; rows <= k_tiled_linear_rows; ++rows)
            CHECK(torch::equal(few_rows_linear(x.narrow(0, 0, rows), w), all.narrow(0, 0, rows)));
        CHECK(torch::equal(few_rows_linear(x.narrow(0, 11, 13), w), all.narrow(0, 11, 13)));
        CHECK(torch::equal(few_rows_linear(x.narrow(0, 5, 1), w), all.narrow(0, 5, 1)));
        CHECK(torch::equal(few_rows_linear(x.narrow(0, 2, 3), w), all.narrow(0, 2, 3)));
    }
}

TEST_CASE("few_rows_linear leaves to ATen a strided weight, a gradient, doubles, many rows", "[decode]") {
    torch::manual_seed(12);
    const auto w = torch::randn({64, 32});
    const auto x = torch::randn({3, 32});
    CHECK(few_rows_linear_applies(x, w) == few_rows_linear_applies(torch::randn({1, 32}), w));
    CHECK_FALSE(few_rows_linear_applies(x, w.t().contiguous().t()));
    CHECK_FALSE(few_rows_linear_applies(torch::randn({k_tiled_linear_rows + 1, 32}), w));
    CHECK_FALSE(few_rows_linear_applies(x.to(torch::kDouble), w.to(torch::kDouble)));
    const auto trained = w.detach().clone().requires_grad_(true);
    CHECK_FALSE(few_rows_linear_applies(x, trained));
    // Whichever computes it, the values are linear's, and a gradient flows.
    const auto y = few_rows_linear(x, trained);
    CHECK(torch::allclose(y, torch::nn::functional::linear(x, trained), 1e-5, 1e-4));
    y.sum().backward();
    REQUIRE(trained.grad().defined());
    const auto many = torch::randn({k_tiled_linear_rows + 7, 32});
    CHECK(torch::allclose(few_rows_linear(many, w), torch::nn::functional::linear(many, w), 1e-5, 1e-4));
}

TEST_CASE("FewRowsStepThreads: a few-row step's ATen work on one thread, the kernels on all, the same values",
          "[decode]") {
    ThreadCount two(2);
    torch::manual_seed(12);
    const auto w = torch::randn({700, 300});
    const auto x = torch::randn({4, 300});
    torch::Tensor serial;
    {
        ThreadCount one(1);
        serial = few_rows_linear(x, w);
    }
    {
        const attnviz::FewRowsStepThreads step(x.size(0));
        CHECK(at::get_num_threads() == 1);
        CHECK(torch::equal(few_rows_linear(x, w), serial));
        {
            const attnviz::FewRowsStepThreads nested(1);  // changes nothing more
            CHECK(torch::equal(few_rows_linear(x.narrow(0, 1, 1), w), serial.narrow(0, 1, 1)));
        }
        CHECK(at::get_num_threads() == 1);
    }
    CHECK(at::get_num_threads() == 2);
    {
        const attnviz::FewRowsStepThreads many(attnviz::k_small_linear_rows + 1);  // a batch: ATen's threads
        CHECK(at::get_num_threads() == 2);
    }
}

namespace {

/// Runs `steps` steps of a search over `rows` rows under StepThreads, each step sleeping
/// `one_ms` on one thread and `all_ms` on all: returns the threads each step ran on.
std::vector<int> timed_steps(int64_t rows, int steps, int one_ms, int all_ms) {
    attnviz::StepThreads threads(rows);
    std::vector<int> used;
    const bool few = rows <= attnviz::k_small_linear_rows;
    for (int s = 0; s < steps; ++s) {
        threads.next_step();
        // A few rows: the rest of the step on one thread whatever the kernels run on.
        if (few) CHECK(at::get_num_threads() == 1);
        used.push_back(few ? attnviz::few_rows_kernel_threads() : at::get_num_threads());
        if (threads.adapts()) CHECK(threads.threads() == used.back());
        std::this_thread::sleep_for(std::chrono::milliseconds(used.back() == 1 ? one_ms : all_ms));
    }
    return used;
}

}  // namespace

TEST_CASE("StepThreads: many rows run on the threads their steps ran faster on, trying the other now and then",
          "[decode]") {
    ThreadCount two(2);
    attnviz::forget_step_threads();
    const int64_t many = attnviz::k_small_linear_rows + 1;
    // Sleeps stand for the steps: the faster choice is clear on any machine.
    SECTION("all threads faster (a quiet machine): one thread only for the few tries") {
        const std::vector<int> used = timed_steps(many, 40, 30, 2);
        CHECK(used[0] == 2);
        CHECK(used[1] == 2);
        CHECK(used[2] == 1);  // the first try
        CHECK(std::count(used.begin(), used.end(), 1) <= 3);  // steps 2, 11, 28: each loss doubles the wait
        CHECK(used.back() == 2);
        // The next search's encoder runs on all threads.
        attnviz::PreferredThreads encoder(many);
        CHECK(at::get_num_threads() == 2);
    }
    SECTION("one thread faster (another process holds a core): all threads only for the tries") {
        const std::vector<int> used = timed_steps(many, 40, 2, 30);
        CHECK(std::count(used.begin(), used.end(), 2) <= 5);  // steps 0, 1, then tries
        CHECK(used.back() == 1);
        CHECK(at::get_num_threads() == 2);  // restored after the search
        {
            // What the search learned: the next search's encoder and first steps on one thread.
            attnviz::PreferredThreads encoder(many);
            CHECK(at::get_num_threads() == 1);
        }
        CHECK(at::get_num_threads() == 2);
        const std::vector<int> next = timed_steps(many, 2, 2, 30);
        CHECK(next[0] == 1);
        // Quiet again: a try finds all threads faster and they stay (within the longest wait, 32 steps).
        const std::vector<int> quiet = timed_steps(many, 50, 30, 2);
        CHECK(std::count(quiet.end() - 10, quiet.end(), 2) == 10);
    }
    SECTION("the load comes while a search runs: its own steps slow past the other's try, and it switches") {
        std::vector<int> used;
        attnviz::StepThreads threads(many);
        for (int s = 0; s < 30; ++s) {
            threads.next_step();
            used.push_back(at::get_num_threads());
            // From step 10 all threads take 60 ms, one 5 ms. The first loaded step's average with the
            // 2 ms before (31 ms) is twice the 1.5 x 10 ms that switches: a sleep that overshoots (a
            // busy VM) delays the switch by a step at most. (With 30 ms the margin was 16 against 15
            // ms, and a switch one step late moved the next try into the last ten steps.)
            const bool loaded = s >= 10;
            const int ms = used.back() == 1 ? (loaded ? 5 : 10) : (loaded ? 60 : 2);
            std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        }
        CHECK(used[2] == 1);  // the try: 10 ms against 2
        CHECK(std::count(used.begin() + 12, used.end(), 2) <= 2);  // one thread from step 11 or 12, but the tries
        CHECK(std::count(used.end() - 10, used.end(), 1) >= 9);  // a try (every 8 steps, then 16) may fall here
    }
    SECTION("a few rows: the step on one thread, its kernels on the threads they ran faster on") {
        const int64_t few = attnviz::k_small_linear_rows;
        const std::vector<int> used = timed_steps(few, 40, 30, 2);
        CHECK(used[0] == 1);  // the kernels start on one thread, as before anything was timed
        CHECK(used[1] == 1);
        CHECK(used[2] == 2);  // the first try
        CHECK(std::count(used.begin(), used.end(), 1) <= 5);  // steps 0, 1, 7, 16, 33: each loss doubles the wait
        CHECK(used.back() == 2);
        // A step outside a search (its own FewRowsStepThreads) takes what the searches found.
        {
            const attnviz::FewRowsStepThreads step(few);
            CHECK(at::get_num_threads() == 1);
            CHECK(attnviz::few_rows_kernel_threads() == 2);
        }
        // What the many rows' searches found is their own: the encoder keeps all threads.
        {
            attnviz::PreferredThreads encoder(many);
            CHECK(at::get_num_threads() == 2);
        }
        // Loaded: the kernels go back to one thread.
        const std::vector<int> loaded = timed_steps(few, 50, 2, 30);  // a try within 32 steps
        CHECK(std::count(loaded.end() - 10, loaded.end(), 1) >= 8);  // at most the tries of all threads
        const attnviz::FewRowsStepThreads step(few);
        CHECK(attnviz::few_rows_kernel_threads() == 1);
    }
    SECTION("a few rows at one thread: nothing timed") {
        ThreadCount one(1);
        const std::vector<int> used = timed_steps(attnviz::k_small_linear_rows, 6, 30, 2);
        CHECK(std::count(used.begin(), used.end(), 0) == 6);  // OpenMP's one thread, as outside a step
        CHECK(at::get_num_threads() == 1);
    }
    CHECK(at::get_num_threads() == 2);
    attnviz::forget_step_threads();
}

TEST_CASE("few_rows_linear: the same values with a step's kernels on helper threads, "
          "from one caller or two at once",
          "[decode][beam]") {
    ThreadCount two(2);
    torch::manual_seed(13);
    const auto w = torch::randn({1500, 300});  // runs of 128 output features
    const auto vocab = torch::randn({5000, 96});  // an output projection's shape: many runs
    const auto x = torch::randn({k_small_linear_rows, 300});
    const auto xv = torch::randn({k_small_linear_rows, 96});
    std::vector<torch::Tensor> few_serial, vocab_serial;
    {
        ThreadCount one(1);
        for (int64_t rows = 1; rows <= k_small_linear_rows; ++rows) {
            few_serial.push_back(few_rows_linear(x.narrow(0, 0, rows), w));
            vocab_serial.push_back(few_rows_linear(xv.narrow(0, 0, rows), vocab));
        }
    }
    // Steps whose kernels ran faster on all threads (sleeps stand for them): the kernels on the
    // helpers from here.
    attnviz::forget_step_threads();
    (void)timed_steps(k_small_linear_rows, 12, 30, 2);
    auto compare = [&] {
        const attnviz::FewRowsStepThreads step(k_small_linear_rows);
        if (few_rows_kernel_threads() != 2) return false;
        bool same = true;
        for (int repeat = 0; repeat < 20; ++repeat)
            for (int64_t rows = 1; rows <= k_small_linear_rows; ++rows) {
                const auto i = static_cast<size_t>(rows - 1);
                same = same && torch::equal(few_rows_linear(x.narrow(0, 0, rows), w), few_serial[i]);
                same = same && torch::equal(few_rows_linear(xv.narrow(0, 0, rows), vocab), vocab_serial[i]);
            }
        return same;
    };
    CHECK(compare());
    // Two callers at once: one gets the helpers, the other computes alone; the same values.
    bool other = false;
    std::thread second([&] {
        ThreadCount both(2);
        other = compare();
    });
    const bool first = compare();
    second.join();
    CHECK(first);
    CHECK(other);
    attnviz::forget_step_threads();
}

TEST_CASE("MKL runs a vector code path on an AMD CPU with AVX2 and FMA, and its products are linear's",
          "[decode]") {
    const std::string path = mkl_code_path();
    INFO(path);
    if (path.empty()) {
        WARN("this LibTorch carries no MKL: nothing to check");
        return;
    }
    // The test executable has the check too (attnviz_torch_runtime, linked whole): MKL's dispatcher
    // asked it and took its AVX2 path, not the generic one it takes on AMD by itself.
    if (mkl_intel_paths_enabled()) CHECK(path != "generic");
    torch::manual_seed(11);
    const auto x = torch::randn({33, 200}, torch::kDouble);
    const auto w = torch::randn({300, 200}, torch::kDouble);
    const auto y = torch::nn::functional::linear(x.to(torch::kFloat), w.to(torch::kFloat));
    CHECK(torch::allclose(y.to(torch::kDouble), torch::mm(x, w.t()), 1e-4, 1e-3));
}

TEST_CASE("few_rows_linears: several weights against one x as one job, each few_rows_linear's values to the bit, "
          "on one thread and on the step's helpers",
          "[decode][beam]") {
    torch::manual_seed(14);
    const int64_t in = 300;
    // A self-attention's q, k and v (with biases), a gated feed-forward's two, and more weights than
    // one job takes; widths no multiple of the runs.
    std::vector<torch::Tensor> weights, biases;
    for (const int64_t out : {300, 300, 300, 517, 517, 7})
        weights.push_back(torch::randn({out, in})), biases.push_back(torch::randn({out}));
    for (const int64_t rows : {1, 3, 8, 12}) {
        CAPTURE(rows);
        const auto x = torch::randn({rows, 1, in});
        std::vector<torch::Tensor> want;
        for (size_t i = 0; i < weights.size(); ++i) want.push_back(few_rows_linear(x, weights[i], biases[i]));
        auto check = [&](const std::vector<torch::Tensor>& got, bool with_bias) {
            REQUIRE(got.size() == weights.size());
            for (size_t i = 0; i < got.size(); ++i) {
                CAPTURE(i);
                REQUIRE(got[i].sizes() == want[i].sizes());
                CHECK(torch::equal(got[i], with_bias ? want[i] : few_rows_linear(x, weights[i])));
            }
        };
        {
            ThreadCount one(1);
            check(few_rows_linears(x, weights, biases), true);
            check(few_rows_linears(x, weights), false);
        }
        ThreadCount two(2);
        attnviz::forget_step_threads();
        (void)timed_steps(k_small_linear_rows, 12, 30, 2);  // the kernels on the helpers from here
        const attnviz::FewRowsStepThreads step(rows);
        if (rows <= k_small_linear_rows) CHECK(few_rows_kernel_threads() == 2);  // else OpenMP's threads
        check(few_rows_linears(x, weights, biases), true);
        attnviz::forget_step_threads();
    }
    // ATen's linear for each where one weight is not the kernels' (here a strided one), the same values.
    const auto x = torch::randn({2, in});
    const auto strided = torch::randn({in, 40}).t();
    const auto mixed = few_rows_linears(x, {weights[0], strided});
    CHECK(torch::allclose(mixed[0], torch::nn::functional::linear(x, weights[0]), 1e-5, 1e-4));
    CHECK(torch::allclose(mixed[1], torch::nn::functional::linear(x, strided), 1e-5, 1e-4));
    CHECK(few_rows_linears(x, {}).empty());
    CHECK_THROWS_AS(few_rows_linears(x, weights, {biases[0]}), std::logic_error);
}

namespace {

/// int8_rows_linear's numbers by ATen: the exact integer sums (in int64), then the same float product.
torch::Tensor int8_rows_reference(const torch::Tensor& xq, const torch::Tensor& x_factor, int zero, const torch::Tensor& w,
                                  const torch::Tensor& w_scale) {
    const auto sums = (xq.to(torch::kLong) - zero).matmul(w.to(torch::kLong).t());  // exact
    return sums.to(torch::kFloat) * (x_factor.unsqueeze(1) * w_scale.unsqueeze(0));
}

/// The instructions this CPU runs int8_rows_linear with: a plain loop always, AVX2, VNNI on 256-bit
/// registers and AVX-512 VNNI where it has them.
std::vector<Int8RowsIsa> int8_rows_isas() {
    std::vector<Int8RowsIsa> isas;
    for (auto isa : {Int8RowsIsa::scalar, Int8RowsIsa::avx2, Int8RowsIsa::avx_vnni, Int8RowsIsa::avx512_vnni})
        if (int8_rows_isa_available(isa)) isas.push_back(isa);
    return isas;
}

}  // namespace

TEST_CASE("int8_rows_linear: exact integer sums of u8 activations and int8 rows, scaled, for 1 to 33 rows, any width, "
          "on one thread, two, and a step's helpers, the same to the bit on every instruction set the CPU has",
          "[decode][precision_inference]") {
    torch::manual_seed(29);
    const auto isas = int8_rows_isas();
    CHECK(int8_rows_isa_available(int8_rows_best_isa()));
    CHECK(int8_rows_linear_vectorized() == (int8_rows_best_isa() != Int8RowsIsa::scalar));
    // Whole 32- and 64-byte blocks, tails of single bytes (AVX2) or a masked load (AVX-512), rows
    // shorter than one block.
    for (const int64_t K : {7, 32, 71, 100, 512, 1024}) {
        for (const int64_t N : {1, 127, 300}) {            // one run, runs of 128 and a last short one
            const auto w = torch::randint(-127, 128, {N, K}, torch::kChar);
            const auto w_scale = torch::rand({N}) * 0.01f + 1e-4f;
            const auto w_sum = w.to(torch::kInt).sum(1, false, torch::kInt);
            for (const int64_t R : {1, 2, 3, 4, 5, 8, 9, 33}) {
                INFO("rows " << R << ", in " << K << ", out " << N);
                // Activations at zero point 64 within 1..127 (63 steps each side), the extremes included.
                auto xq = torch::randint(1, 128, {R, K}, torch::kByte);
                xq.index_put_({0, 0}, 127);
                if (K > 1) xq.index_put_({0, 1}, 1);
                const auto factor = torch::rand({R}) + 0.5f;
                const auto want = int8_rows_reference(xq, factor, 64, w, w_scale);
                const auto by_default = int8_rows_linear(xq, factor, 64, w, w_scale, w_sum);
                REQUIRE(by_default.sizes() == want.sizes());
                // The sums are exact; the float products may round the sum once (2^24 and beyond).
                CHECK(torch::allclose(by_default, want, 1e-6, 0.0));
                for (const auto isa : isas)
                    for (const int threads : {1, 2}) {
                        INFO("instruction set " << static_cast<int>(isa) << ", threads " << threads);
                        ThreadCount count(threads);
                        CHECK(torch::equal(int8_rows_linear(xq, factor, 64, w, w_scale, w_sum, isa), by_default));
                    }
            }
        }
    }
    // 8-bit activations (zero point 128, values 1..255) where the instructions take them: VNNI's
    // 32-bit sums and the plain loop; 127 steps with VNNI, 63 on AVX2 (and the plain loop, as AVX2).
    CHECK(int8_rows_activation_steps(Int8RowsIsa::avx512_vnni) == 127);
    CHECK(int8_rows_activation_steps(Int8RowsIsa::avx_vnni) == 127);
    CHECK(int8_rows_activation_steps(Int8RowsIsa::avx2) == 63);
    CHECK(int8_rows_activation_steps(Int8RowsIsa::scalar) == 63);
    CHECK(int8_rows_activation_steps() == int8_rows_activation_steps(int8_rows_best_isa()));
    for (const auto isa : isas) {
        if (isa == Int8RowsIsa::avx2) continue;
        for (const int64_t K : {7, 100, 1024})
            for (const int64_t R : {1, 4, 33}) {
                INFO("8 bits, instruction set " << static_cast<int>(isa) << ", rows " << R << ", in " << K);
                const auto w = torch::randint(-127, 128, {131, K}, torch::kChar);
                const auto w_scale = torch::rand({131}) * 0.01f + 1e-4f;
                const auto w_sum = w.to(torch::kInt).sum(1, false, torch::kInt);
                auto xq = torch::randint(1, 256, {R, K}, torch::kByte);
                xq.index_put_({0, 0}, 255);
                const auto factor = torch::rand({R}) + 0.5f;
                CHECK(torch::allclose(int8_rows_linear(xq, factor, 128, w, w_scale, w_sum, isa),
                                      int8_rows_reference(xq, factor, 128, w, w_scale), 1e-6, 0.0));
            }
    }
    // The largest sums an NLLB-sized row makes: every product 127 x 127 over 4,096 inputs, no overflow.
    const auto big_w = torch::full({3, 4096}, 127, torch::kChar);
    const auto big_x = torch::full({2, 4096}, 127, torch::kByte);
    const auto one = torch::ones({2}), ones3 = torch::ones({3});
    for (const auto isa : isas) {
        const auto got = int8_rows_linear(big_x, one, 0, big_w, ones3, big_w.to(torch::kInt).sum(1, false, torch::kInt), isa);
        CHECK(torch::equal(got, torch::full({2, 3}, 127.0f * 127.0f * 4096.0f)));
    }
    // Inside a few-row step whose kernels run on helpers: the same values.
    {
        ThreadCount two(2);
        const auto w = torch::randint(-127, 128, {1500, 300}, torch::kChar);
        const auto w_scale = torch::rand({1500}) * 0.01f;
        const auto w_sum = w.to(torch::kInt).sum(1, false, torch::kInt);
        const auto xq = torch::randint(1, 128, {4, 300}, torch::kByte);
        const auto factor = torch::rand({4});
        const auto alone = int8_rows_linear(xq, factor, 64, w, w_scale, w_sum);
        attnviz::forget_step_threads();
        (void)timed_steps(k_small_linear_rows, 12, 30, 2);
        const attnviz::FewRowsStepThreads step(4);
        CHECK(few_rows_kernel_threads() == 2);
        for (int repeat = 0; repeat < 10; ++repeat)
            for (const auto isa : isas) CHECK(torch::equal(int8_rows_linear(xq, factor, 64, w, w_scale, w_sum, isa), alone));
        attnviz::forget_step_threads();
    }
}

TEST_CASE("int8_rows_linear refuses what it cannot read", "[decode][precision_inference]") {
    const auto w = torch::zeros({4, 8}, torch::kChar);
    const auto scale = torch::ones({4}), sums = torch::zeros({4}, torch::kInt);
    const auto xq = torch::zeros({2, 8}, torch::kByte), factor = torch::ones({2});
    CHECK_NOTHROW(int8_rows_linear(xq, factor, 64, w, scale, sums));
    CHECK_THROWS_AS(int8_rows_linear(xq.to(torch::kFloat), factor, 64, w, scale, sums), std::logic_error);
    CHECK_THROWS_AS(int8_rows_linear(torch::zeros({2, 7}, torch::kByte), factor, 64, w, scale, sums), std::logic_error);
    CHECK_THROWS_AS(int8_rows_linear(xq, factor, 64, torch::zeros({8, 4}, torch::kChar).t(), scale, sums), std::logic_error);
    CHECK_THROWS_AS(int8_rows_linear(xq, torch::ones({3}), 64, w, scale, sums), std::logic_error);
    CHECK_THROWS_AS(int8_rows_linear(xq, factor, 64, w, torch::ones({4}, torch::kDouble), sums), std::logic_error);
    CHECK_THROWS_AS(int8_rows_linear(xq, factor, 64, w, scale, torch::zeros({4}, torch::kLong)), std::logic_error);
    CHECK_THROWS_AS(int8_rows_linear(xq, factor, 129, w, scale, sums), std::logic_error);
    CHECK_THROWS_AS(int8_rows_linear(xq, factor, -1, w, scale, sums), std::logic_error);
    if (int8_rows_isa_available(Int8RowsIsa::avx2))  // its activations must stay within 127
        CHECK_THROWS_AS(int8_rows_linear(xq, factor, 65, w, scale, sums, Int8RowsIsa::avx2), std::logic_error);
    for (auto isa : {Int8RowsIsa::scalar, Int8RowsIsa::avx2, Int8RowsIsa::avx_vnni, Int8RowsIsa::avx512_vnni})
        if (!int8_rows_isa_available(isa))  // an instruction set this CPU lacks is refused, not run
            CHECK_THROWS_AS(int8_rows_linear(xq, factor, 64, w, scale, sums, isa), std::logic_error);
    // ATTNVIZ_FORCE_CPU_ISA's names, as CTranslate2's CT2_FORCE_CPU_ISA.
    CHECK(int8_rows_isa_named("generic") == Int8RowsIsa::scalar);
    CHECK(int8_rows_isa_named("AVX2") == Int8RowsIsa::avx2);
    CHECK(int8_rows_isa_named("AvxVnni") == Int8RowsIsa::avx_vnni);
    CHECK(int8_rows_isa_named("avx512") == Int8RowsIsa::avx512_vnni);
    CHECK_THROWS_WITH(int8_rows_isa_named("sse4"), Catch::Contains("generic, avx2, avxvnni or avx512"));
}

TEST_CASE("int8_rows_linear on each instruction set: time per product, one thread (run by hand)",
          "[.][int8_rows_bench]") {
    // Prints one JSON line per shape: the median of 15 products' wall time on each instruction
    // set the CPU has, and the weight bytes read a microsecond (the bound at 1 row).
    ThreadCount one(1);
    torch::manual_seed(3);
    struct Shape {
        int64_t n, k, rows;
    };
    for (const Shape s : {Shape{512, 512, 1}, Shape{2048, 512, 1}, Shape{4096, 1024, 1}, Shape{1024, 4096, 4},
                          Shape{512, 512, 32}, Shape{2048, 512, 32}, Shape{1024, 1024, 128}, Shape{64000, 1024, 4}}) {
        const auto w = torch::randint(-127, 128, {s.n, s.k}, torch::kChar);
        const auto w_scale = torch::rand({s.n}), w_sum = w.to(torch::kInt).sum(1, false, torch::kInt);
        const auto xq = torch::randint(1, 128, {s.rows, s.k}, torch::kByte);
        const auto factor = torch::rand({s.rows});
        std::printf("{\"out\": %lld, \"in\": %lld, \"rows\": %lld", static_cast<long long>(s.n),
                    static_cast<long long>(s.k), static_cast<long long>(s.rows));
        for (const auto isa : int8_rows_isas()) {
            std::vector<double> us;
            for (int i = 0; i < 16; ++i) {
                const auto t0 = std::chrono::steady_clock::now();
                (void)int8_rows_linear(xq, factor, 64, w, w_scale, w_sum, isa);
                const auto t1 = std::chrono::steady_clock::now();
                if (i > 0) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
            }
            std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
            const double median = us[us.size() / 2];
            std::printf(", \"%s_us\": %.1f, \"%s_weight_gb_s\": %.2f", int8_rows_isa_name(isa), median,
                        int8_rows_isa_name(isa), static_cast<double>(s.n * s.k) / median / 1e3);
        }
        std::printf("}\n");
        for (const auto isa : int8_rows_isas())  // what was timed was the product
            CHECK(torch::equal(int8_rows_linear(xq, factor, 64, w, w_scale, w_sum, isa),
                               int8_rows_linear(xq, factor, 64, w, w_scale, w_sum)));
    }
}
