#pragma once
// What the model families' own code shares: building weights from a seed without
// disturbing anyone's random stream, and d2l's num_steps applied to a source batch.
#include <cstdint>
#include <utility>

#include <torch/torch.h>

namespace attnviz {

/// Seeds the global CPU generator for a model's initial weights and puts its previous
/// state back when it goes, so building a model (e.g. a snapshot copy on another thread)
/// never disturbs the random stream of a training run.
class ScopedSeed {
public:
    explicit ScopedSeed(uint64_t seed);
    ~ScopedSeed();
    ScopedSeed(const ScopedSeed&) = delete;
    ScopedSeed& operator=(const ScopedSeed&) = delete;

private:
    at::Generator m_gen;
    at::Tensor m_state;
};

/// d2l's pad_or_trim of a batch of sources src [B, S] (valid lengths src_len [B]) to N
/// steps: a wider batch loses its last columns (a long row its <eos>, src_len clamped to
/// N), a narrower one gets <pad> columns.
std::pair<torch::Tensor, torch::Tensor> fit_source_steps(const torch::Tensor& src, const torch::Tensor& src_len,
                                                         int64_t N);

}  // namespace attnviz
