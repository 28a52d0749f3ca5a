// d2l's Transformer behind the family seam (core/model/transformer_model.hpp).
#include "core/model/transformer_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "core/io/error.hpp"
#include "core/model/attention_blocks.hpp"
#include "core/model/inference_precision.hpp"
#include "core/model/model_support.hpp"
#include "core/text/vocab.hpp"

namespace F = torch::nn::functional;

namespace attnviz {

namespace {

/// Positions whose encoding is computed once (longer inputs compute theirs as they come).
constexpr int64_t k_table_positions = 1024;

/// The names of a step's dropout masks (hashed masks need one per place): the embeddings'
/// and, per block, its attentions' weights and its AddNorms'.
uint64_t enc_site(int64_t layer) { return 16 + 8 * static_cast<uint64_t>(layer); }
uint64_t dec_site(int64_t layer) { return 4096 + 8 * static_cast<uint64_t>(layer); }
constexpr uint64_t k_enc_embedding = 1, k_dec_embedding = 2;

/// [T, T]: -inf above the diagonal (a position attends to itself and those before it).
torch::Tensor causal_bias(int64_t T, const torch::Device& device) {
    return torch::full({T, T}, -std::numeric_limits<float>::infinity(), torch::TensorOptions().device(device))
        .triu(1);
}

}  // namespace

// --- modules -----------------------------------------------------------------

TransformerEncoderImpl::TransformerEncoderImpl(const ModelConfig& c) {
    embedding = register_module("embedding", torch::nn::Embedding(c.src_vocab, c.hidden_size));
    auto blks = register_module("blks", std::make_shared<torch::nn::Module>());
    for (int64_t l = 0; l < c.num_layers; ++l)
        blocks.push_back(blks->register_module("block" + std::to_string(l),
                                               EncoderBlock(c.hidden_size, c.ffn_size, c.num_heads)));
}

TransformerDecoderImpl::TransformerDecoderImpl(const ModelConfig& c) {
    embedding = register_module("embedding", torch::nn::Embedding(c.tgt_vocab, c.hidden_size));
    auto blks = register_module("blks", std::make_shared<torch::nn::Module>());
    for (int64_t l = 0; l < c.num_layers; ++l)
        blocks.push_back(blks->register_module("block" + std::to_string(l),
                                               DecoderBlock(c.hidden_size, c.ffn_size, c.num_heads)));
    dense = register_module("dense", torch::nn::Linear(c.hidden_size, c.tgt_vocab));
}

std::vector<HeadGroup> TransformerImpl::head_groups() const {
    const int L = static_cast<int>(m_config.num_layers), H = static_cast<int>(m_config.num_heads);
    return {{AttentionKind::encoder_self, L, H}, {AttentionKind::cross, L, H}, {AttentionKind::decoder_self, L, H}};
}

TransformerImpl::TransformerImpl(const ModelConfig& config) : m_config(config) {
    config.validate_for_build();
    if (!config.is_transformer()) throw ConfigError("model: a Transformer needs --arch transformer");
    ScopedSeed seeded(config.seed);  // the initial weights depend on the seed alone
    // d2l registers the encoder first, then the decoder; the weights draw in that order.
    encoder = register_module("encoder", TransformerEncoder(config));
    decoder = register_module("decoder", TransformerDecoder(config));
    m_positions = positional_encoding(k_table_positions, config.hidden_size);
}

torch::Tensor TransformerImpl::positions(int64_t first, int64_t n, const torch::Device& device) const {
    if (first + n <= m_positions.size(0)) return m_positions.narrow(0, first, n).to(device);
    return positional_encoding(first + n, m_config.hidden_size).narrow(0, first, n).to(device);
}

torch::Tensor TransformerImpl::embed_positions(const torch::Tensor& emb, int64_t first, const Dropout& dropout,
                                               uint64_t which, const TokenLayout& layout) const {
    const double scale = std::sqrt(static_cast<double>(m_config.hidden_size));
    return dropout.tokens(layout.pack(emb * scale + positions(first, emb.size(1), emb.device())), which, layout);
}

Dropout TransformerImpl::dropout_for(const DropoutStream* stream) const {
    Dropout d;
    d.p = is_training() ? m_config.dropout : 0.0;
    d.stream = stream;
    return d;
}

// --- encoder -----------------------------------------------------------------

bool TransformerImpl::short_fits(const torch::Device& device, int64_t S, int64_t T, const Dropout& dropout) const {
    return device.is_cpu() && decoder->dense->weight.scalar_type() == torch::kFloat &&
           S <= k_short_attention_max_steps && T <= k_short_attention_max_steps &&
           (!dropout.on() || dropout.stream != nullptr);
}

TransformerEncoding TransformerImpl::encode_embedded(const torch::Tensor& emb_in, const torch::Tensor& src_len_in,
                                                     const Dropout& dropout, bool keep, bool pack, bool short_kernel) {
    // d2l's num_steps cuts a longer source (the padding it adds changes nothing: it is masked).
    const int64_t N = m_config.source_steps;
    const bool cut = N > 0 && emb_in.size(1) > N;
    const auto emb = cut ? emb_in.narrow(1, 0, N) : emb_in;
    const auto src_len = cut ? src_len_in.clamp_max(N) : src_len_in;
    const int64_t S = emb.size(1);
    TransformerEncoding enc;
    enc.src_len = src_len;
    enc.mask = torch::arange(S, src_len.options().device(emb.device())).unsqueeze(0) <
               src_len.to(emb.device()).unsqueeze(1);
    enc.bias = key_bias(enc.mask);
    if (pack) enc.layout = TokenLayout::packing(src_len, S, emb.device());
    ShortAttentionOptions where;
    if (short_kernel) {
        if (keep) throw std::logic_error("Transformer encoder: short_attention keeps no weights");
        if (head_gates().any()) throw std::logic_error("Transformer encoder: short_attention has no head gates");
        enc.row_map = enc.layout.row_map(emb.size(0), S);
        where.q_rows = where.k_rows = enc.row_map;
        where.key_len = src_len.to(torch::kCPU, torch::kInt64).contiguous();
    }
    auto x = embed_positions(emb, 0, dropout, k_enc_embedding, enc.layout);
    for (size_t l = 0; l < encoder->blocks.size(); ++l) {
        HeadAttention kept;
        x = encoder->blocks[l]->forward(
            x, enc.bias, dropout, enc_site(static_cast<int64_t>(l)), keep ? &kept : nullptr, enc.layout,
            short_kernel ? &where : nullptr,
            gate_row(head_gates(), AttentionKind::encoder_self, static_cast<int64_t>(l), {}, emb.device()));
        if (keep) {
            enc.weights.push_back(kept.weights);
            enc.scores.push_back(kept.scores);
        }
    }
    enc.output = x;
    return enc;
}

std::shared_ptr<const EncodedSource> TransformerImpl::encode(const torch::Tensor& src, const torch::Tensor& src_len,
                                                             bool keep_maps) {
    return std::make_shared<TransformerEncoding>(
        encode_embedded(encoder->embedding->forward(src), src_len, dropout_for(nullptr), keep_maps));
}

std::shared_ptr<const EncodedSource> TransformerEncoding::select(const torch::Tensor& rows) const {
    if (layout.packed()) throw std::logic_error("TransformerEncoding::select: a packed encoding has no rows to select");
    auto e = std::make_shared<TransformerEncoding>();
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

namespace {
/// Rows [n, n] of a [h, S, S] slice's head as a matrix.
AttentionMatrix to_matrix(const torch::Tensor& m) {
    const auto c = m.to(torch::kCPU, torch::kFloat).contiguous();
    AttentionMatrix out(static_cast<size_t>(c.size(0)));
    const float* p = c.data_ptr<float>();
    for (int64_t r = 0; r < c.size(0); ++r) out[static_cast<size_t>(r)].assign(p + r * c.size(1), p + (r + 1) * c.size(1));
    return out;
}
}  // namespace

std::vector<AttentionMap> TransformerEncoding::source_maps(int64_t row, int64_t n) const {
    std::vector<AttentionMap> maps;
    if (map_rows.defined()) row = map_rows[row].item<int64_t>();
    for (size_t l = 0; l < weights.size(); ++l) {
        const int64_t S = weights[l].size(-1);
        const int64_t k = std::min(n, S);
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

// --- decoder, teacher forced ---------------------------------------------------

torch::Tensor TransformerImpl::decode_embedded(const torch::Tensor& emb, const TransformerEncoding& enc,
                                               const Dropout& dropout, const TokenLayout& layout) {
    const int64_t T = emb.size(1);
    auto y = embed_positions(emb, 0, dropout, k_dec_embedding, layout);
    // Attention through short_attention() where the encoder ran it (enc.row_map), else attend().
    const bool short_kernel = enc.row_map.defined();
    const int64_t B = emb.size(0), H = m_config.num_heads;
    ShortAttentionOptions self_where, cross_where;
    torch::Tensor causal;
    if (short_kernel) {
        self_where.q_rows = self_where.k_rows = cross_where.q_rows = layout.row_map(B, T);
        self_where.causal = true;
        cross_where.k_rows = enc.row_map;
        cross_where.key_len = enc.src_len.to(torch::kCPU, torch::kInt64).contiguous();
    } else {
        causal = causal_bias(T, emb.device());
    }
    for (size_t l = 0; l < decoder->blocks.size(); ++l) {
        auto& blk = decoder->blocks[l];
        const uint64_t site = dec_site(static_cast<int64_t>(l));
        torch::Tensor self_out, cross_out;  // each through its W_o, laid out as y
        if (short_kernel) {
            self_where.dropout = dropout.head_mask(B, H, T, T, site);
            self_out = blk->attention1->short_self(y, self_where);
        } else {
            AttendOptions self;
            self.bias = causal;
            self.dropout = &dropout;
            self.which = site;
            self.head_keep = gate_row(head_gates(), AttentionKind::decoder_self, static_cast<int64_t>(l), {}, emb.device());
            const auto [q, k, v] = blk->attention1->project_qkv(y, layout);
            self_out = blk->attention1->output(attend(q, k, v, self).out, layout);
        }
        auto y1 = blk->addnorm1->forward(y, self_out, dropout, site + 1, layout);
        if (short_kernel) {
            cross_where.dropout = dropout.head_mask(B, H, T, enc.row_map.size(1), site + 2);
            cross_out = blk->attention2->short_cross(y1, enc.output, cross_where);
        } else {
            AttendOptions cross;
            cross.bias = enc.bias;
            cross.dropout = &dropout;
            cross.which = site + 2;
            cross.head_keep = gate_row(head_gates(), AttentionKind::cross, static_cast<int64_t>(l), {}, emb.device());
            const auto [ck, cv] = blk->attention2->project_kv(enc.output, enc.layout);
            const auto a = attend(blk->attention2->project_q(y1, layout), ck, cv, cross);
            cross_out = blk->attention2->output(a.out, layout);
        }
        auto y2 = blk->addnorm2->forward(y1, cross_out, dropout, site + 3, layout);
        y = blk->addnorm3->forward(y2, blk->ffn->forward(y2), dropout, site + 4, layout);
    }
    return y;
}

torch::Tensor TransformerImpl::forward_embedded(const torch::Tensor& src_emb, const torch::Tensor& src_len,
                                                const torch::Tensor& tgt_emb) {
    const Dropout dropout = dropout_for(nullptr);
    const auto enc = encode_embedded(src_emb, src_len, dropout, /*keep=*/false);
    return layer_forward(decoder->dense, decode_embedded(tgt_emb, enc, dropout));
}

torch::Tensor TransformerImpl::forward(const torch::Tensor& src, const torch::Tensor& src_len,
                                       const torch::Tensor& tgt_in, double teacher_forcing) {
    if (teacher_forcing >= 1.0) return forward_embedded(embed_source(src), src_len, embed_target(tgt_in));
    // Scheduled sampling: one step at a time, as decoding runs (no map is shown).
    return sampled_forward(*this, src, src_len, tgt_in, teacher_forcing);
}

torch::Tensor TransformerImpl::loss(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                                    const torch::Tensor& tgt_out, const LossOptions& options) {
    if (options.teacher_forcing < 1.0)
        return masked_cross_entropy(forward(src, src_len, tgt_in, options.teacher_forcing), tgt_out, Vocab::pad_id);
    const TokenLogits t = token_logits(src, src_len, tgt_in, tgt_out, options);
    return F::cross_entropy(t.logits, t.targets);
}

TokenLogits TransformerImpl::real_token_logits(const torch::Tensor& src, const torch::Tensor& src_len,
                                               const torch::Tensor& tgt_in, const torch::Tensor& tgt_out) {
    return token_logits(src, src_len, tgt_in, tgt_out, LossOptions{});
}

TokenLogits TransformerImpl::token_logits(const torch::Tensor& src, const torch::Tensor& src_len,
                                          const torch::Tensor& tgt_in, const torch::Tensor& tgt_out,
                                          const LossOptions& options) {
    // Where padding fills a fifth of the grid or more, every position-wise part runs on the real
    // tokens only (TokenLayout::packing): the source's first src_len, the target's positions up
    // to its last real one (causal attention reads no later one). On a GPU, by default, the grid.
    const bool pack = options.packing == TokenPacking::when_padded ||
                      (options.packing == TokenPacking::automatic && src.device().is_cpu());
    const Dropout dropout = dropout_for(options.dropout);
    const int64_t T = tgt_out.size(1);
    const int64_t S = m_config.source_steps > 0 ? std::min<int64_t>(src.size(1), m_config.source_steps) : src.size(1);
    const bool short_kernel = options.attention == AttentionKernel::automatic && !head_gates().any() &&
                              short_fits(src.device(), S, T, dropout);
    const auto enc = encode_embedded(embed_source(src), src_len, dropout, /*keep=*/false, pack, short_kernel);
    TokenLayout layout;
    if (pack) {
        const auto real = tgt_out.ne(Vocab::pad_id);
        const auto steps = (real * torch::arange(1, T + 1, tgt_out.options())).amax(1);  // last real + 1
        layout = TokenLayout::packing(steps, T, tgt_out.device());
    }
    const auto hidden = decode_embedded(embed_target(tgt_in), enc, dropout, layout);  // [N, d] or [B, T, d]
    const auto rows_all = hidden.reshape({-1, hidden.size(-1)});
    const auto flat = tgt_out.reshape(-1);
    const auto targets = layout.packed() ? flat.index_select(0, layout.index) : flat;
    // The output layer over the real target tokens only.
    const auto keep = targets.ne(Vocab::pad_id);
    if (keep.all().item<bool>()) return {layer_forward(decoder->dense, rows_all), targets};
    const auto rows = keep.nonzero().squeeze(1);
    return {layer_forward(decoder->dense, rows_all.index_select(0, rows)), targets.index_select(0, rows)};
}

// --- decoder, one step at a time ------------------------------------------------

std::unique_ptr<DecoderCache> TransformerImpl::start(const EncodedSource& source) {
    const auto& enc = family_part<const TransformerEncoding>(source, "Transformer", "an encoding");
    auto cache = std::make_unique<TransformerCache>();
    for (auto& blk : decoder->blocks) {
        const auto [k, v] = blk->attention2->project_kv(enc.output);
        cache->cross_k.push_back(k);
        cache->cross_v.push_back(v);
    }
    cache->self_k.resize(decoder->blocks.size());
    cache->self_v.resize(decoder->blocks.size());
    return cache;
}

void TransformerCache::select(const torch::Tensor& rows) {
    for (auto* list : {&self_k, &self_v})
        for (auto& t : *list) t.select(rows);
    for (auto* list : {&cross_k, &cross_v})
        for (auto& t : *list)
            if (t.defined()) t = t.index_select(0, rows);
}

StepOutput TransformerImpl::step(const torch::Tensor& tokens, DecoderCache& cache_in, const EncodedSource& source,
                                 const AttentionIntervention* intervention) {
    auto& cache = family_part<TransformerCache>(cache_in, "Transformer", "a decoder cache");
    const auto& enc = family_part<const TransformerEncoding>(source, "Transformer", "an encoding");
    const Dropout dropout = dropout_for(nullptr);
    const int64_t H = m_config.num_heads, L = m_config.num_layers;
    // d2l's predict_step adds the encoding of X[:, :1], position 0, to every token.
    const int64_t position = m_config.d2l_decode_positions ? 0 : cache.steps;
    auto x = embed_positions(decoder->embedding->forward(tokens).unsqueeze(1), position, dropout, k_dec_embedding);
    torch::Tensor cross_weights;  // [B, 1, 1, S]
    if (intervention && intervention->cross_weights.defined()) cross_weights = intervention->cross_weights.unsqueeze(1).unsqueeze(1);
    torch::Tensor erase_bias;  // [B, 1, 1, S]: -inf at erased source positions (their weight 0, the rest renormalised)
    if (intervention && intervention->cross_erased.defined())
        erase_bias = key_bias(intervention->cross_erased.to(x.device(), torch::kBool).logical_not());
    std::vector<HeadAttention> self(static_cast<size_t>(L)), cross(static_cast<size_t>(L));
    torch::Tensor context;
    for (int64_t l = 0; l < L; ++l) {
        auto& blk = decoder->blocks[static_cast<size_t>(l)];
        const auto i = static_cast<size_t>(l);
        const uint64_t site = dec_site(l);
        auto [q, k, v] = blk->attention1->project_qkv(x);  // [B, h, 1, dh]
        const auto keys = cache.self_k[i].append(k), values = cache.self_v[i].append(v);
        AttendOptions so;
        so.dropout = &dropout;
        so.which = site;
        so.keep = true;
        so.head_keep = gate_row(head_gates(), AttentionKind::decoder_self, l,
                                heads_switched_off(intervention, AttentionKind::decoder_self, l, H), x.device());
        self[i] = attend(q, keys, values, so);
        auto x1 = blk->addnorm1->forward(x, blk->attention1->output(self[i].out), dropout, site + 1);
        AttendOptions co;
        co.bias = erase_bias.defined() ? enc.bias + erase_bias : enc.bias;
        co.zero_empty_rows = erase_bias.defined();
        co.dropout = &dropout;
        co.which = site + 2;
        co.keep = true;
        co.weights = cross_weights;
        co.head_keep = gate_row(head_gates(), AttentionKind::cross, l, heads_switched_off(intervention, AttentionKind::cross, l, H),
                                x.device());
        cross[i] = attend(blk->attention2->project_q(x1), cache.cross_k[i], cache.cross_v[i], co);
        const auto read = blk->attention2->output(cross[i].out);  // [B, 1, d]
        auto x2 = blk->addnorm2->forward(x1, read, dropout, site + 3);
        x = blk->addnorm3->forward(x2, blk->ffn->forward(x2), dropout, site + 4);
        if (l == L - 1) context = read.squeeze(1);
    }
    ++cache.steps;
    StepOutput out;
    out.logits = layer_forward(decoder->dense, x.squeeze(1));  // [B, V]
    out.context = context;
    out.maps = decoder_step_maps(cross, self);  // the primary map first, then every head
    return out;
}

}  // namespace attnviz
