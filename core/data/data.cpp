// Corpora: splitting, filtering and batching (with length bucketing).
#include "core/data/data.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <torch/torch.h>

#include "core/io/error.hpp"

namespace attnviz {

namespace {

// Unbiased integer in [0, n) from a 64-bit generator. Written out (rather than
// std::uniform_int_distribution, whose algorithm the standard leaves open) so a
// seed gives the same data with every standard library.
uint64_t bounded(std::mt19937_64& rng, uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x = rng();
    while (x >= limit) x = rng();
    return x % n;
}

template <typename T>
void seeded_shuffle(std::vector<T>& v, std::mt19937_64& rng) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[bounded(rng, i)]);
}

// SplitMix64 finaliser: decorrelates (seed, epoch) into one generator seed.
uint64_t mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

}  // namespace

std::vector<SentencePair> filter_by_length(const std::vector<SentencePair>& pairs, size_t max_len) {
    if (max_len == 0) return pairs;
    std::vector<SentencePair> out;
    for (const auto& p : pairs)
        if (p.src.size() <= max_len && p.tgt.size() <= max_len) out.push_back(p);
    return out;
}

std::pair<std::vector<size_t>, std::vector<size_t>> split_indices(size_t n, double val_fraction, uint64_t seed,
                                                                  bool shuffle) {
    if (!(val_fraction >= 0.0 && val_fraction < 1.0))
        throw ConfigError("validation fraction " + std::to_string(val_fraction) +
                          " is out of range: expected a value in [0, 1), e.g. 0.1");
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t{0});
    if (shuffle) {
        std::mt19937_64 rng(seed);
        seeded_shuffle(order, rng);
    }
    auto n_val = static_cast<size_t>(std::llround(static_cast<double>(n) * val_fraction));
    if (val_fraction > 0.0 && n_val == 0 && n >= 2) n_val = 1;  // a split asked for gets one pair at least
    if (n > 0 && n_val >= n) n_val = n - 1;                     // and training keeps one at least
    std::pair<std::vector<size_t>, std::vector<size_t>> out;
    out.second.assign(order.begin() + static_cast<std::ptrdiff_t>(n - n_val), order.end());
    order.resize(n - n_val);
    out.first = std::move(order);
    return out;
}

std::pair<std::vector<SentencePair>, std::vector<SentencePair>> split_train_val(
    const std::vector<SentencePair>& pairs, double val_fraction, uint64_t seed, bool shuffle) {
    const auto [train, val] = split_indices(pairs.size(), val_fraction, seed, shuffle);
    std::pair<std::vector<SentencePair>, std::vector<SentencePair>> out;
    out.first.reserve(train.size());
    out.second.reserve(val.size());
    for (size_t i : train) out.first.push_back(pairs[i]);
    for (size_t i : val) out.second.push_back(pairs[i]);
    return out;
}

int64_t Batch::target_tokens() const {
    if (!tgt_len.defined() || tgt_len.numel() == 0) return 0;
    return tgt_len.sum().item<int64_t>();
}

Batch Batch::to(const torch::Device& device) const {
    Batch b;
    b.src = src.to(device);
    b.src_len = src_len.to(device);
    b.tgt_in = tgt_in.to(device);
    b.tgt_out = tgt_out.to(device);
    b.tgt_len = tgt_len.to(device);
    b.index = index;
    return b;
}

Batch make_batch(const std::vector<SentencePair>& pairs, const std::vector<size_t>& rows, const Vocab& src_vocab,
                 const Vocab& tgt_vocab, int64_t fixed_steps) {
    const auto B = static_cast<int64_t>(rows.size());
    std::vector<std::vector<int64_t>> src(rows.size()), out(rows.size());
    int64_t S = 0, T = 0;
    for (size_t r = 0; r < rows.size(); ++r) {
        if (rows[r] >= pairs.size())
            throw Error("batch row " + std::to_string(rows[r]) + " is outside the " + std::to_string(pairs.size()) +
                        " pairs");
        const auto& p = pairs[rows[r]];
        src[r] = src_vocab.encode(p.src);
        src[r].push_back(Vocab::eos_id);
        out[r] = tgt_vocab.encode(p.tgt);
        out[r].push_back(Vocab::eos_id);
        if (fixed_steps > 0) {  // d2l's pad_or_trim, applied after appending <eos>
            if (static_cast<int64_t>(src[r].size()) > fixed_steps) src[r].resize(static_cast<size_t>(fixed_steps));
            if (static_cast<int64_t>(out[r].size()) > fixed_steps) out[r].resize(static_cast<size_t>(fixed_steps));
        }
        S = std::max<int64_t>(S, static_cast<int64_t>(src[r].size()));
        T = std::max<int64_t>(T, static_cast<int64_t>(out[r].size()));
    }
    if (fixed_steps > 0) S = T = fixed_steps;
    const auto opts = torch::TensorOptions().dtype(torch::kInt64);
    Batch b;
    b.src = torch::full({B, S}, Vocab::pad_id, opts);
    b.tgt_in = torch::full({B, T}, Vocab::pad_id, opts);
    b.tgt_out = torch::full({B, T}, Vocab::pad_id, opts);
    b.src_len = torch::empty({B}, opts);
    b.tgt_len = torch::empty({B}, opts);
    auto src_a = b.src.accessor<int64_t, 2>();
    auto in_a = b.tgt_in.accessor<int64_t, 2>();
    auto out_a = b.tgt_out.accessor<int64_t, 2>();
    auto sl = b.src_len.accessor<int64_t, 1>();
    auto tl = b.tgt_len.accessor<int64_t, 1>();
    for (int64_t r = 0; r < B; ++r) {
        const auto& s = src[static_cast<size_t>(r)];
        const auto& o = out[static_cast<size_t>(r)];
        for (size_t k = 0; k < s.size(); ++k) src_a[r][static_cast<int64_t>(k)] = s[k];
        for (size_t k = 0; k < o.size(); ++k) out_a[r][static_cast<int64_t>(k)] = o[k];
        // Decoder input is the output shifted right behind <bos>. In non-fixed mode
        // the <eos> is not fed back; with fixed steps d2l's [:-1] slice may keep it.
        in_a[r][0] = Vocab::bos_id;
        const int64_t fed = fixed_steps > 0 ? T - 1 : static_cast<int64_t>(o.size()) - 1;
        for (int64_t k = 0; k < fed; ++k) in_a[r][k + 1] = out_a[r][k];
        sl[r] = static_cast<int64_t>(s.size());
        tl[r] = static_cast<int64_t>(o.size());
    }
    b.index = rows;
    return b;
}

std::vector<Batch> make_epoch_batches(const std::vector<SentencePair>& pairs, const Vocab& src_vocab,
                                      const Vocab& tgt_vocab, const BatchOptions& options, uint64_t seed,
                                      int epoch) {
    if (options.batch_size <= 0)
        throw ConfigError("batch size " + std::to_string(options.batch_size) + " must be at least 1");
    const auto bs = static_cast<size_t>(options.batch_size);
    std::mt19937_64 rng(mix(seed ^ mix(static_cast<uint64_t>(epoch))));
    std::vector<size_t> order(pairs.size());
    std::iota(order.begin(), order.end(), size_t{0});
    if (options.shuffle) seeded_shuffle(order, rng);
    if (options.bucket_window > 1) {
        const size_t window = bs * static_cast<size_t>(options.bucket_window);
        for (size_t start = 0; start < order.size(); start += window) {
            const auto first = order.begin() + static_cast<std::ptrdiff_t>(start);
            const auto last = order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), start + window));
            std::stable_sort(first, last, [&](size_t a, size_t b) {
                const auto& pa = pairs[a];
                const auto& pb = pairs[b];
                // Total length first, so that both the encoder and the decoder run
                // few padded steps; ties by target length, the dearer side.
                const size_t la = pa.src.size() + pa.tgt.size(), lb = pb.src.size() + pb.tgt.size();
                if (la != lb) return la < lb;
                return pa.tgt.size() < pb.tgt.size();
            });
        }
    }
    std::vector<std::vector<size_t>> groups;
    for (size_t start = 0; start < order.size(); start += bs)
        groups.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(start),
                            order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), start + bs)));
    // Sorted windows would otherwise give short batches first, then long ones.
    if (options.shuffle && options.bucket_window > 1) seeded_shuffle(groups, rng);
    std::vector<Batch> batches;
    batches.reserve(groups.size());
    for (const auto& rows : groups) batches.push_back(make_batch(pairs, rows, src_vocab, tgt_vocab, options.fixed_steps));
    return batches;
}

}  // namespace attnviz
