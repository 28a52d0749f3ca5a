// Agreement between attention and attribution over a corpus.
#include "core/analysis/corpus_agreement.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <nlohmann/json.hpp>

namespace attnviz {

AttributionOptions CorpusAgreementOptions::default_attribution() {
    AttributionOptions o;
    o.methods = {AttributionMethod::saliency, AttributionMethod::grad_input, AttributionMethod::occlusion};
    return o;
}

namespace {
std::string joined(const std::vector<std::string>& tokens) {
    std::string s;
    for (const auto& t : tokens) s += (s.empty() ? "" : " ") + t;
    return s;
}
nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }
}  // namespace

CorpusAgreement corpus_agreement(const TranslationModel& model, const std::vector<std::vector<std::string>>& sources,
                                 const CorpusAgreementOptions& options,
                                 const std::function<bool(size_t, size_t)>& progress) {
    options.attribution.validate();
    if (options.erasure) options.erasure_options.validate();
    const auto t0 = std::chrono::steady_clock::now();
    CorpusAgreement out;
    for (auto m : all_attribution_methods())
        if (std::find(options.attribution.methods.begin(), options.attribution.methods.end(), m) !=
            options.attribution.methods.end())
            out.methods.push_back(m);
    const size_t n = options.max_sentences ? std::min(options.max_sentences, sources.size()) : sources.size();
    const std::vector<std::vector<std::string>> todo(sources.begin(), sources.begin() + static_cast<long>(n));
    // Translated in the decoder's batches, then attributed one by one.
    // They keep only the map attribution reads; a sentence too long for the memory bound is
    // refused by number before any is attributed.
    DecodeOptions decode = options.decode;
    decode.maps = maps_for_attribution(options.attribution);
    if (decode.memory_bound == 0) decode.memory_bound = options.attribution.memory_bound;
    const auto translations = model.translate_tokens(todo, decode);
    check_attribution_fits(model, translations, options.attribution);
    if (options.erasure) check_erasure_fits(model, translations, options.erasure_options);
    for (size_t i = 0; i < translations.size(); ++i) {
        const SentenceAttribution sa = attribute_sentence(model, translations[i], options.attribution, i);
        add_to_table(out.table, sa);
        AgreementTable own;
        add_to_table(own, sa);
        SentenceAgreement row;
        row.index = i;
        row.input = joined(todo[i]);
        row.text = model.tokenizer().decode(todo[i]);
        row.output = translations[i].empty() ? "" : translations[i].best().text;
        row.steps = sa.steps.size();
        for (const auto& pair : own.pairs()) {
            row.kendall_tau[pair] = own.row(pair).step_tau.mean();
            row.top1[pair] = own.row(pair).top1_rate();
        }
        if (options.erasure) {
            row.erasure = erase_sentence(model, translations[i], options.erasure_options, i, &sa);
            if (!out.erasure) out.erasure.emplace();
            out.erasure->add(*row.erasure);
        }
        out.sentences.push_back(std::move(row));
        if (progress && !progress(i + 1, translations.size())) break;
    }
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

nlohmann::json CorpusAgreement::to_json() const {
    nlohmann::json methods_json = nlohmann::json::array();
    for (auto m : methods) methods_json.push_back(to_string(m));
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& s : sentences) {
        nlohmann::json tau = nlohmann::json::object(), top = nlohmann::json::object();
        for (const auto& [pair, v] : s.kendall_tau) tau[pair] = number(v);
        for (const auto& [pair, v] : s.top1) top[pair] = number(v);
        rows.push_back({{"index", s.index}, {"input", s.input}, {"text", s.text}, {"output", s.output}, {"steps", s.steps},
                        {"kendall_tau", tau}, {"top1", top}});
        if (s.erasure) rows.back()["erasure"] = s.erasure->to_json();
    }
    nlohmann::json out = {{"sentences_count", sentences.size()}, {"methods", methods_json}, {"seconds", seconds},
                          {"table", table.to_json()["pairs"]}, {"sentences", rows}};
    if (erasure) out["erasure"] = erasure->to_json();
    return out;
}

}  // namespace attnviz
