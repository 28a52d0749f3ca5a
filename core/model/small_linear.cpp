// x W^T for a few rows against a row-major weight (core/model/small_linear.hpp).
#include "core/model/small_linear.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
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
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace attnviz {

namespace {

/// One int8_rows_linear product: out [R, N] from x [R, K] (u8 at `zero`, each row's factor) and the
/// int8 weight [N, K] (each row's scale and the sum of its values).
struct Int8RowsArgs {
    const uint8_t* x = nullptr;
    const float* x_factor = nullptr;
    int32_t zero = 0;
    const int8_t* w = nullptr;
    const float* w_scale = nullptr;
    const int32_t* w_sum = nullptr;
    float* out = nullptr;
    int64_t R = 0, K = 0, N = 0;
};
/// Output features [o0, o1) of one int8_rows_linear product, every row.
using Int8RowsKernel = void (*)(const Int8RowsArgs&, int64_t o0, int64_t o1);

/// int8_rows_linear's run [o0, o1) without vector instructions (a CPU without AVX2): the same
/// integer sums.
void int8_rows_run_scalar(const Int8RowsArgs& a, int64_t o0, int64_t o1) {
    for (int64_t r = 0; r < a.R; ++r)
        for (int64_t o = o0; o < o1; ++o) {
            const uint8_t* x = a.x + r * a.K;
            const int8_t* w = a.w + o * a.K;
            int32_t sum = 0;
            for (int64_t k = 0; k < a.K; ++k) sum += int32_t{x[k]} * int32_t{w[k]};
            a.out[r * a.N + o] = static_cast<float>(sum - a.zero * a.w_sum[o]) * (a.x_factor[r] * a.w_scale[o]);
        }
}

#ifdef ATTNVIZ_SMALL_LINEAR_AVX2

bool cpu_has_avx2_fma() {
    static const bool has = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }();
    return has;
}

/// A few-row kernel: out [R, N] = x [R, K] times w's data, output features [o0, o1). The
/// kernels for a fixed R (a template argument) do not read R.
using KernelFn = void (*)(const float*, const float*, float*, int64_t R, int64_t K, int64_t N, int64_t o0, int64_t o1);

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

/// Output features [o0, o1) of out [R, N] = x [R, K] times w [N, K], R = ROWS, one weight row at
/// a time: each output feature's row is read once, front to back, against every row of x, one
/// accumulator per row of x over K in 8-float blocks, then finish_dot: the very sums dots (below)
/// computes, in the same order, so the two give the same values to the bit and either may serve
/// any product. Why both: memory serves one stream through the weight better than dots' 2-4
/// interleaved rows when the rows are short, and worse when they are long (dot_kernel).
template <int ROWS>
__attribute__((target("avx2,fma"))) void row_at_a_time(const float* x, const float* w, float* out, int64_t /*R*/,
                                                       int64_t K, int64_t N, int64_t o0, int64_t o1) {
    const int64_t K8 = K / 8 * 8;
    for (int64_t o = o0; o < o1; ++o) {
        const float* wr = w + o * K;
        __m256 acc[ROWS];
        for (int r = 0; r < ROWS; ++r) acc[r] = _mm256_setzero_ps();
        for (int64_t k = 0; k < K8; k += 8) {
            const __m256 wv = _mm256_loadu_ps(wr + k);
            for (int r = 0; r < ROWS; ++r) acc[r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * K + k), wv, acc[r]);
        }
        for (int r = 0; r < ROWS; ++r) finish_dot(acc[r], x, w, out, K, N, r, o);
    }
}

/// Output features [o0, o1) of out [R, N] = x [R, K] times w [N, K] (row-major: each output a
/// dot product of a contiguous weight row), R = ROWS, OUTS features at a time against all ROWS
/// rows: a register tile of ROWS x OUTS accumulators, each over K in 8-float blocks, then
/// finish_dot (row_at_a_time's sums, in its order, whatever ROWS and OUTS are); the features past
/// the last group of OUTS by row_at_a_time. Per block of K: OUTS weight loads and ROWS loads of x
/// for ROWS x OUTS FMAs, independent chains (a tile of 4 x 3 keeps AVX2's FMA units busier than
/// one weight row against 8 rows of x, which is bound by its loads).
template <int ROWS, int OUTS>
__attribute__((target("avx2,fma"))) void dots(const float* x, const float* w, float* out, int64_t R, int64_t K,
                                              int64_t N, int64_t o0, int64_t o1) {
    const int64_t K8 = K / 8 * 8;
    int64_t o = o0;
    for (; o + OUTS <= o1; o += OUTS) {
        __m256 acc[OUTS][ROWS];
        for (int j = 0; j < OUTS; ++j)
            for (int r = 0; r < ROWS; ++r) acc[j][r] = _mm256_setzero_ps();
        for (int64_t k = 0; k < K8; k += 8) {
            __m256 wv[OUTS];
            for (int j = 0; j < OUTS; ++j) wv[j] = _mm256_loadu_ps(w + (o + j) * K + k);
            for (int r = 0; r < ROWS; ++r) {
                const __m256 xv = _mm256_loadu_ps(x + r * K + k);
                for (int j = 0; j < OUTS; ++j) acc[j][r] = _mm256_fmadd_ps(xv, wv[j], acc[j][r]);
            }
        }
        for (int j = 0; j < OUTS; ++j)
            for (int r = 0; r < ROWS; ++r) finish_dot(acc[j][r], x, w, out, K, N, r, o + j);
    }
    row_at_a_time<ROWS>(x, w, out, R, K, N, o, o1);  // the features past the last group of OUTS
}

/// Output features [o0, o1) of out [R, N] = x [R, K] times w [N, K] for 9 to k_tiled_linear_rows
/// rows: blocks of 4 and 3 rows of x (4a + 3b = R, every block at least 3 rows, so that a tile has
/// 9-12 independent FMA chains) each in turn over the run, whose weights (a run is sized to stay
/// in L2, run_kernel) come from memory for the first block and from the cache for the others.
/// Every output is row_at_a_time's sum, so a row's values do not depend on the rows beside it.
__attribute__((target("avx2,fma"))) void tiled(const float* x, const float* w, float* out, int64_t R, int64_t K,
                                               int64_t N, int64_t o0, int64_t o1) {
    const int64_t threes = (4 - R % 4) % 4;  // R = 4a + 3b with b in 0..3 (R >= 9)
    int64_t r = 0;
    for (; r < R - 3 * threes; r += 4) dots<4, 3>(x + r * K, w, out + r * N, 4, K, N, o0, o1);
    for (; r < R; r += 3) dots<3, 3>(x + r * K, w, out + r * N, 3, K, N, o0, o1);
}

/// The kernel for R rows of x against a weight of K input features (the same values whichever):
/// one weight row at a time where the rows are short (K <= 512) or, up to 1,024, for 2-4 rows of
/// x; dots elsewhere (4 output features at a time for one row, 2 up to 4 rows: the accumulators
/// within AVX2's 16 registers; beyond 4 rows one feature at a time, which is row_at_a_time).
/// Measured on an AMD EPYC (Zen 3), two threads, cold weights, GB/s dots -> one row at a time:
/// opus-mt's 59,514 x 512 vocabulary at one row 8.6 -> 10.5-11.0, 2,048 x 512 at one row 13.5 ->
/// 14.2-14.8 and at four 9.6 -> 12.9-13.2, BART's 50,265 x 768 at four rows 8.1-9.0 -> 9.7-10.0;
/// but 50,265 x 768 at one row 12.0 -> 10.1-10.4 and 768 x 3,072 at one row 22.4-22.9 -> 15.3-15.8
/// (docs/benchmarks.md).
KernelFn dot_kernel(int64_t rows, int64_t K) {
    const bool one_at_a_time = K <= 512 || (K <= 1024 && rows >= 2);
    switch (rows) {
    case 1: return one_at_a_time ? row_at_a_time<1> : dots<1, 4>;
    case 2: return one_at_a_time ? row_at_a_time<2> : dots<2, 2>;
    case 3: return one_at_a_time ? row_at_a_time<3> : dots<3, 2>;
    case 4: return one_at_a_time ? row_at_a_time<4> : dots<4, 2>;
    case 5: return row_at_a_time<5>;
    case 6: return row_at_a_time<6>;
    case 7: return row_at_a_time<7>;
    case 8: return row_at_a_time<8>;
    default: return rows <= k_tiled_linear_rows ? tiled : nullptr;
    }
}

/// The int32 sum of an accumulator's 8 lanes.
__attribute__((target("avx2"))) inline int32_t lane_sum_i32(__m256i acc) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/// Output features [o0, o1) of int8_rows_linear for ROWS rows of x starting at row r0: each weight
/// row read once against the ROWS rows, 32 bytes at a time (vpmaddubsw: u8 x s8 pairs summed in 16
/// bits, which cannot saturate for x <= 127; vpmaddwd with ones: in 32 bits), the K % 32 bytes past
/// them one by one. The integer sums are exact, so the order does not matter.
template <int ROWS>
__attribute__((target("avx2"))) void int8_rows_avx2(const Int8RowsArgs& a, int64_t r0, int64_t o0, int64_t o1) {
    const int64_t K = a.K, K32 = K / 32 * 32;
    const __m256i ones = _mm256_set1_epi16(1);
    const uint8_t* x = a.x + r0 * K;
    for (int64_t o = o0; o < o1; ++o) {
        const int8_t* wr = a.w + o * K;
        __m256i acc[ROWS];
        for (int r = 0; r < ROWS; ++r) acc[r] = _mm256_setzero_si256();
        for (int64_t k = 0; k < K32; k += 32) {
            const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr + k));
            for (int r = 0; r < ROWS; ++r) {
                const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + r * K + k));
                acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(_mm256_maddubs_epi16(xv, wv), ones));
            }
        }
        const int32_t offset = a.zero * a.w_sum[o];
        for (int r = 0; r < ROWS; ++r) {
            int32_t sum = lane_sum_i32(acc[r]);
            for (int64_t k = K32; k < K; ++k) sum += int32_t{x[r * K + k]} * int32_t{wr[k]};
            a.out[(r0 + r) * a.N + o] = static_cast<float>(sum - offset) * (a.x_factor[r0 + r] * a.w_scale[o]);
        }
    }
}

/// int8_rows_avx2's loop with vpdpbusd on 256-bit registers (four u8 x s8 products into each 32-bit
/// lane, so any u8 activations), as NAME for the target TARGET with DPBUSD, one of the instruction's
/// two encodings: AVX-VNNI's (VEX: Intel's client CPUs from Alder Lake, which lack AVX-512) and
/// AVX-512 VL's (EVEX), which runs the same loop where AVX-512 VNNI is (so the tests run it there).
#define ATTNVIZ_INT8_ROWS_VNNI256(NAME, TARGET, DPBUSD)                                                          \
    template <int ROWS>                                                                                         \
    __attribute__((target(TARGET))) void NAME(const Int8RowsArgs& a, int64_t r0, int64_t o0, int64_t o1) {    \
        const int64_t K = a.K, K32 = K / 32 * 32;                                                               \
        const uint8_t* x = a.x + r0 * K;                                                                        \
        for (int64_t o = o0; o < o1; ++o) {                                                                     \
            const int8_t* wr = a.w + o * K;                                                                     \
            __m256i acc[ROWS];                                                                                  \
            for (int r = 0; r < ROWS; ++r) acc[r] = _mm256_setzero_si256();                                     \
            for (int64_t k = 0; k < K32; k += 32) {                                                             \
                const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr + k));               \
                for (int r = 0; r < ROWS; ++r)                                                                  \
                    acc[r] = DPBUSD(acc[r], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + r * K + k)), wv); \
            }                                                                                                   \
            const int32_t offset = a.zero * a.w_sum[o];                                                         \
            for (int r = 0; r < ROWS; ++r) {                                                                    \
                int32_t sum = lane_sum_i32(acc[r]);                                                             \
                for (int64_t k = K32; k < K; ++k) sum += int32_t{x[r * K + k]} * int32_t{wr[k]};                \
                a.out[(r0 + r) * a.N + o] = static_cast<float>(sum - offset) * (a.x_factor[r0 + r] * a.w_scale[o]); \
            }                                                                                                   \
        }                                                                                                       \
    }                                                                                                           \
    template <int ROWS>                                                                                         \
    struct NAME##_block {                                                                                       \
        static void run(const Int8RowsArgs& a, int64_t r0, int64_t o0, int64_t o1) { NAME<ROWS>(a, r0, o0, o1); } \
    };

ATTNVIZ_INT8_ROWS_VNNI256(int8_rows_avx_vnni, "avx2,avxvnni", _mm256_dpbusd_avx_epi32)
ATTNVIZ_INT8_ROWS_VNNI256(int8_rows_vnni256_evex, "avx512f,avx512vl,avx512vnni", _mm256_dpbusd_epi32)
#undef ATTNVIZ_INT8_ROWS_VNNI256

/// Whether the CPU runs AVX-VNNI's encoding (CPUID leaf 7, subleaf 1, EAX bit 4: clang 14, the fuzz
/// build's, does not know the name "avxvnni" in __builtin_cpu_supports; AVX2's check covers the OS's
/// saving of the registers).
bool cpu_has_avx_vnni() {
    static const bool has = [] {
        __builtin_cpu_init();
        unsigned a = 0, b = 0, c = 0, d = 0;
        return __builtin_cpu_supports("avx2") && __get_cpuid_count(7, 1, &a, &b, &c, &d) != 0 && (a & (1u << 4)) != 0;
    }();
    return has;
}

/// int8_rows_linear's run [o0, o1) for any rows: blocks of up to 4 rows in turn over the run (its
/// weight rows, sized to stay in L2, come from memory for the first block, from the cache after).
template <template <int> class Block>
void int8_rows_in_blocks(const Int8RowsArgs& a, int64_t o0, int64_t o1) {
    for (int64_t r = 0; r < a.R;) {
        switch (std::min<int64_t>(a.R - r, 4)) {
        case 1: Block<1>::run(a, r, o0, o1), r += 1; break;
        case 2: Block<2>::run(a, r, o0, o1), r += 2; break;
        case 3: Block<3>::run(a, r, o0, o1), r += 3; break;
        default: Block<4>::run(a, r, o0, o1), r += 4; break;
        }
    }
}

template <int ROWS>
struct Int8RowsAvx2 {
    static void run(const Int8RowsArgs& a, int64_t r0, int64_t o0, int64_t o1) { int8_rows_avx2<ROWS>(a, r0, o0, o1); }
};

bool cpu_has_avx512_vnni() {
    static const bool has = [] {
        __builtin_cpu_init();  // libgcc checks that the OS saves the AVX-512 registers
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
    }();
    return has;
}

/// The int32 sums of four accumulators' 16 lanes each, as [s0, s1, s2, s3]: halves added, then
/// pairwise sums (vphaddd) of the four together, instead of four separate reductions (for a 512-wide
/// layer a reduction would cost as much as the 8 products before it).
// GCC 12's AVX-512 intrinsics (casts and extracts) start from an "undefined" vector, which its
// -Wmaybe-uninitialized reports at every use (fixed in GCC 13): not a fault of the code below.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

/// An accumulator's two 256-bit halves added.
__attribute__((target("avx512f"))) inline __m256i halves_added(__m512i v) {
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) inline __m128i lane_sums_4(const __m512i* acc) {
    __m256i h[4];
    for (int i = 0; i < 4; ++i) h[i] = halves_added(acc[i]);
    const __m256i p = _mm256_hadd_epi32(_mm256_hadd_epi32(h[0], h[1]), _mm256_hadd_epi32(h[2], h[3]));
    return _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
}

/// Output features [o0, o1) of int8_rows_linear for ROWS rows of x from row r0 with AVX-512 VNNI:
/// vpdpbusd sums four u8 x s8 products into each int32 lane, 64 bytes of a row at a time (the last
/// K % 64 by masked loads that read zeros past the row, never the memory beyond it). Four weight rows
/// at a time against the ROWS rows (16 accumulators, 8 loads for 16 products), one at a time for
/// the run's last < 4. The same exact integer sums as int8_rows_avx2.
template <int ROWS>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void int8_rows_vnni(const Int8RowsArgs& a, int64_t r0,
                                                                          int64_t o0, int64_t o1) {
    const int64_t K = a.K, K64 = K / 64 * 64;
    const __mmask64 tail = K > K64 ? (~__mmask64{0} >> (64 - (K - K64))) : 0;
    const uint8_t* x = a.x + r0 * K;
    auto finish = [&](int r, int64_t o, int32_t sum) {
        a.out[(r0 + r) * a.N + o] =
            static_cast<float>(sum - a.zero * a.w_sum[o]) * (a.x_factor[r0 + r] * a.w_scale[o]);
    };
    int64_t o = o0;
    for (; o + 4 <= o1; o += 4) {
        const int8_t* wr = a.w + o * K;
        __m512i acc[ROWS][4];
        for (int r = 0; r < ROWS; ++r)
            for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_setzero_si512();
        for (int64_t k = 0; k < K; k += 64) {
            const __mmask64 m = k < K64 ? ~__mmask64{0} : tail;  // a masked load costs what a load does
            const __m512i w0 = _mm512_maskz_loadu_epi8(m, wr + k), w1 = _mm512_maskz_loadu_epi8(m, wr + K + k),
                          w2 = _mm512_maskz_loadu_epi8(m, wr + 2 * K + k),
                          w3 = _mm512_maskz_loadu_epi8(m, wr + 3 * K + k);
            for (int r = 0; r < ROWS; ++r) {
                const __m512i xv = _mm512_maskz_loadu_epi8(m, x + r * K + k);
                acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], xv, w0);
                acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], xv, w1);
                acc[r][2] = _mm512_dpbusd_epi32(acc[r][2], xv, w2);
                acc[r][3] = _mm512_dpbusd_epi32(acc[r][3], xv, w3);
            }
        }
        // finish() for the four outputs together: the same integer and float operations lane by lane.
        const __m128i offsets =
            _mm_mullo_epi32(_mm_set1_epi32(a.zero), _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.w_sum + o)));
        const __m128 scales = _mm_loadu_ps(a.w_scale + o);
        for (int r = 0; r < ROWS; ++r) {
            const __m128 sums = _mm_cvtepi32_ps(_mm_sub_epi32(lane_sums_4(acc[r]), offsets));
            _mm_storeu_ps(a.out + (r0 + r) * a.N + o,
                          _mm_mul_ps(sums, _mm_mul_ps(_mm_set1_ps(a.x_factor[r0 + r]), scales)));
        }
    }
    for (; o < o1; ++o) {
        const int8_t* wr = a.w + o * K;
        __m512i acc[ROWS];
        for (int r = 0; r < ROWS; ++r) acc[r] = _mm512_setzero_si512();
        for (int64_t k = 0; k < K; k += 64) {
            const __mmask64 m = k < K64 ? ~__mmask64{0} : tail;
            const __m512i wv = _mm512_maskz_loadu_epi8(m, wr + k);
            for (int r = 0; r < ROWS; ++r)
                acc[r] = _mm512_dpbusd_epi32(acc[r], _mm512_maskz_loadu_epi8(m, x + r * K + k), wv);
        }
        for (int r = 0; r < ROWS; ++r) finish(r, o, lane_sum_i32(halves_added(acc[r])));
    }
}

template <int ROWS>
struct Int8RowsVnni {
    static void run(const Int8RowsArgs& a, int64_t r0, int64_t o0, int64_t o1) { int8_rows_vnni<ROWS>(a, r0, o0, o1); }
};

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/// The most weights one job takes (few_rows_linears: a self-attention's q, k and v).
constexpr int k_job_parts = 4;

/// One few-row job: `kernel` over runs of `chunk` output features of each of its weights (parts,
/// all against the same x), `chunks` runs in all, a part's runs after the part before it.
struct KernelJob {
    struct Part {
        const float* w = nullptr;
        float* out = nullptr;
        int64_t N = 0;
        int64_t first = 0;  ///< the job's run this part's first run is
    };
    /// An int8 product (int8_rows_linear) runs instead of `kernel` when set: its weight's rows and
    /// sums, its activations.
    struct Int8 {
        Int8RowsKernel kernel = nullptr;
        Int8RowsArgs args;
    };
    KernelFn kernel = nullptr;
    Int8 int8;
    const float* x = nullptr;
    Part parts[k_job_parts];
    int count = 0;  ///< parts in use
    int64_t R = 0, K = 0, chunk = 0, chunks = 0;
    unsigned csr = 0;  ///< the asking thread's floating-point mode (MXCSR: denormals flushed or not)
    void run(int64_t c) const {
        int p = count - 1;
        while (p > 0 && c < parts[p].first) --p;
        const Part& part = parts[p];
        const int64_t local = c - part.first;
        const int64_t o0 = local * chunk, o1 = std::min(part.N, (local + 1) * chunk);
        if (int8.kernel) int8.kernel(int8.args, o0, o1);
        else kernel(x, part.w, part.out, R, K, part.N, o0, o1);
    }
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

/// Runs `job` on this thread and the step's helpers inside a few-row step (t_kernel_threads), on
/// LibTorch's threads outside one.
void run_job(KernelJob& job) {
    job.csr = _mm_getcsr();
    if (t_kernel_threads >= 2 && job.chunks >= 2 && KernelHelpers::instance().run(job, t_kernel_threads - 1)) return;
    at::parallel_for(0, job.chunks, 1, [&](int64_t begin, int64_t end) {
        for (int64_t c = begin; c < end; ++c) job.run(c);
    });
}

/// out_i [R, N_i] = x [R, K] against each weight's data (at most k_job_parts), R = x's rows, by
/// `kernel` over runs of `chunk` output features (weight rows) of all of them, shared among the
/// threads as one job: one hand-over and one last run to wait for, not one a weight.
std::vector<torch::Tensor> run_kernel(KernelFn kernel, const torch::Tensor& x, at::TensorList weights, int64_t chunk) {
    const int64_t R = x.size(0), K = x.size(1);
    const auto xc = x.contiguous();
    std::vector<torch::Tensor> outs;
    KernelJob job;
    job.kernel = kernel;
    job.x = xc.data_ptr<float>();
    job.R = R;
    job.K = K;
    job.chunk = chunk;
    for (const auto& weight : weights) {
        const int64_t N = weight.size(0);
        outs.push_back(torch::empty({R, N}, xc.options()));
        KernelJob::Part& part = job.parts[job.count++];
        part.w = weight.data_ptr<float>();
        part.out = outs.back().data_ptr<float>();
        part.N = N;
        part.first = job.chunks;
        job.chunks += (N + chunk - 1) / chunk;
    }
    run_job(job);
    return outs;
}

#endif

/// What the kernels need: AVX2 and FMA, x [R, in] with 1 <= R <= k_tiled_linear_rows against
/// weight [out, in], dense float CPU tensors, no gradient asked for.
bool plain_few_rows(const torch::Tensor& x, const torch::Tensor& weight) {
#ifdef ATTNVIZ_SMALL_LINEAR_AVX2
    if (!cpu_has_avx2_fma()) return false;
    if (x.dim() != 2 || weight.dim() != 2 || x.size(1) != weight.size(1)) return false;
    if (x.size(0) < 1 || x.size(0) > k_tiled_linear_rows) return false;
    if (!x.device().is_cpu() || !weight.device().is_cpu()) return false;
    if (x.scalar_type() != torch::kFloat || weight.scalar_type() != torch::kFloat) return false;
    if (x.is_sparse() || weight.is_sparse() || x.is_mkldnn() || weight.is_mkldnn()) return false;
    return !(torch::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad()));
#else
    (void)x, (void)weight;
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
    return plain_few_rows(x, weight) && weight.is_contiguous();  // row-major [out, in]
}

std::vector<torch::Tensor> few_rows_linears(const torch::Tensor& x, at::TensorList weights, at::TensorList biases) {
    if (!biases.empty() && biases.size() != weights.size())
        throw std::logic_error("few_rows_linears: " + std::to_string(biases.size()) + " biases for " +
                               std::to_string(weights.size()) + " weights");
    const torch::Tensor none;
    auto bias = [&](size_t i) -> const torch::Tensor& { return biases.empty() ? none : biases[i]; };
    const bool flat = x.dim() == 2;
    const auto x2 = flat ? x : x.reshape({-1, x.size(-1)});
    bool together = !weights.empty();
    for (const auto& w : weights) together = together && few_rows_linear_applies(x2, w);
    std::vector<torch::Tensor> outs;
    auto through_aten = [&] {
        for (size_t i = 0; i < weights.size(); ++i) outs.push_back(torch::nn::functional::linear(x, weights[i], bias(i)));
        return outs;
    };
    if (!together) return through_aten();
#ifdef ATTNVIZ_SMALL_LINEAR_AVX2
    // Up to 8 rows: runs of 128 output features (256 KB of a 512-wide weight): a 512 x 512
    // projection in 4 tasks, so that both threads read it (MKL's matrix-vector product used one).
    // More: runs of ~192 KB of weights (63 features of 768), read once from memory and then from
    // L2 by each block of rows (tiled), at least 12 runs of a 768-wide layer for the threads.
    const int64_t rows = x2.size(0), K = x2.size(1);
    const int64_t chunk = rows <= k_small_linear_rows ? 128 : std::max<int64_t>(12, 49152 / std::max<int64_t>(K, 1) / 3 * 3);
    for (size_t first = 0; first < weights.size(); first += k_job_parts) {
        const auto part = weights.slice(first, std::min<size_t>(k_job_parts, weights.size() - first));
        for (auto& out : run_kernel(dot_kernel(rows, K), x2, part, chunk)) outs.push_back(std::move(out));
    }
    for (size_t i = 0; i < outs.size(); ++i) {
        if (bias(i).defined()) outs[i].add_(bias(i));
        if (flat) continue;
        auto shape = x.sizes().vec();
        shape.back() = weights[i].size(0);
        outs[i] = outs[i].view(shape);
    }
    return outs;
#else
    return through_aten();
#endif
}

bool int8_rows_isa_available(Int8RowsIsa isa) {
    switch (isa) {
    case Int8RowsIsa::automatic:
    case Int8RowsIsa::scalar: return true;
#ifdef ATTNVIZ_SMALL_LINEAR_AVX2
    case Int8RowsIsa::avx2: return cpu_has_avx2_fma();
    case Int8RowsIsa::avx_vnni: return cpu_has_avx2_fma() && (cpu_has_avx_vnni() || cpu_has_avx512_vnni());
    case Int8RowsIsa::avx512_vnni: return cpu_has_avx512_vnni();
#else
    case Int8RowsIsa::avx2:
    case Int8RowsIsa::avx_vnni:
    case Int8RowsIsa::avx512_vnni: return false;
#endif
    }
    return false;
}

Int8RowsIsa int8_rows_isa_named(const std::string& name) {
    std::string lower;
    for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == "generic") return Int8RowsIsa::scalar;
    if (lower == "avx2") return Int8RowsIsa::avx2;
    if (lower == "avxvnni") return Int8RowsIsa::avx_vnni;
    if (lower == "avx512") return Int8RowsIsa::avx512_vnni;
    throw std::invalid_argument("ATTNVIZ_FORCE_CPU_ISA is '" + name +
                                "'; expected generic, avx2, avxvnni or avx512 (or unset)");
}

const char* int8_rows_isa_name(Int8RowsIsa isa) {
    switch (isa) {
    case Int8RowsIsa::automatic: return int8_rows_isa_name(int8_rows_best_isa());
    case Int8RowsIsa::scalar: return "generic";
    case Int8RowsIsa::avx2: return "avx2";
    case Int8RowsIsa::avx_vnni: return "avxvnni";
    case Int8RowsIsa::avx512_vnni: return "avx512";
    }
    return "generic";
}

Int8RowsIsa int8_rows_best_isa() {
    static const Int8RowsIsa best = [] {
        // The most the environment allows (as CTranslate2's CT2_FORCE_CPU_ISA: to compare the kernels
        // on one machine), then the best the CPU has within it.
        // Another value counts as unset here (the CLI refuses it with int8_rows_isa_named's message).
        const char* forced = std::getenv("ATTNVIZ_FORCE_CPU_ISA");
        Int8RowsIsa most = Int8RowsIsa::avx512_vnni;
        try {
            if (forced && *forced) most = int8_rows_isa_named(forced);
        } catch (const std::invalid_argument&) {
        }
        for (auto isa : {Int8RowsIsa::avx512_vnni, Int8RowsIsa::avx_vnni, Int8RowsIsa::avx2})
            if (static_cast<int>(isa) <= static_cast<int>(most) && int8_rows_isa_available(isa)) return isa;
        return Int8RowsIsa::scalar;
    }();
    return best;
}

int int8_rows_activation_steps(Int8RowsIsa isa) {
    if (isa == Int8RowsIsa::automatic) isa = int8_rows_best_isa();
    return isa == Int8RowsIsa::avx512_vnni || isa == Int8RowsIsa::avx_vnni ? 127 : 63;
}

bool int8_rows_linear_vectorized() { return int8_rows_best_isa() != Int8RowsIsa::scalar; }

torch::Tensor int8_rows_linear(const torch::Tensor& xq, const torch::Tensor& x_factor, int zero, const torch::Tensor& w,
                               const torch::Tensor& w_scale, const torch::Tensor& w_sum, Int8RowsIsa isa) {
    auto fail = [](const std::string& what) { throw std::logic_error("int8_rows_linear: " + what); };
    if (!int8_rows_isa_available(isa)) fail("this CPU lacks the instructions asked for");
    if (isa == Int8RowsIsa::automatic) isa = int8_rows_best_isa();
    if (xq.dim() != 2 || xq.scalar_type() != torch::kByte || !xq.is_contiguous() || !xq.device().is_cpu())
        fail("x must be a contiguous u8 CPU matrix [rows, in]");
    if (w.dim() != 2 || w.scalar_type() != torch::kChar || !w.is_contiguous() || !w.device().is_cpu() ||
        w.size(1) != xq.size(1))
        fail("the weight must be a contiguous int8 CPU matrix [out, in] as wide as x");
    const int64_t R = xq.size(0), K = xq.size(1), N = w.size(0);
    auto vector_of = [&](const torch::Tensor& t, torch::ScalarType type, int64_t n, const char* what) {
        if (t.dim() != 1 || t.scalar_type() != type || t.size(0) != n || !t.is_contiguous() || !t.device().is_cpu())
            fail(std::string(what) + " must be a contiguous CPU vector of " + std::to_string(n));
    };
    vector_of(x_factor, torch::kFloat, R, "the rows' factors");
    vector_of(w_scale, torch::kFloat, N, "the weight's scales");
    vector_of(w_sum, torch::kInt, N, "the weight's row sums");
    // AVX2's 16-bit pair sums need activations of at most 127: at zero points above 64 some would not be.
    const int most_zero = isa == Int8RowsIsa::avx2 ? 64 : 128;
    if (zero < 0 || zero > most_zero) fail("the zero point must be within 0.." + std::to_string(most_zero));
    auto out = torch::empty({R, N}, torch::kFloat);
    if (R == 0 || N == 0) return out;
    Int8RowsArgs a;
    a.x = xq.data_ptr<uint8_t>();
    a.x_factor = x_factor.data_ptr<float>();
    a.zero = zero;
    a.w = w.data_ptr<int8_t>();
    a.w_scale = w_scale.data_ptr<float>();
    a.w_sum = w_sum.data_ptr<int32_t>();
    a.out = out.data_ptr<float>();
    a.R = R;
    a.K = K;
    a.N = N;
    // Runs of 128 output features for a few rows (a 512 x 512 projection in 4), of ~192 KB of weights
    // for more (each block of 4 rows reads the run from L2 after the first).
    const int64_t chunk = R <= k_small_linear_rows ? 128 : std::max<int64_t>(12, 196608 / std::max<int64_t>(K, 1));
#ifdef ATTNVIZ_SMALL_LINEAR_AVX2
    if (isa != Int8RowsIsa::scalar) {
        KernelJob job;
        switch (isa) {
        case Int8RowsIsa::avx512_vnni: job.int8.kernel = int8_rows_in_blocks<Int8RowsVnni>; break;
        case Int8RowsIsa::avx_vnni:  // AVX-VNNI's encoding where the CPU has it, AVX-512 VL's otherwise
            job.int8.kernel = cpu_has_avx_vnni() ? int8_rows_in_blocks<int8_rows_avx_vnni_block>
                                                 : int8_rows_in_blocks<int8_rows_vnni256_evex_block>;
            break;
        default: job.int8.kernel = int8_rows_in_blocks<Int8RowsAvx2>; break;
        }
        job.int8.args = a;
        job.count = 1;
        job.parts[0].N = N;
        job.chunk = chunk;
        job.chunks = (N + chunk - 1) / chunk;
        run_job(job);
        return out;
    }
#endif
    at::parallel_for(0, (N + chunk - 1) / chunk, 1, [&](int64_t begin, int64_t end) {
        for (int64_t c = begin; c < end; ++c) int8_rows_run_scalar(a, c * chunk, std::min(N, (c + 1) * chunk));
    });
    return out;
}

torch::Tensor few_rows_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
    return few_rows_linears(x, at::TensorList(weight), at::TensorList(bias)).front();  // no copies of either
}

}  // namespace attnviz
