// What each family's work costs in memory (EncoderDecoder::memory_cost(), core/model/memory_cost.hpp),
// from the tensors each path allocates. All tensors are float32 (4 bytes) unless said.
// Notation: S source positions, T target positions (steps), V target vocabulary; the
// Transformers: d width, f feed-forward width, h heads, L blocks; the RNN: E embedding,
// H hidden, L layers, G gates (GRU 3, LSTM 4), K key width (H, or 2H bidirectional), A
// additive attention's feature width.
//
// A row kept on the host for the views (an AttentionMatrix row: std::vector<float>) costs
// its floats, the allocator's header and rounding (~16 bytes) and the vector itself in its
// outer vector (24 bytes, up to twice that while the outer vector grows): k_row_bytes.
//
// tests/core/test_memory_cost.cpp measures each path's peak resident memory against these.
#include <algorithm>

#include "core/model/pretrained_model.hpp"
#include "core/model/rnn_model.hpp"
#include "core/model/t5_model.hpp"
#include "core/model/transformer_model.hpp"
#include "core/model/work_cost.hpp"

namespace attnviz {

namespace {

constexpr int64_t f4 = 4;            ///< bytes of a float
constexpr int64_t k_row_bytes = 56;  ///< a host row's overhead beside its floats (see above)

/// One Transformer stack's costs, shared by d2l's and the pretrained family: encoder and
/// decoder may differ in blocks and heads (a pretrained config says each).
struct StackShape {
    int64_t d = 1, V = 1;
    bool attention_dropout = false;  ///< dropout on the attention weights in training
    int64_t Le = 1, he = 1, fe = 1;  ///< encoder blocks, heads, feed-forward width
    int64_t Ld = 1, hd = 1, fd = 1;  ///< decoder blocks, heads, feed-forward width
};

MemoryCost stack_cost(const StackShape& m) {
    const int64_t d = m.d, V = m.V;
    MemoryCost c;
    // An attention of Tq queries over Tk keys, per head: q kᵀ, its scaling and the masked
    // scores are one [h, Tq, Tk] each as attend() makes them (two alive at a time), the
    // softmax weights another (3 at the peak). Training keeps for the backward pass the
    // weights (softmax's backward reads its output) and, with dropout on them, its mask and
    // the dropped weights (3 per element); the backward pass's gradients of one attention are
    // about 4 more while it runs. Attribution (no dropout) keeps the weights (1).
    const int64_t eval_attn = 3 * f4, train_keep = (m.attention_dropout ? 3 : 1) * f4, attr_keep = f4,
                  grad_once = 4 * f4;
    // Per position, per block: q, k, v and their heads' copies (6d), the heads' output, W_o's,
    // two AddNorms with their sums and LayerNorm's statistics (~8d), the feed-forward's two [f]
    // (its product and the ReLU); a decoder block has a second attention (its q, W_o: ~4d more).
    const int64_t enc_pos = f4 * (14 * d + 2 * m.fe), dec_pos = f4 * (18 * d + 2 * m.fd);
    // Cross-attention's keys and values of the encoder output, per decoder block: [S, 2d] and
    // the heads' copy.
    const int64_t cross_kv = f4 * 4 * d;

    // Evaluation: no gradients, one block's tensors at a time (the encoder output stays).
    c.evaluation.ss = eval_attn * m.he;
    c.evaluation.tt = eval_attn * m.hd;
    c.evaluation.st = eval_attn * m.hd;
    c.evaluation.s = enc_pos + cross_kv + f4 * d;
    c.evaluation.t = dec_pos + 2 * f4 * V;  // the output layer's logits and log-softmax
    // Training: every block's kept tensors, then one attention's gradients.
    c.training.ss = train_keep * m.Le * m.he + grad_once * m.he;
    c.training.tt = train_keep * m.Ld * m.hd + grad_once * m.hd;
    c.training.st = train_keep * m.Ld * m.hd + grad_once * m.hd;
    c.training.s = m.Le * enc_pos + m.Ld * cross_kv + f4 * d;
    c.training.t = m.Ld * dec_pos + 4 * f4 * V;  // logits, log-softmax and both gradients
    // Attribution: training's kept tensors without dropout; the logits [T, V] and their
    // gradient (indexing's backward scatters into a zero [T, V]); the scaled embeddings and
    // their gradients ([S, d] and [T, d], 2 each).
    c.attribution.ss = attr_keep * m.Le * m.he + grad_once * m.he;
    c.attribution.tt = attr_keep * m.Ld * m.hd + grad_once * m.hd;
    c.attribution.st = attr_keep * m.Ld * m.hd + grad_once * m.hd;
    c.attribution.s = m.Le * enc_pos + m.Ld * cross_kv + 2 * f4 * d;
    c.attribution.t = m.Ld * dec_pos + 3 * f4 * V + 2 * f4 * d;

    // Decoding. encode(): a block's q kᵀ, its scaling, the masked scores and the weights
    // [h, S, S] while it runs (up to 4 alive: 601 positions of 8 heads measured 48 MB, 4 x 46
    // MB / 4); the output [S, d], a block's position-wise tensors while it runs. With the maps
    // kept, every block's self-attention weights and raw scores (2 per element and block).
    c.encoding.ss = 4 * f4 * m.he;
    c.encoding.s = enc_pos + f4 * d + 8;
    c.encoding_maps.ss = 2 * f4 * m.Le * m.he;
    // A step, per hypothesis: the encoder output it reads (beam search copies it per
    // hypothesis), the cache's cross keys and values of every block [S, 2d] (and one block's
    // projection while start() makes them), its self keys and values [T, 2d] in GrowingSteps'
    // buffers (attention_blocks.hpp: room for a quarter more, at least 8 positions; a regrowth
    // or a beam's reordering copies one block's at a time, room included); per block, each
    // attention's scores, masked scores and weights (every block's kept for the maps: 2 of 3),
    // per head; the maps' host copies (weights and scores of every head, the primary mean); the
    // logits and their log-probabilities, beam search's candidates over K x V.
    const int64_t self_kv = m.Ld * 2 * f4 * d + 2 * f4 * d;  // every block's, and one block's copy
    c.step.s = f4 * d + 5 + m.Ld * 2 * f4 * d + cross_kv + f4 * m.hd * (2 * m.Ld + 1) + 2 * f4 * m.Ld * m.hd + f4;
    c.step.t = self_kv + self_kv / 4 + f4 * m.hd * (2 * m.Ld + 1) + 2 * f4 * m.Ld * m.hd;
    c.step.one = 4 * f4 * V + f4 * (12 * d + 2 * m.fd) + 8 * self_kv;
    // Kept rows per hypothesis over T steps: the primary map (the last block's mean of its
    // heads: weights only) a row of S per step; every cross head's weights and scores, two
    // rows of S per step; every decoder self head's, two rows of t at step t (T (T + 1) / 2
    // floats each over T steps).
    c.kept_primary.st = f4;
    c.kept_primary.t = k_row_bytes;
    c.kept_cross.st = 2 * f4 * m.Ld * m.hd;
    c.kept_cross.t = 2 * k_row_bytes * m.Ld * m.hd;
    c.kept_decoder.tt = f4 * m.Ld * m.hd;
    c.kept_decoder.t = f4 * m.Ld * m.hd + 2 * k_row_bytes * m.Ld * m.hd;
    // Per returned hypothesis: every encoder self head's weights and scores, S rows of S each.
    c.kept_source.ss = 2 * f4 * m.Le * m.he;
    c.kept_source.s = 2 * k_row_bytes * m.Le * m.he;
    return c;
}

/// One Transformer stack's forward operations per row (core/model/work_cost.hpp). Per
/// position and block: the self-attention's q, k, v and output projections (4 d^2), the
/// feed-forward (2 d f); a decoder block's cross-attention adds its query and output (2 d^2)
/// and the keys and values of every source position (2 d^2 per source position). Per score
/// element and head: q . k and the weighted sum (2 d / h multiply-adds) and the elementwise
/// work. The output layer: d V per target position.
ShapeCost stack_work(const StackShape& m) {
    const int64_t d = m.d, e = k_attention_element_ops;
    ShapeCost w;
    w.ss = m.Le * (2 * d + m.he * e);
    w.tt = m.Ld * (2 * d + m.hd * e);
    w.st = m.Ld * (2 * d + m.hd * e);
    w.s = m.Le * (4 * d * d + 2 * d * m.fe) + m.Ld * 2 * d * d;
    w.t = m.Ld * (6 * d * d + 2 * d * m.fd) + d * m.V;
    return w;
}

StackShape transformer_shape(const ModelConfig& c) {
    StackShape s;
    s.d = c.hidden_size;
    s.V = c.tgt_vocab;
    s.Le = s.Ld = c.num_layers;
    s.he = s.hd = c.num_heads;
    s.fe = s.fd = c.ffn_size;
    s.attention_dropout = c.dropout > 0;
    return s;
}

StackShape pretrained_shape(const PretrainedConfig& c, int64_t V) {
    StackShape s;
    s.d = c.d_model;
    s.V = V;
    s.Le = c.encoder_layers;
    s.he = c.encoder_heads;
    s.fe = c.encoder_ffn;
    s.Ld = c.decoder_layers;
    s.hd = c.decoder_heads;
    s.fd = c.decoder_ffn;
    s.attention_dropout = c.attention_dropout > 0;
    return s;
}

}  // namespace

MemoryCost TransformerImpl::memory_cost() const {
    MemoryCost cost = stack_cost(transformer_shape(m_config));
    cost.fixed = m_positions.numel() * f4;
    return cost;
}

MemoryCost PretrainedImpl::memory_cost() const {
    const StackShape s = pretrained_shape(hf(), m_config.tgt_vocab);
    MemoryCost cost = stack_cost(s);
    // The position rows each pass looks up ([S, d] and [T, d]), and M2M100's table grown past
    // its rows for a longer input (the whole table again).
    cost.encoding.s += 2 * f4 * s.d;
    cost.step.one += 2 * f4 * s.d;
    cost.evaluation.s += 2 * f4 * s.d;
    cost.evaluation.t += 2 * f4 * s.d;
    cost.training.s += 2 * f4 * s.d;
    cost.training.t += 2 * f4 * s.d;
    cost.attribution.s += 2 * f4 * s.d;
    cost.attribution.t += 2 * f4 * s.d;
    cost.fixed = m_positions.numel() * f4;
    return cost;
}

ShapeCost TransformerImpl::forward_work() const { return stack_work(transformer_shape(m_config)); }

ShapeCost PretrainedImpl::forward_work() const { return stack_work(pretrained_shape(hf(), m_config.tgt_vocab)); }

ShapeCost Seq2SeqImpl::forward_work() const {
    // Per source position: every layer's gates over its input and state, per direction (the
    // first layer reads the embedding, the others the layer below: K wide). Per target token:
    // every decoder layer's gates (the first reads the embedding and the context), the output
    // layer (H V), the attention's query projection. Per source position and target token:
    // additive scoring's features (A, below), a dot product or a general form's (K), the
    // context's weighted sum (K), the scores' elementwise work.
    const ModelConfig& c = m_config;
    const int64_t E = c.embed_size, H = c.hidden_size, L = c.num_layers, V = c.tgt_vocab;
    const int64_t G = c.cell == CellType::lstm ? 4 : 3, dirs = c.bidirectional ? 2 : 1, K = H * dirs;
    const bool attends = c.has_attention();
    const bool additive = c.scoring == Scoring::additive && attends;
    const int64_t A = additive ? (c.attention_size > 0 ? c.attention_size : H) : 0;
    ShapeCost w;
    w.s = dirs * G * H * (E + H) + (L - 1) * dirs * G * H * (K + H);
    w.t = G * H * (E + (attends ? K : 0) + H) + (L - 1) * G * H * (2 * H) + H * V;
    // Additive scoring's features run elementwise: the sum of query and key, its tanh, v's
    // product and the sum over A, and autograd's copies of them, about 7 passes per feature.
    if (attends) {
        if (additive) {
            w.s += K * A;
            w.t += H * A;
            w.st = 7 * k_elementwise_ops * A + K + k_attention_element_ops;
        } else {
            if (c.scoring == Scoring::general) w.s += K * H;
            w.st = K + K + k_attention_element_ops;
        }
    }
    return w;
}

MemoryCost Seq2SeqImpl::memory_cost() const {
    const ModelConfig& c = m_config;
    const int64_t E = c.embed_size, H = c.hidden_size, L = c.num_layers, V = c.tgt_vocab;
    const int64_t G = c.cell == CellType::lstm ? 4 : 3, dirs = c.bidirectional ? 2 : 1, K = H * dirs;
    const bool additive = c.scoring == Scoring::additive && c.has_attention();
    const int64_t A = additive ? (c.attention_size > 0 ? c.attention_size : H) : 0;
    // The projected keys the encoding holds: additive [S, A], general [S, H]; dot products read the keys.
    const int64_t Ak = additive ? A : (c.scoring == Scoring::general ? H : 0);
    const bool attends = c.has_attention();
    MemoryCost cost;
    // The encoder per source position: the embedding, each layer's input projection [G H] per
    // direction and its outputs, the keys [K] and projected keys.
    const int64_t enc_pos = f4 * (E + L * dirs * (G * H + 2 * H) + K + Ak);
    // The decoder per target token: its embedding, every layer's gates, states and inputs
    // (kept for the backward pass), the context [K].
    const int64_t dec_pos = f4 * (E + L * (3 * G * H + 3 * H) + 2 * K);
    // Training (the fused decoder, core/model/fused_decoder.cpp) keeps per target token and
    // source position the additive features [A] (their gradient is made step by step in the
    // backward pass), besides the weights, their dropout mask, scores and gradients (8); the
    // output layer's logits and their gradient (8 V per token). Validation runs the same
    // fused node without gradients: the features and the weights.
    if (attends) cost.training.st = f4 * (A + 8);
    cost.training.s = 2 * enc_pos;
    cost.training.t = 2 * dec_pos + 2 * f4 * V;
    if (attends) cost.evaluation.st = f4 * (A + 4);
    cost.evaluation.s = enc_pos;
    cost.evaluation.t = dec_pos + 2 * f4 * V;
    // Attribution runs the decoder step by step under autograd (forward_embedded): per step
    // the features [S, A] (kept: tanh's output), scores, masked scores and weights (kept), and
    // in the backward pass one step's gradients of them; the logits [T, V] and their gradient.
    if (attends) cost.attribution.st = f4 * (2 * A + 8);
    cost.attribution.s = 2 * enc_pos + 2 * f4 * E + f4 * (A + 4);
    cost.attribution.t = 2 * dec_pos + 3 * f4 * V + 2 * f4 * E;

    // Decoding: the encoding holds the keys [S, K] and projected keys [S, Ak] (a copy per
    // hypothesis in beam search: counted in step) and, while it runs, the encoder's layers.
    cost.encoding.s = enc_pos + 8;
    // A step per hypothesis: its keys, projected keys and mask; additive scoring's sum and tanh
    // [S, A] (two alive at once); scores, masked scores, weights and their host copies; the
    // logits, their log-probabilities and beam search's candidates.
    cost.step.s = f4 * (K + Ak) + 1 + (attends ? 2 * f4 * A + 6 * f4 : 0);
    cost.step.one = 4 * f4 * V + f4 * (4 * G * H * L + 4 * H + 2 * K + E);
    // Kept: the one cross map's weights and scores, a row of S each per step.
    if (attends) {
        cost.kept_primary.st = 2 * f4;
        cost.kept_primary.t = 2 * k_row_bytes;
    }
    return cost;
}


// The T5 family (core/model/t5_model.hpp): the pretrained stack's costs at the wider of d and the
// heads' inner width h x d_kv (its q, k, v and their heads' copies are that wide), the gated
// feed-forward's two [f] products counted as a wider f; per attention element the position bias
// added to the scores (one more [h, Tq, Tk] alive: the bias itself, built per pass).
namespace {
StackShape t5_shape(const PretrainedConfig& c, int64_t V) {
    StackShape s = pretrained_shape(c, V);
    const T5Options& o = *c.t5;
    s.d = std::max(c.d_model, o.inner(c.encoder_heads));
    if (o.gated) s.fe = s.fd = 2 * c.encoder_ffn;
    return s;
}
}  // namespace

MemoryCost T5Impl::memory_cost() const {
    const StackShape s = t5_shape(hf(), m_config.tgt_vocab);
    MemoryCost cost = stack_cost(s);
    for (ShapeCost* path : {&cost.evaluation, &cost.training, &cost.attribution}) {
        path->ss += f4 * s.he;
        path->tt += f4 * s.hd;
    }
    cost.encoding.ss += f4 * s.he;
    cost.step.t += f4 * s.hd;
    return cost;
}

ShapeCost T5Impl::forward_work() const { return stack_work(t5_shape(hf(), m_config.tgt_vocab)); }

}  // namespace attnviz
