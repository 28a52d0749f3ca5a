// The memory bound: chunks of a batch, refusals of pairs too long, models whose sizes cannot run.
#include "core/model/memory_bound.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "core/io/error.hpp"
#include "core/model/pretrained_model.hpp"

namespace attnviz {

namespace {

std::vector<int64_t> host_values(const torch::Tensor& t) {
    const auto cpu = t.to(torch::kCPU, torch::kLong).contiguous();
    return {cpu.data_ptr<int64_t>(), cpu.data_ptr<int64_t>() + cpu.numel()};
}

}  // namespace

ShapeCost training_cost(const EncoderDecoder& network) { return network.memory_cost().training; }

ShapeCost evaluation_cost(const EncoderDecoder& network) { return network.memory_cost().evaluation; }

std::vector<Batch> split_batch(const Batch& batch, const ShapeCost& cost, int64_t source_steps, int64_t bound) {
    const int64_t rows = batch.src.size(0);
    auto width = [&](int64_t s) { return source_steps > 0 ? source_steps : s; };
    if (rows <= 1 || cost.bytes(rows, width(batch.src.size(1)), batch.tgt_in.size(1)) <= bound) return {batch};
    const std::vector<int64_t> src_len = host_values(batch.src_len), tgt_len = host_values(batch.tgt_len);
    std::vector<int64_t> order(static_cast<size_t>(rows));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return src_len[a] > src_len[b]; });
    std::vector<Batch> chunks;
    size_t i = 0;
    while (i < order.size()) {
        std::vector<int64_t> chunk{order[i]};
        int64_t s = src_len[order[i]], t = tgt_len[order[i]];
        for (++i; i < order.size(); ++i) {
            const int64_t s2 = std::max(s, src_len[order[i]]), t2 = std::max(t, tgt_len[order[i]]);
            if (cost.bytes(static_cast<int64_t>(chunk.size()) + 1, width(s2), t2) > bound) break;
            chunk.push_back(order[i]);
            s = s2, t = t2;
        }
        const auto idx = torch::tensor(chunk, torch::kLong).to(batch.src.device());
        Batch c;
        c.src = batch.src.index_select(0, idx).narrow(1, 0, std::max<int64_t>(s, 1));
        c.src_len = batch.src_len.index_select(0, idx);
        c.tgt_in = batch.tgt_in.index_select(0, idx).narrow(1, 0, std::max<int64_t>(t, 1));
        c.tgt_out = batch.tgt_out.index_select(0, idx).narrow(1, 0, std::max<int64_t>(t, 1));
        c.tgt_len = batch.tgt_len.index_select(0, idx);
        for (const int64_t r : chunk)
            if (static_cast<size_t>(r) < batch.index.size()) c.index.push_back(batch.index[static_cast<size_t>(r)]);
        chunks.push_back(std::move(c));
    }
    return chunks;
}

void check_pairs_fit(const std::vector<SentencePair>& pairs, const ShapeCost& cost, int64_t fixed_steps,
                     int64_t source_steps, const std::string& corpus, const std::string& what, int64_t bound) {
    for (size_t i = 0; i < pairs.size(); ++i) {
        const SentencePair& p = pairs[i];
        int64_t s = static_cast<int64_t>(p.src.size()) + 1, t = static_cast<int64_t>(p.tgt.size()) + 1;  // + <eos>
        if (fixed_steps > 0) s = t = fixed_steps;
        if (source_steps > 0) s = source_steps;
        const int64_t need = cost.bytes(1, s, t);
        if (need <= bound) continue;
        const std::string where = p.line > 0 ? corpus + ", line " + std::to_string(p.line)
                                             : corpus + ": " + what + " " + std::to_string(i + 1);
        if (fixed_steps > 0)
            throw ConfigError(where + ": every pair is padded to " + std::to_string(fixed_steps) + " steps (--steps): " +
                              "one training step on a pair needs about " + memory_text(need) + ", more than the " +
                              memory_text(bound) + " a step may use; use fewer steps or a smaller model");
        // The longest pair (both sides alike) that fits: what a maximum length could keep.
        int64_t fits = 0;
        for (int64_t n = 1; n < 1000000 && cost.bytes(1, source_steps > 0 ? source_steps : n + 1, n + 1) <= bound; n = n < 64 ? n + 1 : n + n / 16)
            fits = n;
        throw ConfigError(where + ": a pair of " + std::to_string(p.src.size()) + " source and " +
                          std::to_string(p.tgt.size()) + " target tokens is too long for this model: one training " +
                          "step on it alone needs about " + memory_text(need) + ", more than the " +
                          memory_text(bound) + " a step may use; leave such pairs out with a maximum length" +
                          (fits > 0 ? " (--max-length " + std::to_string(fits) + " or less; in the app: Max length)"
                                    : " (--max-length; in the app: Max length)") +
                          " or train a smaller model");
    }
}

int64_t one_word_bytes(const EncoderDecoder& network, int64_t steps) {
    const MemoryCost c = network.memory_cost();
    const int64_t S = network.config().source_steps > 0 ? network.config().source_steps : 2;  // a word and <eos>
    const ShapeCost all = c.encoding + c.encoding_maps + c.step + c.kept_primary + c.kept_cross + c.kept_decoder + c.kept_source;
    return bytes_plus(all.bytes(1, S, std::max<int64_t>(steps, 1)), c.fixed);
}

void check_network_fits(const EncoderDecoder& network, const std::string& what, int64_t steps, int64_t bound) {
    const int64_t need = one_word_bytes(network, steps);
    if (need <= bound) return;
    const ModelConfig& c = network.config();
    std::string sizes;
    if (c.is_pretrained() && c.pretrained) {  // every pretrained family (T5 has no position limit to name)
        const PretrainedConfig& hf = c.pretrained->model;
        sizes = hf.describe() + (hf.t5 ? std::string() : ", " + std::to_string(hf.max_positions) + " positions");
    } else {
        sizes = std::to_string(c.num_layers) + (c.is_transformer() ? " blocks of " + std::to_string(c.num_heads) + " heads" : " layers") +
                ", width " + std::to_string(c.hidden_size);
        if (c.source_steps > 0) sizes += ", every source padded to " + std::to_string(c.source_steps) + " steps";
    }
    throw ConfigError(what + ": this model (" + sizes + ") would need about " + memory_text(need) +
                      " to translate one word in " + std::to_string(steps) + " steps, more than the " + memory_text(bound) +
                      " decoding may use: its sizes are not ones it can run with");
}

std::string memory_text(int64_t bytes) {
    char buf[32];
    const double gb = static_cast<double>(bytes) / double(int64_t{1} << 30);
    if (gb >= 0.1) std::snprintf(buf, sizeof buf, "%.1f GB", gb);
    else std::snprintf(buf, sizeof buf, "%.0f MB", static_cast<double>(bytes) / double(int64_t{1} << 20));
    return buf;
}

}  // namespace attnviz
