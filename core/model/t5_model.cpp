// The T5 family behind the family seam (core/model/t5_model.hpp), beside transformers 5's modeling_t5.py.
#include "core/model/t5_model.hpp"

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

constexpr float k_t5_neg_inf = -std::numeric_limits<float>::infinity();

/// x W^T without bias: a decoder step's few rows on both threads (few_rows_linear), the rest through ATen.
torch::Tensor t5_project(const torch::Tensor& weight, const torch::Tensor& x) { return precision_linear(x, weight); }

}  // namespace

// In one loop a row where it can: ATen's way is seven dispatched operations (~20 us in all, most
// of it the mean's), three times in each of a step's layers, for 768 numbers. The squares are
// summed in double.
torch::Tensor t5_rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
    const bool plain = x.device().is_cpu() && weight.device().is_cpu() && x.scalar_type() == torch::kFloat &&
                       weight.scalar_type() == torch::kFloat && x.layout() == torch::kStrided &&
                       weight.layout() == torch::kStrided && x.dim() >= 1 && x.is_contiguous() &&
                       weight.is_contiguous() && weight.dim() == 1 && weight.size(0) == x.size(-1) &&
                       !(torch::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad()));
    if (!plain) {
        const auto variance = x.to(torch::kFloat).pow(2).mean(-1, /*keepdim=*/true);
        return weight * (x * torch::rsqrt(variance + eps));
    }
    auto out = torch::empty_like(x, torch::MemoryFormat::Contiguous);
    const int64_t d = x.size(-1), rows = d > 0 ? x.numel() / d : 0;
    const float* xp = x.data_ptr<float>();
    const float* wp = weight.data_ptr<float>();
    float* op = out.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = xp + r * d;
        double squares = 0.0;
        for (int64_t i = 0; i < d; ++i) squares += static_cast<double>(row[i]) * row[i];
        const float variance = static_cast<float>(squares / static_cast<double>(d));
        const float scale = 1.0F / std::sqrt(variance + static_cast<float>(eps));
        float* o = op + r * d;
        for (int64_t i = 0; i < d; ++i) o[i] = wp[i] * (row[i] * scale);
    }
    return out;
}

namespace {

struct T5Heads {
    torch::Tensor out;      ///< [B, T, d] after o
    torch::Tensor weights;  ///< [B, h, Tq, Tk] when kept
    torch::Tensor scores;   ///< [B, h, Tq, Tk] q.k + position bias + mask, when kept
};

/// T5's eager attention: softmax(q kᵀ + bias) v, then o. bias: the position bias and the mask,
/// additive, broadcast over [B, h, Tq, Tk]; weights_given [B, 1, 1, Tk] replaces every head's
/// softmax; keep_heads [h] multiplies each head's output.
T5Heads t5_attend(const torch::Tensor& o_weight, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                  const torch::Tensor& bias, double dropout, bool training, bool keep,
                  const torch::Tensor& weights_given = {}, const torch::Tensor& keep_heads = {},
                  bool zero_empty_rows = false) {
    auto heads = attend_heads(q, k, v, /*scaling=*/1.0, bias, dropout, training, keep, weights_given, keep_heads,
                              zero_empty_rows);
    return {t5_project(o_weight, heads.merged), std::move(heads.weights), std::move(heads.scores)};
}

/// [B, T, h dkv] -> [B, h, T, dkv]
torch::Tensor t5_split(const torch::Tensor& x, int64_t heads) {
    return x.view({x.size(0), x.size(1), heads, -1}).transpose(1, 2);
}

/// The shared vocabulary matrix's rows as an embedding lookup (T5's embedding has no padding_idx),
/// or an int8 / bf16 matrix's (--precision).
torch::Tensor t5_lookup(const torch::Tensor& weight, const torch::Tensor& ids) {
    if (auto rows = converted_rows(weight, ids); rows.defined()) return rows;
    return torch::embedding(weight, ids);
}

/// Registers module path a.b.c under `root` (creating what is missing) and returns the last.
torch::nn::Module& t5_module(torch::nn::Module& root, const std::vector<std::string>& path) {
    torch::nn::Module* m = &root;
    for (const auto& name : path) {
        auto children = m->named_children();
        if (const auto* found = children.find(name)) m = found->get();
        else m = m->register_module(name, std::make_shared<torch::nn::Module>()).get();
    }
    return *m;
}

}  // namespace

torch::Tensor t5_relative_bucket(const torch::Tensor& rel_in, bool bidirectional, int64_t num_buckets,
                                 int64_t max_distance) {
    auto rel = rel_in.to(torch::kLong);
    auto buckets = torch::zeros_like(rel);
    int64_t n = num_buckets;
    if (bidirectional) {
        n /= 2;
        buckets = buckets + rel.gt(0).to(torch::kLong) * n;
        rel = rel.abs();
    } else {
        rel = -torch::min(rel, torch::zeros_like(rel));
    }
    const int64_t max_exact = n / 2;
    const auto is_small = rel.lt(max_exact);
    // As transformers: log(rel / max_exact) in float, over log(max_distance / max_exact) in double.
    auto large = (torch::log(rel.to(torch::kFloat) / max_exact) /
                  std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact)) *
                  static_cast<double>(n - max_exact))
                     .to(torch::kLong) +
                 max_exact;
    large = torch::min(large, torch::full_like(large, n - 1));
    return buckets + torch::where(is_small, rel, large);
}

bool is_t5_config(const ModelConfig& config) {
    return config.is_pretrained() && config.pretrained && config.pretrained->model.family == PretrainedFamily::t5 &&
           config.pretrained->model.t5;
}

T5Impl::T5Impl(const ModelConfig& config, bool filled) : m_config(config), m_spec(config.pretrained) {
    config.validate_for_build();
    if (!is_t5_config(config)) throw ConfigError("model: not a T5 model's configuration");
    const PretrainedConfig& c = m_spec->model;
    const T5Options& o = *c.t5;
    const int64_t V = config.src_vocab, d = c.d_model, h = c.encoder_heads, inner = o.inner(h), f = c.encoder_ffn;
    if (config.src_vocab != config.tgt_vocab)
        throw ConfigError("model: T5 shares one vocabulary (" + std::to_string(config.src_vocab) + " / " +
                          std::to_string(config.tgt_vocab) + " rows)");
    torch::NoGradGuard no_grad;
    auto make = [filled](std::vector<int64_t> shape, double value) {
        return filled ? torch::full(shape, value) : torch::empty(shape);
    };
    // The vocabulary matrices row-major, as the pretrained family keeps them (core/model/pretrained_model.cpp).
    auto matrix = [filled](int64_t rows, int64_t cols) {
        return filled ? torch::zeros({rows, cols}) : torch::empty({rows, cols});
    };
    auto weight = [&](const std::vector<std::string>& path, std::vector<int64_t> shape, double value = 0.0) {
        return t5_module(*this, path).register_parameter("weight", make(std::move(shape), value));
    };
    shared = t5_module(*this, {"shared"}).register_parameter("weight", matrix(V, d));
    for (const bool decoder : {false, true}) {
        const std::string side = decoder ? "decoder" : "encoder";
        const int64_t L = decoder ? c.decoder_layers : c.encoder_layers;
        auto& blocks = decoder ? decoder_blocks : encoder_blocks;
        for (int64_t i = 0; i < L; ++i) {
            const std::string bi = std::to_string(i);
            auto attention = [&](const std::string& layer, const std::string& name, T5AttentionWeights& a, bool relative) {
                const std::vector<std::string> p{side, "block", bi, "layer", layer, name};
                auto at = [&](const char* w) {
                    auto q = p;
                    q.push_back(w);
                    return q;
                };
                a.q = weight(at("q"), {inner, d});
                a.k = weight(at("k"), {inner, d});
                a.v = weight(at("v"), {inner, d});
                a.o = weight(at("o"), {d, inner});
                if (relative)
                    (decoder ? decoder_relative_bias : encoder_relative_bias) =
                        weight(at("relative_attention_bias"), {o.relative_buckets, h});
            };
            T5BlockWeights b;
            attention("0", "SelfAttention", b.self, i == 0);
            b.self_norm = weight({side, "block", bi, "layer", "0", "layer_norm"}, {d}, 1.0);
            if (decoder) {
                attention("1", "EncDecAttention", b.cross, false);
                b.cross_norm = weight({side, "block", bi, "layer", "1", "layer_norm"}, {d}, 1.0);
            }
            const std::string ff = decoder ? "2" : "1";
            const std::vector<std::string> dense{side, "block", bi, "layer", ff, "DenseReluDense"};
            auto at = [&](const char* w) {
                auto q = dense;
                q.push_back(w);
                return q;
            };
            if (o.gated) {
                b.wi_0 = weight(at("wi_0"), {f, d});
                b.wi_1 = weight(at("wi_1"), {f, d});
            } else {
                b.wi = weight(at("wi"), {f, d});
            }
            b.wo = weight(at("wo"), {d, f});
            b.ff_norm = weight({side, "block", bi, "layer", ff, "layer_norm"}, {d}, 1.0);
            blocks.push_back(b);
        }
        (decoder ? decoder_final_norm : encoder_final_norm) = weight({side, "final_layer_norm"}, {d}, 1.0);
    }
    lm_head = c.tie_word_embeddings ? shared
                                    : t5_module(*this, {"lm_head"}).register_parameter("weight", matrix(config.tgt_vocab, d));
}

double T5Impl::dropout_p() const { return is_training() ? hf().dropout : 0.0; }

torch::Tensor T5Impl::input_rows(const torch::Tensor& ids) const {
    return ids.masked_fill(ids.eq(Vocab::bos_id), m_spec->decoder_start_row);
}

torch::Tensor T5Impl::embed_source(const torch::Tensor& src) { return t5_lookup(shared, input_rows(src)); }
torch::Tensor T5Impl::embed_target(const torch::Tensor& tgt) { return t5_lookup(shared, input_rows(tgt)); }

torch::Tensor T5Impl::feed_forward(const T5BlockWeights& b, const torch::Tensor& x) const {
    const auto& c = hf();
    torch::Tensor hidden;
    if (t5().gated) {
        const auto in = precision_linears(x, {b.wi_0, b.wi_1});  // one job: one x, two weights
        hidden = activate(c.activation, in[0]) * in[1];
    } else {
        hidden = activate(c.activation, t5_project(b.wi, x));
    }
    if (dropout_p() > 0) hidden = torch::dropout(hidden, dropout_p(), true);
    return t5_project(b.wo, hidden);
}

torch::Tensor T5Impl::position_bias(bool decoder, int64_t queries, int64_t keys, int64_t first) const {
    const auto& table = decoder ? decoder_relative_bias : encoder_relative_bias;
    const auto options = torch::TensorOptions().dtype(torch::kLong).device(table.device());
    const auto rel = torch::arange(keys, options).unsqueeze(0) - (torch::arange(queries, options) + first).unsqueeze(1);
    const auto buckets = t5_relative_bucket(rel, !decoder, t5().relative_buckets, t5().relative_max_distance);
    return torch::embedding(table, buckets).permute({2, 0, 1}).unsqueeze(0);  // [1, h, Tq, Tk]
}

torch::Tensor T5Impl::position_bias_curve(AttentionKind kind, int64_t span) const {
    if (kind == AttentionKind::cross)
        throw ConfigError("position bias: cross-attention has none (T5 adds it to encoder_self and decoder_self)");
    if (span < 0 || span > (1 << 20)) throw ConfigError("position bias: the span must be 0..1048576 positions");
    torch::NoGradGuard no_grad;
    // One query at `span` over keys 0..2 span: key - query runs -span..span.
    return position_bias(kind == AttentionKind::decoder_self, 1, 2 * span + 1, span)[0].select(1, 0).to(torch::kCPU).clone();
}

torch::Tensor T5Impl::output_logits(const torch::Tensor& hidden) const {
    auto h = t5().scale_decoder_outputs ? hidden * std::pow(static_cast<double>(hf().d_model), -0.5) : hidden;
    auto logits = precision_linear(h, lm_head);  // few_rows_linear for a step's few rows; int8 / bf16 too
    return finish_logits(std::move(logits), {}, Vocab::bos_id, k_t5_neg_inf);
}

// --- encoder ----------------------------------------------------------------------

PretrainedEncoding T5Impl::encode_embedded(const torch::Tensor& emb, const torch::Tensor& src_len, bool keep) {
    const auto& c = hf();
    const int64_t S = emb.size(1), H = c.encoder_heads;
    PretrainedEncoding enc;
    enc.src_len = src_len;
    enc.mask = torch::arange(S, src_len.options().device(emb.device())).unsqueeze(0) <
               src_len.to(emb.device()).unsqueeze(1);
    enc.bias = key_bias(enc.mask);
    const auto bias = position_bias(false, S, S, 0).to(emb.device()) + enc.bias;  // [B, h, S, S]
    auto x = dropout_p() > 0 ? torch::dropout(emb, dropout_p(), true) : emb;
    const double attn_p = is_training() ? c.attention_dropout : 0.0;
    int64_t l = 0;
    StepThreads threads(emb.size(0) * S);  // all threads or one, as its layers run faster (small_linear.hpp)
    for (const auto& b : encoder_blocks) {
        threads.next_step();
        auto h = t5_rms_norm(x, b.self_norm, c.layer_norm_eps);
        auto att = t5_attend(b.self.o, t5_split(t5_project(b.self.q, h), H), t5_split(t5_project(b.self.k, h), H),
                             t5_split(t5_project(b.self.v, h), H), bias, attn_p, is_training(), keep, {},
                             gate_row(head_gates(), AttentionKind::encoder_self, l++, {}, x.device()));
        x = x + (dropout_p() > 0 ? torch::dropout(att.out, dropout_p(), true) : att.out);
        auto ff = feed_forward(b, t5_rms_norm(x, b.ff_norm, c.layer_norm_eps));
        x = x + (dropout_p() > 0 ? torch::dropout(ff, dropout_p(), true) : ff);
        if (keep) {
            enc.weights.push_back(att.weights);
            enc.scores.push_back(att.scores);
        }
    }
    x = t5_rms_norm(x, encoder_final_norm, c.layer_norm_eps);
    enc.output = dropout_p() > 0 ? torch::dropout(x, dropout_p(), true) : x;
    return enc;
}

std::vector<HeadGroup> T5Impl::head_groups() const {
    const auto& c = hf();
    const int E = static_cast<int>(c.encoder_layers), D = static_cast<int>(c.decoder_layers);
    return {{AttentionKind::encoder_self, E, static_cast<int>(c.encoder_heads)},
            {AttentionKind::cross, D, static_cast<int>(c.decoder_heads)},
            {AttentionKind::decoder_self, D, static_cast<int>(c.decoder_heads)}};
}

std::shared_ptr<const EncodedSource> T5Impl::encode(const torch::Tensor& src, const torch::Tensor& src_len,
                                                    bool keep_maps) {
    return std::make_shared<PretrainedEncoding>(encode_embedded(embed_source(src), src_len, keep_maps));
}

// --- decoder, teacher forced ------------------------------------------------------------

torch::Tensor T5Impl::decode_embedded(const torch::Tensor& emb, const PretrainedEncoding& enc) {
    const auto& c = hf();
    const int64_t T = emb.size(1), H = c.decoder_heads;
    const auto causal = torch::full({T, T}, k_t5_neg_inf, torch::TensorOptions().device(emb.device())).triu(1);
    const auto self_bias = position_bias(true, T, T, 0).to(emb.device()) + causal;
    auto y = dropout_p() > 0 ? torch::dropout(emb, dropout_p(), true) : emb;
    const double attn_p = is_training() ? c.attention_dropout : 0.0;
    int64_t l = 0;
    for (const auto& b : decoder_blocks) {
        auto h = t5_rms_norm(y, b.self_norm, c.layer_norm_eps);
        auto self = t5_attend(b.self.o, t5_split(t5_project(b.self.q, h), H), t5_split(t5_project(b.self.k, h), H),
                              t5_split(t5_project(b.self.v, h), H), self_bias, attn_p, is_training(), false, {},
                              gate_row(head_gates(), AttentionKind::decoder_self, l, {}, y.device()));
        y = y + (dropout_p() > 0 ? torch::dropout(self.out, dropout_p(), true) : self.out);
        h = t5_rms_norm(y, b.cross_norm, c.layer_norm_eps);
        auto cross = t5_attend(b.cross.o, t5_split(t5_project(b.cross.q, h), H),
                               t5_split(t5_project(b.cross.k, enc.output), H), t5_split(t5_project(b.cross.v, enc.output), H),
                               enc.bias, attn_p, is_training(), false, {},
                               gate_row(head_gates(), AttentionKind::cross, l, {}, y.device()));
        ++l;
        y = y + (dropout_p() > 0 ? torch::dropout(cross.out, dropout_p(), true) : cross.out);
        auto ff = feed_forward(b, t5_rms_norm(y, b.ff_norm, c.layer_norm_eps));
        y = y + (dropout_p() > 0 ? torch::dropout(ff, dropout_p(), true) : ff);
    }
    y = t5_rms_norm(y, decoder_final_norm, c.layer_norm_eps);
    return dropout_p() > 0 ? torch::dropout(y, dropout_p(), true) : y;
}

torch::Tensor T5Impl::forward_embedded(const torch::Tensor& src_emb, const torch::Tensor& src_len,
                                       const torch::Tensor& tgt_emb) {
    const auto enc = encode_embedded(src_emb, src_len, /*keep=*/false);
    return output_logits(decode_embedded(tgt_emb, enc));
}

torch::Tensor T5Impl::forward(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                              double teacher_forcing) {
    if (teacher_forcing >= 1.0) return forward_embedded(embed_source(src), src_len, embed_target(tgt_in));
    return sampled_forward(*this, src, src_len, tgt_in, teacher_forcing);
}

TokenLogits T5Impl::real_token_logits(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                                      const torch::Tensor& tgt_out) {
    const auto enc = encode_embedded(embed_source(src), src_len, /*keep=*/false);
    const auto hidden = decode_embedded(embed_target(tgt_in), enc);
    const auto flat = tgt_out.reshape(-1);
    const auto rows = flat.ne(Vocab::pad_id).nonzero().squeeze(1);
    return {output_logits(hidden.reshape({-1, hidden.size(-1)}).index_select(0, rows)), flat.index_select(0, rows)};
}

torch::Tensor T5Impl::loss(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                           const torch::Tensor& tgt_out, const LossOptions& options) {
    if (options.teacher_forcing < 1.0)
        return masked_cross_entropy(forward(src, src_len, tgt_in, options.teacher_forcing), tgt_out, Vocab::pad_id);
    const TokenLogits t = real_token_logits(src, src_len, tgt_in, tgt_out);
    return F::cross_entropy(t.logits, t.targets);
}

// --- decoder, one step at a time -------------------------------------------------------

std::unique_ptr<DecoderCache> T5Impl::start(const EncodedSource& source) {
    const auto& enc = family_part<const PretrainedEncoding>(source, "T5", "an encoding");
    const int64_t H = hf().decoder_heads;
    auto cache = std::make_unique<PretrainedCache>();
    const auto sources = cache->begin(enc, decoder_blocks.size());  // a beam's sentence once
    for (const auto& b : decoder_blocks) {
        // Contiguous per head, as the pretrained family's: no copy of k at every step of a beam.
        cache->cross_k.push_back(t5_split(t5_project(b.cross.k, sources), H).contiguous());
        cache->cross_v.push_back(t5_split(t5_project(b.cross.v, sources), H).contiguous());
    }
    return cache;
}

StepOutput T5Impl::step(const torch::Tensor& tokens, DecoderCache& cache_in, const EncodedSource& source,
                        const AttentionIntervention* intervention) {
    auto& cache = family_part<PretrainedCache>(cache_in, "T5", "a decoder cache");
    const auto& enc = family_part<const PretrainedEncoding>(source, "T5", "an encoding");
    const FewRowsStepThreads threads(tokens.size(0));  // a batch-1 step's small operations on one thread
    const auto& c = hf();
    const int64_t L = c.decoder_layers, H = c.decoder_heads;
    auto y = t5_lookup(shared, input_rows(tokens.unsqueeze(1)));  // [B, 1, d]
    const auto self_bias = position_bias(true, 1, cache.steps + 1, cache.steps).to(y.device());  // [1, h, 1, steps + 1]
    torch::Tensor cross_weights;
    if (intervention && intervention->cross_weights.defined())
        cross_weights = intervention->cross_weights.to(y.device(), torch::kFloat).unsqueeze(1).unsqueeze(1);
    torch::Tensor cross_bias = enc.bias;
    const bool erasing = intervention && intervention->cross_erased.defined();
    if (erasing) cross_bias = enc.bias + key_bias(intervention->cross_erased.to(y.device(), torch::kBool).logical_not());
    std::vector<T5Heads> self(static_cast<size_t>(L)), cross(static_cast<size_t>(L));
    torch::Tensor context;
    for (int64_t l = 0; l < L; ++l) {
        const auto i = static_cast<size_t>(l);
        const auto& b = decoder_blocks[i];
        auto h = t5_rms_norm(y, b.self_norm, c.layer_norm_eps);
        const auto qkv = precision_linears(h, {b.self.q, b.self.k, b.self.v});  // one job: one x, three weights
        auto k = t5_split(qkv[1], H), v = t5_split(qkv[2], H);
        const auto keys = cache.self_k[i].append(k), values = cache.self_v[i].append(v);
        self[i] = t5_attend(b.self.o, t5_split(qkv[0], H), keys, values, self_bias,
                            0.0, false, true, {},
                            gate_row(head_gates(), AttentionKind::decoder_self, l,
                                     heads_switched_off(intervention, AttentionKind::decoder_self, l, H), y.device()));
        y = y + self[i].out;
        h = t5_rms_norm(y, b.cross_norm, c.layer_norm_eps);
        cross[i] = t5_attend(b.cross.o, t5_split(t5_project(b.cross.q, h), H), cache.cross_k[i], cache.cross_v[i],
                             cross_bias, 0.0, false, true, cross_weights,
                             gate_row(head_gates(), AttentionKind::cross, l,
                                      heads_switched_off(intervention, AttentionKind::cross, l, H), y.device()),
                             erasing);
        y = y + cross[i].out;
        y = y + feed_forward(b, t5_rms_norm(y, b.ff_norm, c.layer_norm_eps));
        if (l == L - 1) context = cross[i].out.squeeze(1);
    }
    y = t5_rms_norm(y, decoder_final_norm, c.layer_norm_eps);
    ++cache.steps;
    StepOutput out;
    out.logits = output_logits(y.squeeze(1));
    out.context = context;
    out.maps = decoder_step_maps(cross, self);  // the primary map first, then every head
    return out;
}


std::vector<PositionBiasCurve> position_bias_curves(const EncoderDecoder& network, int64_t span) {
    const auto* t5 = dynamic_cast<const T5Impl*>(&network);
    if (!t5) return {};
    std::vector<PositionBiasCurve> out;
    for (const auto kind : {AttentionKind::encoder_self, AttentionKind::decoder_self}) {
        const auto curves = t5->position_bias_curve(kind, span).contiguous();  // [h, 2 span + 1]
        const float* p = curves.data_ptr<float>();
        const int64_t n = curves.size(1);
        for (int64_t h = 0; h < curves.size(0); ++h)
            out.push_back({kind, static_cast<int>(h), std::vector<float>(p + h * n, p + (h + 1) * n)});
    }
    return out;
}

}  // namespace attnviz
