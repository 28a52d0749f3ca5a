// x W^T for a few rows against a column-major weight (core/model/small_linear.hpp).
#include "core/model/small_linear.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <chrono>

#ifdef _OPENMP
#include <omp.h>
#endif

/// MKL's per-thread thread count, where LibTorch carries MKL (weak: absent elsewhere; the C
/// interface: the lower-case name takes a pointer).
extern "C" int MKL_Set_Num_Threads_Local(int) __attribute__((weak));

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

/// The sum of a vector's 8 lanes, in a fixed order.
__attribute__((target("avx2,fma"))) inline float lane_sum(__m256 acc) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/// out[r, o]: the lanes of a dot product's accumulator, then the K % 8 terms past them.
__attribute__((target("avx2,fma"))) inline void finish_dot(__m256 acc, const float* x, const float* w, float* out,
                                                            int64_t K, int64_t N, int64_t r, int64_t o) {
    float v = lane_sum(acc);
    for (int64_t k = K / 8 * 8; k < K; ++k) v = __builtin_fmaf(x[r * K + k], w[o * K + k], v);
    out[r * N + o] = v;
}

/// Output features [o0, o1) of out [R, N] = x [R, K] times w [N, K] (row-major: each output a
/// dot product of a contiguous weight row), R = ROWS. Every (row, output) has one accumulator
/// over K in 8-float blocks, summed across its lanes at the end: the same order whatever ROWS is.
/// OUTS output features at a time give the FMAs independent chains.
template <int ROWS, int OUTS>
__attribute__((target("avx2,fma"))) void dots(const float* x, const float* w, float* out, int64_t K, int64_t N,
                                              int64_t o0, int64_t o1) {
    const int64_t K8 = K / 8 * 8;
    int64_t o = o0;
    for (; o + OUTS <= o1; o += OUTS) {
        __m256 acc[OUTS][ROWS];
        for (int j = 0; j < OUTS; ++j)
            for (int r = 0; r < ROWS; ++r) acc[j][r] = _mm256_setzero_ps();
        for (int64_t k = 0; k < K8; k += 8) {
            for (int j = 0; j < OUTS; ++j) {
                const __m256 wv = _mm256_loadu_ps(w + (o + j) * K + k);
                for (int r = 0; r < ROWS; ++r) acc[j][r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * K + k), wv, acc[j][r]);
            }
        }
        for (int j = 0; j < OUTS; ++j)
            for (int r = 0; r < ROWS; ++r) finish_dot(acc[j][r], x, w, out, K, N, r, o + j);
    }
    for (; o < o1; ++o) {
        __m256 acc[ROWS];
        for (int r = 0; r < ROWS; ++r) acc[r] = _mm256_setzero_ps();
        for (int64_t k = 0; k < K8; k += 8) {
            const __m256 wv = _mm256_loadu_ps(w + o * K + k);
            for (int r = 0; r < ROWS; ++r) acc[r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * K + k), wv, acc[r]);
        }
        for (int r = 0; r < ROWS; ++r) finish_dot(acc[r], x, w, out, K, N, r, o);
    }
}

/// The dot-product kernel for R rows: 4 output features at a time for one row, 2 up to 4 rows,
/// 1 beyond (the accumulators within AVX2's 16 registers).
StripFn dot_kernel(int64_t rows) {
    switch (rows) {
    case 1: return dots<1, 4>;
    case 2: return dots<2, 2>;
    case 3: return dots<3, 2>;
    case 4: return dots<4, 2>;
    case 5: return dots<5, 1>;
    case 6: return dots<6, 1>;
    case 7: return dots<7, 1>;
    case 8: return dots<8, 1>;
    default: return nullptr;
    }
}

/// out [R, N] = x [R, K] against weight's data, R = x's rows, by `kernel` over runs of `chunk`
/// output features (columns or weight rows) shared among the threads.
torch::Tensor run_kernel(StripFn kernel, const torch::Tensor& x, const torch::Tensor& weight, int64_t chunk) {
    const int64_t R = x.size(0), K = x.size(1), N = weight.size(0);
    const auto xc = x.contiguous();
    auto out = torch::empty({R, N}, xc.options());
    const float* xp = xc.data_ptr<float>();
    const float* wp = weight.data_ptr<float>();
    float* op = out.data_ptr<float>();
    at::parallel_for(0, (N + chunk - 1) / chunk, 1, [&](int64_t begin, int64_t end) {
        kernel(xp, wp, op, K, N, begin * chunk, std::min(N, end * chunk));
    });
    return out;
}

#endif

/// What both kernels need: AVX2 and FMA, x [R, in] with min_rows <= R <= k_small_linear_rows
/// against weight [out, in], dense float CPU tensors, no gradient asked for.
bool plain_few_rows(const torch::Tensor& x, const torch::Tensor& weight, int64_t min_rows) {
#ifdef ATTNVIZ_SMALL_LINEAR_AVX2
    if (!cpu_has_avx2_fma()) return false;
    if (x.dim() != 2 || weight.dim() != 2 || x.size(1) != weight.size(1)) return false;
    if (x.size(0) < min_rows || x.size(0) > k_small_linear_rows) return false;
    if (!x.device().is_cpu() || !weight.device().is_cpu()) return false;
    if (x.scalar_type() != torch::kFloat || weight.scalar_type() != torch::kFloat) return false;
    if (x.is_sparse() || weight.is_sparse() || x.is_mkldnn() || weight.is_mkldnn()) return false;
    return !(torch::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad()));
#else
    (void)x, (void)weight, (void)min_rows;
    return false;
#endif
}

}  // namespace

namespace {

/// OpenMP's thread count for this thread's next regions, and MKL's per-thread count (0: its
/// global one); returns MKL's per-thread count before (0 without MKL).
int set_threads(int omp_threads, int mkl_local) {
#ifdef _OPENMP
    omp_set_num_threads(omp_threads);
#else
    (void)omp_threads;
#endif
    return MKL_Set_Num_Threads_Local ? MKL_Set_Num_Threads_Local(mkl_local) : 0;
}

}  // namespace

FewRowsStepThreads::FewRowsStepThreads(int64_t rows) {
    const int threads = at::get_num_threads();
    if (rows > k_small_linear_rows || threads < 2 || at::in_parallel_region()) return;
    m_threads = threads;
    m_mkl = set_threads(1, 1);
}

FewRowsStepThreads::~FewRowsStepThreads() {
    if (m_threads == 0) return;
    set_threads(m_threads, m_mkl);
}

namespace {

/// What StepThreads last found faster, for every search and encoder of the process: 1 for one
/// thread, 0 for all; the steps between tries of the slower (grows while tries lose), and the
/// steps since the last try, counted over every search and encoder.
std::atomic<int> g_one_faster{0};
std::atomic<int64_t> g_interval{4};
std::atomic<int64_t> g_since_try{1 << 20};  // the first search tries at once

int64_t steady_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

}  // namespace

StepThreads::StepThreads(int64_t rows) : m_few(rows) {
    const int threads = at::get_num_threads();
    if (rows <= k_small_linear_rows || threads < 2 || at::in_parallel_region()) return;
    m_full = threads;
    m_best = g_one_faster.load() ? 1 : m_full;
    if (MKL_Set_Num_Threads_Local) m_mkl = MKL_Set_Num_Threads_Local(0);  // 0: the global count from here
}

StepThreads::~StepThreads() {
    if (m_full < 2) return;
    use(m_full);
    if (MKL_Set_Num_Threads_Local) MKL_Set_Num_Threads_Local(m_mkl);
}

void StepThreads::use(int threads) {
    if (threads == m_current) return;
    set_threads(threads, threads == m_full ? 0 : threads);  // MKL's 0: its global count
    m_current = threads;
}

void StepThreads::next_step() {
    if (m_full < 2) return;
    const int64_t now = steady_ns();
    // The step before, unless it was the first (its one-off costs: buffers, the cache's start).
    if (m_step >= 1) {
        const int k = m_current == m_full ? 0 : 1;
        const double seconds = double(now - m_started_ns) * 1e-9;
        const bool tried = m_current != m_best;
        m_time[k] = m_timed[k] ? 0.5 * (m_time[k] + seconds) : seconds;
        m_timed[k] = true;
        if (tried) {
            // The try against this search's own steps of the same shape: a loss makes the next try
            // wait twice as long (each costs a slower step), a change of mind brings it close.
            const int best = m_time[1] < m_time[0] ? 1 : m_full;
            g_interval.store(best == m_best ? std::min<int64_t>(g_interval.load() * 2, 32) : 4);
            m_best = best;
            g_one_faster.store(best == 1 ? 1 : 0);
        } else if (m_timed[0] && m_timed[1] && m_time[k] > 1.5 * m_time[1 - k]) {
            // The choice's own steps slowed far past the other's try (the load came or went; a
            // step's own growth with its position stays well within the margin): switch now.
            m_best = k == 0 ? 1 : m_full;
            g_one_faster.store(m_best == 1 ? 1 : 0);
            g_since_try.store(0);  // the choice just left is not tried again at once
        }
    }
    ++m_step;
    // Step 0 (not timed) and 1 on the choice last found faster; from step 2, when a try is due,
    // one step on the other.
    int next = m_best;
    if (m_step >= 2 && g_since_try.load() >= g_interval.load()) {
        next = m_best == 1 ? m_full : 1;
        g_since_try.store(0);
    } else {
        g_since_try.fetch_add(1);
    }
    use(next);
    m_started_ns = steady_ns();
}

void forget_step_threads() {
    g_one_faster.store(0);
    g_interval.store(4);
    g_since_try.store(1 << 20);
}

PreferredThreads::PreferredThreads(int64_t rows) {
    if (rows > k_small_linear_rows && g_one_faster.load()) m_one.emplace(1);  // one thread, as a few rows' step
}

bool few_rows_linear_applies(const torch::Tensor& x, const torch::Tensor& weight) {
    return plain_few_rows(x, weight, 1) && weight.is_contiguous();  // row-major [out, in]
}

torch::Tensor few_rows_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
    const bool flat = x.dim() == 2;
    const auto x2 = flat ? x : x.reshape({-1, x.size(-1)});
    if (!few_rows_linear_applies(x2, weight)) return torch::nn::functional::linear(x, weight, bias);
#ifdef ATTNVIZ_SMALL_LINEAR_AVX2
    // Runs of 128 output features (256 KB of a 512-wide weight): a 512 x 512 projection in 4
    // tasks, so that both threads read it (MKL's matrix-vector product used one).
    auto out = run_kernel(dot_kernel(x2.size(0)), x2, weight, 128);
    if (bias.defined()) out.add_(bias);
    if (flat) return out;
    auto shape = x.sizes().vec();
    shape.back() = weight.size(0);
    return out.view(shape);
#else
    return torch::nn::functional::linear(x, weight, bias);
#endif
}

bool small_rows_linear_applies(const torch::Tensor& x, const torch::Tensor& weight) {
    // Column-major: weight.t() is a contiguous [in, out].
    return plain_few_rows(x, weight, 2) && weight.stride(0) == 1 && weight.stride(1) == weight.size(0);
}

torch::Tensor small_rows_linear(const torch::Tensor& x, const torch::Tensor& weight) {
    if (!small_rows_linear_applies(x, weight)) return torch::nn::functional::linear(x, weight);
#ifdef ATTNVIZ_SMALL_LINEAR_AVX2
    // The weight's data is its transpose [K, N], row-major. Each task a run of 2,048 columns (a
    // 4 MB slice of a 512-row weight): few enough tasks that starting them costs nothing beside
    // the reading, enough to share among threads.
    return run_kernel(strip_kernel(x.size(0)), x, weight, 2048);
#else
    return torch::nn::functional::linear(x, weight);
#endif
}

}  // namespace attnviz
