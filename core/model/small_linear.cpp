// x W^T for a few rows against a column-major weight (core/model/small_linear.hpp).
#include "core/model/small_linear.hpp"

#include <ATen/Parallel.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ATTNVIZ_SMALL_LINEAR_AVX2 1
#include <immintrin.h>
#endif

namespace attnviz {

namespace {

#ifdef ATTNVIZ_SMALL_LINEAR_AVX2

bool cpu_has_avx2_fma() {
    static const bool has = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }();
    return has;
}

/// Columns [n0, n1) of out [R, N] = x [R, K] times wt [K, N] (row-major: the weight's transpose),
/// R = ROWS, in strips of 8 * VECS columns; the rest of the columns one at a time.
template <int ROWS, int VECS>
__attribute__((target("avx2,fma"))) void strips(const float* x, const float* wt, float* out, int64_t K, int64_t N,
                                                int64_t n0, int64_t n1) {
    constexpr int64_t width = 8 * VECS;
    // The lines of the strip 4 strips on, for each weight row as it is read: the walk goes down
    // the rows (N floats apart), which the hardware prefetchers do not follow.
    constexpr int64_t ahead = 4 * width;
    int64_t n = n0;
    for (; n + width <= n1; n += width) {
        __m256 acc[ROWS][VECS];
        for (int r = 0; r < ROWS; ++r)
            for (int v = 0; v < VECS; ++v) acc[r][v] = _mm256_setzero_ps();
        const float* w = wt + n;
        for (int64_t k = 0; k < K; ++k, w += N) {
            _mm_prefetch(reinterpret_cast<const char*>(w + ahead), _MM_HINT_T1);
            __m256 wv[VECS];
            for (int v = 0; v < VECS; ++v) wv[v] = _mm256_loadu_ps(w + 8 * v);
            for (int r = 0; r < ROWS; ++r) {
                const __m256 xr = _mm256_broadcast_ss(x + r * K + k);
                for (int v = 0; v < VECS; ++v) acc[r][v] = _mm256_fmadd_ps(xr, wv[v], acc[r][v]);
            }
        }
        for (int r = 0; r < ROWS; ++r)
            for (int v = 0; v < VECS; ++v) _mm256_storeu_ps(out + r * N + n + 8 * v, acc[r][v]);
    }
    for (; n < n1; ++n)
        for (int r = 0; r < ROWS; ++r) {
            float s = 0.f;
            for (int64_t k = 0; k < K; ++k) s = __builtin_fmaf(x[r * K + k], wt[k * N + n], s);
            out[r * N + n] = s;
        }
}

using StripFn = void (*)(const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t);

/// The strip kernel for R rows: 16 columns a strip while the accumulators fit AVX2's 16
/// registers beside the weight's (R <= 4), 8 beyond.
StripFn strip_kernel(int64_t rows) {
    switch (rows) {
    case 2: return strips<2, 2>;
    case 3: return strips<3, 2>;
    case 4: return strips<4, 2>;
    case 5: return strips<5, 1>;
    case 6: return strips<6, 1>;
    case 7: return strips<7, 1>;
    case 8: return strips<8, 1>;
    default: return nullptr;
    }
}

#endif

}  // namespace

bool small_rows_linear_applies(const torch::Tensor& x, const torch::Tensor& weight) {
#ifdef ATTNVIZ_SMALL_LINEAR_AVX2
    if (!cpu_has_avx2_fma()) return false;
    if (x.dim() != 2 || weight.dim() != 2 || x.size(1) != weight.size(1)) return false;
    if (x.size(0) < 2 || x.size(0) > k_small_linear_rows) return false;
    if (!x.device().is_cpu() || !weight.device().is_cpu()) return false;
    if (x.scalar_type() != torch::kFloat || weight.scalar_type() != torch::kFloat) return false;
    if (x.is_sparse() || weight.is_sparse() || x.is_mkldnn() || weight.is_mkldnn()) return false;
    if (torch::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad())) return false;
    // Column-major: weight.t() is a contiguous [in, out].
    return weight.stride(0) == 1 && weight.stride(1) == weight.size(0);
#else
    (void)x;
    (void)weight;
    return false;
#endif
}

torch::Tensor small_rows_linear(const torch::Tensor& x, const torch::Tensor& weight) {
    if (!small_rows_linear_applies(x, weight)) return torch::nn::functional::linear(x, weight);
#ifdef ATTNVIZ_SMALL_LINEAR_AVX2
    const int64_t R = x.size(0), K = x.size(1), N = weight.size(0);
    const auto xc = x.contiguous();
    auto out = torch::empty({R, N}, xc.options());
    const float* xp = xc.data_ptr<float>();
    const float* wt = weight.data_ptr<float>();  // [K, N], row-major
    float* op = out.data_ptr<float>();
    const StripFn kernel = strip_kernel(R);
    // Each task a run of 2,048 columns (a 4 MB slice of a 512-row weight): few enough tasks
    // that starting them costs nothing beside the reading, enough to share among threads.
    constexpr int64_t chunk = 2048;
    at::parallel_for(0, (N + chunk - 1) / chunk, 1, [&](int64_t begin, int64_t end) {
        kernel(xp, wt, op, K, N, begin * chunk, std::min(N, end * chunk));
    });
    return out;
#else
    return torch::nn::functional::linear(x, weight);
#endif
}

}  // namespace attnviz
