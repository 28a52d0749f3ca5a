// The pretrained family (Marian, M2M100/NLLB) behind the family seam (core/model/pretrained_model.hpp).
#include "core/model/pretrained_model.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

#include "core/io/error.hpp"
#include "core/model/attention_blocks.hpp"
#include "core/model/inference_precision.hpp"
#include "core/model/small_linear.hpp"
#include "core/text/vocab.hpp"

namespace F = torch::nn::functional;

namespace attnviz {

namespace {

/// A linear layer's x W^T + b: a decoder step's few rows on both threads (few_rows_linear,
/// small_linear.hpp), anything else (training, an encoder's sentence) through ATen.
torch::Tensor project(const torch::nn::Linear& layer, const torch::Tensor& x) {
    return precision_linear(x, layer->weight, layer->bias);  // int8 / bf16 weights too (--precision)
}

constexpr float k_neg_inf = -std::numeric_limits<float>::infinity();

/// What one attention computed for every head.
struct Heads {
    torch::Tensor out;      ///< [B, T, d] after out_proj
    torch::Tensor weights;  ///< [B, h, Tq, Tk] when kept
    torch::Tensor scores;   ///< [B, h, Tq, Tk] q·k·scaling before the mask, -inf at masked keys, when kept
};

/// transformers' eager attention (attend_heads, with the layer's scaling), then out_proj.
Heads attend(PretrainedAttentionImpl& a, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
             const torch::Tensor& bias, double dropout, bool training, bool keep,
             const torch::Tensor& weights_given = {}, const torch::Tensor& keep_heads = {},
             bool zero_empty_rows = false) {
    auto heads = attend_heads(q, k, v, a.scaling, bias, dropout, training, keep, weights_given, keep_heads,
                              zero_empty_rows);
    return {project(a.out_proj, heads.merged), std::move(heads.weights), std::move(heads.scores)};
}

torch::nn::LayerNorm layer_norm(const PretrainedConfig& c) {
    return torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model}).eps(c.layer_norm_eps));
}

/// A Linear layer [out, in] with bias: torch's initialisation when filled, else allocated and never
/// written (built as 1 x 1, then given its real shape), so that no random copy of the weights is
/// ever resident beside the loaded ones.
torch::nn::Linear pretrained_linear(int64_t in, int64_t out, bool filled) {
    if (filled) return torch::nn::Linear(in, out);
    torch::nn::Linear layer(torch::nn::LinearOptions(1, 1));
    layer->weight.set_data(torch::empty({out, in}));
    layer->bias.set_data(torch::empty({out}));
    layer->options.in_features(in).out_features(out);
    return layer;
}

/// A matrix of a slice [n, n] as rows.
AttentionMatrix to_matrix(const torch::Tensor& m) {
    const auto c = m.to(torch::kCPU, torch::kFloat).contiguous();
    AttentionMatrix out(static_cast<size_t>(c.size(0)));
    const float* p = c.data_ptr<float>();
    for (int64_t r = 0; r < c.size(0); ++r) out[static_cast<size_t>(r)].assign(p + r * c.size(1), p + (r + 1) * c.size(1));
    return out;
}

}  // namespace

torch::Tensor pretrained_position_table(PositionTable kind, int64_t n, int64_t width, int64_t padding_idx) {
    if (kind == PositionTable::marian) {
        // MarianSinusoidalPositionalEmbedding.create_weight: angles in double (numpy), sin of the even
        // columns' angles in the first half, cos of the odd columns' in the second, then float.
        auto table = torch::empty({n, width}, torch::kDouble);
        auto t = table.accessor<double, 2>();
        const int64_t half = width / 2 + width % 2;
        for (int64_t p = 0; p < n; ++p)
            for (int64_t j = 0; j < width; ++j) {
                const double angle = static_cast<double>(p) / std::pow(10000.0, 2.0 * static_cast<double>(j / 2) / width);
                if (j % 2 == 0) t[p][j / 2] = std::sin(angle);
                else t[p][half + j / 2] = std::cos(angle);
            }
        return table.to(torch::kFloat);
    }
    // M2M100SinusoidalPositionalEmbedding.get_embedding: in float, as transformers computes it.
    const int64_t half = width / 2;
    const double step = std::log(10000.0) / static_cast<double>(half - 1);
    auto freq = torch::exp(torch::arange(half, torch::kLong).to(torch::kFloat) * -step);
    auto angles = torch::arange(n, torch::kLong).to(torch::kFloat).unsqueeze(1) * freq.unsqueeze(0);
    auto table = torch::cat({torch::sin(angles), torch::cos(angles)}, 1).view({n, -1});
    if (width % 2 == 1) table = torch::cat({table, torch::zeros({n, 1})}, 1);
    if (padding_idx >= 0 && padding_idx < n) table[padding_idx].zero_();
    return table;
}

// --- modules ----------------------------------------------------------------------

PretrainedAttentionImpl::PretrainedAttentionImpl(int64_t width, int64_t h, bool filled)
    : heads(h), head_dim(width / h) {
    scaling = std::pow(static_cast<double>(head_dim), -0.5);
    // transformers' order: k, v, q, out.
    k_proj = register_module("k_proj", pretrained_linear(width, width, filled));
    v_proj = register_module("v_proj", pretrained_linear(width, width, filled));
    q_proj = register_module("q_proj", pretrained_linear(width, width, filled));
    out_proj = register_module("out_proj", pretrained_linear(width, width, filled));
}

torch::Tensor PretrainedAttentionImpl::split_heads(const torch::Tensor& x) const {
    return x.view({x.size(0), x.size(1), heads, head_dim}).transpose(1, 2);
}

PretrainedEncoderLayerImpl::PretrainedEncoderLayerImpl(const PretrainedConfig& c, bool filled) {
    self_attn = register_module("self_attn", PretrainedAttention(c.d_model, c.encoder_heads, filled));
    self_attn_layer_norm = register_module("self_attn_layer_norm", layer_norm(c));
    fc1 = register_module("fc1", pretrained_linear(c.d_model, c.encoder_ffn, filled));
    fc2 = register_module("fc2", pretrained_linear(c.encoder_ffn, c.d_model, filled));
    final_layer_norm = register_module("final_layer_norm", layer_norm(c));
}

PretrainedDecoderLayerImpl::PretrainedDecoderLayerImpl(const PretrainedConfig& c, bool filled) {
    self_attn = register_module("self_attn", PretrainedAttention(c.d_model, c.decoder_heads, filled));
    self_attn_layer_norm = register_module("self_attn_layer_norm", layer_norm(c));
    encoder_attn = register_module("encoder_attn", PretrainedAttention(c.d_model, c.decoder_heads, filled));
    encoder_attn_layer_norm = register_module("encoder_attn_layer_norm", layer_norm(c));
    fc1 = register_module("fc1", pretrained_linear(c.d_model, c.decoder_ffn, filled));
    fc2 = register_module("fc2", pretrained_linear(c.decoder_ffn, c.d_model, filled));
    final_layer_norm = register_module("final_layer_norm", layer_norm(c));
}

PretrainedImpl::PretrainedImpl(const ModelConfig& config, bool filled) : m_config(config), m_spec(config.pretrained) {
    config.validate_for_build();
    if (!config.is_pretrained() || !m_spec) throw ConfigError("model: not a pretrained model's configuration");
    const PretrainedConfig& c = m_spec->model;
    const int64_t Vs = config.src_vocab, Vt = config.tgt_vocab, d = c.d_model;
    if (c.share_embeddings && Vs != Vt)
        throw ConfigError("model: a model sharing its embeddings needs one vocabulary (" + std::to_string(Vs) + " / " +
                          std::to_string(Vt) + " rows)");
    torch::NoGradGuard no_grad;
    // The vocabulary matrices [V, d] (embeddings, the output projection) row-major, as every
    // linear layer: a decoder step's output projection is one dot product per vocabulary row
    // (few_rows_linear), reading the matrix front to back. (They were column-major from 9207c26 to
    // 2026-11-30, when MKL packed a row-major matrix on every few-row call; few_rows_linear reads
    // the row-major one 1.3-1.6x faster than the column-major kernel did: docs/benchmarks.md.)
    const auto matrix = [filled](int64_t rows, int64_t cols) {
        return filled ? torch::zeros({rows, cols}) : torch::empty({rows, cols});
    };
    auto model = register_module("model", std::make_shared<torch::nn::Module>());
    model_module = model.get();
    if (c.share_embeddings) {
        auto holder = model->register_module("shared", std::make_shared<torch::nn::Module>());
        shared = holder->register_parameter("weight", matrix(Vs, d));
        encoder_embed = decoder_embed = shared;
    }
    auto encoder = model->register_module("encoder", std::make_shared<torch::nn::Module>());
    auto decoder = model->register_module("decoder", std::make_shared<torch::nn::Module>());
    if (!c.share_embeddings) {
        encoder_embed = encoder->register_module("embed_tokens", std::make_shared<torch::nn::Module>())
                            ->register_parameter("weight", matrix(Vs, d));
        decoder_embed = decoder->register_module("embed_tokens", std::make_shared<torch::nn::Module>())
                            ->register_parameter("weight", matrix(Vt, d));
    }
    // BART's learned positions: [max_position_embeddings + 2, d], each side its own (transformers' order:
    // embed_tokens, embed_positions, layers, layernorm_embedding, layer_norm).
    const bool learned = c.positions == PositionTable::learned;
    const auto positions_table = [&](torch::nn::Module& side) {
        return side.register_module("embed_positions", std::make_shared<torch::nn::Module>())
            ->register_parameter("weight", filled ? torch::zeros({c.max_positions + 2, d}) : torch::empty({c.max_positions + 2, d}));
    };
    if (learned) encoder_positions = positions_table(*encoder);
    auto enc_layers = encoder->register_module("layers", torch::nn::ModuleList());
    for (int64_t l = 0; l < c.encoder_layers; ++l) {
        encoder_layers.push_back(PretrainedEncoderLayer(c, filled));
        enc_layers->push_back(encoder_layers.back());
    }
    if (c.layernorm_embedding) encoder_embed_norm = encoder->register_module("layernorm_embedding", layer_norm(c));
    if (c.final_layer_norms) encoder_norm = encoder->register_module("layer_norm", layer_norm(c));
    if (learned) decoder_positions = positions_table(*decoder);
    auto dec_layers = decoder->register_module("layers", torch::nn::ModuleList());
    for (int64_t l = 0; l < c.decoder_layers; ++l) {
        decoder_layers.push_back(PretrainedDecoderLayer(c, filled));
        dec_layers->push_back(decoder_layers.back());
    }
    if (c.layernorm_embedding) decoder_embed_norm = decoder->register_module("layernorm_embedding", layer_norm(c));
    if (c.final_layer_norms) decoder_norm = decoder->register_module("layer_norm", layer_norm(c));
    lm_head = c.tie_word_embeddings
                  ? decoder_embed
                  : register_module("lm_head", std::make_shared<torch::nn::Module>())
                        ->register_parameter("weight", matrix(Vt, d));
    // transformers keeps final_logits_bias as a buffer: loaded and saved, never trained.
    final_logits_bias = c.final_logits_bias ? register_parameter("final_logits_bias", torch::zeros({1, Vt}),
                                                                 /*requires_grad=*/false)
                                            : torch::zeros({1, Vt});
    m_embed_scale = c.scale_embedding ? std::sqrt(static_cast<double>(d)) : 1.0;
    const int64_t rows = c.positions == PositionTable::fairseq ? c.max_positions + 2 : c.max_positions;
    if (!learned) m_positions = pretrained_position_table(c.positions, rows, d, c.pad_token_id);
}

double PretrainedImpl::dropout_p() const { return is_training() ? hf().dropout : 0.0; }

torch::Tensor PretrainedImpl::input_rows(const torch::Tensor& ids) const {
    return ids.masked_fill(ids.eq(Vocab::bos_id), m_spec->decoder_start_row);
}

namespace {
/// torch::embedding(weight, ids, pad), or the rows of an int8 / bf16 vocabulary matrix (--precision).
/// The pad row gets no gradient, as embedding's padding_idx gives it none.
torch::Tensor lookup_rows(const torch::Tensor& weight, const torch::Tensor& ids, int64_t pad) {
    if (auto rows = converted_rows(weight, ids); rows.defined()) return rows;
    return torch::embedding(weight, ids, pad);
}
}  // namespace

torch::Tensor PretrainedImpl::embed_source(const torch::Tensor& src) {
    return lookup_rows(encoder_embed, input_rows(src), Vocab::pad_id);
}

torch::Tensor PretrainedImpl::embed_target(const torch::Tensor& tgt) {
    return lookup_rows(decoder_embed, input_rows(tgt), Vocab::pad_id);
}

torch::Tensor PretrainedImpl::position_ids(const torch::Tensor& ids, const torch::Tensor& seen) const {
    const auto& c = hf();
    if (c.positions != PositionTable::fairseq) {
        // Marian: 0, 1, ... after the steps before, whatever the tokens; BART the same, 2 rows on.
        auto pos = torch::arange(ids.size(1), ids.options().dtype(torch::kLong)).unsqueeze(0).expand({ids.size(0), -1}) +
                   first_position();
        return seen.defined() ? pos + seen.unsqueeze(1) : pos;
    }
    // fairseq's make_positions: non-pad tokens count from padding_idx + 1, pads sit at padding_idx.
    auto real = ids.ne(Vocab::pad_id).to(torch::kLong);
    auto count = real.cumsum(1);
    if (seen.defined()) count = count + seen.unsqueeze(1);
    return count * real + c.pad_token_id;
}

int64_t PretrainedImpl::first_position() const {
    const auto& c = hf();
    return c.positions == PositionTable::fairseq ? c.pad_token_id + 1 : c.positions == PositionTable::learned ? 2 : 0;
}

torch::Tensor PretrainedImpl::position_rows(const torch::Tensor& positions, bool decoder) const {
    const int64_t need = positions.numel() == 0 ? 0 : positions.max().item<int64_t>() + 1;
    const auto& c = hf();
    if (c.positions == PositionTable::learned) {
        // BartLearnedPositionalEmbedding: a trained table, read (and trained) as an embedding.
        const torch::Tensor& table = decoder ? decoder_positions : encoder_positions;
        if (need > table.size(0))
            throw ConfigError("model: position " + std::to_string(need - 3) + " is past the model's " +
                              std::to_string(c.max_positions) + " positions (max_position_embeddings)");
        return table.index_select(0, positions.reshape(-1).to(table.device())).view({positions.size(0), positions.size(1), -1});
    }
    torch::Tensor table = m_positions;
    if (need > table.size(0)) {
        if (c.positions == PositionTable::marian)
            throw ConfigError("model: position " + std::to_string(need - 1) + " is past the model's " +
                              std::to_string(c.max_positions) + " positions (max_position_embeddings)");
        table = pretrained_position_table(c.positions, need + 2, c.d_model, c.pad_token_id);  // transformers grows it too
    }
    return table.to(positions.device()).index_select(0, positions.reshape(-1)).view({positions.size(0), positions.size(1), -1});
}

torch::Tensor PretrainedImpl::embed_with_positions(const torch::Tensor& emb, const torch::Tensor& positions,
                                                   bool decoder) const {
    auto x = emb * m_embed_scale + position_rows(positions, decoder).to(emb.scalar_type());
    if (hf().layernorm_embedding) {
        const auto& norm = decoder ? decoder_embed_norm : encoder_embed_norm;
        x = torch::layer_norm(x, {x.size(-1)}, norm->weight, norm->bias, norm->options.eps());
    }
    return dropout_p() > 0 ? torch::dropout(x, dropout_p(), true) : x;
}

torch::Tensor PretrainedImpl::feed_forward(torch::nn::Linear& fc1, torch::nn::Linear& fc2,
                                           const torch::Tensor& x) const {
    auto h = activate(hf().activation, project(fc1, x));
    if (is_training() && hf().activation_dropout > 0) h = torch::dropout(h, hf().activation_dropout, true);
    h = project(fc2, h);
    return dropout_p() > 0 ? torch::dropout(h, dropout_p(), true) : h;
}

torch::Tensor PretrainedImpl::output_logits(const torch::Tensor& hidden) const {
    // A beam's few rows at batch 1: the 122 MB matrix read once, front to back, not packed anew per
    // token (few_rows_linear, small_linear.hpp); int8 / bf16 weights too (--precision).
    auto logits = precision_linear(hidden, lm_head);
    // <bos> is attnviz's, not the model's: never an output, out of every softmax.
    return finish_logits(std::move(logits), final_logits_bias, Vocab::bos_id, k_neg_inf);
}

// --- encoder ----------------------------------------------------------------------

PretrainedEncoding PretrainedImpl::encode_embedded(const torch::Tensor& emb, const torch::Tensor& src_len,
                                                   const torch::Tensor& src_ids, bool keep) {
    const auto& c = hf();
    const int64_t B = emb.size(0), S = emb.size(1);
    PretrainedEncoding enc;
    enc.src_len = src_len;
    enc.mask = torch::arange(S, src_len.options().device(emb.device())).unsqueeze(0) <
               src_len.to(emb.device()).unsqueeze(1);
    enc.bias = key_bias(enc.mask);
    // Positions: from the ids where known (M2M100 skips pads), else 0, 1, ... as transformers does for embeddings.
    torch::Tensor positions;
    if (src_ids.defined()) positions = position_ids(src_ids, {});
    else positions = torch::arange(S, torch::TensorOptions().dtype(torch::kLong).device(emb.device())).unsqueeze(0).expand({B, S}) +
                     first_position();
    auto x = embed_with_positions(emb, positions, /*decoder=*/false);
    const double attn_p = is_training() ? c.attention_dropout : 0.0;
    int64_t layer_index = 0;
    StepThreads threads(B * S);  // all threads or one, as its layers run faster (core/model/small_linear.hpp)
    for (auto& layer : encoder_layers) {
        threads.next_step();
        auto& a = *layer->self_attn;
        auto residual = x;
        auto h = c.normalize_before ? layer->self_attn_layer_norm->forward(x) : x;
        auto att = attend(a, a.split_heads(project(a.q_proj, h)), a.split_heads(project(a.k_proj, h)),
                          a.split_heads(project(a.v_proj, h)), enc.bias, attn_p, is_training(), keep, {},
                          gate_row(head_gates(), AttentionKind::encoder_self, layer_index++, {}, x.device()));
        auto o = dropout_p() > 0 ? torch::dropout(att.out, dropout_p(), true) : att.out;
        x = residual + o;
        if (!c.normalize_before) x = layer->self_attn_layer_norm->forward(x);
        residual = x;
        h = c.normalize_before ? layer->final_layer_norm->forward(x) : x;
        x = residual + feed_forward(layer->fc1, layer->fc2, h);
        if (!c.normalize_before) x = layer->final_layer_norm->forward(x);
        if (keep) {
            enc.weights.push_back(att.weights);
            enc.scores.push_back(att.scores);
        }
    }
    if (c.final_layer_norms) x = encoder_norm->forward(x);
    enc.output = x;
    return enc;
}

std::vector<HeadGroup> PretrainedImpl::head_groups() const {
    const auto& c = hf();
    const int E = static_cast<int>(c.encoder_layers), D = static_cast<int>(c.decoder_layers);
    return {{AttentionKind::encoder_self, E, static_cast<int>(c.encoder_heads)},
            {AttentionKind::cross, D, static_cast<int>(c.decoder_heads)},
            {AttentionKind::decoder_self, D, static_cast<int>(c.decoder_heads)}};
}

std::shared_ptr<const EncodedSource> PretrainedImpl::encode(const torch::Tensor& src, const torch::Tensor& src_len,
                                                            bool keep_maps) {
    return std::make_shared<PretrainedEncoding>(encode_embedded(embed_source(src), src_len, src, keep_maps));
}

std::shared_ptr<const EncodedSource> PretrainedEncoding::select(const torch::Tensor& rows) const {
    auto e = std::make_shared<PretrainedEncoding>();
    e->src_len = src_len.index_select(0, rows.to(src_len.device()));
    e->mask = mask.index_select(0, rows);
    e->bias = bias.index_select(0, rows);
    e->output = output.index_select(0, rows);
    // The maps are shared, not copied: beam search selects each row K times.
    e->weights = weights;
    e->scores = scores;
    const auto host_rows = rows.to(torch::kCPU, torch::kLong);
    e->map_rows = map_rows.defined() ? map_rows.index_select(0, host_rows) : host_rows;
    return e;
}

std::vector<AttentionMap> PretrainedEncoding::source_maps(int64_t row, int64_t n) const {
    std::vector<AttentionMap> maps;
    if (map_rows.defined()) row = map_rows[row].item<int64_t>();
    for (size_t l = 0; l < weights.size(); ++l) {
        const int64_t k = std::min(n, weights[l].size(-1));
        for (int64_t h = 0; h < weights[l].size(1); ++h) {
            AttentionMap m;
            m.id = {AttentionKind::encoder_self, static_cast<int>(l), static_cast<int>(h)};
            m.weights = to_matrix(weights[l][row][h].narrow(0, 0, k).narrow(1, 0, k));
            if (l < scores.size()) m.scores = to_matrix(scores[l][row][h].narrow(0, 0, k).narrow(1, 0, k));
            maps.push_back(std::move(m));
        }
    }
    return maps;
}

// --- decoder, teacher forced ------------------------------------------------------------

torch::Tensor PretrainedImpl::decode_embedded(const torch::Tensor& emb, const torch::Tensor& tgt_ids,
                                              const PretrainedEncoding& enc) {
    const auto& c = hf();
    const int64_t B = emb.size(0), T = emb.size(1);
    torch::Tensor positions;
    if (tgt_ids.defined()) positions = position_ids(input_rows(tgt_ids), {});
    else positions = torch::arange(T, torch::TensorOptions().dtype(torch::kLong).device(emb.device())).unsqueeze(0).expand({B, T}) +
                     first_position();
    auto y = embed_with_positions(emb, positions, /*decoder=*/true);
    const auto causal = torch::full({T, T}, k_neg_inf, torch::TensorOptions().device(emb.device())).triu(1);
    const double attn_p = is_training() ? c.attention_dropout : 0.0;
    int64_t layer_index = 0;
    for (auto& layer : decoder_layers) {
        auto& sa = *layer->self_attn;
        auto& ca = *layer->encoder_attn;
        auto residual = y;
        auto h = c.normalize_before ? layer->self_attn_layer_norm->forward(y) : y;
        auto self = attend(sa, sa.split_heads(project(sa.q_proj, h)), sa.split_heads(project(sa.k_proj, h)),
                           sa.split_heads(project(sa.v_proj, h)), causal, attn_p, is_training(), false, {},
                           gate_row(head_gates(), AttentionKind::decoder_self, layer_index, {}, y.device()));
        y = residual + (dropout_p() > 0 ? torch::dropout(self.out, dropout_p(), true) : self.out);
        if (!c.normalize_before) y = layer->self_attn_layer_norm->forward(y);
        residual = y;
        h = c.normalize_before ? layer->encoder_attn_layer_norm->forward(y) : y;
        auto cross = attend(ca, ca.split_heads(project(ca.q_proj, h)), ca.split_heads(project(ca.k_proj, enc.output)),
                            ca.split_heads(project(ca.v_proj, enc.output)), enc.bias, attn_p, is_training(), false, {},
                            gate_row(head_gates(), AttentionKind::cross, layer_index, {}, y.device()));
        ++layer_index;
        y = residual + (dropout_p() > 0 ? torch::dropout(cross.out, dropout_p(), true) : cross.out);
        if (!c.normalize_before) y = layer->encoder_attn_layer_norm->forward(y);
        residual = y;
        h = c.normalize_before ? layer->final_layer_norm->forward(y) : y;
        y = residual + feed_forward(layer->fc1, layer->fc2, h);
        if (!c.normalize_before) y = layer->final_layer_norm->forward(y);
    }
    if (c.final_layer_norms) y = decoder_norm->forward(y);
    return y;
}

torch::Tensor PretrainedImpl::forward_embedded(const torch::Tensor& src_emb, const torch::Tensor& src_len,
                                               const torch::Tensor& tgt_emb) {
    const auto enc = encode_embedded(src_emb, src_len, {}, /*keep=*/false);
    return output_logits(decode_embedded(tgt_emb, {}, enc));
}

torch::Tensor PretrainedImpl::forward(const torch::Tensor& src, const torch::Tensor& src_len,
                                      const torch::Tensor& tgt_in, double teacher_forcing) {
    if (teacher_forcing >= 1.0) {
        const auto enc = encode_embedded(embed_source(src), src_len, src, /*keep=*/false);
        return output_logits(decode_embedded(embed_target(tgt_in), tgt_in, enc));
    }
    return sampled_forward(*this, src, src_len, tgt_in, teacher_forcing);
}

TokenLogits PretrainedImpl::real_token_logits(const torch::Tensor& src, const torch::Tensor& src_len,
                                              const torch::Tensor& tgt_in, const torch::Tensor& tgt_out) {
    const auto enc = encode_embedded(embed_source(src), src_len, src, /*keep=*/false);
    const auto hidden = decode_embedded(embed_target(tgt_in), tgt_in, enc);  // [B, T, d]
    const auto flat = tgt_out.reshape(-1);
    const auto rows = flat.ne(Vocab::pad_id).nonzero().squeeze(1);
    // The output layer over the real target tokens only: at a 59k vocabulary it is most of the work.
    return {output_logits(hidden.reshape({-1, hidden.size(-1)}).index_select(0, rows)), flat.index_select(0, rows)};
}

torch::Tensor PretrainedImpl::loss(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                                   const torch::Tensor& tgt_out, const LossOptions& options) {
    if (options.teacher_forcing < 1.0)
        return masked_cross_entropy(forward(src, src_len, tgt_in, options.teacher_forcing), tgt_out, Vocab::pad_id);
    const TokenLogits t = real_token_logits(src, src_len, tgt_in, tgt_out);
    return F::cross_entropy(t.logits, t.targets);
}

// --- decoder, one step at a time -------------------------------------------------------

std::unique_ptr<DecoderCache> PretrainedImpl::start(const EncodedSource& source) {
    const auto& enc = family_part<const PretrainedEncoding>(source, "pretrained", "an encoding");
    auto cache = std::make_unique<PretrainedCache>();
    const auto sources = cache->begin(enc, decoder_layers.size());  // a beam's sentence once
    for (auto& layer : decoder_layers) {
        auto& a = *layer->encoder_attn;
        // Contiguous per head: a step's scores multiply by k's transpose, which a head-split view
        // of several rows (a beam's) could not pass to the batched product without copying all of
        // it at every step (a 1,024-token source, 4 beams: 75 MB a step, 18% of the time).
        cache->cross_k.push_back(a.split_heads(project(a.k_proj, sources)).contiguous());
        cache->cross_v.push_back(a.split_heads(project(a.v_proj, sources)).contiguous());
    }
    return cache;
}

torch::Tensor PretrainedCache::begin(const PretrainedEncoding& enc, size_t layers) {
    cross_group = repeated_row_group(enc.map_rows);
    cross_rows = enc.map_rows;
    self_k.resize(layers);
    self_v.resize(layers);
    positions_seen =
        torch::zeros({enc.output.size(0)}, torch::TensorOptions().dtype(torch::kLong).device(enc.output.device()));
    return every_nth_row(enc.output, cross_group);
}

void PretrainedCache::select(const torch::Tensor& rows) {
    const auto host = rows.to(torch::kCPU, torch::kLong).contiguous();
    bool cross_same = false;
    if (cross_rows.defined()) {
        auto next = cross_rows.index_select(0, host);
        cross_same = torch::equal(next, cross_rows);
        cross_rows = std::move(next);
    }
    for (auto* list : {&self_k, &self_v})
        for (auto& t : *list) t.select(rows);
    positions_seen = positions_seen.index_select(0, rows);
    if (cross_same) return;
    // The rows of cross_k that the new rows read: each group's, or (a group's rows now from
    // different groups) every row's own.
    const int64_t R = host.size(0), g = cross_group;
    torch::Tensor from = rows;
    if (g > 1) {
        const auto groups = host.div(g, "floor");
        from = groups;
        const auto blocks = R % g == 0 ? groups.view({R / g, g}) : torch::Tensor();
        if (blocks.defined() && blocks.eq(blocks.select(1, 0).unsqueeze(1)).all().item<bool>()) {
            from = blocks.select(1, 0).contiguous();
            const int64_t G = cross_k.empty() || !cross_k.front().defined() ? from.size(0) : cross_k.front().size(0);
            if (from.size(0) == G && torch::equal(from, torch::arange(G, torch::kLong))) return;  // each group its own
        } else {
            cross_group = 1;
        }
    }
    const auto index = from.to(rows.device());  // rows as given where each row has its own keys
    for (auto* list : {&cross_k, &cross_v})
        for (auto& t : *list)
            if (t.defined()) t = t.index_select(0, index);
}

StepOutput PretrainedImpl::step(const torch::Tensor& tokens, DecoderCache& cache_in, const EncodedSource& source,
                                const AttentionIntervention* intervention) {
    auto& cache = family_part<PretrainedCache>(cache_in, "pretrained", "a decoder cache");
    const auto& enc = family_part<const PretrainedEncoding>(source, "pretrained", "an encoding");
    const FewRowsStepThreads threads(tokens.size(0));  // a batch-1 step's small operations on one thread
    const auto& c = hf();
    const int64_t L = c.decoder_layers, H = c.decoder_heads;
    const auto ids = tokens.unsqueeze(1);  // [B, 1]
    torch::Tensor positions;
    if (c.positions != PositionTable::fairseq) {
        positions = torch::full({ids.size(0), 1}, cache.steps + first_position(), ids.options().dtype(torch::kLong));
    } else {
        const auto rows = input_rows(ids);
        positions = position_ids(rows, cache.positions_seen);
        cache.positions_seen = cache.positions_seen + rows.ne(Vocab::pad_id).squeeze(1).to(torch::kLong);
    }
    auto y = embed_with_positions(lookup_rows(decoder_embed, input_rows(ids), Vocab::pad_id), positions, /*decoder=*/true);
    torch::Tensor cross_weights;  // [B, 1, 1, S]
    if (intervention && intervention->cross_weights.defined())
        cross_weights = intervention->cross_weights.to(y.device(), torch::kFloat).unsqueeze(1).unsqueeze(1);
    torch::Tensor cross_bias = enc.bias;  // -inf at erased source positions too (their weight 0, the rest renormalised)
    const bool erasing = intervention && intervention->cross_erased.defined();
    if (erasing) cross_bias = enc.bias + key_bias(intervention->cross_erased.to(y.device(), torch::kBool).logical_not());
    std::vector<Heads> self(static_cast<size_t>(L)), cross(static_cast<size_t>(L));
    torch::Tensor context;
    for (int64_t l = 0; l < L; ++l) {
        const auto i = static_cast<size_t>(l);
        auto& layer = decoder_layers[i];
        auto& sa = *layer->self_attn;
        auto& ca = *layer->encoder_attn;
        auto residual = y;
        auto h = c.normalize_before ? layer->self_attn_layer_norm->forward(y) : y;
        // One job for q, k and v: one x, three weights.
        const auto qkv = precision_linears(h, {sa.q_proj->weight, sa.k_proj->weight, sa.v_proj->weight},
                                           {sa.q_proj->bias, sa.k_proj->bias, sa.v_proj->bias});
        auto k = sa.split_heads(qkv[1]), v = sa.split_heads(qkv[2]);
        const auto keys = cache.self_k[i].append(k), values = cache.self_v[i].append(v);
        self[i] = attend(sa, sa.split_heads(qkv[0]), keys, values, {}, 0.0, false,
                         true, {},
                         gate_row(head_gates(), AttentionKind::decoder_self, l,
                                  heads_switched_off(intervention, AttentionKind::decoder_self, l, H), y.device()));
        y = residual + self[i].out;
        if (!c.normalize_before) y = layer->self_attn_layer_norm->forward(y);
        residual = y;
        h = c.normalize_before ? layer->encoder_attn_layer_norm->forward(y) : y;
        cross[i] = attend(ca, ca.split_heads(project(ca.q_proj, h)), cache.cross_k[i], cache.cross_v[i], cross_bias, 0.0,
                          false, true, cross_weights,
                          gate_row(head_gates(), AttentionKind::cross, l,
                                   heads_switched_off(intervention, AttentionKind::cross, l, H), y.device()),
                          erasing);
        y = residual + cross[i].out;
        if (!c.normalize_before) y = layer->encoder_attn_layer_norm->forward(y);
        residual = y;
        h = c.normalize_before ? layer->final_layer_norm->forward(y) : y;
        y = residual + feed_forward(layer->fc1, layer->fc2, h);
        if (!c.normalize_before) y = layer->final_layer_norm->forward(y);
        if (l == L - 1) context = cross[i].out.squeeze(1);
    }
    if (c.final_layer_norms) y = decoder_norm->forward(y);
    ++cache.steps;
    StepOutput out;
    out.logits = output_logits(y.squeeze(1));  // [B, V]
    out.context = context;
    out.maps = decoder_step_maps(cross, self);  // the primary map first, then every head
    return out;
}

}  // namespace attnviz
