#include "core/analysis/attention_compare.hpp"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

namespace attnviz {

AttentionComparison compare_attention(const TranslationModel& a, const TranslationModel& b, const std::string& sentence,
                                      const DecodeOptions& options) {
    DecodeOptions greedy = options;
    greedy.beam_size = greedy.num_hypotheses = 1;
    AttentionComparison c;
    c.a = a.translate({sentence}, greedy).at(0);
    c.b = b.translate({sentence}, greedy).at(0);
    if (c.a.empty() || c.b.empty()) {
        c.note = "the sentence is empty";
        return c;
    }
    const Hypothesis& ha = c.a.best();
    c.same_output = ha.tokens == c.b.best().tokens;
    if (a.level() != b.level()) {
        c.note = "one model reads words and the other characters: their attention cannot be lined up";
        return c;
    }
    // B reads exactly what A wrote (A's tokens without a final <eos>; reference mode adds it).
    std::vector<std::string> words(ha.tokens.begin(), ha.tokens.end());
    const bool ended = !words.empty() && words.back() == Vocab::eos_token;
    if (ended) words.pop_back();
    const std::string text = detokenize(words, a.level());
    c.b_on_a = b.force({{sentence, text}}, ForceMode::reference, greedy).at(0);
    if (!c.a.attention_available || !c.b.attention_available) {
        c.note = std::string(!c.a.attention_available ? "model A" : "model B") +
                 " has no attention (scoring none): there is nothing to compare";
        return c;
    }
    const AttentionMatrix& wa_rows = ha.attention.weights();
    const AttentionMatrix& wb_rows = c.b_on_a.best().attention.weights();
    if (c.a.src_tokens.size() != c.b_on_a.src_tokens.size() || wb_rows.size() < wa_rows.size() ||
        (!ended && wb_rows.size() != wa_rows.size() + 1) || (ended && wb_rows.size() != wa_rows.size())) {
        c.note = "the models split the sentence or the output differently: their attention cannot be lined up";
        return c;
    }
    c.comparable = true;
    double sum = 0;
    size_t cells = 0;
    for (size_t t = 0; t < wa_rows.size(); ++t) {
        std::vector<float> row(c.a.src_tokens.size(), 0.0f);
        for (size_t s = 0; s < row.size(); ++s) {
            const float wa = s < wa_rows[t].size() ? wa_rows[t][s] : 0.0f;
            const float wb = s < wb_rows[t].size() ? wb_rows[t][s] : 0.0f;
            row[s] = wa - wb;
            sum += std::abs(row[s]);
            c.max_abs_difference = std::max(c.max_abs_difference, double(std::abs(row[s])));
            ++cells;
        }
        c.difference.push_back(std::move(row));
    }
    c.mean_abs_difference = cells ? sum / double(cells) : 0.0;
    return c;
}

nlohmann::json comparison_json(const AttentionComparison& c) {
    auto side = [](const Translation& t) {
        nlohmann::json j = {{"output", nlohmann::json::array()}, {"text", ""}, {"log_prob", nullptr},
                            {"weights", nlohmann::json::array()}};
        if (t.empty()) return j;
        j["output"] = t.best().tokens;
        j["text"] = t.best().text;
        j["log_prob"] = t.best().log_prob;
        j["weights"] = t.best().attention.weights();
        return j;
    };
    return {{"format", "attnviz-attention-comparison"},
            {"version", 1},
            {"input", c.a.input},
            {"source", c.a.src_tokens},
            {"comparable", c.comparable},
            {"note", c.note},
            {"same_output", c.same_output},
            {"mean_abs_difference", c.mean_abs_difference},
            {"max_abs_difference", c.max_abs_difference},
            {"a", side(c.a)},
            {"b", side(c.b)},
            {"b_on_a", side(c.b_on_a)},
            {"difference", c.difference}};
}

}  // namespace attnviz
