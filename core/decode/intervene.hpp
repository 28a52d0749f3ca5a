#pragma once
// An Intervention (core/decode/intervention.hpp) turned into what the family seam's
// decoder step takes (AttentionIntervention, core/model/encoder_decoder.hpp), step by
// step, for a batch decoded greedily (core/decode/greedy.cpp).
#include <cstdint>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "core/decode/intervention.hpp"
#include "core/model/encoder_decoder.hpp"

namespace attnviz {

/// The cross-attention weights [B, S] an intervention gives a step, from the weights the
/// step would have used (`own` [B, S]; needed by permute and zero_token, else may be
/// undefined) and each row's source length n (lengths [B] on the host; mask [B, S]).
/// Uniform: 1/n on the real positions. Permute: `own` shuffled over the real positions by
/// `generator`. Zero: `own` with the token's weight 0 and the rest renormalised (when the
/// token had all the weight, the others share it equally; a one-token source is left with
/// no attention at all: a zero context). Replace: the given weights normalised (their count
/// must be n). Throws ConfigError when a position or count does not fit a row's source.
torch::Tensor intervention_weights(const Intervention& iv, const torch::Tensor& own, const torch::Tensor& mask,
                                   const std::vector<int64_t>& lengths, torch::Generator& generator);

/// Applies an Intervention to the steps of one greedy decoding of a batch. Where it is
/// computed from the weights a step would have used (permute, zero_token) it reads them by
/// running that step once, unchanged, on a copy of the decoder's cache (DecoderCache::clone):
/// two decoder steps per output token whatever the output's length, where replaying the
/// decoder from its start took t + 1 at step t.
class StepIntervener {
public:
    /// model and source must outlive it; lengths: each row's source length. Throws
    /// ConfigError when the model has no attention to change.
    StepIntervener(EncoderDecoder& model, const EncodedSource& source, Intervention intervention,
                   std::vector<int64_t> lengths);
    /// What the step about to run with `tokens` [B] from `cache` attends (null: as usual);
    /// valid until the next call. The cache is read, not moved on.
    const AttentionIntervention* before_step(int64_t step, const torch::Tensor& tokens, const DecoderCache& cache);
    /// After a step that switched a head off: throws ConfigError when the step recorded no
    /// such map (the model has no such head).
    void check_step(const StepOutput& out) const;

private:
    EncoderDecoder& m_model;
    const EncodedSource& m_source;
    Intervention m_iv;
    std::vector<int64_t> m_lengths;
    torch::Generator m_generator;
    std::unique_ptr<AttentionIntervention> m_applied;  ///< the current step's (null: none)
};

}  // namespace attnviz
