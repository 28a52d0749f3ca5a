#pragma once
// The T5 family (T5, Flan-T5, mT5) behind the family seam (core/model/encoder_decoder.hpp), as
// transformers 5's modeling_t5.py defines T5ForConditionalGeneration:
//
//  - RMSNorm without mean or bias (T5LayerNorm: x / sqrt(mean(x^2) + eps) * w, in float32), pre-norm
//    blocks, a final norm after each stack; no bias anywhere; no 1/sqrt(d) scaling of q.k;
//  - relative position buckets of key - query (bidirectional in the encoder, causal in the decoder)
//    computed by block 0's relative_attention_bias and added by every layer's self-attention to its
//    scores before the softmax (cross-attention has none);
//  - a ReLU feed-forward (wi, wo) or a gated one (act(wi_0 x) * wi_1 x, wo; Flan-T5's gelu_new);
//  - heads x d_kv may differ from d_model; one shared embedding; lm_head tied to it unless the
//    weights hold their own; the last hidden state times d_model^-0.5 first when the config says so
//    (T5Options::scale_decoder_outputs); the decoder starts from <pad>.
//
// Parameters carry transformers' state_dict names (core/persist/parameter_names.cpp):
//
//   shared.weight                                               [V, d]
//   encoder.block.{i}.layer.0.SelfAttention.{q,k,v}.weight     [h dkv, d]   .o.weight [d, h dkv]
//   encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight   [buckets, h]
//   encoder.block.{i}.layer.0.layer_norm.weight                 [d]
//   encoder.block.{i}.layer.1.DenseReluDense.{wi | wi_0, wi_1}.weight [f, d], .wo.weight [d, f]
//   encoder.block.{i}.layer.1.layer_norm.weight, encoder.final_layer_norm.weight
//   decoder.block.{i}.layer.0.SelfAttention.* (block 0 with relative_attention_bias), layer.0.layer_norm
//   decoder.block.{i}.layer.1.EncDecAttention.{q,k,v,o}.weight, layer.1.layer_norm
//   decoder.block.{i}.layer.2.DenseReluDense.*, layer.2.layer_norm, decoder.final_layer_norm.weight
//   lm_head.weight                                              [V, d]  (only when not tied)
//
// The encoding and the decoder's cache are the pretrained family's (PretrainedEncoding,
// PretrainedCache of core/model/pretrained_model.hpp), and its maps are named and recorded as that
// family records them: the primary {cross, last layer, head -1: the heads' mean}, every {cross, l,
// h} and {decoder_self, l, h} per step, every {encoder_self, l, h} in the encoding; weights equal
// transformers' output_attentions, raw scores are the pre-softmax scores with the position bias
// added (and -inf where masked).
#include <cstdint>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "core/config/config.hpp"
#include "core/config/t5_config.hpp"
#include "core/model/encoder_decoder.hpp"
#include "core/model/pretrained_model.hpp"

namespace attnviz {

/// One attention's projections (no biases): q, k, v [h dkv, d] and o [d, h dkv].
struct T5AttentionWeights {
    torch::Tensor q, k, v, o;
};

/// One block's weights. Encoder blocks have no cross attention (cross and cross_norm undefined).
struct T5BlockWeights {
    T5AttentionWeights self, cross;
    torch::Tensor self_norm, cross_norm, ff_norm;  ///< [d] RMSNorm weights
    torch::Tensor wi, wi_0, wi_1, wo;              ///< ReLU: wi; gated: wi_0 (activated), wi_1
};

/// relative_attention_bias' buckets for relative positions rel (key - query, long): transformers'
/// T5Attention._relative_position_bucket, computed alike (the logarithmic part in float).
torch::Tensor t5_relative_bucket(const torch::Tensor& rel, bool bidirectional, int64_t num_buckets, int64_t max_distance);

/// T5LayerNorm (transformers' T5LayerNorm): x over the root of its mean square (in float32, plus
/// eps) times weight [d]; no mean subtracted, no bias. Dense float rows on the CPU with no gradient
/// recorded are computed in one loop a row, anything else through ATen (the same values up to float
/// rounding).
torch::Tensor t5_rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

class T5Impl : public EncoderDecoder {
public:
    /// filled: zeros (norms ones); else allocated, never written (a model folder's weights replace them).
    explicit T5Impl(const ModelConfig& config, bool filled = true);
    const ModelConfig& config() const override { return m_config; }
    const PretrainedConfig& hf() const { return m_spec->model; }
    const T5Options& t5() const { return *hf().t5; }
    /// core/model/family_costs.cpp: the Transformer stack's costs at T5's widths.
    MemoryCost memory_cost() const override;
    ShapeCost forward_work() const override;
    std::vector<HeadGroup> head_groups() const override;

    std::shared_ptr<const EncodedSource> encode(const torch::Tensor& src, const torch::Tensor& src_len,
                                                bool keep_maps = true) override;
    std::unique_ptr<DecoderCache> start(const EncodedSource& source) override;
    /// One token per row; interventions as the pretrained family's (cross_weights replace every
    /// cross head's weights in every layer; heads_off; cross_erased), head gates in every pass.
    StepOutput step(const torch::Tensor& tokens, DecoderCache& cache, const EncodedSource& source,
                    const AttentionIntervention* intervention = nullptr) override;
    torch::Tensor embed_source(const torch::Tensor& src) override;
    torch::Tensor embed_target(const torch::Tensor& tgt) override;
    torch::Tensor forward_embedded(const torch::Tensor& src_emb, const torch::Tensor& src_len,
                                   const torch::Tensor& tgt_emb) override;
    torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                          double teacher_forcing = 1.0) override;
    torch::Tensor loss(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                       const torch::Tensor& tgt_out, const LossOptions& options = {}) override;
    TokenLogits real_token_logits(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                                  const torch::Tensor& tgt_out) override;

    /// What each head adds to a score before the softmax, by relative distance: [h, 2 span + 1],
    /// column j for key - query = j - span (encoder_self: bidirectional buckets; decoder_self:
    /// causal, every key after the query in the bucket of distance 0 -- the causal mask hides them).
    /// kind: encoder_self or decoder_self (ConfigError otherwise: cross-attention has no bias).
    torch::Tensor position_bias_curve(AttentionKind kind, int64_t span) const;
    /// The bias [1, h, Tq, Tk] of queries at positions first..first+Tq-1 over keys 0..Tk-1
    /// (transformers' compute_bias(Tq, Tk, past_seen_tokens=first)).
    torch::Tensor position_bias(bool decoder, int64_t queries, int64_t keys, int64_t first) const;

    /// The encoder over token embeddings emb [B, S, d]; keep: every layer's weights and scores.
    PretrainedEncoding encode_embedded(const torch::Tensor& emb, const torch::Tensor& src_len, bool keep);
    /// The decoder's last hidden state [B, T, d] (after the final norm) for target embeddings [B, T, d].
    torch::Tensor decode_embedded(const torch::Tensor& emb, const PretrainedEncoding& enc);
    /// [.., d] -> [.., V]: the rescaling (when the config asks it), lm_head, <bos> at -inf.
    torch::Tensor output_logits(const torch::Tensor& hidden) const;

    torch::Tensor shared, lm_head;  ///< [V, d]; lm_head is `shared` when tied
    torch::Tensor encoder_relative_bias, decoder_relative_bias;  ///< [buckets, h]
    torch::Tensor encoder_final_norm, decoder_final_norm;      ///< [d]
    std::vector<T5BlockWeights> encoder_blocks, decoder_blocks;

private:
    torch::Tensor input_rows(const torch::Tensor& ids) const;
    torch::Tensor feed_forward(const T5BlockWeights& b, const torch::Tensor& x) const;
    double dropout_p() const;

    ModelConfig m_config;
    std::shared_ptr<const PretrainedSpec> m_spec;
};
TORCH_MODULE(T5);

/// Whether a configuration is the T5 family's (built by build_network as a T5Impl).
bool is_t5_config(const ModelConfig& config);

/// One head's relative position bias as a curve over relative distance: what the head adds to a
/// score before the softmax when the key lies `distance` positions after the query (negative:
/// before it). distances[i] = i - span.
struct PositionBiasCurve {
    AttentionKind kind = AttentionKind::encoder_self;  ///< encoder_self or decoder_self
    int head = 0;
    std::vector<float> bias;  ///< 2 span + 1 values, distances -span..span
};

/// Every head's curve, encoder_self heads first, then decoder_self, for distances -span..span
/// (span 0..1048576, ConfigError otherwise). Every layer of a kind adds the same bias (T5 computes
/// it in block 0 and shares it). Empty for a network without relative position biases (every
/// family but T5).
std::vector<PositionBiasCurve> position_bias_curves(const EncoderDecoder& network, int64_t span);

}  // namespace attnviz
