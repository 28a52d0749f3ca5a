#pragma once
// What a piece of analysis costs in time, by its shape, beside what it costs in memory
// (core/model/memory_cost.hpp). Attribution of one sentence runs a teacher-forced forward
// pass (and a backward pass) per row: occlusion a row per source token, integrated gradients
// a row per point and output step. A 1,000-word sentence makes that cubic in its length, so
// even a tiny model would run for minutes; the work bound refuses such work before it starts
// (or, for automatic integrated gradients, stops adding points) instead.
//
// Work is counted in operations: a multiply-add of a matrix product is one; a float through one
// elementwise operation (a sum, a tanh, a softmax's pass) costs k_elementwise_ops, as such passes
// run at memory's speed, far below a matrix product's. Every family states the operations of one
// teacher-forced forward pass per row (EncoderDecoder::forward_work(), a ShapeCost over S source
// and T target positions); a backward pass counts twice its forward. On two cores of this
// project's machine a tiny Transformer's 1,000-token attention runs at about 22 x 10^9 of these a
// second, an opus-mt-sized model's matrix products at 27 x 10^9, a tiny RNN's additive attention
// under autograd at 11 x 10^9 (docs/robustness.md).
//
// Plain data, no LibTorch.
#include <cstdint>
#include <string>

#include "core/model/memory_cost.hpp"

namespace attnviz {

/// A float through one elementwise operation, in multiply-adds' time (see above).
constexpr int64_t k_elementwise_ops = 20;
/// An attention score element per head beside its multiply-adds: its scaling, mask, softmax
/// (maximum, exponent, sum, division) and the weighted sum's read, about 8 elementwise passes.
constexpr int64_t k_attention_element_ops = 8 * k_elementwise_ops;

/// The most work one command's attribution may take by default (all its sentences together,
/// issue 46; AttributionWork, core/analysis/attribution.hpp) on two threads: 5 x 10^11 operations,
/// about 20-45 s on two cores (see above; docs/robustness.md has the figures).
constexpr int64_t default_work_bound = 500'000'000'000;
/// The threads default_work_bound is measured on. On fewer the default shrinks with them, so that
/// the bound stays the same time: one thread (`--threads 1`; the app on a 2-core machine leaves
/// one core to its window) gets half the operations. More threads get no more: a tiny model's
/// passes are too small to use them.
constexpr int k_work_bound_threads = 2;

/// The bound in force for this process: set_work_bound()'s value, else the environment variable
/// ATTNVIZ_WORK_BOUND (operations: "5e11", "500G", "2T"; at least 10^6) when valid, else
/// default_work_bound for the threads set_work_threads() gave (k_work_bound_threads until then).
int64_t work_bound();
/// The intra-op threads the process computes on (the CLI's --threads, the app's choice), for the
/// default bound; set it where the threads are set, before work starts.
void set_work_threads(int threads);
/// Sets the process's work bound (0: back to the environment's or the default). Set it before
/// work starts.
void set_work_bound(int64_t operations);
/// A count of operations from text: "200000000000", "2e11", "200G", "0.2T" (decimal units k, M,
/// G, T); -1 when not one.
int64_t parse_work_size(const char* text);
/// "2.0 x 10^11 operations": a work count for messages.
std::string work_text(int64_t operations);

/// Operations of a backward pass beside its forward: twice the forward's.
constexpr int64_t k_backward_factor = 2;

}  // namespace attnviz
