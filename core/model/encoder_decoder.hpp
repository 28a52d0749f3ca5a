#pragma once
// The seam between model families and everything that uses a model. Training
// (core/train), decoding (greedy, beam, forced, top-k, the beam tree: core/decode),
// analysis and persistence see a network only through EncoderDecoder: it encodes
// a batch of sources once, then runs the decoder one step at a time with a cache
// it owns (the RNN's hidden state; a Transformer's keys and values per layer),
// or over a whole target at once with teacher forcing, for training. Each step
// names its attention maps (core/model/attention_map.hpp), so a view or an
// export never needs to know which family made them.
//
// Families: the RNN encoder-decoder with attention (core/model/rnn_model.hpp), d2l's
// Transformer (core/model/transformer_model.hpp) and the pretrained Hugging Face models
// (core/model/pretrained_model.hpp).
// build_network() (core/model/families.hpp) makes the one a configuration asks for.
#include <cstdint>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "core/config/config.hpp"
#include "core/model/attention_map.hpp"
#include "core/model/dropout_stream.hpp"
#include "core/model/head_gates.hpp"
#include "core/model/memory_cost.hpp"

namespace attnviz {

/// What the encoder hands the decoder for a batch of B sources, S positions wide.
class EncodedSource {
public:
    virtual ~EncodedSource() = default;
    torch::Tensor src_len;  ///< [B] valid source lengths (at most ModelConfig::source_steps when set)
    torch::Tensor mask;     ///< [B, S] true at valid source positions
    /// The same encoding for the rows `rows` [R] (long, on the encoding's device) of this
    /// batch, in that order; a row may repeat (beam search gives each sentence K rows).
    virtual std::shared_ptr<const EncodedSource> select(const torch::Tensor& rows) const = 0;
    /// Source-side attention maps of row `row` over its first n positions (encoder
    /// self-attention: n × n each), for a family that has them; none for the RNN.
    virtual std::vector<AttentionMap> source_maps(int64_t row, int64_t n) const { return {}; }
};

/// What the decoder carries from one step to the next.
class DecoderCache {
public:
    virtual ~DecoderCache() = default;
    /// Keeps the rows `rows` [R] (long, on the cache's device), in that order: beam
    /// search's reordering of its hypotheses (CTranslate2's gather_state).
    virtual void select(const torch::Tensor& rows) = 0;
    /// An independent copy: stepping either leaves the other where it was (what-if
    /// interventions read the weights a step would have used from a copy,
    /// core/decode/intervene.hpp). Cheap: a step replaces a cache's tensors and never writes
    /// them in place, so the copy shares them.
    virtual std::unique_ptr<DecoderCache> clone() const = 0;
};

/// One attention map of one decoding step: every row's query over its keys.
struct StepMap {
    AttentionMapId id;
    torch::Tensor weights;  ///< [B, K] (cross: K = S, padding 0; decoder_self: K = steps so far)
    torch::Tensor scores;   ///< [B, K] the same before the softmax (padding -inf); undefined when not kept
};

/// What one decoding step produces.
struct StepOutput {
    torch::Tensor logits;       ///< [B, V] scores over the target vocabulary
    std::vector<StepMap> maps;  ///< the step's attention maps, the primary one first
                                ///< (core/model/attention_map.hpp); empty without attention
    torch::Tensor context;      ///< [B, C] what the step read of the source (the RNN: its context vector)
};

/// A change to what a decoding step attends to (what-if interventions): the step runs
/// with it, and its maps show the weights it used.
struct AttentionIntervention {
    /// Replaces the cross-attention weights of the step, one row per batch row [B, S] (rows
    /// summing to 1 over the real source positions, 0 on padding): the RNN's one map, or
    /// every cross head of every layer of a family with several. Undefined: unchanged.
    torch::Tensor cross_weights;
    /// Heads switched off for this step: their output is zero (a multi-head family; for the
    /// RNN, its cross map (layer 0, head 0) off means a zero context vector).
    std::vector<AttentionMapId> heads_off;
    /// Source positions erased for this step, per batch row [B, S] (bool, true: erased;
    /// Serrano & Smith's erasure, core/analysis/erasure.hpp): every cross map (every head of
    /// every layer; the RNN's one map) gives them weight 0 and renormalises the rest, which is
    /// the softmax with their scores at -inf. A row with every position erased attends to
    /// nothing (weights 0: a zero context). Undefined: none. Applied before cross_weights.
    torch::Tensor cross_erased;
};

/// How the Transformer's training loss lays out its tokens (TokenLayout in
/// core/model/transformer_layers.hpp); the RNN ignores it.
enum class TokenPacking {
    /// when_padded on the CPU; on a GPU the grid: at d2l's sizes a GPU step is bound by kernel
    /// launches, not arithmetic, packing adds launches and a host sync per layout, and on an
    /// H200 it bought nothing (README "On a GPU").
    automatic,
    when_padded,  ///< the real tokens only, where padding fills a fifth of the grid or more; any device
    never,        ///< always the padded grid
};

/// How the Transformer's training loss (and validation) computes attention on the CPU.
enum class AttentionKernel {
    /// short_attention() (core/model/short_attention.hpp) where every sequence is at most
    /// k_short_attention_max_steps long, dropout (if any) is hashed and the device is the CPU;
    /// attend() otherwise. On d2l's configuration a training step took ~15% less time.
    automatic,
    reference,  ///< always attend(): ATen's batched products, softmax and masks
};

/// How loss() runs.
struct LossOptions {
    double teacher_forcing = 1.0;  ///< probability of feeding the true previous token (a family may support only 1)
    /// Where dropout masks come from (core/model/dropout_stream.hpp; the training step sets
    /// one so that a batch split into parts draws the whole batch's masks); null: ATen's
    /// generator.
    const DropoutStream* dropout = nullptr;
    TokenPacking packing = TokenPacking::automatic;  ///< the Transformer's token layout (see TokenPacking)
    AttentionKernel attention = AttentionKernel::automatic;  ///< the Transformer's attention (see AttentionKernel)
};

/// Teacher-forced scores of a batch's real target tokens (what validation counts).
struct TokenLogits {
    torch::Tensor logits;   ///< [N, V] forward()'s logits at tgt_out's N real (non-pad) tokens
    torch::Tensor targets;  ///< [N] those tokens, in the same order
};

/// A model family's network. Shapes: B batch, S source steps, T target steps, V target vocabulary.
class EncoderDecoder : public torch::nn::Module {
public:
    /// The configuration it was built from, vocabulary sizes included.
    virtual const ModelConfig& config() const = 0;
    bool has_attention() const { return config().has_attention(); }

    /// Encodes src [B, S] (ids) of valid lengths src_len [B]. keep_maps false: the encoding
    /// keeps no source-side maps (source_maps() gives none), for decoding whose caller shows
    /// none of them (DecodeOptions::maps): a Transformer's are S x S per head and layer.
    virtual std::shared_ptr<const EncodedSource> encode(const torch::Tensor& src, const torch::Tensor& src_len,
                                                        bool keep_maps = true) = 0;
    /// The decoder's cache before its first step.
    virtual std::unique_ptr<DecoderCache> start(const EncodedSource& source) = 0;
    /// One step: tokens [B] (each row's previous output; <bos> first) -> logits, maps and
    /// context; the cache moves one step on. With an intervention the step attends as it says.
    virtual StepOutput step(const torch::Tensor& tokens, DecoderCache& cache, const EncodedSource& source,
                            const AttentionIntervention* intervention = nullptr) = 0;

    // Attribution: the same computation from embeddings, so that gradients reach them.
    /// The source embeddings the encoder reads for src [B, S]: [B, S, E] (before any scaling or
    /// positional encoding a family adds).
    virtual torch::Tensor embed_source(const torch::Tensor& src) = 0;
    /// The target embeddings the decoder reads for tokens [B, T]: [B, T, E].
    virtual torch::Tensor embed_target(const torch::Tensor& tgt) = 0;
    /// Teacher-forced logits [B, T, V] from src_emb [B, S, E] (of valid lengths src_len) and
    /// tgt_emb [B, T, E] (<bos> and the target prefix): forward()'s value, differentiable with
    /// respect to both embeddings (no fused paths).
    virtual torch::Tensor forward_embedded(const torch::Tensor& src_emb, const torch::Tensor& src_len,
                                           const torch::Tensor& tgt_emb) = 0;

    /// The decoder over tgt_in [B, T] at once -> logits [B, T, V]. With teacher_forcing < 1
    /// each step feeds the model's own previous prediction with probability 1 - teacher_forcing.
    virtual torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                                  double teacher_forcing = 1.0) = 0;
    /// d2l's training loss of a batch: the mean cross-entropy over tgt_out's non-pad tokens
    /// of forward(src, src_len, tgt_in); a family may compute it without the padding's logits.
    virtual torch::Tensor loss(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                               const torch::Tensor& tgt_out, const LossOptions& options = {}) = 0;
    /// forward()'s logits (full teacher forcing) at tgt_out's real tokens, in an order the
    /// targets give, for validation's loss and accuracy. A family may compute them without the
    /// padding's positions (the Transformer packs them on the CPU as loss() does); by default
    /// forward() on the whole grid, then its real tokens.
    virtual TokenLogits real_token_logits(const torch::Tensor& src, const torch::Tensor& src_len,
                                          const torch::Tensor& tgt_in, const torch::Tensor& tgt_out);
    /// Whether loss() may run on parts of a batch at once, one CPU thread each, with its
    /// randomness all from options.dropout (core/train/split_step.hpp).
    virtual bool trains_in_parts(double teacher_forcing) const { return false; }
    /// What its work costs in memory, path by path, by the shape of the work
    /// (core/model/memory_cost.hpp): every caller asks the one bound with it before it
    /// allocates (core/model/memory_bound.hpp). A family derives it from the tensors its
    /// paths allocate: every attention it computes, the maps it keeps, the backward pass.
    virtual MemoryCost memory_cost() const = 0;
    /// The operations of one teacher-forced forward pass per row of S source and T target
    /// positions (core/model/work_cost.hpp): its matrix products' multiply-adds and its attention
    /// elements. What attribution's work bound counts its passes with.
    virtual ShapeCost forward_work() const = 0;

    // Head gates (core/model/head_gates.hpp): every pass multiplies each head's output by its gate.
    /// The heads it has, kind by kind (the RNN with attention: cross 1 x 1; without: none).
    virtual std::vector<HeadGroup> head_groups() const = 0;
    /// Sets the run-wide gates (HeadGates{}: every gate 1, the fused paths back). Not thread-safe
    /// with work in flight: set them before work starts (the CLI's --mask-heads on the model it
    /// loaded; analysis on a network of its own, ScopedHeadGates). ConfigError when a kind's
    /// tensor is not [layers, heads] of head_groups() or the network has no such kind.
    void set_head_gates(HeadGates gates);
    const HeadGates& head_gates() const { return m_gates; }

private:
    HeadGates m_gates;
};

/// Sets a network's gates for a scope and puts back the ones it had.
class ScopedHeadGates {
public:
    ScopedHeadGates(EncoderDecoder& network, HeadGates gates) : m_network(network), m_saved(network.head_gates()) {
        network.set_head_gates(std::move(gates));
    }
    ~ScopedHeadGates() { m_network.set_head_gates(m_saved); }
    ScopedHeadGates(const ScopedHeadGates&) = delete;
    ScopedHeadGates& operator=(const ScopedHeadGates&) = delete;

private:
    EncoderDecoder& m_network;
    HeadGates m_saved;
};

/// A network, shared: a TranslationModel's is never changed after construction.
using Network = std::shared_ptr<EncoderDecoder>;

/// Copies every weight and buffer of src into dst (same configuration; any devices).
void copy_weights(EncoderDecoder& dst, const EncoderDecoder& src);

/// Number of trainable parameters.
int64_t count_parameters(const torch::nn::Module& module);

/// Masked cross-entropy (d2l's Seq2Seq.loss): mean over non-pad target tokens.
torch::Tensor masked_cross_entropy(const torch::Tensor& logits, const torch::Tensor& target, int64_t pad_id);

}  // namespace attnviz
