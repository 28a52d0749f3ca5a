// Attention sinks: <eos> and punctuation, their share of each step, and rows without them.
#include "core/analysis/sinks.hpp"

#include "core/text/unicode.hpp"
#include "core/text/vocab.hpp"

namespace attnviz {

const char* const sinks_excluded_note = "sinks excluded (<eos>, punctuation), rows renormalised";

bool is_sink_token(const std::string& token) { return token == Vocab::eos_token || is_punctuation(token); }

namespace {
std::vector<bool> sink_columns(const std::vector<std::string>& source) {
    std::vector<bool> sink;
    sink.reserve(source.size());
    for (const auto& tok : source) sink.push_back(is_sink_token(tok));
    return sink;
}
}  // namespace

std::vector<float> sink_share(const AttentionMatrix& weights, const std::vector<std::string>& source) {
    const auto sink = sink_columns(source);
    std::vector<float> share;
    share.reserve(weights.size());
    for (const auto& row : weights) {
        double on = 0, all = 0;
        for (size_t s = 0; s < row.size(); ++s) {
            all += row[s];
            if (s < sink.size() && sink[s]) on += row[s];
        }
        share.push_back(all > 0 ? static_cast<float>(on / all) : 0.0f);
    }
    return share;
}

std::vector<bool> sink_flags(const AttentionMatrix& weights, const std::vector<std::string>& source, float threshold) {
    std::vector<bool> flags;
    for (float s : sink_share(weights, source)) flags.push_back(s >= threshold);
    return flags;
}

AttentionMatrix without_sinks(const AttentionMatrix& weights, const std::vector<std::string>& source) {
    const auto sink = sink_columns(source);
    AttentionMatrix out = weights;
    for (auto& row : out) {
        double rest = 0;
        for (size_t s = 0; s < row.size(); ++s)
            if (!(s < sink.size() && sink[s])) rest += row[s];
        if (rest <= 0) continue;
        for (size_t s = 0; s < row.size(); ++s)
            row[s] = s < sink.size() && sink[s] ? 0.0f : static_cast<float>(row[s] / rest);
    }
    return out;
}

Translation exclude_sinks(const Translation& t) {
    Translation out = t;
    for (auto& h : out.hypotheses)
        for (auto& m : h.attention.maps)
            if (m.id.kind == AttentionKind::cross) m.weights = without_sinks(m.weights, t.src_tokens);
    out.merged = out.merged.empty() ? sinks_excluded_note : out.merged + "; " + sinks_excluded_note;
    return out;
}

}  // namespace attnviz
