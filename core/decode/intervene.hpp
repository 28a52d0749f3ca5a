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
/// running the decoder again from its start with the tokens and interventions so far (the
/// seam has no copy of a cache): t extra steps at step t.
class StepIntervener {
public:
    /// model and source must outlive it; lengths: each row's source length. Throws
    /// ConfigError when the model has no attention to change.
    StepIntervener(EncoderDecoder& model, const EncodedSource& source, Intervention intervention,
                   std::vector<int64_t> lengths);
    /// What the step about to run with `tokens` [B] attends (null: as usual); remembers both
    /// for later replays.
    const AttentionIntervention* before_step(int64_t step, const torch::Tensor& tokens);
    /// After a step that switched a head off: throws ConfigError when the step recorded no
    /// such map (the model has no such head).
    void check_step(const StepOutput& out) const;

private:
    torch::Tensor own_weights(const torch::Tensor& tokens);
    EncoderDecoder& m_model;
    const EncodedSource& m_source;
    Intervention m_iv;
    std::vector<int64_t> m_lengths;
    torch::Generator m_generator;
    std::vector<torch::Tensor> m_tokens;                             ///< fed at each step so far
    std::vector<std::unique_ptr<AttentionIntervention>> m_applied;  ///< per step so far (null: none)
};

}  // namespace attnviz
