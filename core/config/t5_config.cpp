// The T5 family's config.json (core/config/t5_config.hpp), checked field by field.
#include "core/config/t5_config.hpp"

#include <algorithm>
#include <memory>

#include "core/config/config_fields.hpp"
#include "core/io/error.hpp"
#include "core/io/message.hpp"

namespace attnviz {

using json = nlohmann::json;

namespace {

/// transformers' ACT2FN names a T5 feed-forward may use (the part after "gated-").
/// `said`: which key named it and how ("\"feed_forward_proj\" is 'gated-foo'"), for the error.
Activation t5_activation(const std::string& name, const std::string& said, const std::string& what) {
    if (const auto a = activation_named(name)) return *a;
    throw FileError(what + ": " + said + ", expected one of " + k_activation_names + " or one of them gated (\"gated-gelu\")");
}

}  // namespace

bool is_t5_model_type(const std::string& model_type) { return model_type == "t5" || model_type == "mt5"; }

PretrainedConfig t5_config_from_json(const json& j, const std::string& what) {
    namespace cf = config_fields;
    const cf::Fields f(j, what);
    const std::string type = f.text_or("model_type", "t5");
    if (!is_t5_model_type(type)) throw FileError(what + ": model_type " + quote(type) + " is not t5 or mt5");
    const bool mt5 = type == "mt5";
    auto o = std::make_shared<T5Options>();
    o->model_type = type;
    PretrainedConfig c;
    c.family = PretrainedFamily::t5;
    c.raw = j;
    // transformers' defaults (T5Config, MT5Config) for fields a file leaves out.
    c.vocab_size = c.decoder_vocab_size = f.integer_or("vocab_size", mt5 ? 250112 : 32128, 4, cf::k_max_vocab);
    c.d_model = f.integer_or("d_model", 512, 2, cf::max_width());
    o->head_dim = f.integer_or("d_kv", 64, 1, cf::max_width());
    c.encoder_heads = c.decoder_heads = f.integer_or("num_heads", mt5 ? 6 : 8, 1, cf::k_max_heads);
    if (o->inner(c.encoder_heads) > cf::max_width())
        throw FileError(what + ": \"num_heads\" x \"d_kv\" is " + std::to_string(o->inner(c.encoder_heads)) +
                        ", past the widest attention attnviz builds (" + std::to_string(cf::max_width()) + ")");
    c.encoder_ffn = c.decoder_ffn = f.integer_or("d_ff", mt5 ? 1024 : 2048, 1, cf::k_max_ffn);
    c.encoder_layers = f.integer_or("num_layers", mt5 ? 8 : 6, 1, cf::k_max_layers);
    c.decoder_layers = f.integer_or("num_decoder_layers", c.encoder_layers, 1, cf::k_max_layers);
    o->relative_buckets = f.integer_or("relative_attention_num_buckets", 32, 4, 4096);
    // The logarithmic buckets start at max_exact (a quarter of the buckets in the encoder, half in
    // the decoder) and reach max_distance: it must lie past both.
    const int64_t past_exact = o->relative_buckets / 2 + 1;
    if (f.has("relative_attention_max_distance") && j.at("relative_attention_max_distance").is_number_integer() &&
        j.at("relative_attention_max_distance").get<int64_t>() < past_exact)
        throw FileError(what + ": \"relative_attention_max_distance\" is " + j.at("relative_attention_max_distance").dump() +
                        ", expected at least " + std::to_string(past_exact) + ": the decoder's exact buckets (half of " +
                        std::to_string(o->relative_buckets) + " relative_attention_num_buckets) must end before it");
    o->relative_max_distance = f.integer_or("relative_attention_max_distance", 128, past_exact, 1 << 20);
    o->feed_forward_proj = f.text_or("feed_forward_proj", mt5 ? "gated-gelu" : "relu");
    {
        const std::string& p = o->feed_forward_proj;
        o->gated = p.rfind("gated-", 0) == 0;
        const std::string act = o->gated ? p.substr(6) : p;
        if (act.find('-') != std::string::npos)
            throw FileError(what + ": \"feed_forward_proj\" is " + quote(p) + ", expected an activation or \"gated-\" and one");
        // T5Config: "gated-gelu" means gelu_new (the tanh approximation), for backwards compatibility.
        c.activation_name = p == "gated-gelu" ? "gelu_new" : act;
        // What save_pretrained writes beside it wins, as in T5Config (a hand-edited file may disagree).
        if (f.has("dense_act_fn")) c.activation_name = f.text_or("dense_act_fn", c.activation_name);
        if (f.has("is_gated_act")) o->gated = f.boolean_or("is_gated_act", o->gated);
        c.activation = t5_activation(c.activation_name,
                                     f.has("dense_act_fn") ? "\"dense_act_fn\" is " + quote(c.activation_name)
                                                           : "\"feed_forward_proj\" is " + quote(p),
                                     what);
    }
    c.dropout = f.real_or("dropout_rate", 0.1, 0.0, 0.99);
    c.attention_dropout = c.activation_dropout = c.dropout;  // T5 drops weights and activations at dropout_rate
    c.layer_norm_eps = f.real_or("layer_norm_epsilon", 1e-6, 1e-12, 1.0);
    // No position table: the relative buckets have no longest sequence (positions stays at the
    // table position_limit() puts no limit on).
    c.max_positions = cf::k_max_positions;
    c.positions = PositionTable::fairseq;
    c.scale_embedding = false;
    c.normalize_before = true;
    c.final_layer_norms = true;
    c.final_logits_bias = false;
    c.share_embeddings = true;
    // transformers 5 ties lm_head to `shared` unless the weights hold an lm_head.weight of their own
    // (the folder's loader decides by the weights); the config's tie_word_embeddings says whether t5
    // rescales the decoder's output, unless scale_decoder_outputs says it itself.
    c.tie_word_embeddings = f.boolean_or("tie_word_embeddings", true);
    o->scale_decoder_outputs = mt5 ? false : f.boolean_or("scale_decoder_outputs", c.tie_word_embeddings);
    const int64_t V = c.vocab_size;
    c.pad_token_id = f.integer_or("pad_token_id", 0, 0, V - 1);
    const auto eos = f.ids_or("eos_token_id", {1}, V);
    if (eos.size() > 1)
        throw FileError(what + ": \"eos_token_id\" lists " + std::to_string(eos.size()) +
                        " tokens; attnviz reads models with one end-of-sentence token");
    c.eos_token_id = eos.front();
    c.bos_token_id = f.integer_or("bos_token_id", -1, -1, V - 1);
    c.decoder_start_token_id = f.integer_or("decoder_start_token_id", c.pad_token_id, 0, V - 1);
    if (c.pad_token_id == c.eos_token_id)
        throw FileError(what + ": pad_token_id and eos_token_id are both " + std::to_string(c.eos_token_id) +
                        "; attnviz needs them apart");
    if (f.has("task_specific_params")) {
        const json& tasks = j.at("task_specific_params");
        if (!tasks.is_object()) throw f.bad("task_specific_params", "an object of tasks", tasks);
        for (const auto& [task, params] : tasks.items()) {
            const std::string key = "task_specific_params." + task;
            if (!params.is_object()) throw f.bad(key.c_str(), "an object (a task's settings)", params);
            if (!params.contains("prefix") || params["prefix"].is_null()) continue;
            if (!params["prefix"].is_string())
                throw f.bad((key + ".prefix").c_str(), "a string (the text typed before the input)", params["prefix"]);
            o->task_prefixes.emplace_back(task, params["prefix"].get<std::string>());
        }
    }
    c.t5 = o;
    return c;
}

json t5_config_to_json(const PretrainedConfig& c) {
    json j = c.raw.is_object() ? c.raw : json::object();
    const T5Options fallback;
    const T5Options& o = c.t5 ? *c.t5 : fallback;
    j["model_type"] = o.model_type;
    j["architectures"] = json::array({o.model_type == "mt5" ? "MT5ForConditionalGeneration" : "T5ForConditionalGeneration"});
    j["is_encoder_decoder"] = true;
    j["vocab_size"] = c.vocab_size;
    j["d_model"] = c.d_model;
    j["d_kv"] = o.head_dim;
    j["d_ff"] = c.encoder_ffn;
    j["num_layers"] = c.encoder_layers;
    j["num_decoder_layers"] = c.decoder_layers;
    j["num_heads"] = c.encoder_heads;
    j["relative_attention_num_buckets"] = o.relative_buckets;
    j["relative_attention_max_distance"] = o.relative_max_distance;
    j["feed_forward_proj"] = o.feed_forward_proj;
    j["dropout_rate"] = c.dropout;
    j["layer_norm_epsilon"] = c.layer_norm_eps;
    j["tie_word_embeddings"] = c.tie_word_embeddings;
    if (o.model_type == "t5") j["scale_decoder_outputs"] = o.scale_decoder_outputs;
    j["pad_token_id"] = c.pad_token_id;
    j["eos_token_id"] = c.eos_token_id;
    if (c.bos_token_id >= 0) j["bos_token_id"] = c.bos_token_id;
    j["decoder_start_token_id"] = c.decoder_start_token_id;
    return j;
}

std::string t5_describe(const PretrainedConfig& c) {
    const T5Options fallback;
    const T5Options& o = c.t5 ? *c.t5 : fallback;
    const std::string name = o.model_type == "mt5" ? "mT5" : o.gated ? "T5 v1.1 / Flan-T5" : "T5";
    return name + ", d " + std::to_string(c.d_model) + ", " + std::to_string(c.encoder_layers) + "+" +
           std::to_string(c.decoder_layers) + " layers, " + count_of(c.encoder_heads, "head", "heads") + " of " +
           std::to_string(o.head_dim) + ", ffn " + std::to_string(c.encoder_ffn) + " " + o.feed_forward_proj +
           ", vocabulary " + std::to_string(c.vocab_size);
}

std::vector<std::pair<std::string, std::string>> task_prefixes(const PretrainedConfig& c) {
    if (c.family != PretrainedFamily::t5 || !c.t5) return {};
    return c.t5->task_prefixes;
}

}  // namespace attnviz
