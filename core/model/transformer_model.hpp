#pragma once
// The Transformer family: d2l 1.0.3's encoder-decoder Transformer (section 11.7),
// behind the family seam (core/model/encoder_decoder.hpp). Token embeddings times
// √d plus the sinusoidal positional encoding (with dropout); encoder blocks of
// multi-head self-attention and a position-wise feed-forward network, each followed
// by AddNorm; decoder blocks of causal self-attention, cross-attention over the
// encoder output (masked by the source's valid length) and the feed-forward network;
// an output layer. Parts and parameter names are d2l's (core/model/transformer_layers.hpp),
// so named_parameters() are d2l's state_dict names: encoder.embedding.weight,
// encoder.blks.block0.attention.W_q.weight, ..., decoder.dense.bias.
//
// Decoding feeds one token a step with the keys and values of every layer cached;
// each token gets its true position (ModelConfig::d2l_decode_positions: position 0's,
// as d2l's predict_step). A step records its maps: first the primary one {cross, last
// layer, head -1: the mean of that layer's heads}, then every {cross, l, h} and every
// {decoder_self, l, h}, with weights and the raw scores q·k/√dh; the encoding holds
// every {encoder_self, l, h} (EncodedSource::source_maps).
//
// Shapes: B batch, S source positions, T target positions, d width (hidden_size), h heads,
// dh = d / h, L blocks, V target vocabulary.
#include <cstdint>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "core/config/config.hpp"
#include "core/model/attention_blocks.hpp"
#include "core/model/encoder_decoder.hpp"
#include "core/model/transformer_layers.hpp"

namespace attnviz {

/// What the Transformer's encoder hands the decoder (EncodedSource's src_len and mask besides).
struct TransformerEncoding : EncodedSource {
    torch::Tensor output;                ///< [B, S, d] the last block's output (the cross-attention's keys and
                                         ///< values), or [N, d] packed by layout
    TokenLayout layout;                  ///< where output's tokens lie (packed in training's loss only)
    torch::Tensor row_map;               ///< [B, S] layout.row_map() when the pass runs short_attention(); else undefined
    torch::Tensor bias;                  ///< [B, 1, 1, S] 0 at valid positions, -inf at padding
    std::vector<torch::Tensor> weights;  ///< per block [B, h, S, S]: self-attention weights (when kept)
    std::vector<torch::Tensor> scores;   ///< per block [B, h, S, S]: their raw scores (when kept)
    torch::Tensor map_rows;              ///< [B] long, CPU: row b's maps are row map_rows[b] of weights and scores
                                         ///< (select() shares them); undefined: row b's own
    std::shared_ptr<const EncodedSource> select(const torch::Tensor& rows) const override;
    /// Every {encoder_self, l, h} of row `row` over its first n positions, layer by layer.
    std::vector<AttentionMap> source_maps(int64_t row, int64_t n) const override;
};

/// The decoder's cache: the keys and values of every block, for the steps so far and for the source.
struct TransformerCache : DecoderCache {
    int64_t steps = 0;                            ///< tokens fed so far: the next token's position
    std::vector<GrowingSteps> self_k, self_v;     ///< per block [B, h, steps, dh] (self-attention)
    std::vector<torch::Tensor> cross_k, cross_v;  ///< per block [B, h, S, dh] (the encoder output projected)
    void select(const torch::Tensor& rows) override;
    std::unique_ptr<DecoderCache> clone() const override { return std::make_unique<TransformerCache>(*this); }
};

/// d2l's TransformerEncoder's parameters: embedding and blks.block{i}.
class TransformerEncoderImpl : public torch::nn::Module {
public:
    TransformerEncoderImpl(const ModelConfig& c);
    torch::nn::Embedding embedding{nullptr};
    std::vector<EncoderBlock> blocks;
};
TORCH_MODULE(TransformerEncoder);

/// d2l's TransformerDecoder's parameters: embedding, blks.block{i} and dense.
class TransformerDecoderImpl : public torch::nn::Module {
public:
    TransformerDecoderImpl(const ModelConfig& c);
    torch::nn::Embedding embedding{nullptr};
    std::vector<DecoderBlock> blocks;
    torch::nn::Linear dense{nullptr};
};
TORCH_MODULE(TransformerDecoder);

/// The Transformer encoder-decoder.
class TransformerImpl : public EncoderDecoder {
public:
    /// Builds it with d2l's initialisation (PyTorch's defaults) from config.seed; ConfigError
    /// when the configuration is invalid or not a Transformer's.
    explicit TransformerImpl(const ModelConfig& config);
    const ModelConfig& config() const override { return m_config; }
    /// Encoder self-attention S x S, decoder self-attention T x T and cross-attention T x S
    /// per head and block, the maps kept (core/model/family_costs.cpp).
    MemoryCost memory_cost() const override;
    ShapeCost forward_work() const override;
    /// encoder_self, cross and decoder_self: num_layers x num_heads each.
    std::vector<HeadGroup> head_groups() const override;

    // --- the family seam (core/model/encoder_decoder.hpp) ---------------------------------
    /// A TransformerEncoding with every block's self-attention kept.
    std::shared_ptr<const EncodedSource> encode(const torch::Tensor& src, const torch::Tensor& src_len,
                                                bool keep_maps = true) override;
    /// A TransformerCache with each block's cross-attention keys and values of the source.
    std::unique_ptr<DecoderCache> start(const EncodedSource& source) override;
    /// One token per row at the cache's next position; the maps of the header's comment.
    /// An intervention's cross_weights replace every cross head's weights in every block;
    /// heads_off zeroes the outputs of those cross or decoder_self heads (head -1: every
    /// head of the layer). Head gates (head_gates()) apply in every pass; with gates set the
    /// passes leave short_attention(), which has none.
    StepOutput step(const torch::Tensor& tokens, DecoderCache& cache, const EncodedSource& source,
                    const AttentionIntervention* intervention = nullptr) override;
    torch::Tensor embed_source(const torch::Tensor& src) override { return encoder->embedding->forward(src); }
    torch::Tensor embed_target(const torch::Tensor& tgt) override { return decoder->embedding->forward(tgt); }
    torch::Tensor forward_embedded(const torch::Tensor& src_emb, const torch::Tensor& src_len,
                                   const torch::Tensor& tgt_emb) override;
    /// Teacher forcing: all T positions at once under the causal mask. teacher_forcing < 1:
    /// step by step, each step feeding the model's own previous prediction with probability
    /// 1 - teacher_forcing (drawn from the global generator).
    torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                          double teacher_forcing = 1.0) override;
    /// The mean cross-entropy over tgt_out's real tokens, the output layer run for them only;
    /// dropout masks hashed from options.dropout when given.
    torch::Tensor loss(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                       const torch::Tensor& tgt_out, const LossOptions& options = {}) override;
    /// loss()'s packed computation, without dropout in eval mode: the output layer on the real tokens only.
    TokenLogits real_token_logits(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                                  const torch::Tensor& tgt_out) override;
    /// With full teacher forcing every mask comes from LossOptions::dropout: parts of a batch may train at once.
    bool trains_in_parts(double teacher_forcing) const override { return teacher_forcing >= 1.0; }

    // --- the Transformer's own ---------------------------------------------------------------
    /// The encoder over embeddings emb [B, S, d] (embed_source's, before √d and the positions).
    /// keep: every block's self-attention weights and scores in the result. pack: the
    /// position-wise work on the real tokens only (TokenLayout), output packed. short_kernel:
    /// self-attention through short_attention() (keep false; the caller checked short_fits()).
    TransformerEncoding encode_embedded(const torch::Tensor& emb, const torch::Tensor& src_len,
                                        const Dropout& dropout, bool keep, bool pack = false,
                                        bool short_kernel = false);
    /// The decoder's last block output for target embeddings emb [B, T, d] (teacher forced):
    /// [B, T, d], or [N, d] for the tokens of `layout` when it is packed.
    /// Attention through short_attention() where enc was encoded so (enc.row_map defined).
    torch::Tensor decode_embedded(const torch::Tensor& emb, const TransformerEncoding& enc, const Dropout& dropout,
                                  const TokenLayout& layout = {});
    /// Whether short_attention() can run a pass of S source and T target positions of this
    /// model's weights on `device` with this dropout: float32 weights on the CPU, S and T at
    /// most k_short_attention_max_steps, dropout off or hashed.
    bool short_fits(const torch::Device& device, int64_t S, int64_t T, const Dropout& dropout) const;

    TransformerEncoder encoder{nullptr};
    TransformerDecoder decoder{nullptr};

private:
    /// The logits of tgt_out's real tokens with full teacher forcing, laid out as options say
    /// (packed or the grid), dropout from options.dropout: loss() and real_token_logits().
    TokenLogits token_logits(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                             const torch::Tensor& tgt_out, const LossOptions& options);
    /// The positional encoding of positions [first, first + n): [n, d] on `device`.
    torch::Tensor positions(int64_t first, int64_t n, const torch::Device& device) const;
    /// emb * √d + positions, with dropout: d2l's pos_encoding(embedding(X) * √d); packed by layout.
    torch::Tensor embed_positions(const torch::Tensor& emb, int64_t first, const Dropout& dropout, uint64_t which,
                                  const TokenLayout& layout = {}) const;
    /// Dropout of this mode (training: config().dropout), hashed from stream when given.
    Dropout dropout_for(const DropoutStream* stream) const;
    ModelConfig m_config;
    torch::Tensor m_positions;  ///< [P, d] d2l's table for the first P positions (CPU)
};
TORCH_MODULE(Transformer);

}  // namespace attnviz
