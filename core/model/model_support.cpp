// Seeded construction and d2l's num_steps (core/model/model_support.hpp).
#include "core/model/model_support.hpp"

#include "core/text/vocab.hpp"

namespace attnviz {

ScopedSeed::ScopedSeed(uint64_t seed) : m_gen(at::detail::getDefaultCPUGenerator()), m_state(m_gen.get_state()) {
    m_gen.set_current_seed(seed);
}

ScopedSeed::~ScopedSeed() { m_gen.set_state(m_state); }

std::pair<torch::Tensor, torch::Tensor> fit_source_steps(const torch::Tensor& src, const torch::Tensor& src_len,
                                                         int64_t N) {
    const int64_t S = src.size(1);
    if (S == N) return {src, src_len};
    if (S > N) return {src.narrow(1, 0, N), src_len.clamp_max(N)};
    return {torch::constant_pad_nd(src, {0, N - S}, static_cast<double>(Vocab::pad_id)), src_len};
}

}  // namespace attnviz
