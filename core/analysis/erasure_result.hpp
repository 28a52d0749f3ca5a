#pragma once
// What an erasure flip curve finds (Serrano & Smith 2019), as plain data (no LibTorch): per
// output step and order, how many source positions had to be erased before the model's choice
// changed. core/analysis/erasure.hpp computes it; the `attribute` and `agreement` files and the
// web page (core/analysis/web_page.hpp) show it. Header only, so that the torch-free library
// (attnviz_base, the web page) reads it without linking the one that computes it.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace attnviz {

/// The order in which source positions are erased.
enum class ErasureOrder {
    attention,             ///< the primary map's weight at the step, highest first
    grad_input,            ///< |gradient x input| of the step's log-probability, highest first
    integrated_gradients,  ///< |integrated gradients| of it, highest first
    random,                ///< a permutation drawn from the seed (per sentence and step)
};

/// Every order, in the order results list them.
inline const std::vector<ErasureOrder>& all_erasure_orders() {
    static const std::vector<ErasureOrder> all{ErasureOrder::attention, ErasureOrder::grad_input,
                                               ErasureOrder::integrated_gradients, ErasureOrder::random};
    return all;
}

/// "attention", "grad_input", "integrated_gradients", "random".
inline std::string to_string(ErasureOrder order) {
    switch (order) {
    case ErasureOrder::attention: return "attention";
    case ErasureOrder::grad_input: return "grad_input";
    case ErasureOrder::integrated_gradients: return "integrated_gradients";
    case ErasureOrder::random: return "random";
    }
    return "?";
}

/// One output step.
struct StepErasure {
    int64_t step = 0;       ///< 0-based output step
    std::string token;      ///< the model's argmax at the step before any erasure
    /// Per order: the removals that changed the argmax (1..S), or nullopt when erasing every
    /// source position did not change it.
    std::map<ErasureOrder, std::optional<int64_t>> removals;
    /// Per order: the source positions in the order they are erased (all S of them).
    std::map<ErasureOrder, std::vector<int64_t>> order;
};

/// One sentence's erasure.
struct SentenceErasure {
    std::vector<std::string> source;  ///< source tokens as the model read them, <eos> included (S of them)
    std::vector<std::string> output;  ///< the output tokens erased at
    std::vector<ErasureOrder> orders;
    std::vector<StepErasure> steps;

    /// The mean removals over the steps the order flipped (nullopt: none flipped).
    std::optional<double> mean_removals(ErasureOrder order) const {
        double sum = 0;
        size_t n = 0;
        for (const auto& st : steps) {
            const auto it = st.removals.find(order);
            if (it != st.removals.end() && it->second) {
                sum += static_cast<double>(*it->second);
                ++n;
            }
        }
        if (n == 0) return std::nullopt;
        return sum / static_cast<double>(n);
    }

    /// The steps the order never flipped.
    size_t never(ErasureOrder order) const {
        size_t n = 0;
        for (const auto& st : steps) {
            const auto it = st.removals.find(order);
            if (it != st.removals.end() && !it->second) ++n;
        }
        return n;
    }

    /// {"source", "output", "steps": [{"step", "token", "removals": {order: n|null}}],
    ///  "mean_removals": {order: x|null}, "never": {order: n}}.
    nlohmann::json to_json() const {
        nlohmann::json step_rows = nlohmann::json::array();
        for (const auto& st : steps) {
            nlohmann::json removals = nlohmann::json::object();
            for (const auto& [o, k] : st.removals) removals[to_string(o)] = k ? nlohmann::json(*k) : nlohmann::json();
            step_rows.push_back({{"step", st.step}, {"token", st.token}, {"removals", removals}});
        }
        nlohmann::json mean = nlohmann::json::object(), never_json = nlohmann::json::object();
        for (auto o : orders) {
            const auto m = mean_removals(o);
            mean[to_string(o)] = m ? nlohmann::json(*m) : nlohmann::json();
            never_json[to_string(o)] = never(o);
        }
        return {{"source", source}, {"output", output}, {"steps", step_rows}, {"mean_removals", mean},
                {"never", never_json}};
    }
};

}  // namespace attnviz
