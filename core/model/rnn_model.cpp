// The encoder-decoder with attention. Shapes: B batch, S source steps, T target
// steps, E embedding, H hidden, K key size (H, or 2H when bidirectional),
// A attention size, L layers, V vocabulary.
#include "core/model/rnn_model.hpp"

#include <cmath>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/io/error.hpp"
#include "core/model/device.hpp"
#include "core/model/fused_gru.hpp"
#include "core/model/model_support.hpp"
#include "core/text/text.hpp"
#include "core/text/vocab.hpp"

namespace F = torch::nn::functional;

namespace attnviz {

// --- attention ---------------------------------------------------------------

AttentionImpl::AttentionImpl(Scoring scoring, int64_t query_size, int64_t key_size, int64_t attention_size)
    : m_scoring(scoring), m_key_size(key_size) {
    namespace nn = torch::nn;
    switch (scoring) {
    case Scoring::additive:
        W_k = register_module("W_k", nn::Linear(nn::LinearOptions(key_size, attention_size).bias(false)));
        W_q = register_module("W_q", nn::Linear(nn::LinearOptions(query_size, attention_size).bias(false)));
        w_v = register_module("w_v", nn::Linear(nn::LinearOptions(attention_size, 1).bias(false)));
        break;
    case Scoring::general:
        W_k = register_module("W_k", nn::Linear(nn::LinearOptions(key_size, query_size).bias(false)));
        break;
    case Scoring::dot:
    case Scoring::scaled_dot:
    case Scoring::none:
        break;
    }
}

std::vector<torch::nn::Linear> AttentionImpl::layers() const {
    std::vector<torch::nn::Linear> out;
    for (const auto& layer : {W_k, W_q, w_v})  // registration order
        if (layer) out.push_back(layer);
    return out;
}

torch::Tensor AttentionImpl::project_keys(const torch::Tensor& keys) {
    // keys: [B, S, K] -> [B, S, A] (additive), [B, S, H] (general), keys (dot).
    if (W_k) return W_k->forward(keys);
    return keys;
}

torch::Tensor AttentionImpl::score(const torch::Tensor& query, const torch::Tensor& proj_keys,
                                   const torch::Tensor& mask) {
    torch::Tensor scores;  // [B, S]
    if (m_scoring == Scoring::additive) {
        // w_v^T tanh(W_q q + W_k k): [B, 1, A] + [B, S, A] -> [B, S, 1]
        auto features = torch::tanh(W_q->forward(query).unsqueeze(1) + proj_keys);
        scores = w_v->forward(features).squeeze(-1);
    } else {
        // q^T k (dot, scaled dot) or q^T (W k) (general): [B, S, H] x [B, H, 1]
        scores = torch::bmm(proj_keys, query.unsqueeze(2)).squeeze(2);
        if (m_scoring == Scoring::scaled_dot) scores = scores / std::sqrt(static_cast<double>(m_key_size));
    }
    // Padded positions get -inf, hence exactly 0 after the softmax.
    return scores.masked_fill(mask.logical_not(), -std::numeric_limits<float>::infinity());
}

// --- seq2seq -----------------------------------------------------------------


Seq2SeqImpl::Seq2SeqImpl(const ModelConfig& config) : m_config(config) {
    namespace nn = torch::nn;
    config.validate_for_build();
    ScopedSeed seeded(config.seed);  // the initial weights depend on the seed alone
    const int64_t E = config.embed_size, H = config.hidden_size, L = config.num_layers;
    const int64_t dirs = config.bidirectional ? 2 : 1;
    m_key_size = H * dirs;
    const double rnn_dropout = L > 1 ? config.dropout : 0.0;

    enc_embedding = register_module("enc_embedding", nn::Embedding(config.src_vocab, E));
    dec_embedding = register_module("dec_embedding", nn::Embedding(config.tgt_vocab, E));
    if (config.cell == CellType::gru)
        enc_gru = register_module("enc_rnn", nn::GRU(nn::GRUOptions(E, H).num_layers(L).dropout(rnn_dropout)
                                                          .bidirectional(config.bidirectional).batch_first(true)));
    else
        enc_lstm = register_module("enc_rnn", nn::LSTM(nn::LSTMOptions(E, H).num_layers(L).dropout(rnn_dropout)
                                                            .bidirectional(config.bidirectional).batch_first(true)));
    if (config.bidirectional) bridge = register_module("bridge", nn::Linear(2 * H, H));

    const int64_t A = config.attention_size > 0 ? config.attention_size : H;
    attention = register_module("attention", Attention(config.scoring, H, m_key_size, A));

    // Decoder RNN, one step at a time: layer 0 reads [context; embedding] (d2l's order).
    const int64_t gates = config.cell == CellType::gru ? 3 : 4;
    for (int64_t l = 0; l < L; ++l) {
        const int64_t in = l == 0 ? m_key_size + E : H;
        const double bound = 1.0 / std::sqrt(static_cast<double>(H));  // PyTorch's RNN default
        auto u = [&](std::vector<int64_t> shape) { return torch::empty(shape).uniform_(-bound, bound); };
        const std::string s = std::to_string(l);
        m_w_ih.push_back(register_parameter("dec_rnn_weight_ih_l" + s, u({gates * H, in})));
        m_w_hh.push_back(register_parameter("dec_rnn_weight_hh_l" + s, u({gates * H, H})));
        m_b_ih.push_back(register_parameter("dec_rnn_bias_ih_l" + s, u({gates * H})));
        m_b_hh.push_back(register_parameter("dec_rnn_bias_hh_l" + s, u({gates * H})));
    }
    dropout = register_module("dropout", nn::Dropout(config.dropout));
    dense = register_module("dense", nn::Linear(H, config.tgt_vocab));
    reset_parameters();
}

Seq2SeqImpl::RecurrentWeights Seq2SeqImpl::encoder_layer(int64_t l, bool reverse) const {
    // PyTorch's names for layer l's parameters, "_reverse" for the backward direction.
    const auto p = enc_gru ? enc_gru->named_parameters(/*recurse=*/false)
                           : enc_lstm->named_parameters(/*recurse=*/false);
    const std::string s = std::to_string(l) + (reverse ? "_reverse" : "");
    return {p["weight_ih_l" + s], p["weight_hh_l" + s], p["bias_ih_l" + s], p["bias_hh_l" + s]};
}


RnnEncoding Seq2SeqImpl::encode_states(const torch::Tensor& src, const torch::Tensor& src_len,
                                       const DropoutStream* dropout) {
    return encode_impl(src, src_len, torch::Tensor(), dropout);
}

RnnEncoding Seq2SeqImpl::encode_embedded(const torch::Tensor& src_emb, const torch::Tensor& src_len) {
    // Ids only set the batch's shape here: the embeddings are what the encoder reads.
    const auto shape = torch::zeros({src_emb.size(0), src_emb.size(1)},
                                    torch::TensorOptions().dtype(torch::kLong).device(src_emb.device()));
    return encode_impl(shape, src_len, src_emb, nullptr);
}

RnnEncoding Seq2SeqImpl::encode_impl(const torch::Tensor& src_in, const torch::Tensor& src_len_in,
                                     const torch::Tensor& emb_in, const DropoutStream* dropout) {
    // source_steps (d2l's num_steps): the batch is made N wide and the RNN reads
    // every position, padding included, so its final state comes after the pads;
    // only the attention mask keeps to each sentence's valid length.
    const int64_t N = m_config.source_steps;
    const auto [src, src_len] = N > 0 ? fit_source_steps(src_in, src_len_in, N) : std::make_pair(src_in, src_len_in);
    torch::Tensor emb = emb_in;  // embeddings given: fitted to N as the ids are (padding: <pad>'s embedding)
    if (emb.defined() && N > 0 && emb.size(1) != N)
        emb = emb.size(1) > N ? emb.narrow(1, 0, N)
                              : torch::cat({emb, enc_embedding->forward(torch::full({emb.size(0), N - emb.size(1)},
                                                                                      Vocab::pad_id, src.options()))},
                                           1);
    const int64_t B = src.size(0), S = src.size(1), H = m_config.hidden_size, L = m_config.num_layers;
    RnnEncoding enc;
    enc.src_len = src_len;
    auto lengths_cpu = N > 0 ? torch::full({B}, S, torch::kLong) : src_len.to(torch::kCPU, torch::kLong);
    // Right-to-left reading: reverse each row's valid positions (an involution,
    // applied again to the outputs so that position p is source token p).
    torch::Tensor flip;
    if (m_config.reverse_source) {
        auto pos = torch::arange(S, src.options()).unsqueeze(0).expand({B, S});
        auto len = src_len.to(src.device()).unsqueeze(1);
        flip = torch::where(pos < len, len - 1 - pos, pos);
    }
    auto tokens = flip.defined() ? src.gather(1, flip) : src;
    if (emb.defined())
        encode_packed(flip.defined() ? emb.gather(1, flip.unsqueeze(2).expand_as(emb)) : emb, lengths_cpu, enc);
    else if (encodes_fused())
        encode_fused(tokens, lengths_cpu, enc, dropout);
    else
        encode_packed(enc_embedding->forward(tokens), lengths_cpu, enc);  // embeddings [B, S, E]
    if (flip.defined()) enc.outputs = enc.outputs.gather(1, flip.unsqueeze(2).expand_as(enc.outputs));
    enc.mask = torch::arange(S, src.options()).unsqueeze(0) < src_len.to(src.device()).unsqueeze(1);
    enc.proj_keys = attention->project_keys(enc.outputs);

    if (m_config.bidirectional) {
        // h_n: [L*2, B, H] -> [L, B, 2H] -> bridge -> [L, B, H] (Bahdanau: s0 = tanh(W h1_backward)).
        auto both = enc.h0.view({L, 2, B, H}).permute({0, 2, 1, 3}).reshape({L, B, 2 * H});
        enc.final_ctx = both[L - 1];
        enc.h0 = torch::tanh(bridge->forward(both));
        if (enc_lstm) enc.c0 = torch::zeros_like(enc.h0);
    } else {
        enc.final_ctx = enc.h0[L - 1];
    }
    return enc;
}

void Seq2SeqImpl::encode_packed(const torch::Tensor& emb, const torch::Tensor& lengths_cpu, RnnEncoding& enc) {
    namespace rnn = torch::nn::utils::rnn;
    const int64_t S = emb.size(1);
    auto packed = rnn::pack_padded_sequence(emb, lengths_cpu, /*batch_first=*/true, /*enforce_sorted=*/false);
    auto unpack = [S](const rnn::PackedSequence& p) { return std::get<0>(rnn::pad_packed_sequence(p, true, 0.0, S)); };
    if (enc_gru) {
        auto [out_packed, h] = enc_gru->forward_with_packed_input(packed);
        enc.outputs = unpack(out_packed);  // [B, S, K]
        enc.h0 = h;                        // [L*dirs, B, H]
    } else {
        auto [out_packed, hc] = enc_lstm->forward_with_packed_input(packed);
        enc.outputs = unpack(out_packed);
        std::tie(enc.h0, enc.c0) = hc;
    }
}

namespace {
GateArithmetic gate_arithmetic(bool generic) { return generic ? GateArithmetic::generic : GateArithmetic::automatic; }
}  // namespace

void Seq2SeqImpl::encode_fused(const torch::Tensor& tokens, const torch::Tensor& lengths_cpu, RnnEncoding& enc,
                               const DropoutStream* dropout) {
    // Rows sorted by source length, longest first, packed step-major.
    const int64_t B = tokens.size(0), S = tokens.size(1), H = m_config.hidden_size, L = m_config.num_layers;
    const auto dev = tokens.device();
    const auto packing = pack_by_length(lengths_cpu, S);
    auto pos = torch::tensor(packing.caller_index, torch::kLong).to(dev);
    FusedEncoderInputs in;
    in.tokens = tokens.reshape(-1).index_select(0, pos);
    in.embedding = enc_embedding->weight;
    for (int64_t l = 0; l < L; ++l) {
        const auto w = encoder_layer(l, /*reverse=*/false);
        in.w_ih.push_back(w.w_ih);
        in.w_hh.push_back(w.w_hh);
        in.b_ih.push_back(w.b_ih);
        in.b_hh.push_back(w.b_hh);
    }
    FusedEncoderOptions opts;
    opts.steps = packing.steps;
    opts.dropout = is_training() ? m_config.dropout : 0.0;
    opts.gates = gate_arithmetic(m_generic_gates);
    if (opts.dropout > 0) {
        opts.dropout_keys = dropout_keys(dropout, packing, S);
        opts.dropout_stream = dropout;
    }
    auto out = fused_gru_encoder(in, opts);
    enc.outputs = torch::zeros({B * S, H}, out.outputs.options()).index_copy(0, pos, out.outputs).view({B, S, H});
    // h_n rows are in sorted order; put them back in the caller's.
    enc.h0 = torch::empty_like(out.h_n).index_copy(1, packing.perm.to(dev), out.h_n);
}

RnnState Seq2SeqImpl::init_state(const RnnEncoding& enc) const {
    RnnState state;
    state.h = enc.h0;
    state.c = enc.c0;
    return state;
}

std::shared_ptr<const EncodedSource> RnnEncoding::select(const torch::Tensor& rows) const {
    auto e = std::make_shared<RnnEncoding>();
    e->src_len = src_len.index_select(0, rows);
    e->mask = mask.index_select(0, rows);
    e->outputs = outputs.index_select(0, rows);
    e->proj_keys = proj_keys.index_select(0, rows);
    e->final_ctx = final_ctx.index_select(0, rows);
    e->h0 = h0.index_select(1, rows);
    if (c0.defined()) e->c0 = c0.index_select(1, rows);
    return e;
}

void RnnState::select(const torch::Tensor& rows) {
    h = h.index_select(1, rows);
    if (c.defined()) c = c.index_select(1, rows);
}

std::shared_ptr<const EncodedSource> Seq2SeqImpl::encode(const torch::Tensor& src, const torch::Tensor& src_len, bool) {
    return std::make_shared<RnnEncoding>(encode_states(src, src_len));
}

namespace {
template <typename T, typename Base>
T& as_rnn(Base& x, const char* what) {
    auto* p = dynamic_cast<T*>(&x);
    if (!p) throw std::logic_error(std::string("RNN decoder step: ") + what + " of another model family");
    return *p;
}
}  // namespace

std::unique_ptr<DecoderCache> Seq2SeqImpl::start(const EncodedSource& source) {
    return std::make_unique<RnnState>(init_state(as_rnn<const RnnEncoding>(source, "an encoding")));
}

torch::Tensor Seq2SeqImpl::rnn_step(const torch::Tensor& x, RnnState& state) {
    // x: [B, K+E]; state.h, state.c: [L, B, H]. Returns the top layer's output [B, H].
    const int64_t L = m_config.num_layers;
    std::vector<torch::Tensor> hs, cs;
    auto input = x;
    for (int64_t l = 0; l < L; ++l) {
        if (m_config.cell == CellType::gru) {
            input = torch::gru_cell(input, state.h[l], m_w_ih[l], m_w_hh[l], m_b_ih[l], m_b_hh[l]);
        } else {
            auto hc = torch::lstm_cell(input, {state.h[l], state.c[l]}, m_w_ih[l], m_w_hh[l], m_b_ih[l], m_b_hh[l]);
            input = std::get<0>(hc);
            cs.push_back(std::get<1>(hc));
        }
        hs.push_back(input);
        if (l + 1 < L) input = dropout->forward(input);  // between layers, as nn.GRU(dropout=...)
    }
    state.h = torch::stack(hs);
    if (!cs.empty()) state.c = torch::stack(cs);
    return input;
}

torch::Tensor Seq2SeqImpl::decode_step(const torch::Tensor& x, RnnState& state, const RnnEncoding& enc,
                                       RnnStepRead& read, const AttentionIntervention* intervention) {
    // x: [B, E]. The query is the top layer's previous state (d2l).
    if (m_config.scoring == Scoring::none) {
        read.context = enc.final_ctx;
    } else {
        read.scores = attention->score(state.h[m_config.num_layers - 1], enc.proj_keys, enc.mask);  // [B, S]
        const bool erasing = intervention && intervention->cross_erased.defined();
        if (erasing)  // erased positions out of the softmax: weight 0, the rest renormalised
            read.scores = read.scores.masked_fill(intervention->cross_erased.to(read.scores.device(), torch::kBool),
                                                  -std::numeric_limits<float>::infinity());
        read.weights = torch::softmax(read.scores, -1);
        if (erasing) read.weights = torch::nan_to_num(read.weights, 0.0);  // every position erased: no attention
        if (intervention) {  // what if it had looked elsewhere (or not at all)?
            if (intervention->cross_weights.defined())
                read.weights = intervention->cross_weights.to(read.weights.options());
            for (const auto& off : intervention->heads_off)
                if (off == AttentionMapId{}) read.weights = torch::zeros_like(read.weights);
        }
        read.context = torch::bmm(dropout->forward(read.weights).unsqueeze(1), enc.outputs).squeeze(1);  // [B, K]
        // The one head's gate (core/model/head_gates.hpp) on what it read.
        const auto gate = gate_row(head_gates(), AttentionKind::cross, 0, {}, read.context.device());
        if (gate.defined()) read.context = read.context * gate;
    }
    return rnn_step(torch::cat({read.context, x}, -1), state);  // [B, H]
}

StepOutput Seq2SeqImpl::step(const torch::Tensor& tokens, DecoderCache& cache, const EncodedSource& source,
                              const AttentionIntervention* intervention) {
    auto& state = as_rnn<RnnState>(cache, "a decoder cache");
    const auto& enc = as_rnn<const RnnEncoding>(source, "an encoding");
    RnnStepRead read;
    StepOutput out;
    out.logits = dense->forward(decode_step(dec_embedding->forward(tokens), state, enc, read, intervention));  // [B, V]
    if (read.weights.defined()) out.maps.push_back(StepMap{AttentionMapId{}, read.weights, read.scores});
    out.context = read.context;
    return out;
}

torch::Tensor Seq2SeqImpl::forward(const torch::Tensor& src, const torch::Tensor& src_len,
                                   const torch::Tensor& tgt_in, double teacher_forcing) {
    if (takes_fused_path(teacher_forcing)) return forward_fused(src, src_len, tgt_in);
    return forward_steps(src, src_len, tgt_in, teacher_forcing, nullptr);
}

torch::Tensor Seq2SeqImpl::forward_embedded(const torch::Tensor& src_emb, const torch::Tensor& src_len,
                                            const torch::Tensor& tgt_emb) {
    // Attribution differentiates this pass in evaluation mode, and cuDNN's RNNs have no
    // backward outside training mode: on a GPU the pass runs on LibTorch's own RNN kernels.
    std::optional<CudnnOffGuard> no_cudnn;
    if (src_emb.is_cuda() && !is_training() && torch::GradMode::is_enabled()) no_cudnn.emplace();
    auto enc = encode_embedded(src_emb, src_len);
    auto state = init_state(enc);
    std::vector<torch::Tensor> tops;
    for (int64_t t = 0; t < tgt_emb.size(1); ++t) {
        RnnStepRead read;
        tops.push_back(decode_step(tgt_emb.select(1, t), state, enc, read));
    }
    return dense->forward(torch::stack(tops, 1));  // [B, T, V]
}

torch::Tensor Seq2SeqImpl::forward_with_attention(const torch::Tensor& src, const torch::Tensor& src_len,
                                                  const torch::Tensor& tgt_in, torch::Tensor* attention) {
    return forward_steps(src, src_len, tgt_in, 1.0, attention);
}

torch::Tensor Seq2SeqImpl::forward_steps(const torch::Tensor& src, const torch::Tensor& src_len,
                                         const torch::Tensor& tgt_in, double teacher_forcing,
                                         torch::Tensor* attention_out) {
    const int64_t T = tgt_in.size(1);
    auto enc = encode_states(src, src_len);
    auto state = init_state(enc);
    auto emb = dec_embedding->forward(tgt_in);  // [B, T, E], embedded once for all steps
    const bool sample = teacher_forcing < 1.0;
    std::vector<torch::Tensor> tops, logits, weights;
    torch::Tensor prev_pred;
    for (int64_t t = 0; t < T; ++t) {
        const bool own = t > 0 && sample && torch::rand({1}).item<double>() >= teacher_forcing;
        auto x = own ? dec_embedding->forward(prev_pred) : emb.select(1, t);  // own: the model's last prediction
        RnnStepRead out;
        auto top = decode_step(x, state, enc, out);
        if (attention_out && out.weights.defined()) weights.push_back(out.weights);
        if (sample) {
            logits.push_back(dense->forward(top));
            prev_pred = logits.back().argmax(-1);
        } else {
            tops.push_back(top);
        }
    }
    if (attention_out) *attention_out = weights.empty() ? torch::Tensor() : torch::stack(weights, 1);
    if (sample) return torch::stack(logits, 1);
    return dense->forward(torch::stack(tops, 1));  // [B, T, V], one matmul for all steps
}

bool Seq2SeqImpl::takes_fused_path(double teacher_forcing) const {
    // The fused decoder has no head gate: with gates set, the steps.
    return m_fused && m_config.cell == CellType::gru && teacher_forcing >= 1.0 && !head_gates().any();
}

std::vector<HeadGroup> Seq2SeqImpl::head_groups() const {
    if (!has_attention()) return {};
    return {{AttentionKind::cross, 1, 1}};
}

torch::Tensor Seq2SeqImpl::decode_fused(const torch::Tensor& src, const torch::Tensor& src_len,
                                        const torch::Tensor& tgt_in, LengthPacking& packing,
                                        const DropoutStream* dropout) {
    const int64_t T = tgt_in.size(1);
    const auto dev = tgt_in.device();
    // Rows sorted by target length, longest first, so that step t runs rows
    // [0, n_t). Every row has at least <bos>.
    packing = pack_by_length(tgt_in.ne(Vocab::pad_id).sum(1).to(torch::kCPU, torch::kLong), T);
    auto to_dev = [&](const std::vector<int64_t>& v) { return torch::tensor(v, torch::kLong).to(dev); };
    auto perm_dev = packing.perm.to(dev);
    // The encoder sees the rows in this order: its dropout masks must know each row's place in the batch.
    const DropoutStream* stream = is_training() && m_config.dropout > 0 ? dropout : nullptr;
    DropoutStream sorted_stream;
    if (stream) {
        sorted_stream.seed = stream->seed;
        const int64_t* perm = packing.perm.data_ptr<int64_t>();
        for (int64_t r = 0; r < packing.perm.size(0); ++r) sorted_stream.rows.push_back(stream->batch_row(perm[r]));
    }
    auto enc = encode_states(src.index_select(0, perm_dev), src_len.to(dev).index_select(0, perm_dev),
                             stream ? &sorted_stream : nullptr);
    auto tokens = tgt_in.index_select(0, perm_dev).reshape(-1).index_select(0, to_dev(packing.sorted_index));

    FusedDecoderInputs in;
    in.values = enc.outputs;
    in.mask = enc.mask;
    in.h0 = enc.h0;
    in.tokens = tokens;  // [N]
    in.embedding = dec_embedding->weight;
    for (int64_t l = 0; l < m_config.num_layers; ++l) {
        in.w_ih.push_back(m_w_ih[l]);
        in.w_hh.push_back(m_w_hh[l]);
        in.b_ih.push_back(m_b_ih[l]);
        in.b_hh.push_back(m_b_hh[l]);
    }
    FusedDecoderOptions opts;
    opts.steps = packing.steps;
    opts.dropout = is_training() ? m_config.dropout : 0.0;
    opts.gates = gate_arithmetic(m_generic_gates);
    if (opts.dropout > 0) {
        opts.dropout_keys = dropout_keys(stream, packing, T);
        opts.dropout_stream = stream;
    }
    switch (m_config.scoring) {
    case Scoring::additive:
        opts.scoring = FusedScoring::additive;
        in.proj_keys = enc.proj_keys;
        in.W_q = attention->query_weight();
        in.w_v = attention->score_weight();
        break;
    case Scoring::dot:
    case Scoring::scaled_dot:
    case Scoring::general:
        opts.scoring = FusedScoring::dot_like;
        in.proj_keys = enc.proj_keys;
        if (m_config.scoring == Scoring::scaled_dot) opts.scale = 1.0 / std::sqrt(static_cast<double>(m_key_size));
        break;
    case Scoring::none:
        opts.scoring = FusedScoring::none;
        in.final_ctx = enc.final_ctx;
        break;
    }
    return fused_gru_decoder(in, opts);  // [N, H]
}

torch::Tensor Seq2SeqImpl::forward_fused(const torch::Tensor& src, const torch::Tensor& src_len,
                                         const torch::Tensor& tgt_in) {
    const int64_t B = tgt_in.size(0), T = tgt_in.size(1), V = m_config.tgt_vocab;
    LengthPacking packing;
    auto logits = dense->forward(decode_fused(src, src_len, tgt_in, packing, nullptr));  // [N, V]
    auto rows = torch::tensor(packing.caller_index, torch::kLong).to(tgt_in.device());
    return torch::zeros({B * T, V}, logits.options()).index_copy(0, rows, logits).view({B, T, V});
}

}  // namespace attnviz
