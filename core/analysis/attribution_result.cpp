// Attribution results: method names, agreement with attention, the attribute file's JSON.
#include "core/analysis/attribution_result.hpp"

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/analysis/sinks.hpp"
#include "core/io/error.hpp"
#include "core/io/message.hpp"

namespace attnviz {

const std::vector<AttributionMethod>& all_attribution_methods() {
    static const std::vector<AttributionMethod> all{AttributionMethod::saliency, AttributionMethod::grad_input,
                                                    AttributionMethod::integrated_gradients,
                                                    AttributionMethod::occlusion};
    return all;
}

std::string to_string(AttributionMethod method) {
    switch (method) {
    case AttributionMethod::saliency: return "saliency";
    case AttributionMethod::grad_input: return "grad_input";
    case AttributionMethod::integrated_gradients: return "integrated_gradients";
    case AttributionMethod::occlusion: return "occlusion";
    }
    return "saliency";
}

std::string cli_name(AttributionMethod method) {
    switch (method) {
    case AttributionMethod::grad_input: return "grad-input";
    case AttributionMethod::integrated_gradients: return "integrated-gradients";
    default: return to_string(method);
    }
}

AttributionMethod attribution_method_from_string(const std::string& name) {
    for (auto m : all_attribution_methods())
        if (name == to_string(m) || name == cli_name(m)) return m;
    throw ConfigError("unknown attribution method " + quote(name) +
                      ": expected saliency, grad-input, integrated-gradients or occlusion");
}

const AttributionScores* StepAttribution::find(AttributionMethod method) const {
    auto it = scores.find(method);
    return it == scores.end() ? nullptr : &it->second;
}

namespace {
std::vector<float> magnitudes(const std::vector<float>& v) {
    std::vector<float> out;
    out.reserve(v.size());
    for (float x : v) out.push_back(std::fabs(x));
    return out;
}
nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }
nlohmann::json numbers(const std::vector<float>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (float x : v) a.push_back(number(x));
    return a;
}
}  // namespace

std::map<AttributionMethod, RankAgreement> attention_agreement(const StepAttribution& step) {
    std::map<AttributionMethod, RankAgreement> out;
    if (step.attention.empty()) return out;
    for (const auto& [method, s] : step.scores)
        if (s.source.size() == step.attention.size())
            out[method] = rank_agreement(step.attention, magnitudes(s.source));
    return out;
}

RankAgreement method_agreement(const StepAttribution& step, AttributionMethod a, AttributionMethod b) {
    const AttributionScores* x = step.find(a);
    const AttributionScores* y = step.find(b);
    if (!x || !y || x->source.size() != y->source.size()) return {};
    return rank_agreement(magnitudes(x->source), magnitudes(y->source));
}

void add_to_table(AgreementTable& table, const SentenceAttribution& sentence) {
    const bool attention = !sentence.steps.empty() && !sentence.steps.front().attention.empty();
    for (auto m : sentence.methods) {
        if (!attention) break;
        std::vector<RankAgreement> steps;
        for (const auto& step : sentence.steps) steps.push_back(attention_agreement(step)[m]);
        table.add_sentence("attention vs " + to_string(m), steps);
    }
    for (size_t i = 0; i < sentence.methods.size(); ++i)
        for (size_t j = i + 1; j < sentence.methods.size(); ++j) {
            std::vector<RankAgreement> steps;
            for (const auto& step : sentence.steps)
                steps.push_back(method_agreement(step, sentence.methods[i], sentence.methods[j]));
            table.add_sentence(to_string(sentence.methods[i]) + " vs " + to_string(sentence.methods[j]), steps);
        }
}

nlohmann::json to_json(const SentenceAttribution& sentence) {
    nlohmann::json steps = nlohmann::json::array();
    AttentionMatrix rows;
    for (const auto& s : sentence.steps) rows.push_back(s.attention);
    const auto sinks = sink_share(rows, sentence.source);
    for (size_t t = 0; t < sentence.steps.size(); ++t) {
        const StepAttribution& s = sentence.steps[t];
        nlohmann::json source = nlohmann::json::object(), target = nlohmann::json::object();
        for (const auto& [method, scores] : s.scores) {
            source[to_string(method)] = numbers(scores.source);
            if (!scores.target.empty()) target[to_string(method)] = numbers(scores.target);
        }
        nlohmann::json agreement = nlohmann::json::object();
        for (const auto& [method, a] : attention_agreement(s))
            agreement[to_string(method)] = {{"kendall_tau", number(a.kendall_tau)}, {"top1", a.top1}};
        nlohmann::json j{{"token", s.token},
                         {"log_prob", number(s.log_prob)},
                         {"attention", numbers(s.attention)},
                         {"attributions", source},
                         {"target_attributions", target},
                         {"baseline_log_prob", s.find(AttributionMethod::integrated_gradients)
                                                   ? number(s.baseline_log_prob) : nlohmann::json()},
                         {"completeness_error", s.find(AttributionMethod::integrated_gradients)
                                                    ? number(s.completeness_error) : nlohmann::json()},
                         {"ig_steps", s.find(AttributionMethod::integrated_gradients)
                                          ? nlohmann::json(s.ig_steps) : nlohmann::json()},
                         {"sink_share", s.attention.empty() ? nlohmann::json() : number(sinks[t])},
                         {"agreement", agreement}};
        if (!s.contrast.empty()) j["contrast"] = s.contrast;
        if (t < sentence.top_k.size()) {
            nlohmann::json top = nlohmann::json::array();
            for (const auto& c : sentence.top_k[t]) top.push_back({{"token", c.token}, {"id", c.id}, {"prob", c.prob}});
            j["top_k"] = top;
        }
        steps.push_back(std::move(j));
    }
    nlohmann::json methods = nlohmann::json::array();
    for (auto m : sentence.methods) methods.push_back(to_string(m));
    nlohmann::json out{{"input", sentence.input},      {"source", sentence.source},   {"output", sentence.output},
                       {"text", sentence.text},        {"attention_map", sentence.attention_map}, {"methods", methods},
                       {"ig_steps", sentence.ig_steps}, {"steps", steps}};
    if (sentence.ig_steps > 0) {
        nlohmann::json ig{{"auto", sentence.ig_auto},
                          {"relative_error", number(sentence.ig_relative_error)},
                          {"converged", sentence.ig_converged}};
        if (sentence.ig_auto) {
            ig["tolerance"] = sentence.ig_tolerance;
            ig["work_capped"] = sentence.ig_work_capped;
        }
        out["ig"] = std::move(ig);
    }
    return out;
}

}  // namespace attnviz
