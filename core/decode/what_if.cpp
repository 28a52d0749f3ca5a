// One step's attention changed, the sentence decoded again from there.
#include "core/decode/what_if.hpp"

#include "core/decode/greedy.hpp"
#include "core/io/error.hpp"

namespace attnviz {

WhatIf what_if(const TranslationModel& model, const std::vector<std::string>& source,
               const std::vector<std::string>& output, Intervention intervention, DecodeOptions options) {
    const auto steps = static_cast<int64_t>(output.size());
    if (intervention.step < 0 || intervention.step >= steps)
        throw ConfigError("what if: step " + std::to_string(intervention.step) + " is not one of the output's 0.." +
                          std::to_string(steps - 1));
    const std::vector<int64_t> ids = model.tgt_vocab().encode(output);
    const std::vector<int64_t> before(ids.begin(), ids.begin() + intervention.step);
    options.beam_size = options.num_hypotheses = 1;
    options.beam_tree = false;
    // The original output given in full: as it was, and with the step changed (its token's
    // new log-probability). An output without <eos> (cut at the length limit) ends where it ended.
    DecodeOptions given = options;
    given.max_length = std::max<int64_t>(steps, 1);
    given.intervention = {};
    const SearchModel searcher = model.search_model();
    const std::vector<std::vector<std::string>> sources{source};
    const std::vector<std::vector<int64_t>> full{ids}, prefix{before};
    WhatIf w;
    w.intervention = intervention;
    w.original_output = output;
    auto original = greedy_decode(searcher, sources, given, &full);
    given.intervention = intervention;
    auto forced_changed = greedy_decode(searcher, sources, given, &full);
    options.intervention = intervention;
    auto changed = greedy_decode(searcher, sources, options, &prefix);
    if (original[0].empty()) throw ConfigError("what if: the source is empty");
    w.source = original[0].src_tokens;
    w.original = std::move(original[0].hypotheses[0]);
    w.changed = std::move(changed[0].hypotheses[0]);
    const auto t = static_cast<size_t>(intervention.step);
    w.original_token = output[t];
    w.original_log_prob = w.original.step_log_prob.at(t);
    w.changed_log_prob = forced_changed[0].hypotheses[0].step_log_prob.at(t);
    return w;
}

WhatIf what_if(const TranslationModel& model, const Translation& translation, Intervention intervention,
               DecodeOptions options) {
    std::vector<std::string> source = translation.src_tokens;
    if (!source.empty() && source.back() == Vocab::eos_token) source.pop_back();
    return what_if(model, source, translation.best().tokens, std::move(intervention), std::move(options));
}

}  // namespace attnviz
