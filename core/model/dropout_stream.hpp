#pragma once
// Hashed dropout masks: a mask element is a function of a seed, which mask it is,
// and the token's place in the whole batch, so a batch trained in parts on
// several threads draws the same masks as the whole batch would.
#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace attnviz {

/// Where dropout masks come from during a training step (core/train/split_step.hpp
/// makes one per step and hands it to the network's loss(), LossOptions::dropout):
/// element u of packed token i is kept when a
/// hash of (seed, which mask, the token's batch row and step, u) falls below
/// the keep probability. So a mask depends on the step's seed and on each
/// token's place in the whole batch, not on how the batch was split into
/// parts, nor on threads or their timing. Without a stream (outside training
/// steps, e.g. the tests' direct calls) masks come from ATen's generator.
struct DropoutStream {
    uint64_t seed = 0;          ///< this step's seed
    std::vector<int64_t> rows;  ///< the batch row of each row the model is given; empty: the same row
    /// The batch row of the model's row r.
    int64_t batch_row(int64_t r) const { return rows.empty() ? r : rows[static_cast<size_t>(r)]; }
};

/// A packed token's key for hashed masks: its batch row and step.
inline uint64_t dropout_key(int64_t batch_row, int64_t step) {
    return (static_cast<uint64_t>(batch_row) << 32) | static_cast<uint64_t>(step);
}

/// A dropout mask [keys.size(), units] of 1/keep (kept) and 0, hashed from the
/// stream's seed, `which` (one id per mask of a step) and the keys, with
/// `options`' dtype and device.
torch::Tensor hashed_dropout_mask(const DropoutStream& stream, uint64_t which, const std::vector<uint64_t>& keys,
                                  int64_t units, double keep, const torch::TensorOptions& options);

/// The dropout masks of multi-head attention weights, [B, heads, queries, units] in one
/// tensor: head h's [B, queries, units] is hashed_dropout_mask(stream, (which << 8) | h,
/// keys, units, keep) viewed so, where keys are the B x queries (batch row, query) keys in
/// row-major order. std::logic_error when keys.size() is not a multiple of queries.
torch::Tensor hashed_dropout_head_masks(const DropoutStream& stream, uint64_t which, const std::vector<uint64_t>& keys,
                                        int64_t heads, int64_t queries, int64_t units, double keep,
                                        const torch::TensorOptions& options);

}  // namespace attnviz
