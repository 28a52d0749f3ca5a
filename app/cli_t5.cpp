// attnviz-cli position-bias and prefixes: what the T5 family has that other families have not --
// each head's relative position bias as a curve over relative distance (core/model/t5_model.hpp's
// position_bias_curves), and the task prefixes of config.json's task_specific_params
// (core/config/t5_config.hpp's task_prefixes).
#include <iostream>

#include <nlohmann/json.hpp>

#include "app/cli_common.hpp"
#include "app/cli_decode.hpp"
#include "core/config/t5_config.hpp"
#include "core/io/atomic_file.hpp"
#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/model/t5_model.hpp"

namespace attnviz::cli {

namespace {

struct PositionBiasOptions {
    std::string model, out;
    int64_t span = -1;  ///< distances -span..span; -1: the model's relative_attention_max_distance
};

int run_position_bias(const PositionBiasOptions& o) {
    TranslationModelPtr model = load_model_on(o.model, "cpu");
    const auto& config = model->config();
    if (!config.is_pretrained() || !config.pretrained || !config.pretrained->model.t5)
        throw ConfigError("this model has no relative position bias (T5, Flan-T5 and mT5 have one; this is " +
                          (config.pretrained ? config.pretrained->model.describe() : std::string("attnviz's own model")) +
                          ")");
    const PretrainedConfig& c = config.pretrained->model;
    const T5Options& t5 = *c.t5;
    const int64_t span = o.span >= 0 ? o.span : t5.relative_max_distance;
    nlohmann::json j;
    j["model"] = model->corpus_name();
    j["description"] = c.describe();
    j["buckets"] = t5.relative_buckets;
    j["max_distance"] = t5.relative_max_distance;
    j["span"] = span;
    j["meaning"] = "bias[kind][head][i]: what the head adds to a score before the softmax when the key lies "
                   "distance = i - span positions after the query (negative: before it); every layer of a kind adds "
                   "the same (block 0 computes it); decoder_self is causal (keys after the query are masked)";
    std::vector<int64_t> distances;
    for (int64_t d = -span; d <= span; ++d) distances.push_back(d);
    j["distances"] = distances;
    nlohmann::json bias = {{"encoder_self", nlohmann::json::array()}, {"decoder_self", nlohmann::json::array()}};
    for (const auto& curve : position_bias_curves(*model->network(), span))
        bias[to_string(curve.kind)].push_back(curve.bias);
    j["bias"] = bias;
    if (!o.out.empty()) write_file_atomic(o.out, j.dump(2) + "\n");
    else std::cout << j.dump() << std::endl;
    return exit_ok;
}

struct PrefixesOptions {
    std::string model;
    bool json = false;
};

int run_prefixes(const PrefixesOptions& o) {
    TranslationModelPtr model = load_model_on(o.model, "cpu");
    const auto& config = model->config();
    std::vector<std::pair<std::string, std::string>> prefixes;
    if (config.is_pretrained() && config.pretrained) prefixes = task_prefixes(config.pretrained->model);
    if (o.json) {
        nlohmann::json j = nlohmann::json::array();
        for (const auto& [task, prefix] : prefixes) j.push_back({{"task", task}, {"prefix", prefix}});
        std::cout << j.dump() << std::endl;
        return exit_ok;
    }
    if (prefixes.empty()) std::cerr << "this model's config names no task prefixes (task_specific_params)\n";
    for (const auto& [task, prefix] : prefixes) std::cout << escape_controls(task) << "\t" << quote(prefix, 400) << "\n";
    return exit_ok;
}

}  // namespace

Command add_position_bias_command(CLI::App& parent) {
    auto o = std::make_shared<PositionBiasOptions>();
    CLI::App* app = parent.add_subcommand("position-bias", "A T5 model's relative position bias, head by head, as JSON");
    app->footer(
        "T5 adds a learned bias to every self-attention score by the key's distance from the query\n"
        "(relative position buckets: exact for short distances, logarithmic up to max_distance, one bucket\n"
        "beyond). This prints, for every encoder_self and decoder_self head, the bias at distances\n"
        "-span..span as one JSON object (bias.encoder_self[head][i] at distance i - span).");
    app->add_option("--model", o->model, "a T5 / Flan-T5 / mT5 model folder, hub id or checkpoint")
        ->type_name("PATH")->required();
    app->add_option("--span", o->span, "distances -N..N (default: the model's relative_attention_max_distance)")
        ->type_name("N")->check(CLI::Range(0, 1 << 20));
    app->add_option("--out", o->out, "write the JSON to FILE instead of printing it")->type_name("FILE");
    return {app, [o] { return run_position_bias(*o); }};
}

Command add_prefixes_command(CLI::App& parent) {
    auto o = std::make_shared<PrefixesOptions>();
    CLI::App* app = parent.add_subcommand("prefixes", "The task prefixes a T5 model's config names (type one before the text)");
    app->footer(
        "T5 reads its task from the text: \"translate English to German: The house is wonderful.\". This\n"
        "lists config.json's task_specific_params prefixes, one task a line (task, tab, the prefix quoted).");
    app->add_option("--model", o->model, "a model folder, hub id or checkpoint")->type_name("PATH")->required();
    app->add_flag("--json", o->json, "print [{\"task\", \"prefix\"}, ...]");
    return {app, [o] { return run_prefixes(*o); }};
}

}  // namespace attnviz::cli
