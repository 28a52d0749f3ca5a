#pragma once
// The pretrained family: Hugging Face's Marian (opus-mt) and M2M100/NLLB translation
// models behind the family seam (core/model/encoder_decoder.hpp), as transformers'
// modeling_marian.py and modeling_m2m_100.py define them. One family, because the two
// are one encoder-decoder Transformer with a handful of differences, each a named field
// of PretrainedConfig (core/config/pretrained_config.hpp): post-norm or pre-norm blocks,
// final LayerNorms, the position table, final_logits_bias, the activation. Modules carry
// transformers' names, so named_parameters() are the state_dict names of a model folder:
//
//   model.shared.weight                                     [V, d]   (encoder and decoder embedding; lm_head tied)
//   model.encoder.layers.{k}.self_attn.{q,k,v,out}_proj.{weight,bias}
//   model.encoder.layers.{k}.self_attn_layer_norm.{weight,bias}
//   model.encoder.layers.{k}.fc1.*, fc2.*, final_layer_norm.*
//   model.encoder.embed_positions.weight                    [P + 2, d] (BART, mBART: learned positions)
//   model.encoder.layernorm_embedding.*                     (BART, mBART)
//   model.encoder.layer_norm.*                              (M2M100, mBART)
//   model.decoder.layers.{k}.self_attn.*, self_attn_layer_norm.*, encoder_attn.*, encoder_attn_layer_norm.*,
//                            fc1.*, fc2.*, final_layer_norm.*
//   model.decoder.embed_positions.weight, model.decoder.layernorm_embedding.*   (BART, mBART)
//   model.decoder.layer_norm.*                              (M2M100, mBART)
//   final_logits_bias                                       [1, V]   (Marian, BART, mBART; not trained, as transformers' buffer)
//   model.encoder.embed_tokens.weight, model.decoder.embed_tokens.weight, lm_head.weight
//                                                            (only where the model does not share or tie them)
//
// Vocabulary rows are in attnviz's order (PretrainedSpec's comment): <pad>, <bos>, <eos>,
// <unk>, then the rest. The decoder's first input (<bos>) reads the row of the model's
// decoder_start_token_id; <bos> is never an output (its logit is -inf).
//
// A step records the maps the d2l Transformer records (core/model/transformer_model.hpp):
// first the primary {cross, last layer, head -1: the mean of that layer's heads}, then every
// {cross, l, h} and every {decoder_self, l, h}, weights and the raw scores q·k/√dh; the
// encoding holds every {encoder_self, l, h}. Weights equal transformers' output_attentions.
//
// Shapes: B batch, S source positions, T target positions, d width, h heads, dh = d / h,
// V vocabulary (attnviz's rows: the model's + 1 for <bos>).
#include <cstdint>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "core/config/config.hpp"
#include "core/config/pretrained_config.hpp"
#include "core/model/attention_blocks.hpp"
#include "core/model/encoder_decoder.hpp"

namespace attnviz {

/// transformers' MarianAttention / M2M100Attention: q, k, v and out projections with biases.
class PretrainedAttentionImpl : public torch::nn::Module {
public:
    /// filled: initialised (zeros, torch's Linear init); else allocated, never written (a loader
    /// overwrites every parameter: the untouched pages cost no memory until then).
    PretrainedAttentionImpl(int64_t width, int64_t heads, bool filled = true);
    /// [B, T, d] -> [B, h, T, dh]
    torch::Tensor split_heads(const torch::Tensor& x) const;
    torch::nn::Linear k_proj{nullptr}, v_proj{nullptr}, q_proj{nullptr}, out_proj{nullptr};
    int64_t heads = 1, head_dim = 1;
    double scaling = 1.0;  ///< head_dim^-0.5, applied to q·k as transformers applies it
};
TORCH_MODULE(PretrainedAttention);

/// One encoder layer: self_attn, self_attn_layer_norm, fc1, fc2, final_layer_norm.
class PretrainedEncoderLayerImpl : public torch::nn::Module {
public:
    PretrainedEncoderLayerImpl(const PretrainedConfig& c, bool filled = true);
    PretrainedAttention self_attn{nullptr};
    torch::nn::LayerNorm self_attn_layer_norm{nullptr};
    torch::nn::Linear fc1{nullptr}, fc2{nullptr};
    torch::nn::LayerNorm final_layer_norm{nullptr};
};
TORCH_MODULE(PretrainedEncoderLayer);

/// One decoder layer: self_attn (causal), encoder_attn (cross), the feed-forward network, three LayerNorms.
class PretrainedDecoderLayerImpl : public torch::nn::Module {
public:
    PretrainedDecoderLayerImpl(const PretrainedConfig& c, bool filled = true);
    PretrainedAttention self_attn{nullptr};
    torch::nn::LayerNorm self_attn_layer_norm{nullptr};
    PretrainedAttention encoder_attn{nullptr};
    torch::nn::LayerNorm encoder_attn_layer_norm{nullptr};
    torch::nn::Linear fc1{nullptr}, fc2{nullptr};
    torch::nn::LayerNorm final_layer_norm{nullptr};
};
TORCH_MODULE(PretrainedDecoderLayer);

/// What the encoder hands the decoder.
struct PretrainedEncoding : EncodedSource {
    torch::Tensor output;                ///< [B, S, d] the last layer's output (after the final LayerNorm, M2M100)
    torch::Tensor bias;                  ///< [B, 1, 1, S] 0 at valid positions, -inf at padding
    std::vector<torch::Tensor> weights;  ///< per layer [B, h, S, S] self-attention weights (when kept)
    std::vector<torch::Tensor> scores;   ///< per layer [B, h, S, S] their raw scores (when kept)
    torch::Tensor map_rows;              ///< [B] long, CPU: row b's maps are row map_rows[b] of weights and scores
                                         ///< (select() shares them); undefined: row b's own
    std::shared_ptr<const EncodedSource> select(const torch::Tensor& rows) const override;
    std::vector<AttentionMap> source_maps(int64_t row, int64_t n) const override;
};

/// The decoder's cache: every layer's keys and values.
struct PretrainedCache : DecoderCache {
    int64_t steps = 0;                            ///< tokens fed so far
    torch::Tensor positions_seen;                 ///< [B] long: non-pad tokens fed so far (M2M100's positions)
    std::vector<GrowingSteps> self_k, self_v;     ///< per layer [B, h, steps, dh]
    std::vector<torch::Tensor> cross_k, cross_v;  ///< per layer [B / cross_group, h, S, dh]
    /// Consecutive rows sharing one row of cross_k and cross_v: row r reads row r / cross_group.
    /// Beam search's K rows of a sentence (an encoding selected K times a row, map_rows 0 0 0 0 1
    /// 1 1 1 ...) keep one copy of their sentence's keys: projected once, not K times, and each
    /// step reads them once for all K queries (an opus-mt-sized batch 32 at beam 4: 4x fewer bytes
    /// a step). select() keeps the groups while rows stay within them, else expands to 1.
    int64_t cross_group = 1;
    /// [B] long, CPU: the encoding's map_rows, the source sentence whose keys row b's cross_k and
    /// cross_v hold (undefined: not known). select() leaves them alone when no row changes sentence:
    /// beam search's reordering within a sentence copied all of them every step (a 1,024-token
    /// BART-base-sized source with 4 beams: 151 MB a step), to the same values.
    torch::Tensor cross_rows;
    /// Made empty for `layers` decoder layers over enc (the pretrained family's and T5's start()):
    /// the groups its rows form, their sentences, no step yet. Returns the encoder output's rows
    /// whose keys and values the caller projects into cross_k and cross_v (one per group).
    torch::Tensor begin(const PretrainedEncoding& enc, size_t layers);
    void select(const torch::Tensor& rows) override;
    std::unique_ptr<DecoderCache> clone() const override { return std::make_unique<PretrainedCache>(*this); }
};

/// The pretrained encoder-decoder. Built from config.pretrained with weights at zero, or, with
/// filled = false, allocated and never written: a model folder's weights replace them
/// (core/persist/hf_folder.hpp) without a random model of the same size in memory first (a 300 MB
/// opus-mt would otherwise peak at twice its size). There is no initialisation of its own.
class PretrainedImpl : public EncoderDecoder {
public:
    explicit PretrainedImpl(const ModelConfig& config, bool filled = true);
    const ModelConfig& config() const override { return m_config; }
    const PretrainedConfig& hf() const { return m_spec->model; }
    const PretrainedSpec& spec() const { return *m_spec; }
    /// As the d2l Transformer's, with the encoder's and decoder's own blocks and heads
    /// (core/model/family_costs.cpp).
    MemoryCost memory_cost() const override;
    ShapeCost forward_work() const override;
    /// encoder_self (encoder layers x heads), cross and decoder_self (decoder layers x heads).
    std::vector<HeadGroup> head_groups() const override;

    std::shared_ptr<const EncodedSource> encode(const torch::Tensor& src, const torch::Tensor& src_len,
                                                bool keep_maps = true) override;
    std::unique_ptr<DecoderCache> start(const EncodedSource& source) override;
    /// One token per row; an intervention's cross_weights replace every cross head's weights in
    /// every layer, heads_off zeroes those heads' outputs (head -1: every head of the layer).
    /// Head gates (head_gates()) apply here and in every other pass.
    StepOutput step(const torch::Tensor& tokens, DecoderCache& cache, const EncodedSource& source,
                    const AttentionIntervention* intervention = nullptr) override;
    torch::Tensor embed_source(const torch::Tensor& src) override;
    torch::Tensor embed_target(const torch::Tensor& tgt) override;
    torch::Tensor forward_embedded(const torch::Tensor& src_emb, const torch::Tensor& src_len,
                                   const torch::Tensor& tgt_emb) override;
    torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                          double teacher_forcing = 1.0) override;
    /// The mean cross-entropy over tgt_out's real tokens (transformers' loss with -100 at padding).
    torch::Tensor loss(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                       const torch::Tensor& tgt_out, const LossOptions& options = {}) override;
    TokenLogits real_token_logits(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                                  const torch::Tensor& tgt_out) override;

    /// The encoder over token embeddings emb [B, S, d] (embed_source's, unscaled); src_ids [B, S]
    /// when known (M2M100 counts positions over the non-pad tokens), else positions run 0, 1, ...
    /// keep: every layer's self-attention weights and scores in the result.
    PretrainedEncoding encode_embedded(const torch::Tensor& emb, const torch::Tensor& src_len,
                                       const torch::Tensor& src_ids, bool keep);
    /// The decoder's last hidden state [B, T, d] for target embeddings emb [B, T, d] (teacher forced).
    torch::Tensor decode_embedded(const torch::Tensor& emb, const torch::Tensor& tgt_ids, const PretrainedEncoding& enc);
    /// The output layer: [.., d] -> [.., V] (lm_head + final_logits_bias, <bos> at -inf).
    torch::Tensor output_logits(const torch::Tensor& hidden) const;

    torch::nn::Module* model_module{nullptr};  ///< "model": shared, encoder, decoder
    torch::Tensor shared;                         ///< model.shared.weight (when shared)
    torch::Tensor encoder_embed, decoder_embed;   ///< the embeddings each side reads (views of shared, or own)
    torch::Tensor lm_head;                        ///< the output projection (tied: decoder_embed)
    torch::Tensor final_logits_bias;              ///< [1, V] (zeros when the family has none); never trained
    std::vector<PretrainedEncoderLayer> encoder_layers;
    std::vector<PretrainedDecoderLayer> decoder_layers;
    torch::nn::LayerNorm encoder_norm{nullptr}, decoder_norm{nullptr};  ///< M2M100's and mBART's final LayerNorms
    /// BART's and mBART's learned positions [max_position_embeddings + 2, d] (model.{en,de}coder.embed_positions.weight;
    /// position p reads row p + 2), trained with the rest; undefined for the sinusoid tables.
    torch::Tensor encoder_positions, decoder_positions;
    torch::nn::LayerNorm encoder_embed_norm{nullptr}, decoder_embed_norm{nullptr};  ///< layernorm_embedding (BART, mBART)

private:
    /// Token ids as the embedding reads them: <bos> -> the decoder start row.
    torch::Tensor input_rows(const torch::Tensor& ids) const;
    /// Rows of the position table [B, T] (long) for tokens ids [B, T] whose first `seen` tokens per row came
    /// before (Marian: 0, 1, ...; fairseq: counted over the non-pad tokens; learned: 2, 3, ...).
    torch::Tensor position_ids(const torch::Tensor& ids, const torch::Tensor& seen) const;
    /// The row of the first position when the tokens are not known (embeddings given): 0, 2 or padding_idx + 1.
    int64_t first_position() const;
    /// The position table's rows for positions [B, T] -> [B, T, d] (the decoder's own table when learned).
    torch::Tensor position_rows(const torch::Tensor& positions, bool decoder) const;
    /// emb * scale + positions, then layernorm_embedding (BART, mBART), with dropout in training.
    torch::Tensor embed_with_positions(const torch::Tensor& emb, const torch::Tensor& positions, bool decoder) const;
    torch::Tensor feed_forward(torch::nn::Linear& fc1, torch::nn::Linear& fc2, const torch::Tensor& x) const;
    double dropout_p() const;

    ModelConfig m_config;
    std::shared_ptr<const PretrainedSpec> m_spec;
    torch::Tensor m_positions;  ///< the sinusoid table [P, d], float, CPU (moved with the weights on first use); learned: undefined
    double m_embed_scale = 1.0;
};
TORCH_MODULE(Pretrained);

/// The table of core/config/pretrained_config.hpp's PositionTable for positions 0..n-1, computed
/// as transformers computes it (Marian: in double, then float; fairseq: in float, row
/// padding_idx zero): [n, d] float.
torch::Tensor pretrained_position_table(PositionTable kind, int64_t n, int64_t width, int64_t padding_idx);

}  // namespace attnviz
