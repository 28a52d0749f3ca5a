// Pruning curves (core/analysis/prune_curve.hpp).
#include "core/analysis/prune_curve.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <sstream>
#include <tuple>

#include "core/analysis/metrics.hpp"
#include "core/config/pretrained_config.hpp"
#include "core/data/training_data.hpp"
#include "core/model/memory_bound.hpp"
#include "core/text/vocab.hpp"

namespace attnviz {

namespace {

/// The heads of report whose kind is `kinds` ("all": every one), in increasing order of `key`
/// (NaN first: a head never measured counts as the least).
std::vector<AttentionMapId> prune_ordered(const HeadReport& report, const std::string& kinds,
                                    double (*key)(const HeadStats&)) {
    std::vector<const HeadStats*> heads;
    for (const auto& h : report.heads)
        if (kinds == "all" || to_string(h.id.kind) == kinds) heads.push_back(&h);
    std::stable_sort(heads.begin(), heads.end(), [key](const HeadStats* a, const HeadStats* b) {
        const double x = key(*a), y = key(*b);
        if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && !std::isnan(y);
        return x < y;
    });
    std::vector<AttentionMapId> ids;
    for (const auto* h : heads) ids.push_back(h->id);
    return ids;
}

double prune_by_importance(const HeadStats& h) { return h.importance; }
double prune_by_confidence(const HeadStats& h) { return h.confidence; }

/// base's gates times 0 at the heads `off`.
HeadGates prune_masked_gates(const std::vector<HeadGroup>& groups, const HeadGates& base, const std::vector<AttentionMapId>& off) {
    HeadGates g = HeadGates::mask(groups, off);
    for (const auto& group : groups) {
        const auto& b = base.of(group.kind);
        if (!b.defined()) continue;
        auto& t = g.of(group.kind);
        t = t.defined() ? t * b.detach().to(torch::kCPU, torch::kFloat) : b.detach().to(torch::kCPU, torch::kFloat);
    }
    return g;
}

std::string prune_key(std::vector<AttentionMapId> ids) {
    std::sort(ids.begin(), ids.end(), [](const AttentionMapId& a, const AttentionMapId& b) {
        return std::make_tuple(static_cast<int>(a.kind), a.layer, a.head) <
               std::make_tuple(static_cast<int>(b.kind), b.layer, b.head);
    });
    std::string s;
    for (const auto& id : ids) s += head_text(id) + ",";
    return s;
}

/// Teacher-forced mean token loss, as eval's validation sums count it (batches of batch_size,
/// cut within the bound by evaluation_cost), without gradients.
double prune_forced_loss(EncoderDecoder& network, const std::vector<SentencePair>& pairs, const Vocab& src_vocab,
                   const Vocab& tgt_vocab, int64_t batch_size, int64_t fixed_steps, const torch::Device& device,
                   int64_t bound) {
    torch::NoGradGuard no_grad;
    const ShapeCost cost = evaluation_cost(network);
    double loss = 0, tokens = 0;
    std::vector<size_t> rows;
    for (size_t start = 0; start < pairs.size(); start += static_cast<size_t>(batch_size)) {
        rows.clear();
        for (size_t i = start; i < std::min(pairs.size(), start + static_cast<size_t>(batch_size)); ++i) rows.push_back(i);
        const Batch whole = make_batch(pairs, rows, src_vocab, tgt_vocab, fixed_steps);
        for (const Batch& cpu : split_batch(whole, cost, network.config().source_steps, bound)) {
            const Batch b = cpu.to(device);
            const TokenLogits t = network.real_token_logits(b.src, b.src_len, b.tgt_in, b.tgt_out);
            loss += torch::nn::functional::cross_entropy(
                        t.logits, t.targets, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                        .item<double>();
            tokens += static_cast<double>(t.targets.size(0));
        }
    }
    return loss / std::max(tokens, 1.0);
}

}  // namespace

std::vector<PrunePoint> prune_curve(const TranslationModel& model, const std::vector<SentencePair>& pairs,
                                    const HeadReport& report, const PruneCurveOptions& options) {
    std::vector<PrunePoint> points;
    EncoderDecoder& network = *model.network();
    const auto groups = network.head_groups();
    if (groups.empty() || pairs.empty()) return points;
    const HeadGates base = network.head_gates();
    // A multilingual pretrained model's pairs as it trains on them (core/data/training_data.hpp): the
    // loss teacher-forces them with their language codes, and the references start with the target's
    // code as the outputs do (decoding puts the codes itself: the sources stay as they are).
    std::vector<SentencePair> coded = pairs;
    add_language_codes(coded, model.tokenizer(), options.source_lang, options.target_lang);
    std::vector<std::vector<std::string>> sources, refs;
    for (size_t i = 0; i < pairs.size(); ++i) {
        sources.push_back(pairs[i].src);
        refs.push_back(coded[i].tgt);
    }
    DecodeOptions d = model.decode_defaults();
    d.beam_size = 1;
    d.num_hypotheses = 1;
    d.maps = MapsKept::none;
    d.batch_size = std::max<int64_t>(options.batch_size, 1);
    d.source_lang = options.source_lang;
    d.target_lang = options.target_lang;
    // 0: as evaluation decodes (twice the longest reference + 2), so that the 0% point's BLEU is
    // eval's; within decoding's limit and a Marian model's position table.
    int64_t longest = 0;
    for (const auto& r : refs) longest = std::max<int64_t>(longest, static_cast<int64_t>(r.size()));
    d.max_length = options.max_length > 0 ? options.max_length : std::min<int64_t>(2 * longest + 2, max_decode_length);
    if (const int64_t table = position_limit(network.config()); table > 0)
        d.max_length = std::min<int64_t>(d.max_length, table);
    d.memory_bound = options.memory_bound;
    const int64_t bound = options.memory_bound > 0 ? options.memory_bound : memory_bound();
    check_pairs_fit(coded, evaluation_cost(network), options.fixed_steps, network.config().source_steps, "evaluation",
                    "pair", bound);

    std::map<std::string, std::pair<double, double>> measured;  // masked set -> loss, BLEU
    auto measure = [&](const std::vector<AttentionMapId>& off) {
        const std::string key = prune_key(off);
        const auto found = measured.find(key);
        if (found != measured.end()) return found->second;
        ScopedHeadGates gates(network, prune_masked_gates(groups, base, off));
        const double loss = prune_forced_loss(network, coded, model.src_vocab(), model.tgt_vocab(), d.batch_size,
                                        options.fixed_steps, model.device(), bound);
        double bleu = std::nan("");
        if (options.bleu) {
            std::vector<std::vector<std::string>> hyps;
            for (const auto& t : model.translate_tokens(sources, d))
                hyps.push_back(t.empty() ? std::vector<std::string>{} : until_eos(t.best().tokens));
            bleu = corpus_bleu(hyps, refs).score;
        }
        return measured[key] = {loss, bleu};
    };

    std::vector<std::string> kind_sets = {"all"};
    if (options.each_kind && groups.size() > 1)
        for (const auto& g : groups) kind_sets.push_back(to_string(g.kind));
    std::vector<std::tuple<std::string, std::string, std::vector<AttentionMapId>>> curves;  // kinds, order, ids
    for (const auto& kinds : kind_sets) {
        if (options.by_importance) curves.emplace_back(kinds, "importance", prune_ordered(report, kinds, prune_by_importance));
        if (options.by_confidence) curves.emplace_back(kinds, "confidence", prune_ordered(report, kinds, prune_by_confidence));
        for (int seed = 1; seed <= options.random_orders; ++seed) {
            auto ids = prune_ordered(report, kinds, prune_by_importance);
            std::mt19937_64 rng(static_cast<uint64_t>(seed));
            std::shuffle(ids.begin(), ids.end(), rng);
            curves.emplace_back(kinds, "random:" + std::to_string(seed), ids);
        }
    }
    const size_t total = curves.size() * options.fractions.size();
    for (const auto& [kinds, name, ids] : curves)
        for (const double f : options.fractions) {
            const auto k = static_cast<int64_t>(std::lround(f * static_cast<double>(ids.size())));
            const std::vector<AttentionMapId> off(ids.begin(), ids.begin() + std::min<int64_t>(k, ids.size()));
            const auto [loss, bleu] = measure(off);
            points.push_back({name, kinds, f, static_cast<int64_t>(off.size()), loss, bleu});
            if (options.progress && !options.progress(points.size(), total)) return points;
        }
    return points;
}

std::string prune_curve_csv(const std::vector<PrunePoint>& points) {
    std::ostringstream out;
    out.precision(6);
    out << "order,kinds,fraction,heads_masked,loss,bleu\n";
    for (const auto& p : points)
        out << p.order << "," << p.kinds << "," << p.fraction << "," << p.heads_masked << "," << p.loss << ","
            << p.bleu << "\n";
    return out.str();
}

nlohmann::json prune_curve_json(const std::vector<PrunePoint>& points) {
    const auto number = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
    nlohmann::json out = nlohmann::json::array();
    for (const auto& pt : points)
        out.push_back({{"order", pt.order},
                       {"kinds", pt.kinds},
                       {"fraction", pt.fraction},
                       {"heads_masked", pt.heads_masked},
                       {"loss", number(pt.loss)},
                       {"bleu", number(pt.bleu)}});
    return out;
}

}  // namespace attnviz
