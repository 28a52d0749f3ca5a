// DecodeOptions: JSON and range checks.
#include "core/decode/translation.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/io/error.hpp"

namespace attnviz {

nlohmann::json DecodeOptions::to_json() const {
    nlohmann::json j{{"max_length", max_length},
            {"beam_size", beam_size},
            {"num_hypotheses", num_hypotheses},
            {"length_penalty", length_penalty},
            {"batch_size", batch_size},
            {"normalize_input", normalize_input},
            {"top_k", top_k},
            {"beam_tree", beam_tree}};
    if (intervention.active()) j["intervention"] = intervention.to_json();
    if (!source_lang.empty()) j["source_lang"] = source_lang;
    if (!target_lang.empty()) j["target_lang"] = target_lang;
    if (generation.transformers_search || generation.masks()) {
        static const char* const stopping[] = {"false", "true", "never"};
        j["generation"] = {{"search", generation.transformers_search ? "transformers" : "attnviz"},
                           {"early_stopping", stopping[std::clamp(generation.early_stopping, 0, 2)]},
                           {"forced_first", generation.forced_first},
                           {"forced_last", generation.forced_last},
                           {"min_length", generation.min_length},
                           {"no_repeat_ngram", generation.no_repeat_ngram},
                           {"bad_words", generation.bad_words}};
    }
    return j;
}

void DecodeOptions::validate() const {
    const DecodeOptions& o = *this;
    if (o.max_length < 1 || o.max_length > max_decode_length)
        throw ConfigError("decode: max length must be in 1.." + std::to_string(max_decode_length));
    if (o.beam_size < 1 || o.beam_size > 100) throw ConfigError("decode: beam size must be in 1..100");
    if (o.num_hypotheses < 1 || o.num_hypotheses > o.beam_size)
        throw ConfigError("decode: number of hypotheses must be in 1..beam size");
    if (o.batch_size < 1) throw ConfigError("decode: batch size must be at least 1");
    if (o.batch_tokens < 0) throw ConfigError("decode: batch tokens must be 0 (off) or more");
    // Negative as transformers allows it (a generation_config.json's: log P times length^-alpha).
    if (!(o.length_penalty >= -100 && o.length_penalty <= 100)) throw ConfigError("decode: length penalty must be in -100..100");
    if (o.top_k < 0 || o.top_k > 100) throw ConfigError("decode: top-k must be in 0..100");
    o.intervention.validate();
    if (o.intervention.active() && (o.beam_size > 1 || o.beam_tree))
        throw ConfigError("decode: interventions on attention decode greedily (beam size 1, no beam tree)");
}

}  // namespace attnviz
