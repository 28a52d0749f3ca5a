#pragma once
// Inference precision of a loaded network: int8 or bf16 weights for decoding, evaluation, maps
// and attribution, chosen once after loading (the CLI's --precision). Training and fine-tuning
// stay float32: a converted network refuses them (check_trainable_precision).
//
// int8 (CTranslate2's int8_float32 split): every projection's weight [out, in] is quantized per
// output channel (symmetric, scale = max |w| / 127) and packed once for LibTorch's fbgemm
// (quantized::linear_prepack; a vocabulary-wide weight in parts of 16,384 rows, which fbgemm packs
// 3x faster, on both threads) or oneDNN (onednn::qlinear_prepack; Int8Kernels below); a product
// quantizes its activations per row at run time and returns float. Softmax, layer norms, attention scores,
// positions and biases stay float. A vocabulary matrix that is also read as an embedding keeps an
// int8 row table with one scale per row beside the packed matrix, except when opened from a model
// folder: its lookups then quantize the file's rows as they read them (load_converted's `lookup`;
// the same values, no table). The float32 weight is freed:
// the parameter keeps its shape but its data becomes a one-byte int8 placeholder (stride 0), so
// anything that reads it without this file's functions fails (ATen refuses int8 in a float op)
// instead of computing with stale numbers. A model folder opened in int8 or bf16
// (core/persist/hf_folder.hpp's load_model_folder, the CLI's --precision) is converted as it is read,
// a block of rows at a time (load_converted): its float32 weights are never resident together.
//
// bf16: every such weight is stored in bfloat16 (no float copy); products run in ATen's
// bf16 matmul (oneDNN: AVX512-BF16/AMX where the CPU has them, a slower exact-rounding path
// elsewhere) and come back as float; norms, softmax and attention scores stay float.
//
// Why LibTorch's kernels and not our own: measured on this project's 2-core Sapphire Rapids VM
// (tools/bench_pretrained.py, docs/benchmarks.md), fbgemm's VNNI/AVX-512 kernels ran the
// opus-mt-sized 512x512 .. 59,514x512 products 1.5-4.7x faster than float32 for 1 to 128 rows,
// and oneDNN's AMX kernels another 1.3-2x for 32 rows and more; both pick their kernels at run
// time (AVX2 fallbacks), so the same binary runs on any x86-64.
//
// What is converted, per family:
//   - pretrained (Marian, M2M100/NLLB, BART/mBART) and T5: every attention and feed-forward
//     projection, the shared / embed_tokens vocabulary matrices (lookups and the tied output
//     projection), lm_head; not the position tables, layer norms, biases, final_logits_bias, T5's
//     relative position bias;
//   - d2l's Transformer: W_q, W_k, W_v, W_o, the feed-forward layers and the output layer (dense);
//     its two embedding tables stay float (small);
//   - the RNN encoder-decoder: refused (its fused GRU kernels read float weights).
#include <functional>
#include <string>
#include <utility>

#include <torch/torch.h>

namespace attnviz {

enum class InferencePrecision { fp32, bf16, int8 };

/// "fp32", "bf16", "int8".
std::string precision_name(InferencePrecision p);
/// The precision a name gives ("fp32", "float32", "bf16", "bfloat16", "int8"); ConfigError listing them otherwise.
InferencePrecision parse_inference_precision(const std::string& name);

/// Converts a network's weights to `p` in place, once, on the CPU (ConfigError for another device,
/// for the RNN, or for a network already converted to another precision; fp32 on a float network
/// changes nothing). Not thread-safe with work in flight on the network: call it right after loading.
void set_inference_precision(torch::nn::Module& network, InferencePrecision p);

/// Whether set_inference_precision converts the parameter `name` of a network (a float32 2-D
/// weight that does not stay float, as listed above) to int8 or bf16.
bool converts_parameter(const std::string& name, const torch::Tensor& param);

/// Rows [first, first + count) of a weight being read, [count, in], any floating type: a view of
/// the file or a small copy (load_converted reads a weight a block of rows at a time).
using WeightRows = std::function<torch::Tensor(int64_t first, int64_t count)>;
/// Rows `ids` (1-D int64) of a vocabulary matrix being read, [ids.size(0), in], any floating type,
/// from any thread at any time while the network lives.
using RowLookup = std::function<torch::Tensor(const torch::Tensor& ids)>;

/// Gives `param` (parameter `name` of a network being loaded, its data allocated and never written;
/// converts_parameter true) its weight in precision `p` (int8 or bf16) straight from `rows`, a block
/// of rows at a time: no float32 copy of the whole weight is ever made, and the parameter ends
/// exactly as set_inference_precision would have made it from the float32 weight (the same int8
/// values, scales and packed matrix; the same bfloat16 values). The float32 storage `param` had is
/// freed. ConfigError for fp32 or a weight converts_parameter refuses; the CPU only.
///
/// `lookup` (int8, a vocabulary matrix also read as an embedding; optional): the same float rows by id,
/// read again at each lookup (converted_rows quantizes them as the conversion did: the same values)
/// instead of an int8 row table kept beside the packed matrix (V x in bytes: 30 MB for opus-mt, 262 MB
/// for NLLB-600M). load_model_folder gives the mapped file's rows. It must give exactly what `rows` gave.
void load_converted(torch::Tensor& param, const std::string& name, InferencePrecision p, const WeightRows& rows,
                    const RowLookup& lookup = {});

/// One weight for load_converted_all: load_converted's parameter, name and rows (no lookup), and what
/// to do once the weight is converted (optional; e.g. let the file's pages go), on the thread that
/// converted it.
struct ConvertedLoad {
    torch::Tensor* param = nullptr;  ///< the parameter being loaded (as load_converted's `param`)
    std::string name;                ///< its name in the network
    WeightRows rows;                 ///< its rows, as load_converted's `rows`; called from one thread at a time
    std::function<void()> done;      ///< called once the weight is converted; may be empty
};

/// load_converted(*l.param, l.name, p, l.rows) and l.done() for each, several weights at once on
/// LibTorch's threads (one weight's quantizing and packing is serial: one at a time left the other
/// threads waiting). The first error is thrown once every thread has stopped; weights not reached
/// keep their unconverted data.
void load_converted_all(const std::vector<ConvertedLoad>& loads, InferencePrecision p);

/// Symmetric per-row int8 of a matrix [rows, in] (any floating type): (int8 values [rows, in], float
/// scales [rows]) with scale = max |w| / 127 (at least 1e-12) and value = w / scale rounded half to
/// even, within +-127. The numbers of the tensor expression scale = (w.abs().amax(1) / 127.0)
/// .clamp_min(1e-12), round(w / scale).clamp(-127, 127).to(int8) (tested), a NaN value giving 0, in
/// one pass a row on LibTorch's threads.
std::pair<torch::Tensor, torch::Tensor> quantize_rows_int8(const torch::Tensor& w);

/// Symmetric per-row u8 of activations [rows, in] (any floating type) for oneDNN's products: (u8 values
/// [rows, in] at zero point steps + 1, float [rows] with each row's largest magnitude m, at least 1e-30)
/// with value = round(x * steps / m) + steps + 1 (half to even, within 1..2 steps + 1; a NaN gives the
/// zero point). steps: 1..127 (std::invalid_argument otherwise); 127 uses the whole u8 range.
std::pair<torch::Tensor, torch::Tensor> quantize_rows_u8(const torch::Tensor& x, int steps = 127);

/// The steps each side of zero that int8 products quantize their activations to: 127 (8 bits) on a
/// CPU with VNNI (AVX512-VNNI or AVX-VNNI: vpdpbusd sums u8 x s8 products in 32 bits), 63 (7 bits)
/// without it, for both kernels: AVX2's vpmaddubsw adds pairs of u8 x s8 products with 16-bit
/// saturation (255 x 127 x 2 > 32,767; 127 x 127 x 2 is not), so full-range activations gave wrong
/// sums there (oneDNN's products off by up to 18x the tolerance on an AVX2-only AMD EPYC). fbgemm
/// gets it as PyTorch's reduce_range. Half the steps roughly double the activations' rounding.
int int8_activation_steps();

/// The int8 kernels a converted weight is packed for. fbgemm (quantized::linear_prepack, VNNI/AVX2):
/// the fastest here for a few rows at a time (a typed sentence). oneDNN (onednn::qlinear_prepack /
/// qlinear_pointwise): on a CPU with AMX-INT8 tiles 1.3-2x fbgemm's speed for 32 rows and more (a
/// corpus in batches), slower without them (measured on a Sapphire Rapids VM, docs/benchmarks.md).
/// rowwise (attnviz's own, core/model/small_linear.hpp's int8_rows_linear): the quantized rows
/// as they are, nothing packed, each weight row read once a product against every activation row
/// (AVX-512 VNNI or AVX2, a plain loop elsewhere). Why: packing for fbgemm was most of opening an int8 model (NLLB-600M-
/// sized: ~4.5 of 5.6 s on 2 cores; docs/benchmarks.md), and a typed sentence's products are
/// matrix-vector products bound by reading the weight, which needs no packed layout.
/// Each product quantizes its activations per row (quantize_rows_u8 for oneDNN and rowwise, the
/// latter at int8_rows_activation_steps(): 8 bits on AVX-512 VNNI, 7 on AVX2; for fbgemm each row divided by its largest magnitude, then
/// fbgemm's per-tensor quantization) and returns float.
enum class Int8Kernels { fbgemm, onednn, rowwise };
/// "fbgemm", "onednn", "rowwise".
std::string int8_kernels_name(Int8Kernels k);
/// Whether this CPU has AMX-INT8 tiles that the OS lets this process use (and oneDNN is not capped
/// below them by ONEDNN_MAX_CPU_ISA).
bool cpu_has_amx_int8();
/// The kernels weights converted to int8 from now on are packed for (process-wide; until set,
/// preferred_int8_kernels(1): a typed sentence's).
/// Set it before loading: a network keeps the kernels its weights were packed for.
void set_int8_kernels(Int8Kernels k);
Int8Kernels int8_kernels();
/// The faster kernels here for products of about `rows` rows (batch x beam): below 32 rows rowwise
/// where its vector loops run (int8_rows_linear_vectorized), fbgemm otherwise; for 32 rows and more
/// oneDNN where the CPU has AMX-INT8 (cpu_has_amx_int8) or AVX-512 VNNI, fbgemm otherwise.
/// Measured (2 threads, opus-mt-sized, 24 tokens, ms a sentence; docs/benchmarks.md): on an AMD
/// EPYC (Zen 3, AVX2), rowwise / fbgemm, batch 1 greedy 164-194 / 224-226, beam 4 221-285 / 321-335,
/// batch 32 greedy 43.5 / 41.2, beam 4 130 / 113; on an Ice Lake Xeon (AVX-512 VNNI, no AMX),
/// oneDNN / fbgemm at batch 32, medians of 8 interleaved rounds, greedy 23.0 / 28.7, beam 4 59.3 /
/// 71.4, and a product of 128 rows (batch 32, beam 4) mostly 0.80-0.97 of fbgemm's time.
Int8Kernels preferred_int8_kernels(int64_t rows);
/// The kernels a network's int8 weights are packed for (fbgemm when none is int8).
Int8Kernels int8_kernels_of(const torch::nn::Module& network);

/// The precision a network's weights are in (fp32 when none was converted).
InferencePrecision inference_precision(const torch::nn::Module& network);

/// ConfigError saying what to do when the network was converted by set_inference_precision (training,
/// fine-tuning, export and saving need float32 weights). `what`: the refused action ("fine-tuning").
void check_trainable_precision(const torch::nn::Module& network, const std::string& what);

/// x [..., in] W^T + bias for a weight [out, in] in any of the precisions (float32: few_rows_linear,
/// small_linear.hpp); float result.
torch::Tensor precision_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias = {});
/// precision_linear(x, weights[i], biases[i]) for every i (biases: empty or one each, optional):
/// float32 weights as one few_rows_linears job (a self-attention's q, k and v against one x),
/// converted ones one at a time.
std::vector<torch::Tensor> precision_linears(const torch::Tensor& x, at::TensorList weights, at::TensorList biases = {});
/// A Linear layer's forward in its precision.
torch::Tensor precision_linear(const torch::nn::Linear& layer, const torch::Tensor& x);
/// layer->forward(x) exactly (ATen) for a float32 layer, precision_linear for a converted one.
torch::Tensor layer_forward(const torch::nn::Linear& layer, const torch::Tensor& x);

/// Whether weights of this type are set_inference_precision's (int8, bf16): float32 and float64
/// weights (the tests' double models) run as before.
bool is_converted(torch::ScalarType type);
/// Whether weight was converted to int8 (an fbgemm packed matrix stands for it).
bool is_int8_weight(const torch::Tensor& weight);

/// Bytes a pass with gradients to its inputs (attribution) holds beside its activations in an int8
/// network: precision_linear then multiplies by each weight's float32 copy (dequantized from fbgemm's
/// packed matrix, an int8 copy on the way), and autograd keeps every copy for the backward pass, so
/// the pass holds the float32 weights (4 bytes a parameter) and the largest weight's int8 unpacking
/// besides. 0 for a float32 or bf16 network (bf16 products keep their bf16 weights, no copy).
int64_t gradient_pass_weight_bytes(const torch::nn::Module& network);

/// Bytes of the int8 row tables a network keeps for its vocabulary matrices' lookups (V x d each, plus
/// the scales): 0 when its lookups read the model file (load_converted's `lookup`) or nothing is int8.
int64_t int8_row_table_bytes(const torch::nn::Module& network);

/// Rows ids [...] of a vocabulary matrix [V, d] converted by set_inference_precision: [..., d] float
/// (int8: the row table times each row's scale; bf16: widened). Undefined when the matrix is float
/// (the caller reads it as before).
torch::Tensor converted_rows(const torch::Tensor& table, const torch::Tensor& ids);

}  // namespace attnviz
