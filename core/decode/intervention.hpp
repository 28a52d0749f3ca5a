#pragma once
// What-if interventions on attention, as decoding is asked for them: "what would
// the model have said had it looked elsewhere?" (Jain & Wallace 2019; Wiegreffe &
// Pinter 2019; Seq2Seq-Vis's attention editing). Plain data, no LibTorch: a
// DecodeOptions carries one (core/decode/translation.hpp), greedy search turns it
// into the tensors of the family seam's AttentionIntervention step by step
// (core/decode/intervene.hpp), and core/decode/what_if.hpp re-decodes one step's
// change and reports what moved.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/model/attention_map.hpp"

namespace attnviz {

/// How an intervention changes a step's cross-attention.
enum class InterventionKind {
    none,        ///< unchanged
    uniform,     ///< the same weight on every real source token (1 / n)
    permute,     ///< the step's own weights, shuffled over the real source tokens (a fresh permutation per step)
    zero_token,  ///< the step's own weights with one source token's weight 0 and the rest renormalised
    replace,     ///< a given distribution over the source tokens
    head_off     ///< one attention head switched off (its output zero; the RNN's one map off: a zero context)
};
std::string to_string(InterventionKind kind);  ///< "none", "uniform", "permute", "zero", "weights", "head-off"

/// One intervention: what it does and at which output steps.
struct Intervention {
    InterventionKind kind = InterventionKind::none;  ///< what it does; none: decoding as usual
    int64_t step = -1;          ///< the output step it changes (0-based); -1: every step
    int64_t source_token = 0;   ///< zero_token: the source position (0-based, reading order, <eos> included)
    std::vector<float> weights; ///< replace: the new weights, one per source token (<eos> included), >= 0,
                                ///< not all 0; normalised to sum 1 before use
    AttentionMapId head;        ///< head_off: the head (kind cross; the RNN has layer 0, head 0 only)
    uint64_t seed = 0;          ///< permute: seed of the permutations (the same seed gives the same ones)

    bool active() const { return kind != InterventionKind::none; }
    /// Whether it changes output step `t`.
    bool applies_at(int64_t t) const { return active() && (step < 0 || step == t); }
    /// Whether it is computed from the weights the step would have used (permute, zero_token).
    bool needs_own_weights() const { return kind == InterventionKind::permute || kind == InterventionKind::zero_token; }
    /// "uniform attention at every step", "source token 2's weight zeroed at step 3", ...
    std::string describe() const;
    /// {"kind", "step" (null: every step), and "source_token", "weights", "head", "seed" where they apply}.
    nlohmann::json to_json() const;
    /// Throws ConfigError naming what is wrong (negative position, empty or negative weights, ...).
    void validate() const;
};

/// Parses the command line's form: "uniform", "permute", "zero=POS", "weights=W1,W2,...",
/// "head-off=LAYER:HEAD" (at every step; set Intervention::step for one). Throws ConfigError
/// listing the forms on anything else.
Intervention parse_intervention(const std::string& text);

}  // namespace attnviz
