// int8 and bf16 inference weights (core/model/inference_precision.hpp).
#include "core/model/inference_precision.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/io/error.hpp"
#include "core/model/encoder_decoder.hpp"
#include "core/model/small_linear.hpp"
#include "core/model/target_clones.hpp"

namespace attnviz {

namespace {

/// What stands for an int8 weight: fbgemm's or oneDNN's packed matrix, and for a vocabulary matrix
/// read as an embedding its int8 rows and their scales.
struct Int8Weight {
    explicit Int8Weight(c10::weak_intrusive_ptr<c10::StorageImpl> p) : placeholder(std::move(p)) {}
    c10::weak_intrusive_ptr<c10::StorageImpl> placeholder;  ///< the parameter's one-byte storage
    Int8Kernels kernels = Int8Kernels::fbgemm;              ///< which of the three below stands for it
    /// fbgemm: quantized::linear_prepack's results, one per k_int8_pack_rows output rows (a vocabulary
    /// matrix in parts, each packed on its own: below), one for every other weight.
    std::vector<c10::IValue> packed;
    torch::Tensor onednn;      ///< oneDNN: onednn::qlinear_prepack's matrix (opaque, [in, out])
    torch::Tensor w_scale;     ///< oneDNN, rowwise: [out] float, the per-channel scales
    torch::Tensor values;      ///< rowwise: [out, in] int8, the rows as quantized (no packed copy)
    torch::Tensor sums;        ///< rowwise: [out] int32, each row's sum of values (the activations' zero point)
    torch::Tensor w_zero;      ///< oneDNN: [out] int64 zeros (symmetric weights)
    torch::Tensor rows;                                     ///< [V, d] int8 (lookups only, when no `lookup`)
    torch::Tensor row_scale;                                ///< [V] float (lookups only, when no `lookup`)
    RowLookup lookup;  ///< the float rows again, quantized at each lookup (load_converted's; no table then)
    int64_t out = 0, in = 0;
};

/// Int8 weights by their placeholder's storage: a network that shares the weights
/// (share_network: set_data of the same storage) finds them too. Entries whose placeholder died
/// are dropped at the next conversion.
struct Registry {
    std::shared_mutex mutex;
    std::unordered_map<const c10::StorageImpl*, std::shared_ptr<const Int8Weight>> weights;
};

Registry& registry() {
    static Registry* r = new Registry();  // never destroyed: weights may outlive static destruction
    return *r;
}

std::shared_ptr<const Int8Weight> find_int8(const torch::Tensor& weight) {
    if (!weight.defined() || weight.scalar_type() != torch::kChar || !weight.has_storage()) return nullptr;
    const auto* key = weight.storage().unsafeGetStorageImpl();
    auto& r = registry();
    std::shared_lock<std::shared_mutex> lock(r.mutex);
    const auto it = r.weights.find(key);
    if (it == r.weights.end() || it->second->placeholder.expired()) return nullptr;
    return it->second;
}

c10::OperatorHandle op(const char* name) { return c10::Dispatcher::singleton().findSchemaOrThrow(name, ""); }

/// quantized::linear_dynamic, looked up once.
const c10::OperatorHandle& linear_dynamic() {
    static const c10::OperatorHandle handle = op("quantized::linear_dynamic");
    return handle;
}

/// quantized::linear_prepack, looked up once.
const c10::OperatorHandle& linear_prepack() {
    static const c10::OperatorHandle handle = op("quantized::linear_prepack");
    return handle;
}

/// onednn::qlinear_prepack and onednn::qlinear_pointwise (oneDNN's int8 matmul, AMX where the CPU
/// has it), looked up once.
const c10::OperatorHandle& onednn_prepack() {
    static const c10::OperatorHandle handle = op("onednn::qlinear_prepack");
    return handle;
}
const c10::OperatorHandle& onednn_linear() {
    static const c10::OperatorHandle handle = op("onednn::qlinear_pointwise");
    return handle;
}

/// The kernels weights converted from now on are packed for (set_int8_kernels).
std::atomic<Int8Kernels>& conversion_kernels() {
    static std::atomic<Int8Kernels> k{preferred_int8_kernels(1)};  // a typed sentence's
    return k;
}

/// x [rows, in] (u8 at `zero_point`, scale x_scale) times an oneDNN-packed weight: float [rows, out].
torch::Tensor onednn_product(const torch::Tensor& qx, const Int8Weight& e, double x_scale, int64_t zero_point) {
    torch::jit::Stack stack{qx,
                            x_scale,
                            zero_point,
                            e.onednn,
                            e.w_scale,
                            e.w_zero,
                            c10::IValue(),
                            1.0,
                            int64_t{0},
                            c10::IValue(torch::kFloat),
                            std::string("none"),
                            c10::List<std::optional<c10::Scalar>>(),
                            std::string()};
    onednn_linear().callBoxed(&stack);
    return stack.at(0).toTensor();
}

/// Output rows fbgemm packs at a time: a weight with more is packed in parts of this many rows and
/// multiplied part by part. Why: fbgemm's packing slows with the matrix's width far beyond its size
/// (one thread: NLLB-600M-sized 256,206 x 1,024 vocabulary 7.6 s as one matrix, 2.4 s in parts of
/// 16,384 rows, 4,096 x 1,024 layers 7.9 ms a MB): opening the model went from ~17 s to 9-11 s, the
/// parts packed one after another (this file was not compiled with OpenMP then: at::parallel_for ran
/// serially); since it is, they pack on LibTorch's threads, and the layers' weights convert several at
/// once (load_converted_all): 6.7-7.5 s (docs/benchmarks.md). A typed sentence's vocabulary product in
/// parts took 17.9 ms against 16.9 (one more write of the output and a call per part).
constexpr int64_t k_int8_pack_rows = 16384;

/// x [R, in] (each row within [-1, 1]) times fbgemm's packed parts: float [R, out].
torch::Tensor fbgemm_product(const torch::Tensor& x, const Int8Weight& e) {
    const bool reduce_range = int8_activation_steps() != 127;
    const auto part = [&](const c10::IValue& packed) {
        torch::jit::Stack stack{x, packed, reduce_range};
        linear_dynamic().callBoxed(&stack);
        return stack.at(0).toTensor();
    };
    if (e.packed.size() == 1) return part(e.packed.front());
    auto y = torch::empty({x.size(0), e.out}, x.options());
    int64_t first = 0;
    for (const auto& packed : e.packed) {
        auto p = part(packed);
        y.narrow(1, first, p.size(1)).copy_(p);
        first += p.size(1);
    }
    return y;
}

/// The int8 weight's float values (for products that need a gradient, e.g. attribution).
torch::Tensor dequantized(const Int8Weight& e) {
    if (e.kernels == Int8Kernels::rowwise) return e.values.to(torch::kFloat).mul_(e.w_scale.unsqueeze(1));
    if (e.kernels == Int8Kernels::onednn) {
        // oneDNN's packed matrix has no unpacking: the identity's product gives each value times its
        // scale exactly (an input of 1 is one step above the zero point at scale 1: sums of one term).
        const int64_t zero = int8_activation_steps() + 1;
        auto eye = torch::full({e.in, e.in}, zero, torch::kByte);
        eye.diagonal().fill_(zero + 1);
        return onednn_product(eye, e, 1.0, zero).t();  // [out, in], a view of [in, out]
    }
    std::vector<torch::Tensor> parts;
    for (const auto& packed : e.packed) {
        torch::jit::Stack stack{packed};
        op("quantized::linear_unpack").callBoxed(&stack);
        // linear_unpack returns (weight, bias): a boxed call leaves them on the stack one by one.
        parts.push_back(stack.at(0).toTensor().dequantize());
    }
    return parts.size() == 1 ? parts.front() : torch::cat(parts);
}

/// Names of 2-D weights that stay float: position tables, T5's relative position bias, d2l's embeddings.
bool stays_float(const std::string& name) {
    return name.find("embed_positions") != std::string::npos || name.find("relative_attention_bias") != std::string::npos ||
           name.find("embedding.") != std::string::npos;
}

/// Vocabulary matrices also read as embeddings (they keep an int8 row table).
bool read_as_rows(const std::string& name) {
    return name.find("shared") != std::string::npos || name.find("embed_tokens") != std::string::npos;
}

/// Rows a block of a weight reads at a time: about 1 MB of float32, whatever its width (quantizing a
/// block makes ~5 temporaries of its size: 4 MB blocks added ~20 MB to the peak of opening a model).
int64_t block_rows(int64_t in) { return std::max<int64_t>(1, (int64_t{1} << 18) / std::max<int64_t>(1, in)); }

/// The block rows(first, count) gave, as float32 [count, in] (ConfigError naming the weight otherwise).
torch::Tensor float_block(const WeightRows& rows, int64_t first, int64_t count, int64_t in, const std::string& name) {
    auto w = rows(first, count);
    if (!w.defined() || w.dim() != 2 || w.size(0) != count || w.size(1) != in)
        throw ConfigError("converting " + name + ": rows " + std::to_string(first) + ".." + std::to_string(first + count) +
                          " did not come as a [" + std::to_string(count) + ", " + std::to_string(in) + "] matrix");
    return w.to(torch::kFloat).contiguous();
}

/// Each row's sum of an int8 matrix [out, in]: [out] int32 (q.sum(1, kInt) made an int32 copy of the
/// whole matrix first: 1 GB for NLLB-600M's vocabulary).
torch::Tensor row_sums(const torch::Tensor& q) {
    const int64_t out = q.size(0), in = q.size(1);
    auto sums = torch::empty({out}, torch::kInt);
    const int8_t* v = q.data_ptr<int8_t>();
    int32_t* s = sums.data_ptr<int32_t>();
    at::parallel_for(0, out, 1024, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
            int32_t sum = 0;
            for (int64_t k = 0; k < in; ++k) sum += v[r * in + k];
            s[r] = sum;
        }
    });
    return sums;
}

/// param [out, in] becomes int8 from `rows`, block by block: the int8 values and their per-row scales
/// are the whole matrix's quantize_rows_int8 (a row's scale is its own maximum: blocks of rows change
/// nothing), with no float32 copy of the matrix. `keep_rows`: a vocabulary matrix also read as an
/// embedding (its int8 table kept for lookups, or `lookup` kept instead when given).
void store_int8(torch::Tensor& param, const std::string& name, bool keep_rows, const WeightRows& rows,
                const RowLookup& lookup = {}) {
    const int64_t out = param.size(0), in = param.size(1);
    auto q = torch::empty({out, in}, torch::kChar);
    auto scale = torch::empty({out}, torch::kFloat);
    const int64_t step = block_rows(in);
    for (int64_t r = 0; r < out; r += step) {
        const int64_t k = std::min(step, out - r);
        auto [qb, sb] = quantize_rows_int8(float_block(rows, r, k, in, name));
        q.narrow(0, r, k).copy_(qb);
        scale.narrow(0, r, k).copy_(sb);
    }
    // The float data goes: a one-byte placeholder of the same shape stands for it.
    auto placeholder = torch::zeros({1}, torch::kChar).expand({out, in});
    auto e = std::make_shared<Int8Weight>(placeholder.storage().getWeakStorageImpl());
    e->out = out;
    e->in = in;
    e->kernels = int8_kernels();
    const bool table_needed = keep_rows && !lookup;
    torch::Tensor table;  // the int8 rows the lookups read (table_needed)
    if (e->kernels == Int8Kernels::rowwise) {
        // The int8 rows are the weight: nothing to pack (fbgemm's packing was most of opening an
        // int8 model); the lookups' table, where kept, is the same rows.
        e->sums = row_sums(q);
        e->values = q;
        e->w_scale = scale;
        table = q;
    } else if (e->kernels == Int8Kernels::onednn) {
        // oneDNN's matrix is a packed copy of q: no unpacking kept, so the lookups' table is q itself.
        torch::jit::Stack stack{q, c10::IValue()};
        onednn_prepack().callBoxed(&stack);
        e->onednn = stack.at(0).toTensor();
        e->w_scale = scale;
        e->w_zero = torch::zeros({out}, torch::kLong);
        table = q;
    } else {
        auto qw = at::_make_per_channel_quantized_tensor(q, scale.to(torch::kDouble), torch::zeros({out}, torch::kLong), 0);
        q = torch::Tensor();  // qw holds a copy: one int8 matrix at a time beside the packed one
        // In parts of k_int8_pack_rows rows, on LibTorch's threads (each part's packing is serial).
        const int64_t parts = (out + k_int8_pack_rows - 1) / k_int8_pack_rows;
        e->packed.resize(static_cast<size_t>(parts));
        const c10::OperatorHandle& prepack = linear_prepack();
        at::parallel_for(0, parts, 1, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) {
                const int64_t first = i * k_int8_pack_rows;
                torch::jit::Stack stack{parts == 1 ? qw : qw.narrow(0, first, std::min(k_int8_pack_rows, out - first)),
                                        c10::IValue()};
                prepack.callBoxed(&stack);
                e->packed[static_cast<size_t>(i)] = stack.at(0);
            }
        });
        // The lookups' table is qw's own bytes (fbgemm's packed matrix is a copy of its own); without
        // one qw goes with this scope.
        if (table_needed)
            table = torch::from_blob(qw.data_ptr(), {out, in}, [qw](void*) mutable { qw.reset(); }, torch::kChar);
    }
    if (keep_rows && lookup) {
        e->lookup = lookup;
    } else if (table_needed) {
        e->rows = table;
        e->row_scale = scale;
    }
    param.requires_grad_(false);
    param.set_data(placeholder);
    auto& r = registry();
    std::unique_lock<std::shared_mutex> lock(r.mutex);
    r.weights[placeholder.storage().unsafeGetStorageImpl()] = std::move(e);
}

/// param [out, in] becomes bfloat16 from `rows`, block by block (the same rounding as one conversion
/// of the whole matrix). Row-major [out, in], half the bytes (whatever the float32 layout: oneDNN
/// repacked a column-major matrix on every product, opus-mt-sized beam 4 at batch 1 4 s a sentence
/// instead of 0.2 s).
void store_bf16(torch::Tensor& param, const std::string& name, const WeightRows& rows) {
    const int64_t out = param.size(0), in = param.size(1);
    auto bf = torch::empty({out, in}, torch::kBFloat16);
    const int64_t step = block_rows(in);
    for (int64_t r = 0; r < out; r += step) {
        const int64_t k = std::min(step, out - r);
        bf.narrow(0, r, k).copy_(float_block(rows, r, k, in, name).to(torch::kBFloat16));
    }
    param.requires_grad_(false);
    param.set_data(bf);
}

/// Whether a parameter's name makes it a weight that is converted (2-D, type aside).
bool converted_name(const std::string& name) {
    return name.size() >= 6 && name.compare(name.size() - 6, 6, "weight") == 0 && !stays_float(name);
}

void drop_dead_entries() {
    auto& r = registry();
    std::unique_lock<std::shared_mutex> lock(r.mutex);
    for (auto it = r.weights.begin(); it != r.weights.end();)
        it = it->second->placeholder.expired() ? r.weights.erase(it) : std::next(it);
}

}  // namespace

namespace {

/// quantize_rows_int8 of one row: x [in] -> y [in], its scale. Built per x86 level (target clones):
/// the maximum as an integer maximum of the magnitudes' bit patterns (for floats >= 0 their order;
/// a NaN's pattern lies above infinity's), the values with the CPU's vector rounding.
ATTNVIZ_TARGET_CLONES("arch=x86-64-v4", "arch=x86-64-v3", "default")
float quantize_row(const float* x, int64_t in, int8_t* y) {
    uint32_t top = 0;
    for (int64_t i = 0; i < in; ++i) {
        uint32_t bits;
        std::memcpy(&bits, x + i, sizeof bits);
        bits &= 0x7FFFFFFFu;
        top = bits > top ? bits : top;
    }
    float m;
    std::memcpy(&m, &top, sizeof m);
    const float s = top > 0x7F800000u ? m : std::max(m / 127.0f, 1e-12f);  // a NaN stays, as amax keeps it
    for (int64_t i = 0; i < in; ++i) {
        const float v = std::nearbyint(x[i] / s);
        const float c = v < -127.0f ? -127.0f : (v > 127.0f ? 127.0f : v);
        y[i] = v == v ? static_cast<int8_t>(c) : int8_t{0};
    }
    return s;
}

}  // namespace

/// (values [rows, in] of `type` written by `row_kernel` row by row, the float it gives per row) for a
/// matrix x [rows, in] of any floating type, on LibTorch's threads.
template <typename T, typename RowKernel>
std::pair<torch::Tensor, torch::Tensor> each_row(const char* who, const torch::Tensor& x_in, torch::ScalarType type,
                                                 RowKernel row_kernel) {
    if (x_in.dim() != 2) throw std::invalid_argument(std::string(who) + ": expected a matrix");
    const auto x = x_in.to(torch::kFloat).contiguous();
    const int64_t rows = x.size(0), in = x.size(1);
    auto q = torch::empty({rows, in}, type);
    auto per_row = torch::empty({rows}, torch::kFloat);
    const float* src = x.data_ptr<float>();
    T* dst = static_cast<T*>(q.data_ptr());
    float* out = per_row.data_ptr<float>();
    at::parallel_for(0, rows, std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(in, 1)), [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) out[r] = row_kernel(src + r * in, in, dst + r * in);
    });
    return {q, per_row};
}

std::pair<torch::Tensor, torch::Tensor> quantize_rows_int8(const torch::Tensor& w) {
    // One pass for the maximum, one for the values: what six tensor operations (each a parallel region
    // of its own) did, the same numbers (float division, round half to even, as ATen's).
    return each_row<int8_t>("quantize_rows_int8", w, torch::kChar, &quantize_row);
}

namespace {

/// quantize_rows_u8 of one row: x [in] -> y [in] with `steps` each side of the zero point steps + 1,
/// its largest magnitude (at least 1e-30).
ATTNVIZ_TARGET_CLONES("arch=x86-64-v4", "arch=x86-64-v3", "default")
float quantize_row_u8(const float* x, int64_t in, uint8_t* y, float steps) {
    // The maximum as an integer maximum of the magnitudes' bit patterns (a float maximum is a serial
    // chain: it does not vectorize); a NaN's pattern lies above infinity's: where one came out on top,
    // the row again without them (a slow pass only then).
    auto magnitudes_top = [&](bool skip_nan) {
        uint32_t top = 0;
        for (int64_t i = 0; i < in; ++i) {
            uint32_t bits;
            std::memcpy(&bits, x + i, sizeof bits);
            bits &= 0x7FFFFFFFu;
            if (skip_nan && bits > 0x7F800000u) continue;
            top = bits > top ? bits : top;
        }
        return top;
    };
    uint32_t top = magnitudes_top(false);
    if (top > 0x7F800000u) top = magnitudes_top(true);
    float m;
    std::memcpy(&m, &top, sizeof m);
    m = std::max(m, 1e-30f);
    const float s = steps / m;
    const int zero = static_cast<int>(steps) + 1;
    for (int64_t i = 0; i < in; ++i) {
        const float v = std::nearbyint(x[i] * s);
        const float c = v < -steps ? -steps : (v > steps ? steps : v);
        y[i] = static_cast<uint8_t>(v == v ? static_cast<int>(c) + zero : zero);
    }
    return m;
}

}  // namespace

std::pair<torch::Tensor, torch::Tensor> quantize_rows_u8(const torch::Tensor& x, int steps) {
    if (steps < 1 || steps > 127) throw std::invalid_argument("quantize_rows_u8: steps must be 1..127");
    const float s = static_cast<float>(steps);
    return each_row<uint8_t>("quantize_rows_u8", x, torch::kByte,
                             [s](const float* row, int64_t in, uint8_t* y) { return quantize_row_u8(row, in, y, s); });
}

int int8_activation_steps() {
    // VNNI in either encoding (AVX-512 VNNI or AVX-VNNI): the check the rowwise kernels make, whatever
    // ATTNVIZ_FORCE_CPU_ISA says (it caps attnviz's own kernels, not fbgemm's nor oneDNN's).
    static const bool vnni = int8_rows_isa_available(Int8RowsIsa::avx_vnni);
    return vnni ? 127 : 63;
}

std::string int8_kernels_name(Int8Kernels k) {
    switch (k) {
    case Int8Kernels::onednn: return "onednn";
    case Int8Kernels::rowwise: return "rowwise";
    case Int8Kernels::fbgemm: break;
    }
    return "fbgemm";
}

bool cpu_has_amx_int8() {
#if defined(__x86_64__) && defined(__linux__)
    static const bool amx = [] {
        unsigned a = 0, b = 0, c = 0, d = 0;
        // CPUID leaf 7: EDX bit 24 AMX-TILE, bit 25 AMX-INT8.
        if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0 || (d & (3u << 24)) != (3u << 24)) return false;
        // A user who capped oneDNN's instruction set below AMX (ONEDNN_MAX_CPU_ISA) gets fbgemm.
        for (const char* var : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"})
            if (const char* isa = std::getenv(var); isa && *isa && !std::strstr(isa, "AMX") && !std::strstr(isa, "amx") &&
                                                    std::string(isa) != "ALL" && std::string(isa) != "all")
                return false;
        // Linux hands out the tiles' state on request (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA,
        // as oneDNN asks): a kernel or sandbox that refuses it leaves oneDNN without AMX.
        constexpr long arch_req_xcomp_perm = 0x1023, xfeature_xtiledata = 18;
        return syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) == 0;
    }();
    return amx;
#else
    return false;
#endif
}

void set_int8_kernels(Int8Kernels k) { conversion_kernels().store(k); }

Int8Kernels int8_kernels() { return conversion_kernels().load(); }

Int8Kernels preferred_int8_kernels(int64_t rows) {
    if (rows >= 32)
        return cpu_has_amx_int8() || int8_rows_isa_available(Int8RowsIsa::avx512_vnni) ? Int8Kernels::onednn
                                                                                       : Int8Kernels::fbgemm;
    return int8_rows_linear_vectorized() ? Int8Kernels::rowwise : Int8Kernels::fbgemm;
}

Int8Kernels int8_kernels_of(const torch::nn::Module& network) {
    for (const auto& p : network.parameters())
        if (const auto e = find_int8(p)) return e->kernels;
    return Int8Kernels::fbgemm;
}

std::string precision_name(InferencePrecision p) {
    switch (p) {
    case InferencePrecision::fp32: return "fp32";
    case InferencePrecision::bf16: return "bf16";
    case InferencePrecision::int8: return "int8";
    }
    return "fp32";
}

InferencePrecision parse_inference_precision(const std::string& name) {
    if (name == "fp32" || name == "float32") return InferencePrecision::fp32;
    if (name == "bf16" || name == "bfloat16") return InferencePrecision::bf16;
    if (name == "int8") return InferencePrecision::int8;
    throw ConfigError("expected fp32, bf16 or int8 as the precision, got '" + name + "'");
}

InferencePrecision inference_precision(const torch::nn::Module& network) {
    for (const auto& p : network.parameters()) {
        if (p.scalar_type() == torch::kBFloat16) return InferencePrecision::bf16;
        if (p.scalar_type() == torch::kChar && find_int8(p)) return InferencePrecision::int8;
    }
    return InferencePrecision::fp32;
}

void check_trainable_precision(const torch::nn::Module& network, const std::string& what) {
    const auto p = inference_precision(network);
    if (p == InferencePrecision::fp32) return;
    throw ConfigError(what + " needs the model's float32 weights, but this copy was converted to " + precision_name(p) +
                      " for inference (--precision " + precision_name(p) +
                      "): open the model again without --precision (or with --precision fp32)");
}

void set_inference_precision(torch::nn::Module& network, InferencePrecision p) {
    const auto now = inference_precision(network);
    if (now == p) return;
    if (now != InferencePrecision::fp32)
        throw ConfigError("the model was converted to " + precision_name(now) + " already; open it again for " +
                          precision_name(p));
    if (const auto* net = dynamic_cast<const EncoderDecoder*>(&network); net && net->config().arch == ModelArch::rnn)
        throw ConfigError(precision_name(p) +
                          " inference is not available for the RNN encoder-decoder (its fused GRU kernels read float32 "
                          "weights): use fp32, or a Transformer or pretrained model");
    for (const auto& param : network.parameters())
        if (!param.device().is_cpu())
            throw ConfigError(precision_name(p) + " inference runs on the CPU only for now (the model is on " +
                              param.device().str() + "): use --device cpu");
    drop_dead_entries();
    torch::NoGradGuard no_grad;
    for (auto& item : network.named_parameters()) {
        auto& param = item.value();
        const auto& name = item.key();
        if (!converts_parameter(name, param)) continue;
        // Read a block of rows at a time (any layout): no float32 copy of
        // a whole matrix beside the model.
        const auto w = param.detach();
        const WeightRows rows = [&w](int64_t first, int64_t count) { return w.narrow(0, first, count); };
        if (p == InferencePrecision::int8) store_int8(param, name, read_as_rows(name), rows);
        else store_bf16(param, name, rows);
    }
}

bool converts_parameter(const std::string& name, const torch::Tensor& param) {
    return param.defined() && param.dim() == 2 && param.scalar_type() == torch::kFloat && converted_name(name);
}

void load_converted(torch::Tensor& param, const std::string& name, InferencePrecision p, const WeightRows& rows,
                    const RowLookup& lookup) {
    if (p == InferencePrecision::fp32 || !converts_parameter(name, param))
        throw ConfigError("cannot load " + name + " as " + precision_name(p) + ": only float32 weights of two dimensions "
                          "that set_inference_precision converts are loaded converted");
    if (!param.device().is_cpu())
        throw ConfigError(precision_name(p) + " inference runs on the CPU only for now (" + name + " is on " +
                          param.device().str() + "): use --device cpu");
    drop_dead_entries();
    torch::NoGradGuard no_grad;
    if (p == InferencePrecision::int8) store_int8(param, name, read_as_rows(name), rows, lookup);
    else store_bf16(param, name, rows);
}

void load_converted_all(const std::vector<ConvertedLoad>& loads, InferencePrecision p) {
    // One weight a task (nested parallel loops run inline): a few MB of temporaries each.
    at::parallel_for(0, static_cast<int64_t>(loads.size()), 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            const auto& l = loads[static_cast<size_t>(i)];
            load_converted(*l.param, l.name, p, l.rows);
            if (l.done) l.done();
        }
    });
}

bool is_int8_weight(const torch::Tensor& weight) { return find_int8(weight) != nullptr; }

int64_t gradient_pass_weight_bytes(const torch::nn::Module& network) {
    int64_t floats = 0, largest = 0;
    for (const auto& p : network.parameters())
        if (const auto e = find_int8(p)) {
            floats += e->out * e->in * 4;
            largest = std::max(largest, e->out * e->in);
        }
    return floats + largest;
}

int64_t int8_row_table_bytes(const torch::nn::Module& network) {
    int64_t bytes = 0;
    for (const auto& p : network.parameters())
        if (const auto e = find_int8(p); e && e->rows.defined()) bytes += e->rows.nbytes() + e->row_scale.nbytes();
    return bytes;
}

bool is_converted(torch::ScalarType type) { return type == torch::kChar || type == torch::kBFloat16; }

torch::Tensor precision_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
    const auto type = weight.scalar_type();
    if (!is_converted(type)) return few_rows_linear(x, weight, bias);  // float, double (tests), half
    if (type == torch::kBFloat16) {
        auto y = at::linear(x.to(torch::kBFloat16), weight).to(torch::kFloat);
        return bias.defined() ? y + bias : y;
    }
    const auto e = find_int8(weight);
    if (!e) throw std::logic_error("precision_linear: a weight of type " + std::string(c10::toString(type)) +
                                   " that set_inference_precision did not convert");
    torch::Tensor y;
    if (torch::GradMode::is_enabled() && x.requires_grad()) {
        y = at::linear(x, dequantized(*e));  // a gradient to the input (attribution): float products
    } else {
        auto shape = x.sizes().vec();
        shape.back() = e->out;
        const auto flat = x.reshape({-1, e->in});
        if (e->kernels == Int8Kernels::fbgemm) {
            // Per-row activations through fbgemm's per-tensor quantization: each row divided by its
            // largest |value| first (every row then spans [-1, 1], so one scale fits them all, as a
            // scale per row would), the product's rows multiplied back. Without it a row of small
            // values beside one of large ones lost most of its bits (the Marian fixture's maps moved
            // by up to 0.03-0.06; with it, see tests/pretrained/test_precision_pretrained.cpp).
            const auto rows = flat.to(torch::kFloat);
            const auto row_max = rows.abs().amax(1, true).clamp_min(1e-30);
            y = fbgemm_product((rows / row_max).contiguous(), *e).mul_(row_max);
        } else {
            // Each row quantized with its own scale (u8: max |x| is `steps` from the zero point steps + 1),
            // the product's rows multiplied back. rowwise: the steps its instructions sum exactly (8 bits
            // on AVX-512 VNNI, 7 on AVX2), every weight row read once as stored.
            const bool rowwise = e->kernels == Int8Kernels::rowwise;
            const int steps = rowwise ? int8_rows_activation_steps() : int8_activation_steps();
            auto [qx, row_max] = quantize_rows_u8(flat, steps);
            y = rowwise ? int8_rows_linear(qx, row_max.div_(static_cast<float>(steps)), steps + 1, e->values, e->w_scale,
                                           e->sums)
                        : onednn_product(qx, *e, 1.0 / steps, steps + 1).mul_(row_max.unsqueeze(1));
        }
        y = y.view(shape);
    }
    return bias.defined() ? y + bias : y;
}

std::vector<torch::Tensor> precision_linears(const torch::Tensor& x, at::TensorList weights, at::TensorList biases) {
    bool plain = true;
    for (const auto& w : weights) plain = plain && !is_converted(w.scalar_type());
    if (plain) return few_rows_linears(x, weights, biases);
    std::vector<torch::Tensor> out;
    for (size_t i = 0; i < weights.size(); ++i)
        out.push_back(precision_linear(x, weights[i], i < biases.size() ? biases[i] : torch::Tensor()));
    return out;
}

torch::Tensor precision_linear(const torch::nn::Linear& layer, const torch::Tensor& x) {
    return precision_linear(x, layer->weight, layer->bias);
}

torch::Tensor layer_forward(const torch::nn::Linear& layer, const torch::Tensor& x) {
    return is_converted(layer->weight.scalar_type()) ? precision_linear(layer, x) : layer.ptr()->forward(x);
}

torch::Tensor converted_rows(const torch::Tensor& table, const torch::Tensor& ids) {
    const auto type = table.scalar_type();
    if (!is_converted(type)) return {};
    auto shape = ids.sizes().vec();
    shape.push_back(table.size(1));
    const auto flat = ids.reshape(-1).to(torch::kLong);
    if (type == torch::kBFloat16) return table.index_select(0, flat).to(torch::kFloat).view(shape);
    const auto e = find_int8(table);
    if (e && e->lookup) {
        // The rows read again and quantized as store_int8 quantized them (quantize_rows_int8: a row's scale is
        // its own maximum): the values the row table would have held.
        const auto w = e->lookup(flat);
        if (!w.defined() || w.dim() != 2 || w.size(0) != flat.size(0) || w.size(1) != e->in)
            throw std::logic_error("converted_rows: the row lookup gave no [" + std::to_string(flat.size(0)) + ", " +
                                   std::to_string(e->in) + "] matrix");
        auto [q, scale] = quantize_rows_int8(w);
        return (q.to(torch::kFloat) * scale.unsqueeze(1)).view(shape);
    }
    if (!e || !e->rows.defined())
        throw std::logic_error("converted_rows: an int8 matrix without its row table");
    return (e->rows.index_select(0, flat).to(torch::kFloat) * e->row_scale.index_select(0, flat).unsqueeze(1)).view(shape);
}

}  // namespace attnviz
