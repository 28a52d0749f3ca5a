// Hashed dropout masks (core/model/dropout_stream.hpp).
#include "core/model/dropout_stream.hpp"

#include <ATen/Parallel.h>

namespace attnviz {

namespace {
// splitmix64's finaliser: consecutive inputs give independent-looking outputs.
inline uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}
constexpr uint64_t golden = 0x9e3779b97f4a7c15ULL;
}  // namespace

torch::Tensor hashed_dropout_mask(const DropoutStream& stream, uint64_t which, const std::vector<uint64_t>& keys,
                                  int64_t units, double keep, const torch::TensorOptions& options) {
    const auto n = static_cast<int64_t>(keys.size());
    auto mask = at::empty({n, units}, torch::TensorOptions().dtype(torch::kFloat));
    float* out = mask.data_ptr<float>();
    const float kept = static_cast<float>(1.0 / keep);
    // Kept when the hash, read as a fraction of 2^64, is below keep.
    const double limit = keep * 18446744073709551616.0;
    const uint64_t threshold = limit >= 18446744073709551615.0 ? ~0ULL : static_cast<uint64_t>(limit);
    const uint64_t base = mix64(stream.seed ^ mix64(which * golden));
    at::parallel_for(0, n, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, units)), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            const uint64_t row = mix64(base + keys[static_cast<size_t>(i)] * golden);
            float* o = out + i * units;
            for (int64_t u = 0; u < units; ++u) o[u] = mix64(row + static_cast<uint64_t>(u + 1) * golden) < threshold ? kept : 0.0f;
        }
    });
    return mask.to(options);
}

}  // namespace attnviz
