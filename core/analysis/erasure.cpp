// Erasure flip curves: source positions erased from every cross map, one more at a time, until
// the step's decision changes.
#include "core/analysis/erasure.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>
#include <iomanip>

#include <nlohmann/json.hpp>

#include "core/analysis/attribution.hpp"
#include "core/io/error.hpp"
#include "core/model/memory_bound.hpp"
#include "core/model/work_cost.hpp"

namespace attnviz {

void ErasureOptions::validate() const {
    if (orders.empty()) throw ConfigError("erasure: no order asked for");
    if (ig_steps < 1 || ig_steps > 1024) throw ConfigError("erasure: integrated gradients' steps must be in 1..1024");
    if (memory_bound < 0) throw ConfigError("erasure: the memory bound must be >= 0");
    if (work_bound < 0) throw ConfigError("erasure: the work bound must be >= 0");
}

namespace {

/// Throws ConfigError (`where` first) when erasing S x T by `orders` orders would pass the work bound.
void check_erasure_work(const EncoderDecoder& net, int64_t S, int64_t T, size_t orders, const ErasureOptions& options,
                        const std::string& where) {
    const int64_t work = erasure_work(net, S, T, orders);
    const int64_t limit = options.work_bound > 0 ? options.work_bound : work_bound();
    if (work <= limit) return;
    throw ConfigError(where + "a sentence of " + std::to_string(S) + " source and " + std::to_string(T) +
                      " output tokens would take about " + work_text(work) + " to erase by " + std::to_string(orders) +
                      " orders, more than the " + work_text(limit) +
                      " one sentence's analysis may take (ATTNVIZ_WORK_BOUND); erase by fewer orders or shorten it");
}

}  // namespace

void check_erasure_fits(const TranslationModel& model, const std::vector<Translation>& translations,
                        const ErasureOptions& options) {
    for (size_t i = 0; i < translations.size(); ++i) {
        const Translation& t = translations[i];
        if (t.empty() || t.hypotheses.empty() || t.best().ids.empty() || t.src_tokens.empty()) continue;
        check_erasure_work(*model.network(), static_cast<int64_t>(t.src_tokens.size()),
                           static_cast<int64_t>(t.best().ids.size()), options.orders.size(), options,
                           "erasure of sentence " + std::to_string(i + 1) + ": ");
    }
}

int64_t erasure_work(const EncoderDecoder& network, int64_t S, int64_t T, size_t orders) {
    // The encoding once, then per step t one decoder step for each of orders x S rows: its
    // position's products, its cross-attention over S, its self-attention over t + 1.
    const ShapeCost w = network.forward_work();
    int64_t total = bytes_plus(bytes_times(w.ss, bytes_times(S, S)), bytes_times(w.s, S));
    const int64_t rows = bytes_times(static_cast<int64_t>(orders), S);
    for (int64_t t = 0; t < T; ++t) {
        const int64_t step = bytes_plus(bytes_plus(w.t, bytes_times(w.st, S)), bytes_times(w.tt, 2 * (t + 1)));
        total = bytes_plus(total, bytes_times(bytes_plus(rows, 1), step));
    }
    return total;
}

std::vector<int64_t> erasure_order_by(const std::vector<float>& scores, int64_t n, bool absolute) {
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t{0});
    auto key = [&](int64_t p) {
        const float v = static_cast<size_t>(p) < scores.size() ? scores[static_cast<size_t>(p)] : 0.0f;
        return absolute ? std::fabs(v) : v;
    };
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return key(a) > key(b); });
    return order;
}

std::vector<int64_t> random_erasure_order(int64_t n, uint64_t seed, size_t index, int64_t step) {
    std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(index),
                      static_cast<uint32_t>(step)};
    std::mt19937_64 gen(seq);
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t{0});
    for (int64_t i = n - 1; i > 0; --i)
        std::swap(order[static_cast<size_t>(i)], order[gen() % static_cast<uint64_t>(i + 1)]);
    return order;
}

namespace {

bool wants_order(const ErasureOptions& o, ErasureOrder order) {
    return std::find(o.orders.begin(), o.orders.end(), order) != o.orders.end();
}

nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

}  // namespace

SentenceErasure erase_sentence(const TranslationModel& model, const Translation& translation,
                               const ErasureOptions& options, size_t index, const SentenceAttribution* computed) {
    options.validate();
    const std::string where = "erasure of sentence " + std::to_string(index + 1) + ": ";
    SentenceErasure out;
    for (auto o : all_erasure_orders())
        if (wants_order(options, o)) out.orders.push_back(o);
    if (translation.empty() || translation.hypotheses.empty()) return out;
    const Hypothesis& h = translation.best();
    out.source = translation.src_tokens;
    out.output = h.tokens;
    if (h.ids.empty() || translation.src_tokens.empty()) return out;
    EncoderDecoder& net = *model.network();
    if (!net.has_attention()) throw ConfigError(where + "the model has no attention (scoring none) to erase");
    const auto S = static_cast<int64_t>(translation.src_tokens.size());
    const auto T = static_cast<int64_t>(h.ids.size());
    if (wants_order(options, ErasureOrder::attention) && h.attention.empty())
        throw ConfigError(where + "the translation kept no attention map to order by");
    // Within the work bound (core/model/work_cost.hpp), before any work; the gradient orders'
    // attribution is held to it on its own.
    check_erasure_work(net, S, T, out.orders.size(), options, where);

    // The gradient orders' scores: one attribution of the sentence (source only).
    SentenceAttribution attribution;
    AttributionOptions ao;
    ao.methods.clear();
    auto has = [&](AttributionMethod m) {
        return computed && std::find(computed->methods.begin(), computed->methods.end(), m) != computed->methods.end();
    };
    const auto grad = AttributionMethod::grad_input, ig = AttributionMethod::integrated_gradients;
    if (wants_order(options, ErasureOrder::grad_input) && !has(grad)) ao.methods.push_back(grad);
    if (wants_order(options, ErasureOrder::integrated_gradients) && !has(ig)) ao.methods.push_back(ig);
    if (!ao.methods.empty()) {
        ao.ig_steps = options.ig_steps;
        ao.target = false;
        ao.memory_bound = options.memory_bound;
        ao.work_bound = options.work_bound;
        attribution = attribute_sentence(model, translation, ao, index);
    }
    auto source_scores = [&](int64_t t, AttributionMethod m) -> const std::vector<float>& {
        const SentenceAttribution& from = has(m) ? *computed : attribution;
        return from.steps.at(static_cast<size_t>(t)).scores.at(m).source;
    };

    c10::InferenceMode inference;
    const auto dev = model.device();
    const auto longs = torch::TensorOptions().dtype(torch::kLong).device(dev);
    std::vector<int64_t> src_ids;
    for (const auto& tok : translation.src_tokens) src_ids.push_back(model.src_vocab().id(tok));
    const auto src = torch::tensor(src_ids, torch::kLong).to(dev).unsqueeze(0);
    const auto encoding = net.encode(src, torch::full({1}, S, longs), false);
    const int64_t width = encoding->mask.size(1);  // S, or the model's fixed source width
    auto cache = net.start(*encoding);
    const MemoryCost cost = net.memory_cost();
    const int64_t bound = options.memory_bound > 0 ? options.memory_bound : memory_bound();
    const auto n_orders = static_cast<int64_t>(out.orders.size());
    const int64_t rows = n_orders * S;  // row (o, k): order o's first k + 1 positions erased
    int64_t previous = Vocab::bos_id;
    for (int64_t t = 0; t < T; ++t) {
        const auto before = cache->clone();
        const auto own = net.step(torch::full({1}, previous, longs), *cache, *encoding);
        const int64_t top = own.logits[0].argmax().item<int64_t>();
        StepErasure st;
        st.step = t;
        st.token = model.tgt_vocab().token(top);
        for (auto o : out.orders) {
            std::vector<int64_t> order;
            switch (o) {
            case ErasureOrder::attention:
                order = erasure_order_by(h.attention.primary().weights.at(static_cast<size_t>(t)), S, false);
                break;
            case ErasureOrder::grad_input:
            case ErasureOrder::integrated_gradients: {
                const auto m = o == ErasureOrder::grad_input ? AttributionMethod::grad_input
                                                             : AttributionMethod::integrated_gradients;
                order = erasure_order_by(source_scores(t, m), S, true);
                break;
            }
            case ErasureOrder::random: order = random_erasure_order(S, options.seed, index, t); break;
            }
            st.order[o] = std::move(order);
        }
        // Every (order, k) one row of a step from the same cache, in passes within the bound.
        const int64_t per_row = cost.step.per_row(width, t + 1);
        if (per_row > bound)
            throw ConfigError(where + "one erased step of " + std::to_string(width) + " source positions needs about " +
                              memory_text(per_row) + ", more than the " + memory_text(bound) + " it may use");
        const int64_t pass = std::clamp<int64_t>(bound / std::max<int64_t>(per_row, 1), 1, rows);
        std::vector<int64_t> argmax(static_cast<size_t>(rows));
        for (int64_t start = 0; start < rows; start += pass) {
            const int64_t n = std::min(pass, rows - start);
            auto erased = torch::zeros({n, width}, torch::kBool);
            auto e = erased.accessor<bool, 2>();
            for (int64_t r = 0; r < n; ++r) {
                const auto& order = st.order.at(out.orders[static_cast<size_t>((start + r) / S)]);
                const int64_t k = (start + r) % S + 1;
                for (int64_t i = 0; i < k; ++i) e[r][order[static_cast<size_t>(i)]] = true;
            }
            const auto same_row = torch::zeros({n}, longs);
            const auto source_rows = encoding->select(same_row);
            auto step_cache = before->clone();
            step_cache->select(same_row);
            AttentionIntervention iv;
            iv.cross_erased = erased.to(dev);
            const auto logits = net.step(torch::full({n}, previous, longs), *step_cache, *source_rows, &iv).logits;
            const auto a = logits.argmax(-1).to(torch::kCPU).contiguous();
            std::copy(a.data_ptr<int64_t>(), a.data_ptr<int64_t>() + n, argmax.begin() + start);
        }
        for (size_t oi = 0; oi < out.orders.size(); ++oi) {
            std::optional<int64_t> flip;
            for (int64_t k = 1; k <= S && !flip; ++k)
                if (argmax[oi * static_cast<size_t>(S) + static_cast<size_t>(k - 1)] != top) flip = k;
            st.removals[out.orders[oi]] = flip;
        }
        out.steps.push_back(std::move(st));
        previous = h.ids[static_cast<size_t>(t)];
    }
    return out;
}

void ErasureSummary::add(const SentenceErasure& sentence) {
    if (orders.empty()) orders = sentence.orders;
    const bool race = std::find(orders.begin(), orders.end(), ErasureOrder::attention) != orders.end();
    for (const auto& st : sentence.steps) {
        ++steps;
        for (const auto& [o, k] : st.removals) {
            if (k) {
                m_counts[o].push_back(*k);
                ++flipped[o];
            } else {
                flipped[o] += 0;
            }
        }
        if (!race) continue;
        const auto a = st.removals.at(ErasureOrder::attention);
        for (const auto& [o, g] : st.removals) {
            if (o == ErasureOrder::attention) continue;
            Race& r = attention_vs[o];
            if (!a && !g) ++r.neither;
            else if (a && (!g || *a < *g)) ++r.sooner;
            else if (a && g && *a == *g) ++r.same;
            else ++r.later;
        }
    }
    for (auto o : orders) {
        auto v = m_counts[o];
        if (v.empty()) {
            mean[o] = median[o] = std::nan("");
            continue;
        }
        std::sort(v.begin(), v.end());
        mean[o] = static_cast<double>(std::accumulate(v.begin(), v.end(), int64_t{0})) / static_cast<double>(v.size());
        const size_t m = v.size() / 2;
        median[o] = v.size() % 2 ? static_cast<double>(v[m]) : (static_cast<double>(v[m - 1]) + static_cast<double>(v[m])) / 2.0;
    }
}

nlohmann::json ErasureSummary::to_json() const {
    nlohmann::json names = nlohmann::json::array(), flipped_json = nlohmann::json::object(),
                   mean_json = nlohmann::json::object(), median_json = nlohmann::json::object(),
                   races = nlohmann::json::object();
    for (auto o : orders) {
        names.push_back(to_string(o));
        const auto f = flipped.find(o);
        flipped_json[to_string(o)] = f == flipped.end() ? size_t{0} : f->second;
        const auto m = mean.find(o), d = median.find(o);
        mean_json[to_string(o)] = number_or_null(m == mean.end() ? std::nan("") : m->second);
        median_json[to_string(o)] = number_or_null(d == median.end() ? std::nan("") : d->second);
    }
    for (const auto& [o, r] : attention_vs)
        races[to_string(o)] = {{"sooner", r.sooner}, {"same", r.same}, {"later", r.later}, {"neither", r.neither},
                               {"sooner_share", steps ? nlohmann::json(static_cast<double>(r.sooner) /
                                                                       static_cast<double>(steps))
                                                      : nlohmann::json()}};
    return {{"steps", steps},          {"orders", names},           {"flipped", flipped_json},
            {"mean_removals", mean_json}, {"median_removals", median_json}, {"attention_vs", races}};
}

std::string ErasureSummary::to_text() const {
    std::ostringstream os;
    os << "erasure: source positions erased until the step's decision changes (" << steps << " steps)\n";
    os << std::left << std::setw(22) << "order" << std::right << std::setw(10) << "flipped" << std::setw(8) << "mean"
       << std::setw(8) << "median" << "\n";
    auto shown = [](const std::map<ErasureOrder, double>& m, ErasureOrder o) {
        std::ostringstream v;
        const auto it = m.find(o);
        if (it == m.end() || !std::isfinite(it->second)) v << "-";
        else v << std::fixed << std::setprecision(2) << it->second;
        return v.str();
    };
    for (auto o : orders) {
        const auto f = flipped.find(o);
        os << std::left << std::setw(22) << to_string(o) << std::right << std::setw(10)
           << (std::to_string(f == flipped.end() ? 0 : f->second) + "/" + std::to_string(steps)) << std::setw(8)
           << shown(mean, o) << std::setw(8) << shown(median, o) << "\n";
    }
    for (const auto& [o, r] : attention_vs)
        os << "attention vs " << to_string(o) << ": sooner " << r.sooner << ", same " << r.same << ", later " << r.later
           << ", neither flipped " << r.neither << "\n";
    return os.str();
}

}  // namespace attnviz
