#pragma once
// x W^T for a few rows (a decoder step at batch 1: one row a beam) against a row-major weight,
// reading the weight once, on this thread and helpers of our own.
//
// Why: at batch 1 a decoder step's products are matrix-vector products (greedy) or products of
// 2-8 rows (a beam) against 1-150 MB weights: the layers' projections and the output projection
// over the vocabulary (an opus-mt-sized model's 59,514 x 512 matrix, 122 MB). MKL ran one row's
// on one thread (10 GB/s), and for 2 to 8 rows ran a GEMM that first copies ("packs") the whole
// weight into its own layout on every call (a beam of 4 spent two thirds of its time in those
// copies). Here each output feature is a dot product of its contiguous weight row with every
// row of x, runs of 128 features shared among the threads: the weight is read once, front to
// back, whatever the number of rows. The vocabulary matrices were column-major for a kernel of
// their own until 2026-11-30; this one reads the row-major matrix 1.3-1.6x faster (BART-base-sized's
// 50,265 x 768 on an AMD EPYC: 12.6-14.1 ms a call in the decoder against 9.9-10.9;
// docs/benchmarks.md).
//
// Each output is summed over the input features in 8-float lanes, in the same order whatever the
// rows beside it or the threads, so a row's values do not depend on them; they differ from MKL's
// in float rounding only (the tests compare the two).
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace attnviz {

/// The most rows of a few-row step (FewRowsStepThreads, StepThreads); few_rows_linear's kernels
/// for one weight row against them.
constexpr int64_t k_small_linear_rows = 8;

/// The most rows few_rows_linear computes itself (more go to ATen's linear): beyond
/// k_small_linear_rows by register tiles of 4 or 3 rows x 3 output features over runs of the
/// weight kept in L2. Why: a typed sentence's encoder (10-30 tokens) and its cross-attention keys
/// and values ran on MKL's packing GEMM, which copies the weight before it multiplies: a
/// BART-base-sized encoder of 10-12 tokens took ~50 ms, more than the step after it.
constexpr int64_t k_tiled_linear_rows = 32;

/// x [..., in] times a row-major weight [out, in] transposed, plus bias (optional): [..., out], as
/// torch::nn::functional::linear(x, weight, bias) gives it up to float rounding. Computed here,
/// both threads reading the weight, when x has 1 to k_tiled_linear_rows rows, both are float
/// CPU tensors, the weight is contiguous, no gradient is asked for and the CPU has AVX2 and
/// FMA; otherwise by ATen's linear. Why: at batch 1 a decoder step's projections are
/// matrix-vector products of 1-4 MB weights, which MKL ran on one thread at 10 GB/s (an
/// opus-mt-sized decoder's 88 MB of them: 8.7 ms a token whatever the threads). Every output
/// is one dot product summed in the same order whatever the rows beside it.
torch::Tensor few_rows_linear(const torch::Tensor& x, const torch::Tensor& weight,
                              const torch::Tensor& bias = {});

/// few_rows_linear(x, weights[i], biases[i]) for every i (biases: empty, or one per weight, each
/// optional), the same values bit for bit. Where few_rows_linear computes them all itself, they run
/// as one job (up to 4 weights a job): a self-attention's q, k and v, or a gated feed-forward's two
/// input projections, share one hand-over to the helpers and one wait for the last run, instead
/// of one each. std::logic_error when biases has another count.
std::vector<torch::Tensor> few_rows_linears(const torch::Tensor& x, at::TensorList weights, at::TensorList biases = {});

/// The instructions int8_rows_linear can run on.
enum class Int8RowsIsa {
    automatic,    ///< the best this CPU has (int8_rows_best_isa)
    scalar,       ///< a plain loop, on any CPU
    avx2,         ///< vpmaddubsw / vpmaddwd, 32 bytes a step (x86-64 with AVX2 and FMA)
    avx_vnni,     ///< vpdpbusd on 256-bit registers, 32 bytes a step (AVX-VNNI: Intel's client CPUs from
                  ///< Alder Lake; or AVX-512 VL's encoding of it where AVX-512 VNNI is)
    avx512_vnni,  ///< vpdpbusd, 64 bytes a step (AVX-512 F, BW, VL and VNNI)
};

/// An int8 product as Int8Kernels::rowwise (inference_precision.hpp) stores its weights, rows as
/// quantized, no packing: out [R, N] float with out[r, o] = (sum_k xq[r, k] w[o, k] - zero w_sum[o])
/// x_factor[r] w_scale[o], where xq [R, K] is u8 (each row's activations around `zero`), w [N, K] int8
/// row-major, w_sum [N] int32 each row's sum of values. On AVX2 the activations must be at most 127
/// (its vpmaddubsw sums pairs of u8 x s8 products in 16 bits, which 127 x 127 x 2 does not overflow;
/// zero points above 64 are refused); with VNNI (vpdpbusd sums in 32 bits) and in the plain loop,
/// any u8 (zero points up to 128). The integer sums are exact whatever the order; each output is one
/// float product of them. Run like few_rows_linear (a few-row step's helpers, LibTorch's threads
/// otherwise), every weight row read once from memory whatever the rows (blocks of 4 rows over runs
/// kept in L2). std::logic_error for other shapes or types.
/// `isa`: the instructions to run on (automatic: int8_rows_best_isa(); another the CPU lacks:
/// std::logic_error). Every choice gives the same values to the bit.
torch::Tensor int8_rows_linear(const torch::Tensor& xq, const torch::Tensor& x_factor, int zero, const torch::Tensor& w,
                               const torch::Tensor& w_scale, const torch::Tensor& w_sum,
                               Int8RowsIsa isa = Int8RowsIsa::automatic);

/// Whether this CPU runs int8_rows_linear with `isa` (automatic and scalar: always).
bool int8_rows_isa_available(Int8RowsIsa isa);

/// What int8_rows_linear runs on by default: AVX-512 VNNI where the CPU has it (vpdpbusd, 64 bytes
/// a step: Ice Lake, Sapphire Rapids, Zen 4), AVX-VNNI where it has that (Alder Lake and later
/// client CPUs), AVX2 where it has that, a plain loop otherwise; at most what the environment
/// variable ATTNVIZ_FORCE_CPU_ISA names when set (generic, avx2, avxvnni or avx512, as CTranslate2's
/// CT2_FORCE_CPU_ISA; another value counts as unset).
Int8RowsIsa int8_rows_best_isa();

/// `isa`'s name as ATTNVIZ_FORCE_CPU_ISA spells it (automatic: the best's).
const char* int8_rows_isa_name(Int8RowsIsa isa);

/// The instruction set ATTNVIZ_FORCE_CPU_ISA's value names (generic, avx2, avxvnni, avx512, any
/// case); std::invalid_argument naming the four for another.
Int8RowsIsa int8_rows_isa_named(const std::string& name);

/// The steps each side of the zero point (steps + 1) that rowwise products quantize activations to
/// on `isa` (automatic: int8_rows_best_isa()): 127 with VNNI (8 bits, as fbgemm's and oneDNN's on
/// such CPUs), 63 otherwise (7 bits: AVX2's pair sums; the plain loop gives AVX2's results).
int int8_rows_activation_steps(Int8RowsIsa isa = Int8RowsIsa::automatic);

/// Whether int8_rows_linear runs vector instructions on this CPU (AVX2 or better; a plain loop otherwise).
bool int8_rows_linear_vectorized();

/// Whether few_rows_linear computes (x as [rows, in], weight) itself (for the tests).
bool few_rows_linear_applies(const torch::Tensor& x, const torch::Tensor& weight);

/// For a decoder step or search of `rows` <= k_small_linear_rows rows, while it lives on this
/// thread: everything, the few-row kernels included, runs on this thread alone (OpenMP's and
/// MKL's per-thread counts set to 1; restored after). Why: at batch 1 a step is ~110 products
/// of 0.5-6 MB and many small operations, each an OpenMP region of a few to 100 us whose workers
/// spin between regions and whose barrier waits for every thread: on the shared 2-core machines
/// (load 2-4) a descheduled worker stalled region after region (Flan-T5-base-sized greedy
/// decoding: 6.5 s a sentence at 2 threads, 1.6 s at 1; 45% of the time in libgomp), and a pool
/// of our own that shared the products without OpenMP was still slower than one thread (1.7-2.1
/// s against 1.0 s) whenever another process held a core. transformers' own decoder steps run
/// as one thread too (MKL's matrix-vector product takes one below its size threshold). Nothing
/// changes for more rows, inside a parallel region, or at one thread; the encoder keeps every
/// thread. The large products alone (few_rows_linear) may still share their
/// output features with helper threads of our own (up to 4 threads in all) when a search's steps
/// ran faster so (StepThreads; one thread until one did): the helpers spin between products and
/// the step waits only for the features a helper took, never for a helper to arrive; every output
/// is computed by one thread in the same order, so the values do not change.
class FewRowsStepThreads {
public:
    explicit FewRowsStepThreads(int64_t rows);
    ~FewRowsStepThreads();
    FewRowsStepThreads(const FewRowsStepThreads&) = delete;
    FewRowsStepThreads& operator=(const FewRowsStepThreads&) = delete;

private:
    friend class StepThreads;
    int m_threads = 0;  ///< OpenMP's threads before, 0 when nothing was changed
    int m_mkl = 0;      ///< MKL's per-thread count before
    int m_kernels = 0;  ///< the few-row kernels' threads before
};

/// The threads of a search's steps (or an encoder's layers) over `rows` rows, chosen step by step
/// while it runs. A few rows (<= k_small_linear_rows): the step on one thread, as
/// FewRowsStepThreads, its large products on one thread or on all (FewRowsStepThreads' helpers),
/// chosen as below from a few rows' steps of their own. More rows (batch 32 at beam 4: 128; an encoder's tokens): all the threads
/// or one, whichever ran its steps faster. Why: on a quiet machine such a step runs faster on 2
/// threads, but while another process holds a core every OpenMP region of it waits on the
/// descheduled thread (libgomp spins, then sleeps): the same steps ran 3-8x slower than on one
/// thread (opus-mt-sized int8, batch 32, load 3: 300-500 ms a step against 55-100 ms; a
/// BART-base-sized encoder of 1,024 tokens 2.2 s against 1.3 s). The load comes and goes, so it
/// is measured, not guessed: a search starts with what the process last found faster, and now
/// and then (from its step 2) runs one step on the other, compared with its own steps of the
/// same shape; a try that loses makes the next wait twice as long (up to 32 steps, counted over
/// every search and encoder), a change of mind brings it back to 4. The outputs were the same at
/// 1 and 2 threads (64 sentences, batch 32, greedy and beam 4, fp32 and int8): the products split
/// their output rows, not their sums, among threads.
class StepThreads {
public:
    explicit StepThreads(int64_t rows);
    ~StepThreads();
    StepThreads(const StepThreads&) = delete;
    StepThreads& operator=(const StepThreads&) = delete;

    /// At the start of each step: times the step before (from the last call) and sets this one's threads.
    void next_step();
    /// The threads the current step runs on (0 before the first next_step of an adapting search).
    int threads() const { return m_current; }
    /// Whether the threads are chosen step by step (2+ threads; a few rows: their products' threads).
    bool adapts() const { return m_full > 1; }

private:
    void use(int threads);

    FewRowsStepThreads m_few;  ///< a few rows: one thread throughout
    int m_full = 0;            ///< the threads before (2+ when adapting), restored at the end
    bool m_few_rows = false;   ///< adapting a few rows' kernels' threads (the rest on one, m_few)
    int m_mkl = 0;             ///< MKL's per-thread count before
    int m_current = 0;         ///< this step's threads
    int m_best = 0;            ///< the faster so far (m_full or 1)
    int64_t m_step = -1;       ///< the current step, from 0
    double m_time[2] = {0.0, 0.0};  ///< recent seconds a step on all threads [0] and on one [1]
    bool m_timed[2] = {false, false};
    int64_t m_started_ns = 0;  ///< when the current step started (steady clock)
};

/// The threads a few-row product (few_rows_linear) runs on from this thread now:
/// 0 outside a few-row step (OpenMP's), 1 this thread alone, 2+ this thread and helpers (for the tests).
int few_rows_kernel_threads();

/// Forgets what StepThreads learned (all threads faster; the next search tries one at once): for tests.
void forget_step_threads();

/// For a pass over `rows` rows outside a search's steps (its encoder): one thread when the last
/// search over many rows (StepThreads) found one faster, all otherwise; restored after.
class PreferredThreads {
public:
    explicit PreferredThreads(int64_t rows);

private:
    std::optional<FewRowsStepThreads> m_one;  ///< set: one thread until the end of the scope
};

}  // namespace attnviz
