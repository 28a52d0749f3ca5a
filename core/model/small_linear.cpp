// x W^T for a few rows against a column-major weight (core/model/small_linear.hpp).
#include "core/model/small_linear.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

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
/// R = ROWS, in blocks of up to WIDTH columns: for each weight row in turn, a contiguous run of
/// WIDTH floats times each x row's value, added to the block's accumulators, which stay in the
/// L1 cache (ROWS x WIDTH floats, 8-16 KB); the next weight row's run is prefetched as this one
/// is read. Why not strips of 16-32 columns with the accumulators in registers (the kernel
/// before): those read 64-128 bytes of every one of the K rows, rows N floats apart, before
/// moving on, which memory serves worse than long runs. On an AMD EPYC (Zen 3), BART-base-sized's
/// 768 x 50,265 output projection on two threads took 14.8-15.0 ms a call with strips, 11.5-13.4
/// with these blocks (a plain sum of the same bytes: ~9.5); greedy decoding 7-19% faster
/// (docs/benchmarks.md).
/// Each output's sum runs over k in order, one fused multiply-add per term, as before: the same
/// values to the bit, whatever the rows beside it. The columns past the last 8-column group are
/// summed one at a time in the same order.
template <int ROWS, int WIDTH>
__attribute__((target("avx2,fma"))) void column_blocks(const float* x, const float* wt, float* out, int64_t K, int64_t N,
                                                       int64_t n0, int64_t n1) {
    static_assert(WIDTH % 16 == 0, "a block is whole 16-column groups");
    alignas(64) float acc[ROWS][WIDTH];
    for (int64_t n = n0; n < n1; n += WIDTH) {
        const int64_t width = std::min<int64_t>(WIDTH, n1 - n), vectors = width / 8 * 8;
        for (int r = 0; r < ROWS; ++r) std::fill(acc[r], acc[r] + vectors, 0.0f);
        const float* w = wt + n;
        for (int64_t k = 0; k < K; ++k, w += N) {
            if (k + 1 < K)
                for (int64_t i = 0; i < vectors; i += 16) _mm_prefetch(reinterpret_cast<const char*>(w + N + i), _MM_HINT_T0);
            __m256 xr[ROWS];
            for (int r = 0; r < ROWS; ++r) xr[r] = _mm256_broadcast_ss(x + r * K + k);
            for (int64_t i = 0; i < vectors; i += 8) {
                const __m256 wv = _mm256_loadu_ps(w + i);
                for (int r = 0; r < ROWS; ++r)
                    _mm256_store_ps(acc[r] + i, _mm256_fmadd_ps(xr[r], wv, _mm256_load_ps(acc[r] + i)));
            }
        }
        for (int r = 0; r < ROWS; ++r) std::copy(acc[r], acc[r] + vectors, out + r * N + n);
        for (int64_t c = n + vectors; c < n + width; ++c)
            for (int r = 0; r < ROWS; ++r) {
                float s = 0.f;
                for (int64_t k = 0; k < K; ++k) s = __builtin_fmaf(x[r * K + k], wt[k * N + c], s);
                out[r * N + c] = s;
            }
    }
}

using StripFn = void (*)(const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t);

/// The column-block kernel for R rows: at most 16 KB of accumulators (the L1 cache is 32 KB on
/// the machines measured), so blocks of 2,048 columns up to 2 rows, 1,024 up to 4, 512 beyond.
StripFn strip_kernel(int64_t rows) {
    switch (rows) {
    case 1: return column_blocks<1, 2048>;
    case 2: return column_blocks<2, 2048>;
    case 3: return column_blocks<3, 1024>;
    case 4: return column_blocks<4, 1024>;
    case 5: return column_blocks<5, 512>;
    case 6: return column_blocks<6, 512>;
    case 7: return column_blocks<7, 512>;
    case 8: return column_blocks<8, 512>;
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

/// One few-row product: `kernel` over runs of `chunk` output features, `chunks` of them.
struct KernelJob {
    StripFn kernel = nullptr;
    const float* x = nullptr;
    const float* w = nullptr;
    float* out = nullptr;
    int64_t K = 0, N = 0, chunk = 0, chunks = 0;
    unsigned csr = 0;  ///< the asking thread's floating-point mode (MXCSR: denormals flushed or not)
    void run(int64_t c) const { kernel(x, w, out, K, N, c * chunk, std::min(N, (c + 1) * chunk)); }
};

/// Threads of our own that take runs of a few-row product beside the thread that asked for it,
/// without OpenMP: the asking thread claims runs too, and waits only for runs a helper took,
/// never for a helper to arrive (a descheduled one is simply not waited for). Helpers spin a
/// while after a product (a step's products come every few to 100 us), then sleep.
class KernelHelpers {
public:
    static KernelHelpers& instance() {
        static auto* helpers = new KernelHelpers;  // never destroyed: its threads outlive main's statics
        return *helpers;
    }

    /// Runs `job` on this thread and up to `helpers` helpers; false (nothing run) when another
    /// thread is using them.
    bool run(const KernelJob& job, int helpers) {
        bool expected = false;
        if (!m_busy.compare_exchange_strong(expected, true, std::memory_order_acquire)) return false;
        start(helpers);
        m_job = job;
        m_next.store(0, std::memory_order_relaxed);
        m_finished.store(0, std::memory_order_relaxed);
        ++m_gen;
        m_state.store((m_gen << 16) | k_open);  // seq_cst: against the sleepers' count
        if (m_sleepers.load() > 0) {
            const std::lock_guard<std::mutex> lock(m_mutex);
            m_cv.notify_all();
        }
        for (int64_t c; (c = m_next.fetch_add(1, std::memory_order_relaxed)) < job.chunks;) job.run(c);
        // Closed: a helper that has not entered by now never will.
        const uint64_t entered = m_state.exchange(m_gen << 16) & k_entered;
        for (int spins = 0; m_finished.load(std::memory_order_acquire) < static_cast<int>(entered); ++spins)
            if (spins < 4096) _mm_pause(); else std::this_thread::yield();
        m_busy.store(false, std::memory_order_release);
        return true;
    }

private:
    static constexpr uint64_t k_open = 1u << 15;
    static constexpr uint64_t k_entered = k_open - 1;

    void start(int helpers) {
        while (static_cast<int>(m_threads.size()) < helpers) m_threads.emplace_back([this] { loop(); });
    }

    /// Waits for an open job newer than `seen` (spinning, then asleep); returns its state.
    uint64_t wait(uint64_t& seen) {
        const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(300);
        for (int spins = 0;; ++spins) {
            uint64_t s = m_state.load(std::memory_order_acquire);
            if ((s >> 16) > seen) {
                if (s & k_open) return s;
                seen = s >> 16;  // closed before we came
            }
            if ((spins & 63) != 63 || std::chrono::steady_clock::now() < spin_until) {
                _mm_pause();
                continue;
            }
            std::unique_lock<std::mutex> lock(m_mutex);
            m_sleepers.fetch_add(1);
            m_cv.wait(lock, [&] {
                const uint64_t t = m_state.load();
                return (t >> 16) > seen && (t & k_open);
            });
            m_sleepers.fetch_sub(1);
            return wait(seen);
        }
    }

    void loop() {
        uint64_t seen = 0;
        for (;;) {
            uint64_t s = wait(seen);
            if (!m_state.compare_exchange_strong(s, s + 1, std::memory_order_acq_rel)) continue;  // closed or raced
            seen = s >> 16;
            const KernelJob job = m_job;
            if (_mm_getcsr() != job.csr) _mm_setcsr(job.csr);  // the asking thread's rounding of denormals
            for (int64_t c; (c = m_next.fetch_add(1, std::memory_order_relaxed)) < job.chunks;) job.run(c);
            m_finished.fetch_add(1, std::memory_order_release);
        }
    }

    std::atomic<bool> m_busy{false};
    std::atomic<uint64_t> m_state{0};  ///< the job's number << 16, open bit, helpers entered
    std::atomic<int64_t> m_next{0};    ///< the next run to claim
    std::atomic<int> m_finished{0};    ///< helpers done with the job
    std::atomic<int> m_sleepers{0};
    std::mutex m_mutex;
    std::condition_variable m_cv;
    KernelJob m_job;
    uint64_t m_gen = 0;
    std::vector<std::thread> m_threads;
};

/// The threads a few-row product runs on inside a few-row step (FewRowsStepThreads): 0 outside
/// one (OpenMP's threads), 1: this thread, 2+: this thread and helpers of our own.
thread_local int t_kernel_threads = 0;

/// The most threads a few-row step's product runs on: a decoder's 768 x 768 projection is 6 runs
/// of 128 features, and every helper spins between products.
constexpr int k_kernel_threads = 4;

/// out [R, N] = x [R, K] against weight's data, R = x's rows, by `kernel` over runs of `chunk`
/// output features (columns or weight rows) shared among the threads.
torch::Tensor run_kernel(StripFn kernel, const torch::Tensor& x, const torch::Tensor& weight, int64_t chunk) {
    const int64_t R = x.size(0), K = x.size(1), N = weight.size(0);
    const auto xc = x.contiguous();
    auto out = torch::empty({R, N}, xc.options());
    KernelJob job;
    job.kernel = kernel;
    job.x = xc.data_ptr<float>();
    job.w = weight.data_ptr<float>();
    job.out = out.data_ptr<float>();
    job.K = K;
    job.N = N;
    job.chunk = chunk;
    job.chunks = (N + chunk - 1) / chunk;
    job.csr = _mm_getcsr();
    if (t_kernel_threads >= 2 && job.chunks >= 2 && KernelHelpers::instance().run(job, t_kernel_threads - 1))
        return out;
    at::parallel_for(0, job.chunks, 1, [&](int64_t begin, int64_t end) {
        for (int64_t c = begin; c < end; ++c) job.run(c);
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

namespace {

/// What StepThreads last found faster, for every search and encoder of the process (one for many
/// rows' steps, one for a few rows'): one_faster 1 for one thread, 0 for all; the steps between
/// tries of the slower (grows while tries lose), and the steps since the last try, counted over
/// every search.
struct LearnedThreads {
    std::atomic<int> one_faster;
    std::atomic<int64_t> interval{4};
    std::atomic<int64_t> since_try{1 << 20};  // the first search tries at once
    void forget(int one) {
        one_faster.store(one);
        interval.store(4);
        since_try.store(1 << 20);
    }
};
LearnedThreads g_many{{0}};  ///< many rows: all threads until a search finds one faster
LearnedThreads g_few{{1}};   ///< a few rows' kernels: one thread until a search finds all faster

int64_t steady_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

/// ATTNVIZ_FEW_SPLIT, for benchmarks (the same build with and without): 1, a few rows' products on
/// all threads in every step; 0, on one (as before they adapted); unset or else: as the steps ran faster.
int forced_few_split() {
    static const int forced = [] {
        const char* e = std::getenv("ATTNVIZ_FEW_SPLIT");
        return e && (e[0] == '0' || e[0] == '1') ? e[0] - '0' : -1;
    }();
    return forced;
}

}  // namespace

FewRowsStepThreads::FewRowsStepThreads(int64_t rows) {
    const int threads = at::get_num_threads();
    if (rows > k_small_linear_rows || threads < 2 || at::in_parallel_region()) return;
    m_threads = threads;
    m_mkl = set_threads(1, 1);
#ifdef ATTNVIZ_SMALL_LINEAR_AVX2
    m_kernels = t_kernel_threads;
    const int forced = forced_few_split();
    const int all = std::min(threads, k_kernel_threads);
    t_kernel_threads = forced >= 0 ? (forced ? all : 1) : (g_few.one_faster.load() ? 1 : all);
#endif
}

FewRowsStepThreads::~FewRowsStepThreads() {
    if (m_threads == 0) return;
    set_threads(m_threads, m_mkl);
#ifdef ATTNVIZ_SMALL_LINEAR_AVX2
    t_kernel_threads = m_kernels;
#endif
}

int few_rows_kernel_threads() {
#ifdef ATTNVIZ_SMALL_LINEAR_AVX2
    return t_kernel_threads;
#else
    return 0;
#endif
}

StepThreads::StepThreads(int64_t rows) : m_few(rows) {
    const int threads = at::get_num_threads();
    if (rows <= k_small_linear_rows) {
#ifdef ATTNVIZ_SMALL_LINEAR_AVX2
        // A few rows: the kernels' threads, all or one (the rest stays on one, m_few).
        if (m_few.m_threads < 2 || forced_few_split() >= 0) return;
        m_few_rows = true;
        m_full = std::min(m_few.m_threads, k_kernel_threads);
        m_best = g_few.one_faster.load() ? 1 : m_full;
        m_current = t_kernel_threads;
#endif
        return;
    }
    if (threads < 2 || at::in_parallel_region()) return;
    m_full = threads;
    m_best = g_many.one_faster.load() ? 1 : m_full;
    if (MKL_Set_Num_Threads_Local) m_mkl = MKL_Set_Num_Threads_Local(0);  // 0: the global count from here
}

StepThreads::~StepThreads() {
    if (m_full < 2 || m_few_rows) return;  // a few rows: m_few restores the kernels' threads
    use(m_full);
    if (MKL_Set_Num_Threads_Local) MKL_Set_Num_Threads_Local(m_mkl);
}

void StepThreads::use(int threads) {
    if (threads == m_current) return;
#ifdef ATTNVIZ_SMALL_LINEAR_AVX2
    if (m_few_rows)
        t_kernel_threads = threads;
    else
#endif
        set_threads(threads, threads == m_full ? 0 : threads);  // MKL's 0: its global count
    m_current = threads;
}

void StepThreads::next_step() {
    if (m_full < 2) return;
    LearnedThreads& learned = m_few_rows ? g_few : g_many;
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
            learned.interval.store(best == m_best ? std::min<int64_t>(learned.interval.load() * 2, 32) : 4);
            m_best = best;
            learned.one_faster.store(best == 1 ? 1 : 0);
        } else if (m_timed[0] && m_timed[1] && m_time[k] > 1.5 * m_time[1 - k]) {
            // The choice's own steps slowed far past the other's try (the load came or went; a
            // step's own growth with its position stays well within the margin): switch now.
            m_best = k == 0 ? 1 : m_full;
            learned.one_faster.store(m_best == 1 ? 1 : 0);
            learned.since_try.store(0);  // the choice just left is not tried again at once
        }
    }
    ++m_step;
    // Step 0 (not timed) and 1 on the choice last found faster; from step 2, when a try is due,
    // one step on the other.
    int next = m_best;
    if (m_step >= 2 && learned.since_try.load() >= learned.interval.load()) {
        next = m_best == 1 ? m_full : 1;
        learned.since_try.store(0);
    } else {
        learned.since_try.fetch_add(1);
    }
    use(next);
    m_started_ns = steady_ns();
}

void forget_step_threads() {
    g_many.forget(0);
    g_few.forget(1);
}

PreferredThreads::PreferredThreads(int64_t rows) {
    if (rows > k_small_linear_rows && g_many.one_faster.load()) m_one.emplace(1);  // one thread, as a few rows' step
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
    // One row too (greedy's output projection): MKL's matrix-vector product reads the matrix on
    // one thread, these column blocks on every thread the step's products may use (BART-base-sized
    // greedy: its 154 MB vocabulary matrix was most of a token's time).
    return plain_few_rows(x, weight, 1) && weight.stride(0) == 1 && weight.stride(1) == weight.size(0);
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
