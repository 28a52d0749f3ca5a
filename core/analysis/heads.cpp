// Which heads matter (core/analysis/heads.hpp).
#include "core/analysis/heads.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "core/analysis/sinks.hpp"
#include "core/data/training_data.hpp"
#include "core/io/error.hpp"
#include "core/model/memory_bound.hpp"
#include "core/text/vocab.hpp"

namespace F = torch::nn::functional;

namespace attnviz {

namespace {

bool heads_source_keys(AttentionKind kind) { return kind != AttentionKind::decoder_self; }
bool heads_self_kind(AttentionKind kind) { return kind != AttentionKind::cross; }

}  // namespace

std::vector<std::string> head_roles(const HeadStats& s) {
    auto percent = [](double share) { return std::to_string(static_cast<int>(std::lround(share * 100))) + "%"; };
    std::vector<std::string> roles;
    if (s.positional && s.positional->positional())
        roles.push_back("positional " + std::string(s.positional->offset > 0 ? "+" : "") +
                        std::to_string(s.positional->offset) + " (" + percent(s.positional->share) + ")");
    if (s.rare_share >= 0.5) roles.push_back("rare words (" + percent(s.rare_share) + ")");
    if (s.sink_share >= 0.5) roles.push_back("sink (" + percent(s.sink_share) + ")");
    return roles;
}

const HeadStats* HeadReport::find(const AttentionMapId& id) const {
    for (const auto& h : heads)
        if (h.id == id) return &h;
    return nullptr;
}

// --- map statistics ------------------------------------------------------------------------

struct HeadMapStats::Sums {
    double confidence = 0, entropy = 0;
    int64_t rows = 0, confidence_rows = 0;
    std::map<int, int64_t> argmax_offsets;  ///< offset -> rows whose argmax is there
    std::map<int, int64_t> offsets_possible;  ///< offset -> rows for which it exists
    int64_t rare_hits = 0, rare_rows = 0;
    double sink = 0;
    int64_t sink_rows = 0;
    AlignmentScore alignment;
};

HeadMapStats::HeadMapStats(std::vector<HeadGroup> groups) : m_groups(std::move(groups)) {
    int64_t n = 0;
    for (const auto& g : m_groups) n += g.count();
    m_sums.resize(static_cast<size_t>(n));
}

HeadMapStats::~HeadMapStats() = default;
HeadMapStats::HeadMapStats(HeadMapStats&&) noexcept = default;
HeadMapStats& HeadMapStats::operator=(HeadMapStats&&) noexcept = default;

void HeadMapStats::add(const HeadSample& sample) {
    if (!sample.attention) return;
    const auto& source = sample.source;
    size_t index = 0;
    for (const auto& g : m_groups)
        for (int l = 0; l < g.layers; ++l)
            for (int h = 0; h < g.heads; ++h, ++index) {
                const AttentionMap* map = sample.attention->find(AttentionMapId{g.kind, l, h});
                if (!map) continue;
                Sums& s = m_sums[index];
                const bool over_source = heads_source_keys(g.kind);
                const auto& rows = map->weights;
                for (size_t q = 0; q < rows.size(); ++q) {
                    const auto& row = rows[q];
                    // A causal row holds the keys up to its own step (maybe padded with 0 past it).
                    const size_t keys = g.kind == AttentionKind::decoder_self ? std::min(row.size(), q + 1) : row.size();
                    if (keys == 0) continue;
                    size_t argmax = 0;
                    double best = -1, best_real = -1, entropy = 0;
                    for (size_t k = 0; k < keys; ++k) {
                        const double w = row[k];
                        if (w > best) {
                            best = w;
                            argmax = k;
                        }
                        if (w > 0) entropy -= w * std::log(w);
                        const bool eos = over_source && k < source.size() && source[k] == "<eos>";
                        if (!eos) best_real = std::max(best_real, w);
                    }
                    ++s.rows;
                    s.entropy += entropy;
                    if (best_real >= 0) {
                        s.confidence += best_real;
                        ++s.confidence_rows;
                    }
                    if (heads_self_kind(g.kind)) {
                        const int qi = static_cast<int>(q);
                        ++s.argmax_offsets[static_cast<int>(argmax) - qi];
                        for (int k = 0; k < static_cast<int>(keys); ++k) ++s.offsets_possible[k - qi];
                    }
                    if (over_source) {
                        if (!sample.rarest.empty()) {
                            ++s.rare_rows;
                            if (std::find(sample.rarest.begin(), sample.rarest.end(), argmax) != sample.rarest.end())
                                ++s.rare_hits;
                        }
                    }
                }
                if (over_source && !source.empty()) {
                    for (float share : sink_share(rows, source)) {
                        s.sink += share;
                        ++s.sink_rows;
                    }
                }
                if (g.kind == AttentionKind::cross && sample.gold)
                    s.alignment += score_alignment(
                        hard_alignment(rows, sample.source_size, sample.target_size, 0.0f), *sample.gold);
            }
}

std::vector<HeadStats> HeadMapStats::result() const {
    std::vector<HeadStats> out;
    size_t index = 0;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (const auto& g : m_groups)
        for (int l = 0; l < g.layers; ++l)
            for (int h = 0; h < g.heads; ++h, ++index) {
                const Sums& s = m_sums[index];
                HeadStats st;
                st.id = {g.kind, l, h};
                st.confidence = s.confidence_rows > 0 ? s.confidence / static_cast<double>(s.confidence_rows) : nan;
                st.entropy = s.rows > 0 ? s.entropy / static_cast<double>(s.rows) : nan;
                if (heads_self_kind(g.kind) && !s.argmax_offsets.empty()) {
                    // The offset the argmax takes most often (ties: the one nearest the query, then the earlier).
                    auto best = s.argmax_offsets.begin();
                    for (auto it = s.argmax_offsets.begin(); it != s.argmax_offsets.end(); ++it)
                        if (it->second > best->second ||
                            (it->second == best->second && std::abs(it->first) < std::abs(best->first)))
                            best = it;
                    const auto possible = s.offsets_possible.find(best->first);
                    PositionalRole role;
                    role.offset = best->first;
                    role.share = possible == s.offsets_possible.end() || possible->second == 0
                                     ? 0.0
                                     : static_cast<double>(best->second) / static_cast<double>(possible->second);
                    st.positional = role;
                }
                if (heads_source_keys(g.kind)) {
                    st.rare_share = s.rare_rows > 0 ? static_cast<double>(s.rare_hits) / static_cast<double>(s.rare_rows) : nan;
                    st.sink_share = s.sink_rows > 0 ? s.sink / static_cast<double>(s.sink_rows) : nan;
                }
                if (g.kind == AttentionKind::cross && s.alignment.sentences > 0) st.aer = s.alignment.aer();
                out.push_back(st);
            }
    return out;
}

std::vector<HeadStats> head_map_stats(const std::vector<HeadGroup>& groups, const std::vector<HeadSample>& samples) {
    HeadMapStats stats(groups);
    for (const auto& s : samples) stats.add(s);
    return stats.result();
}

// --- importance ----------------------------------------------------------------------------

torch::Tensor normalise_per_layer(const torch::Tensor& raw) {
    // Michel et al.'s code: head_importance / (||layer's row||_2 + 1e-20).
    return raw / (raw.pow(2).sum(-1, /*keepdim=*/true).sqrt() + 1e-20);
}

HeadImportance head_importance(EncoderDecoder& network, const std::vector<SentencePair>& pairs,
                               const Vocab& src_vocab, const Vocab& tgt_vocab, const HeadStatsOptions& options,
                               const torch::Device& device, const HeadGates& base) {
    HeadImportance out;
    if (pairs.empty()) return out;
    const int64_t bound = options.memory_bound > 0 ? options.memory_bound : memory_bound();
    // A forward pass with autograd on and its backward: a training step's cost, or what the
    // step-by-step path costs where gates turn a fused path off (the RNN's decoder keeps its
    // attention features per step then, as attribution's pass does): the larger of the two.
    const ShapeCost trained = training_cost(network), stepwise = network.memory_cost().attribution;
    ShapeCost cost;
    cost.ss = std::max(trained.ss, stepwise.ss);
    cost.st = std::max(trained.st, stepwise.st);
    cost.tt = std::max(trained.tt, stepwise.tt);
    cost.s = std::max(trained.s, stepwise.s);
    cost.t = std::max(trained.t, stepwise.t);
    cost.one = std::max(trained.one, stepwise.one);
    check_pairs_fit(pairs, cost, options.fixed_steps, network.config().source_steps, "evaluation", "pair", bound);
    HeadGates gates;
    std::vector<torch::Tensor> leaves;
    std::vector<AttentionKind> kinds;
    for (const auto& g : network.head_groups()) {
        const auto& given = base.of(g.kind);
        auto start = given.defined() ? given.detach().to(torch::kCPU, torch::kFloat).clone()
                                     : torch::ones({g.layers, g.heads}, torch::kFloat);
        auto leaf = start.to(device).set_requires_grad(true);
        gates.of(g.kind) = leaf;
        leaves.push_back(leaf);
        kinds.push_back(g.kind);
        out.raw.of(g.kind) = torch::zeros({g.layers, g.heads}, torch::kFloat);
    }
    ScopedHeadGates scoped(network, gates);
    torch::AutoGradMode grad_on(true);
    const auto batch_size = static_cast<size_t>(std::max<int64_t>(options.batch_size, 1));
    std::vector<size_t> rows;
    for (size_t start = 0; start < pairs.size(); start += batch_size) {
        rows.clear();
        for (size_t i = start; i < std::min(pairs.size(), start + batch_size); ++i) rows.push_back(i);
        const Batch whole = make_batch(pairs, rows, src_vocab, tgt_vocab, options.fixed_steps);
        // A batch cut into chunks by the bound still gives the batch's derivative: the chunks' add up.
        std::vector<torch::Tensor> batch_grad(leaves.size());
        for (const Batch& cpu : split_batch(whole, cost, network.config().source_steps, bound)) {
            const Batch b = cpu.to(device);
            const TokenLogits t = network.real_token_logits(b.src, b.src_len, b.tgt_in, b.tgt_out);
            const auto loss = F::cross_entropy(t.logits, t.targets, F::CrossEntropyFuncOptions().reduction(torch::kSum));
            out.loss_sum += loss.item<double>();
            out.tokens += t.targets.size(0);
            if (leaves.empty()) continue;
            const auto grads = torch::autograd::grad({loss}, leaves, {}, /*retain_graph=*/false,
                                                     /*create_graph=*/false, /*allow_unused=*/true);
            for (size_t i = 0; i < grads.size(); ++i) {
                if (!grads[i].defined()) continue;
                const auto g = grads[i].detach().to(torch::kCPU, torch::kFloat);
                batch_grad[i] = batch_grad[i].defined() ? batch_grad[i] + g : g;
            }
        }
        for (size_t i = 0; i < leaves.size(); ++i)
            if (batch_grad[i].defined()) out.raw.of(kinds[i]) += batch_grad[i].abs();
        const size_t batches = (pairs.size() + batch_size - 1) / batch_size;
        if (options.progress && !options.progress(start / batch_size + 1, batches))
            throw Cancelled("head importance: cancelled");
    }
    if (out.tokens > 0)
        for (const auto kind : kinds) out.raw.of(kind) /= static_cast<double>(out.tokens);
    return out;
}

// --- everything ----------------------------------------------------------------------------

namespace {

/// The positions of the rarest of a sentence's source tokens (<eos> aside).
std::vector<size_t> rarest_positions(const std::vector<std::string>& source, const Vocab& vocab,
                                     const std::unordered_map<std::string, int64_t>& counts) {
    std::vector<size_t> out;
    // Rarity: fewer occurrences in `counts` (a token it lacks, <unk> among them, rarest); without
    // counts a later vocabulary id (the vocabulary is built by descending frequency), <unk> (a word
    // the vocabulary left out for being rare) and a token outside it rarest of all.
    int64_t best = std::numeric_limits<int64_t>::min();
    for (size_t i = 0; i < source.size(); ++i) {
        if (source[i] == "<eos>") continue;
        int64_t rarity;
        if (!counts.empty()) {
            const auto it = counts.find(source[i]);
            rarity = it == counts.end() ? 0 : -it->second;
        } else {
            rarity = vocab.contains(source[i]) && vocab.id(source[i]) != Vocab::unk_id
                         ? vocab.id(source[i])
                         : std::numeric_limits<int64_t>::max();
        }
        if (rarity > best) {
            best = rarity;
            out.clear();
        }
        if (rarity == best) out.push_back(i);
    }
    return out;
}

}  // namespace

HeadReport head_stats(const TranslationModel& model, const std::vector<SentencePair>& pairs,
                      const HeadStatsOptions& options) {
    HeadReport report;
    report.sentences = static_cast<int64_t>(pairs.size());
    EncoderDecoder& network = *model.network();
    const auto groups = network.head_groups();
    // Progress over both passes: importance's batches, then the forced pass's.
    const size_t per_pass = (pairs.size() + static_cast<size_t>(std::max<int64_t>(options.batch_size, 1)) - 1) /
                            static_cast<size_t>(std::max<int64_t>(options.batch_size, 1));
    const size_t total = (options.importance ? per_pass : 0) + (options.maps ? per_pass : 0);
    HeadImportance importance;
    if (options.importance) {
        HeadStatsOptions o = options;
        if (options.progress) o.progress = [&](size_t done, size_t) { return options.progress(done, total); };
        // A multilingual pretrained model's loss as it trains: the pairs with their language codes
        // (core/data/training_data.hpp; the forced pass below puts them itself).
        std::vector<SentencePair> coded = pairs;
        add_language_codes(coded, model.tokenizer(), options.source_lang, options.target_lang);
        importance = head_importance(network, coded, model.src_vocab(), model.tgt_vocab(), o, model.device(),
                                     network.head_gates());
        report.tokens = importance.tokens;
        if (importance.tokens > 0) report.loss = importance.loss_sum / static_cast<double>(importance.tokens);
    }
    HeadMapStats stats(groups);
    if (options.maps && !groups.empty()) {
        DecodeOptions d;
        d.maps = MapsKept::all;
        d.batch_size = std::max<int64_t>(options.batch_size, 1);
        d.memory_bound = options.memory_bound;
        d.source_lang = options.source_lang;
        d.target_lang = options.target_lang;
        // A batch's records at a time: every map of every head, for its sentences only.
        const auto chunk = static_cast<size_t>(d.batch_size);
        for (size_t start = 0; start < pairs.size(); start += chunk) {
            std::vector<std::vector<std::string>> sources, targets;
            std::vector<const SentencePair*> used;
            for (size_t i = start; i < std::min(pairs.size(), start + chunk); ++i) {
                if (pairs[i].src.empty()) continue;
                sources.push_back(pairs[i].src);
                targets.push_back(pairs[i].tgt);
                used.push_back(&pairs[i]);
            }
            if (used.empty()) continue;
            const auto forced = model.force_tokens(sources, targets, ForceMode::reference, d);
            for (size_t i = 0; i < forced.size(); ++i) {
                if (forced[i].empty()) continue;
                HeadSample sample;
                sample.attention = &forced[i].best().attention;
                sample.source = forced[i].src_tokens;
                sample.rarest = rarest_positions(sample.source, model.src_vocab(), options.source_counts);
                sample.gold = used[i]->alignment ? &*used[i]->alignment : nullptr;
                sample.source_size = used[i]->src.size();
                sample.target_size = used[i]->tgt.size();
                stats.add(sample);
            }
            if (options.progress &&
                !options.progress((options.importance ? per_pass : 0) + start / chunk + 1, total))
                throw Cancelled("head statistics: cancelled");
        }
    }
    report.heads = stats.result();
    for (auto& h : report.heads) {
        const auto& raw = importance.raw.of(h.id.kind);
        if (!raw.defined()) continue;
        h.importance_raw = raw[h.id.layer][h.id.head].item<double>();
        h.importance = normalise_per_layer(raw)[h.id.layer][h.id.head].item<double>();
    }
    return report;
}

namespace {
nlohmann::json heads_json_number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }
}  // namespace

nlohmann::json head_to_json(const HeadStats& h) {
    nlohmann::json j;
    j["kind"] = to_string(h.id.kind);
    j["layer"] = h.id.layer;
    j["head"] = h.id.head;
    j["confidence"] = heads_json_number(h.confidence);
    j["entropy"] = heads_json_number(h.entropy);
    if (h.positional)
        j["positional"] = {{"offset", h.positional->offset},
                           {"share", h.positional->share},
                           {"positional", h.positional->positional()}};
    else
        j["positional"] = nullptr;
    j["rare_share"] = heads_json_number(h.rare_share);
    j["sink_share"] = heads_json_number(h.sink_share);
    j["importance"] = heads_json_number(h.importance);
    j["importance_raw"] = heads_json_number(h.importance_raw);
    if (h.aer) j["aer"] = heads_json_number(*h.aer);
    return j;
}

nlohmann::json heads_to_json(const std::vector<HeadStats>& heads) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& h : heads) out.push_back(head_to_json(h));
    return out;
}

}  // namespace attnviz
