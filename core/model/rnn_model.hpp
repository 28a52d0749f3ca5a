#pragma once
// The RNN family: d2l's encoder-decoder with attention (Seq2SeqEncoder +
// Seq2SeqAttentionDecoder, seed 003), with the variants a course asks for:
// GRU or LSTM cells, bidirectional encoder, several scoring functions and a
// no-attention baseline. Names follow d2l so the code reads beside the book.
// Everything else uses it through the family seam (core/model/encoder_decoder.hpp);
// its decoding steps record one cross attention map (layer 0, head 0).
#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/config/config.hpp"
#include "core/model/encoder_decoder.hpp"
#include "core/model/fused_gru.hpp"

namespace attnviz {

/// What the RNN encoder hands to the decoder (EncodedSource's src_len and mask
/// besides); keys are projected once per batch.
struct RnnEncoding : EncodedSource {
    torch::Tensor outputs;    ///< [B, S, K] last layer's hidden states (keys and values), K = H or 2H
    torch::Tensor proj_keys;  ///< [B, S, A] keys after the scorer's key projection (or the keys themselves)
    torch::Tensor final_ctx;  ///< [B, K] the encoder's final state of the last layer (context for Scoring::none)
    torch::Tensor h0;         ///< [L, B, H] decoder's initial hidden state
    torch::Tensor c0;         ///< [L, B, H] decoder's initial cell state (LSTM only, else undefined)
    std::shared_ptr<const EncodedSource> select(const torch::Tensor& rows) const override;
};

/// The RNN decoder's state, carried from step to step.
struct RnnState : DecoderCache {
    torch::Tensor h;  ///< [L, B, H]
    torch::Tensor c;  ///< [L, B, H] (LSTM only)
    void select(const torch::Tensor& rows) override;
    std::unique_ptr<DecoderCache> clone() const override { return std::make_unique<RnnState>(*this); }
};

/// What one RNN decoder step reads of the source.
struct RnnStepRead {
    torch::Tensor scores;   ///< [B, S] raw attention scores before the softmax (padding: -inf); undefined for none
    torch::Tensor weights;  ///< [B, S] attention weights (rows sum to 1, padding 0); undefined for none
    torch::Tensor context;  ///< [B, K] context vector fed to the RNN
};

/// Attention scoring with a padding mask (d2l's AdditiveAttention & co).
class AttentionImpl : public torch::nn::Module {
public:
    AttentionImpl(Scoring scoring, int64_t query_size, int64_t key_size, int64_t attention_size);
    /// keys [B,S,K] -> projected keys [B,S,A], computed once per batch (Joey NMT's compute_proj_keys).
    torch::Tensor project_keys(const torch::Tensor& keys);
    /// query [B,H], proj_keys [B,S,A], mask [B,S] -> raw scores [B,S] (padding = -inf).
    torch::Tensor score(const torch::Tensor& query, const torch::Tensor& proj_keys,
                        const torch::Tensor& mask);
    Scoring scoring() const { return m_scoring; }
    /// Additive scoring's W_q [A, H] and w_v [1, A] (undefined for the other scorings).
    torch::Tensor query_weight() const { return W_q ? W_q->weight : torch::Tensor(); }
    torch::Tensor score_weight() const { return w_v ? w_v->weight : torch::Tensor(); }
    /// The scorer's Linear layers (none to three), in registration order.
    std::vector<torch::nn::Linear> layers() const;

private:
    Scoring m_scoring;
    int64_t m_key_size;
    torch::nn::Linear W_q{nullptr}, W_k{nullptr}, w_v{nullptr};
};
TORCH_MODULE(Attention);

/// The encoder-decoder. forward() runs the whole target sequence with teacher forcing.
class Seq2SeqImpl : public EncoderDecoder {
public:
    explicit Seq2SeqImpl(const ModelConfig& config);
    const ModelConfig& config() const override { return m_config; }

    // --- the family seam (core/model/encoder_decoder.hpp) ---------------------------------
    /// An RnnEncoding (encode_states).
    std::shared_ptr<const EncodedSource> encode(const torch::Tensor& src, const torch::Tensor& src_len,
                                                bool keep_maps = true) override;
    /// An RnnState (init_state).
    std::unique_ptr<DecoderCache> start(const EncodedSource& source) override;
    /// One step on an RnnState and an RnnEncoding: logits, the cross map (layer 0, head 0:
    /// weights and raw scores [B, S]; none for Scoring::none) and the context vector [B, K].
    StepOutput step(const torch::Tensor& tokens, DecoderCache& cache, const EncodedSource& source,
                    const AttentionIntervention* intervention = nullptr) override;
    torch::Tensor embed_source(const torch::Tensor& src) override { return enc_embedding->forward(src); }
    torch::Tensor embed_target(const torch::Tensor& tgt) override { return dec_embedding->forward(tgt); }
    /// Runs the packed encoder (not the fused one) on the embeddings and the decoder step by step.
    torch::Tensor forward_embedded(const torch::Tensor& src_emb, const torch::Tensor& src_len,
                                   const torch::Tensor& tgt_emb) override;
    /// Teacher-forced decoder over tgt_in [B,T] -> logits [B,T,V]. When
    /// teacher_forcing < 1, each step feeds the model's own previous prediction
    /// with probability 1 - teacher_forcing (drawn from the global generator).
    torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                          double teacher_forcing = 1.0) override;
    /// d2l's training loss of a batch: masked_cross_entropy(forward(src, src_len,
    /// tgt_in, teacher_forcing), tgt_out, pad), the mean over non-pad targets.
    /// Where forward() takes the fused path, the output layer and the loss run
    /// as one node over the real target tokens only (core/model/fused_output.hpp):
    /// same value and gradients, no logits for padding; its dropout masks come from
    /// options.dropout when given.
    torch::Tensor loss(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                       const torch::Tensor& tgt_out, const LossOptions& options = {}) override;
    /// trains_fused(teacher_forcing).
    bool trains_in_parts(double teacher_forcing) const override { return trains_fused(teacher_forcing); }
    /// Additive attention's [A] tanh features per (target token, source position) in training,
    /// the keys each hypothesis reads in decoding, one cross map kept (core/model/family_costs.cpp).
    MemoryCost memory_cost() const override;
    ShapeCost forward_work() const override;
    /// cross 1 x 1 with attention (its gate multiplies the context vector); none without.
    std::vector<HeadGroup> head_groups() const override;

    // --- the RNN's own ---------------------------------------------------------------------
    /// src [B,S], src_len [B] -> encoder state, keys projected. With config().source_steps = N > 0
    /// the batch is first made N wide as d2l's pad_or_trim does (src_len clamped to N) and the
    /// RNN runs over all N steps; the state's S is then N and src_len/mask the clamped lengths.
    /// `dropout` (training, fused): the hashed masks' stream, its rows in this batch's order.
    RnnEncoding encode_states(const torch::Tensor& src, const torch::Tensor& src_len,
                              const DropoutStream* dropout = nullptr);
    /// encode_states() from source embeddings [B, S, E] (embed_source's) instead of ids.
    RnnEncoding encode_embedded(const torch::Tensor& src_emb, const torch::Tensor& src_len);
    /// Initial decoder state from the encoder.
    RnnState init_state(const RnnEncoding& enc) const;
    /// forward() with the attention weights [B,T,S] of every step (undefined for none),
    /// always step by step (not the fused path).
    torch::Tensor forward_with_attention(const torch::Tensor& src, const torch::Tensor& src_len,
                                         const torch::Tensor& tgt_in, torch::Tensor* attention);

    /// Applies config().init to every parameter (called by the constructor).
    void reset_parameters();

    /// A GRU model's teacher-forced forward() (training and validation loss)
    /// and a unidirectional GRU encoder run as fused autograd nodes
    /// (core/model/fused_gru.hpp; same maths, faster). false runs them step by step
    /// under autograd, the reference the tests compare with. In the fused
    /// path, logits past a row's target length are 0 (the loss ignores them).
    /// Decoding (step()) is not affected.
    void set_fused_decoder(bool on) { m_fused = on; }
    bool fused_decoder() const { return m_fused; }
    /// Whether loss() runs as fused nodes only, encoder and decoder (a GRU,
    /// unidirectional, fused, full teacher forcing): then all its randomness
    /// is the fused nodes' dropout masks (LossOptions::dropout), which is what lets
    /// core/train/split_step.hpp train parts of a batch on several threads at once.
    bool trains_fused(double teacher_forcing) const;
    /// true runs the fused nodes' backward gate arithmetic with ATen ops on
    /// the CPU too (GateArithmetic::generic, the code CUDA runs), so that CPU
    /// tests check it; false (default) takes the faster CPU loop there.
    void set_fused_generic_gates(bool on) { m_generic_gates = on; }

private:
    /// The decoder step of step() and forward(): x [B,E] embedded input ->
    /// top layer's output [B,H] (before the output layer); read receives the
    /// attention scores and weights [B,S] (undefined for none) and context [B,K].
    torch::Tensor decode_step(const torch::Tensor& x, RnnState& state, const RnnEncoding& enc, RnnStepRead& read,
                              const AttentionIntervention* intervention = nullptr);
    /// The encoder from ids (src) or, when defined, from embeddings (emb [B, S, E]).
    RnnEncoding encode_impl(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& emb,
                            const DropoutStream* dropout);
    torch::Tensor rnn_step(const torch::Tensor& x, RnnState& state);
    torch::Tensor forward_steps(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                                double teacher_forcing, torch::Tensor* attention);
    /// One recurrent layer's parameters in one direction, PyTorch's layout.
    struct RecurrentWeights {
        torch::Tensor w_ih, w_hh, b_ih, b_hh;  ///< [G*H, in], [G*H, H], [G*H], [G*H]; G gates (GRU 3, LSTM 4)
    };
    /// The encoder RNN's layer l (reverse: its backward direction).
    RecurrentWeights encoder_layer(int64_t l, bool reverse) const;
    void encode_packed(const torch::Tensor& emb, const torch::Tensor& lengths_cpu, RnnEncoding& enc);
    void encode_fused(const torch::Tensor& tokens, const torch::Tensor& lengths_cpu, RnnEncoding& enc,
                      const DropoutStream* dropout);
    /// Whether encode() runs the encoder as one fused node.
    bool encodes_fused() const { return m_fused && enc_gru && !m_config.bidirectional; }
    /// Whether forward() and loss() take the fused path.
    bool takes_fused_path(double teacher_forcing) const;
    /// The fused path up to the output layer: the top layer's outputs [N, H]
    /// for the N real target tokens, in packing's order (packing.caller_index
    /// says where each stands in the caller's [B*T] batch).
    torch::Tensor decode_fused(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                               LengthPacking& packing, const DropoutStream* dropout);
    torch::Tensor forward_fused(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in);
    bool m_fused = true;
    bool m_generic_gates = false;
    ModelConfig m_config;
    int64_t m_key_size;
    torch::nn::Embedding enc_embedding{nullptr}, dec_embedding{nullptr};
    torch::nn::GRU enc_gru{nullptr};
    torch::nn::LSTM enc_lstm{nullptr};
    torch::nn::Linear bridge{nullptr};   ///< bidirectional: [2H] -> [H] initial decoder state
    Attention attention{nullptr};
    std::vector<torch::Tensor> m_w_ih, m_w_hh, m_b_ih, m_b_hh;  ///< decoder RNN, one set per layer
    torch::nn::Dropout dropout{nullptr};
    torch::nn::Linear dense{nullptr};
};
TORCH_MODULE(Seq2Seq);

}  // namespace attnviz
