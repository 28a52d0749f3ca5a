// Hashed dropout masks (core/model/dropout_stream.hpp).
#include "core/model/dropout_stream.hpp"

#include <algorithm>
#include <stdexcept>

#include <ATen/Parallel.h>

#include "core/model/target_clones.hpp"

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

/// What every row of one call's masks shares.
struct MaskRule {
    int64_t units = 0;       ///< elements per row
    uint64_t threshold = 0;  ///< kept when an element's hash is below it
    float kept = 0;          ///< a kept element's value, 1/keep
};

/// `count` rows: row r's units go to out + offset[r], element u kept when
/// mix64(row_hash[r] + (u + 1) * golden) < threshold. Integer arithmetic only, so every
/// version gives the same masks; on x86 a build for AVX-512 CPUs (x86-64-v4, whose 64-bit
/// vector multiply hashes 8 elements at once) is chosen at load time where the CPU has it
/// (core/model/target_clones.hpp says where not).
ATTNVIZ_TARGET_CLONES("arch=x86-64-v4", "default")
void fill_rows(const uint64_t* row_hash, const int64_t* offset, int64_t count, const MaskRule& rule, float* out) {
    const int64_t units = rule.units;
    const uint64_t threshold = rule.threshold;
    const float kept = rule.kept;
    for (int64_t r = 0; r < count; ++r) {
        const uint64_t row = row_hash[r];
        float* o = out + offset[r];
        for (int64_t u = 0; u < units; ++u) o[u] = mix64(row + static_cast<uint64_t>(u + 1) * golden) < threshold ? kept : 0.0f;
    }
}

MaskRule rule_for(int64_t units, double keep) {
    MaskRule rule;
    rule.units = units;
    rule.kept = static_cast<float>(1.0 / keep);
    // Kept when the hash, read as a fraction of 2^64, is below keep.
    const double limit = keep * 18446744073709551616.0;
    rule.threshold = limit >= 18446744073709551615.0 ? ~0ULL : static_cast<uint64_t>(limit);
    return rule;
}

/// The hash every element of mask `which`'s rows starts from.
uint64_t mask_base(const DropoutStream& stream, uint64_t which) { return mix64(stream.seed ^ mix64(which * golden)); }

/// Fills `rows` mask rows in parallel chunks: place(i, &row_hash, &offset) says row i's.
template <typename Place>
void fill_parallel(int64_t rows, const MaskRule& rule, float* out, const Place& place) {
    at::parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, rule.units)), [&](int64_t begin, int64_t end) {
        constexpr int64_t chunk = 256;
        uint64_t hash[chunk];
        int64_t offset[chunk];
        for (int64_t first = begin; first < end; first += chunk) {
            const int64_t n = std::min(chunk, end - first);
            for (int64_t r = 0; r < n; ++r) place(first + r, &hash[r], &offset[r]);
            fill_rows(hash, offset, n, rule, out);
        }
    });
}
}  // namespace

torch::Tensor hashed_dropout_mask(const DropoutStream& stream, uint64_t which, const std::vector<uint64_t>& keys,
                                  int64_t units, double keep, const torch::TensorOptions& options) {
    const auto n = static_cast<int64_t>(keys.size());
    auto mask = at::empty({n, units}, torch::TensorOptions().dtype(torch::kFloat));
    const MaskRule rule = rule_for(units, keep);
    const uint64_t base = mask_base(stream, which);
    fill_parallel(n, rule, mask.data_ptr<float>(), [&](int64_t i, uint64_t* hash, int64_t* offset) {
        *hash = mix64(base + keys[static_cast<size_t>(i)] * golden);
        *offset = i * units;
    });
    return mask.to(options);
}

torch::Tensor hashed_dropout_head_masks(const DropoutStream& stream, uint64_t which, const std::vector<uint64_t>& keys,
                                        int64_t heads, int64_t queries, int64_t units, double keep,
                                        const torch::TensorOptions& options) {
    const auto n = static_cast<int64_t>(keys.size());
    if (queries <= 0 || n % queries != 0)
        throw std::logic_error("hashed_dropout_head_masks: the keys are not whole rows of queries");
    const int64_t batch = n / queries;
    auto mask = at::empty({batch, heads, queries, units}, torch::TensorOptions().dtype(torch::kFloat));
    const MaskRule rule = rule_for(units, keep);
    std::vector<uint64_t> base(static_cast<size_t>(heads));
    for (int64_t h = 0; h < heads; ++h) base[static_cast<size_t>(h)] = mask_base(stream, (which << 8) | static_cast<uint64_t>(h));
    // Row j: head j / n, key i = j % n (batch row i / queries, query i % queries).
    fill_parallel(heads * n, rule, mask.data_ptr<float>(), [&](int64_t j, uint64_t* hash, int64_t* offset) {
        const int64_t h = j / n, i = j % n;
        *hash = mix64(base[static_cast<size_t>(h)] + keys[static_cast<size_t>(i)] * golden);
        *offset = (((i / queries) * heads + h) * queries + i % queries) * units;
    });
    return mask.to(options);
}

}  // namespace attnviz
