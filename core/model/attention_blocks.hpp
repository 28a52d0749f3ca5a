#pragma once
// Blocks the attention families share (the d2l Transformer, the pretrained family and T5),
// each written once: the additive key mask, the heads an intervention switches off, eager
// multi-head attention before its output projection, the feed-forward activations, scheduled
// sampling one step at a time, and the checked downcast of the seam's encodings and caches.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/config/config.hpp"
#include "core/config/pretrained_config.hpp"
#include "core/model/encoder_decoder.hpp"

namespace attnviz {

/// The family's own type behind one of the seam's base classes (an encoding, a cache): a
/// logic_error naming the family and the part when another family's object reached it.
template <typename T, typename Base>
T& family_part(Base& x, const char* family, const char* what) {
    auto* p = dynamic_cast<T*>(&x);
    if (!p) throw std::logic_error(std::string(family) + " decoder step: " + what + " of another model family");
    return *p;
}

/// [B, 1, 1, S] float: 0 where mask [B, S] is true, -inf elsewhere (added to scores over keys).
torch::Tensor key_bias(const torch::Tensor& mask);

/// [heads] float on the CPU with 0 for the heads of (kind, layer) the intervention switches off
/// (head -1: all of them) and 1 for the others; undefined when it switches none off.
torch::Tensor heads_switched_off(const AttentionIntervention* intervention, AttentionKind kind, int64_t layer,
                                 int64_t heads);

/// The feed-forward activation of a config (relu, gelu, gelu_tanh, silu, tanh).
torch::Tensor activate(Activation a, const torch::Tensor& x);

/// A decoder layer's self-attention keys (or values) [B, h, steps, dh], one position longer each
/// step without copying the positions already there: a buffer with room for more (a quarter of
/// what is filled, at least 8 positions, zeroed), of which filled() is the first steps(). Why:
/// torch::cat copied the whole cache at every step, and beam search's reordering copied it
/// again (an opus-mt-sized decoder at batch 32 and beam 4: 38 MB a step each, 13% of the time).
/// A reordering gathers the buffer, room included. Recording a gradient (scheduled sampling
/// trains through steps) it is the cat it replaces: no position is written in place. A copy
/// shares nothing with its original (a cloned cache appends on its own).
class GrowingSteps {
public:
    GrowingSteps() = default;
    GrowingSteps(const GrowingSteps& other);
    GrowingSteps& operator=(const GrowingSteps& other);
    GrowingSteps(GrowingSteps&&) noexcept = default;
    GrowingSteps& operator=(GrowingSteps&&) noexcept = default;
    /// Appends x [B, h, n, dh] after the filled positions; returns filled(), x's positions included.
    torch::Tensor append(const torch::Tensor& x);
    /// [B, h, steps, dh], a view of the buffer (undefined before the first append).
    torch::Tensor filled() const;
    int64_t steps() const { return m_steps; }
    /// Row r becomes the row rows[r] was (beam search's reordering).
    void select(const torch::Tensor& rows);

private:
    torch::Tensor m_buffer;  ///< [B, h, capacity, dh]
    int64_t m_steps = 0;
};

/// g when map_rows [R] (an encoding's rows: the source row each holds) is 0 (g times), 1 (g
/// times), ..., as beam search's selection of every row g times leaves it, g > 1; else 1.
int64_t repeated_row_group(const torch::Tensor& map_rows);

/// Rows 0, g, 2g, ... of x (x itself when g is 1).
torch::Tensor every_nth_row(const torch::Tensor& x, int64_t g);

/// A decoder's vocabulary logits [..., V] made final: plus bias ([V] or [1, V], optional; an all-zero
/// bias, as Marian's final_logits_bias, adds nothing and is skipped), and `never` (attnviz's <bos>)
/// set to `floor` in every row. In place when no gradient is recorded: at batch 32 and beam 4 an
/// opus-mt-sized step's logits are 30 MB, and each out-of-place pass wrote another 30 MB.
torch::Tensor finish_logits(torch::Tensor logits, const torch::Tensor& bias, int64_t never, float floor);

/// What eager attention computed for every head, before the output projection.
struct AttendedHeads {
    torch::Tensor merged;   ///< [B, Tq, h dh]: the heads' outputs side by side
    torch::Tensor weights;  ///< [B, h, Tq, Tk] when kept
    torch::Tensor scores;   ///< [B, h, Tq, Tk] q·kᵀ·scaling + bias (-inf at masked keys), when kept
};

/// transformers' eager attention over q, k, v [B, h, T, dh]: softmax(q·kᵀ·scaling + bias) v.
/// scaling 1 multiplies nothing (T5 scales no score). bias (optional): additive, broadcast
/// over [B, h, Tq, Tk]; weights_given (optional): [B, 1, 1, Tk] replacing every head's softmax;
/// keep_heads (optional): [h] multiplying each head's output; zero_empty_rows: a row whose
/// every key is masked attends to nothing (its NaN weights become 0). Dropout on the weights
/// when training. k and v of fewer rows than q: each of their rows serves q.size(0) / k.size(0)
/// consecutive rows of one position each (beam search's beams of one sentence over its
/// cross-attention keys); bias and weights_given are then per query row [B, ., 1, Tk] or broadcast.
AttendedHeads attend_heads(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scaling,
                           const torch::Tensor& bias, double dropout, bool training, bool keep,
                           const torch::Tensor& weights_given = {}, const torch::Tensor& keep_heads = {},
                           bool zero_empty_rows = false);

/// Whether attend_heads computes (q, k, v, bias) in its own loops rather than through ATen (for
/// the tests): a decoder step's few queries (at most 16 positions) over at most 256 keys, dense
/// float CPU tensors whose heads' dh are contiguous, no gradient recorded, no dropout applied,
/// no weights given, a float bias that broadcasts to the scores and keep_heads of h values.
bool attend_heads_in_loops(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                           const torch::Tensor& bias, bool dropping, const torch::Tensor& weights_given,
                           const torch::Tensor& keep_heads);

/// Appends a decoder step's maps of one attention layer to `maps`, one per head: weights and
/// scores (optional) [B, h, 1, K] -> [B, K] each, views. (A BART-base-sized step keeps 144 of
/// them: the layer's row is taken once, not once a head.)
void append_head_maps(std::vector<StepMap>& maps, AttentionKind kind, int64_t layer, const torch::Tensor& weights,
                      const torch::Tensor& scores);

/// A decoder step's maps as StepOutput carries them, from each layer's cross and self attention
/// (a family's own type with weights and scores [B, h, 1, K]): the primary map first (the last
/// layer's cross heads' mean), then every cross head of every layer, then every self head.
template <typename Attended>
std::vector<StepMap> decoder_step_maps(const std::vector<Attended>& cross, const std::vector<Attended>& self) {
    std::vector<StepMap> maps;
    const auto L = static_cast<int64_t>(cross.size());
    if (L == 0) return maps;
    maps.reserve(static_cast<size_t>(1 + 2 * L * cross.back().weights.size(1)));
    maps.push_back(StepMap{AttentionMapId{AttentionKind::cross, static_cast<int>(L - 1), -1},
                           cross.back().weights.squeeze(2).mean(1), torch::Tensor()});
    for (int64_t l = 0; l < L; ++l)
        append_head_maps(maps, AttentionKind::cross, l, cross[static_cast<size_t>(l)].weights,
                         cross[static_cast<size_t>(l)].scores);
    for (int64_t l = 0; l < L; ++l)
        append_head_maps(maps, AttentionKind::decoder_self, l, self[static_cast<size_t>(l)].weights,
                         self[static_cast<size_t>(l)].scores);
    return maps;
}

/// Scheduled sampling: the logits [B, T, V] of tgt_in [B, T] decoded one step at a time, each
/// step after the first fed the model's own previous argmax with probability 1 - teacher_forcing
/// (one draw of the global generator a step), as decoding runs.
torch::Tensor sampled_forward(EncoderDecoder& model, const torch::Tensor& src, const torch::Tensor& src_len,
                              const torch::Tensor& tgt_in, double teacher_forcing);

}  // namespace attnviz
