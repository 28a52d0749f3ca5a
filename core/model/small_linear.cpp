// x W^T for a few rows against a column-major weight (core/model/small_linear.hpp).
#include "core/model/small_linear.hpp"

#include <ATen/Parallel.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

/// MKL's per-thread thread count, where LibTorch carries MKL (weak: absent elsewhere).
extern "C" int MKL_Set_Num_Threads_Local(int) __attribute__((weak));  // the C interface (the lower-case name takes a pointer)

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ATTNVIZ_SMALL_LINEAR_AVX2 1
#include <immintrin.h>
#endif

namespace attnviz {

namespace {

/// The threads the few-row kernels share on this thread while a FewRowsStepThreads lives; 0: ATen's.
thread_local int t_kernel_threads = 0;

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

/// Helper threads for the few-row kernels, which wait asleep between products (a futex, not a
/// spin). Why not OpenMP: a decoder step runs ~100 of these products, 20-100 us each, and
/// libgomp's workers spin between regions while its barriers wait for every thread: on a busy
/// 2-core machine (load 4) a descheduled worker stalled each region, and greedy Flan-T5-base-sized
/// decoding took 6.5 s a sentence at 2 threads against 1.6 s at 1 (perf: 45% libgomp). Here
/// the caller and the helpers claim runs of output features from one counter, and the caller
/// waits only for runs a helper has claimed: a helper the scheduler has not run yet costs
/// nothing. Each run is computed by the same kernel over the same features whoever claims it, so
/// the results do not depend on the threads.
class KernelPool {
public:
    /// kernel over runs [0, runs) of `chunk` features of N, with up to `threads` threads in all.
    void run(StripFn kernel, const float* x, const float* w, float* out, int64_t K, int64_t N, int64_t chunk,
             int64_t runs, int threads) {
        std::unique_lock<std::mutex> busy(m_busy, std::try_to_lock);  // another caller: on this thread alone
        if (!busy.owns_lock() || threads < 2 || runs < 2) {
            kernel(x, w, out, K, N, 0, N);
            return;
        }
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            while (static_cast<int>(m_helpers.size()) < threads - 1) {
                const int index = static_cast<int>(m_helpers.size());
                m_helpers.emplace_back([this, index, seen = m_generation] { helper(index, seen); });
                m_helpers.back().detach();
            }
            m_job = Job{kernel, x, w, out, K, N, chunk, runs, threads - 1};
            m_generation = (m_generation + 1) & 0xffffffffu;
            m_done.store(0, std::memory_order_relaxed);
            m_next.store(m_generation << 32, std::memory_order_release);
        }
        m_wake.notify_all();
        const uint64_t gen = m_generation;
        while (claim_and_run(m_job, gen)) {
        }
        while (m_done.load(std::memory_order_acquire) < runs) std::this_thread::yield();  // claimed runs in flight
    }

private:
    struct Job {
        StripFn kernel = nullptr;
        const float* x = nullptr;
        const float* w = nullptr;
        float* out = nullptr;
        int64_t K = 0, N = 0, chunk = 0, runs = 0;
        int helpers = 0;
    };

    /// Claims the next run of generation `gen` (the counter's high half) and computes it; false
    /// when none is left or a later product has begun.
    bool claim_and_run(const Job& job, uint64_t gen) {
        uint64_t v = m_next.load(std::memory_order_acquire);
        for (;;) {
            if ((v >> 32) != gen || static_cast<int64_t>(v & 0xffffffffu) >= job.runs) return false;
            if (m_next.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel)) break;
        }
        const int64_t r = static_cast<int64_t>(v & 0xffffffffu);
        job.kernel(job.x, job.w, job.out, job.K, job.N, r * job.chunk, std::min(job.N, (r + 1) * job.chunk));
        m_done.fetch_add(1, std::memory_order_acq_rel);
        return true;
    }

    [[noreturn]] void helper(int index, uint64_t seen) {
        for (;;) {
            Job job;
            uint64_t gen = 0;
            {
                std::unique_lock<std::mutex> lock(m_mutex);
                m_wake.wait(lock, [&] { return m_generation != seen; });
                seen = gen = m_generation;
                job = m_job;
            }
            if (index < job.helpers)
                while (claim_and_run(job, gen)) {
                }
        }
    }

    std::mutex m_busy;   ///< held by the product running
    std::mutex m_mutex;  ///< m_job, m_generation, m_helpers
    std::condition_variable m_wake;
    std::vector<std::thread> m_helpers;
    Job m_job;
    uint64_t m_generation = 0;        ///< the product's number, 32 bits
    std::atomic<uint64_t> m_next{0};  ///< generation << 32 | the next run
    std::atomic<int64_t> m_done{0};   ///< runs of this generation finished
};

KernelPool& kernel_pool() {
    static auto* pool = new KernelPool;  // never destroyed: its helpers sleep through the exit
    return *pool;
}

/// out [R, N] = x [R, K] against weight's data, R = x's rows, by `kernel` over runs of `chunk`
/// output features (columns or weight rows) shared among at::get_num_threads() threads
/// (KernelPool); on this thread alone inside a parallel region.
torch::Tensor run_kernel(StripFn kernel, const torch::Tensor& x, const torch::Tensor& weight, int64_t chunk) {
    const int64_t R = x.size(0), K = x.size(1), N = weight.size(0);
    const auto xc = x.contiguous();
    auto out = torch::empty({R, N}, xc.options());
    const float* xp = xc.data_ptr<float>();
    const float* wp = weight.data_ptr<float>();
    float* op = out.data_ptr<float>();
    const int threads = at::in_parallel_region() ? 1 : t_kernel_threads > 0 ? t_kernel_threads : at::get_num_threads();
    kernel_pool().run(kernel, xp, wp, op, K, N, chunk, (N + chunk - 1) / chunk, threads);
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

FewRowsStepThreads::FewRowsStepThreads(int64_t rows) {
    const int threads = at::get_num_threads();
    if (rows > k_small_linear_rows || threads < 2 || at::in_parallel_region() || t_kernel_threads > 0) return;
    m_threads = threads;
    t_kernel_threads = threads;
#ifdef _OPENMP
    omp_set_num_threads(1);
#endif
    if (MKL_Set_Num_Threads_Local) m_mkl = MKL_Set_Num_Threads_Local(1);
}

FewRowsStepThreads::~FewRowsStepThreads() {
    if (m_threads == 0) return;
    t_kernel_threads = 0;
#ifdef _OPENMP
    omp_set_num_threads(m_threads);
#endif
    if (MKL_Set_Num_Threads_Local) MKL_Set_Num_Threads_Local(m_mkl);
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
