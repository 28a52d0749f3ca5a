#pragma once
// Head gates: a scalar ξ_h multiplying each attention head's output (Michel et al. 2019,
// "Are Sixteen Heads Really Better than One?"), run-wide. Every family applies them in every
// pass -- the encoder's self-attention, the teacher-forced decoder, each decoding step -- so
// a gate of 0 switches a head off for a whole run (AttentionIntervention::heads_off does it for
// one step), and a gate of 1 that requires grad measures the loss's derivative in the head
// (importance, core/analysis/heads.hpp). The RNN has one head: its cross map (layer 0, head
// 0), whose gate multiplies the context vector.
#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/model/attention_map.hpp"

namespace attnviz {

/// The heads of one kind of attention a network has: layers x heads.
struct HeadGroup {
    AttentionKind kind = AttentionKind::cross;
    int layers = 0;
    int heads = 0;  ///< per layer
    int64_t count() const { return static_cast<int64_t>(layers) * heads; }
};

/// One gate per head of each kind a network has; a kind's tensor undefined: every gate 1.
struct HeadGates {
    torch::Tensor encoder_self;  ///< [L, h] float
    torch::Tensor cross;         ///< [L, h] float
    torch::Tensor decoder_self;  ///< [L, h] float
    const torch::Tensor& of(AttentionKind kind) const;
    torch::Tensor& of(AttentionKind kind);
    /// Whether any kind has gates (then the families leave their fused paths, which have none).
    bool any() const { return encoder_self.defined() || cross.defined() || decoder_self.defined(); }
    /// Ones [L, h] for every group, requiring grad: what importance differentiates.
    static HeadGates ones(const std::vector<HeadGroup>& groups, bool requires_grad);
    /// Every head of `groups` at 1 except those of `off` at 0 (no grad). ConfigError naming the
    /// head and the model's sizes when one is not in `groups` (head -1: every head of its layer).
    static HeadGates mask(const std::vector<HeadGroup>& groups, const std::vector<AttentionMapId>& off);
};

/// "cross:1:3,encoder_self:0:2" -> the heads, in order. Each item KIND:LAYER:HEAD with KIND one of
/// cross, encoder_self, decoder_self (enc and dec for short), LAYER and HEAD non-negative integers.
/// ConfigError naming the item and the form when one is not.
std::vector<AttentionMapId> parse_head_ids(const std::string& text);
/// "cross:1:3" (the form parse_head_ids reads).
std::string head_text(const AttentionMapId& id);
/// "cross 2 layers x 4 heads, encoder_self 2 layers x 4 heads, ..." for messages.
std::string describe_heads(const std::vector<HeadGroup>& groups);

/// The gate row [h] of (kind, layer) on `device` -- undefined when the gates of that kind are -- times
/// `keep` ([h], an intervention's heads switched off; undefined: none): the head multiplier a
/// family's attention applies. Undefined when both are.
torch::Tensor gate_row(const HeadGates& gates, AttentionKind kind, int64_t layer, const torch::Tensor& keep,
                       const torch::Device& device);

}  // namespace attnviz
