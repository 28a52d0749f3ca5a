// The T5 family's parameter table (declared in core/persist/parameter_names.hpp).
#include "core/persist/parameter_names.hpp"

#include "core/config/pretrained_config.hpp"
#include "core/config/t5_config.hpp"
#include "core/io/error.hpp"

namespace attnviz {

std::vector<ParameterName> t5_parameter_names(const ModelConfig& mc) {
    if (!mc.pretrained || mc.pretrained->model.family != PretrainedFamily::t5 || !mc.pretrained->model.t5)
        throw ConfigError("model: not a T5 model's configuration");
    const PretrainedConfig& c = mc.pretrained->model;
    const T5Options& o = *c.t5;
    const int64_t d = c.d_model, h = c.encoder_heads, inner = o.inner(h), f = c.encoder_ffn;
    std::vector<ParameterName> out;
    auto add = [&](const std::string& name, std::vector<int64_t> shape, VocabRows rows = VocabRows::none) {
        out.push_back({name, name, std::move(shape), rows});
    };
    add("shared.weight", {mc.src_vocab, d}, VocabRows::source);
    for (const bool decoder : {false, true}) {
        const std::string side = decoder ? "decoder" : "encoder";
        const int64_t L = decoder ? c.decoder_layers : c.encoder_layers;
        for (int64_t i = 0; i < L; ++i) {
            const std::string b = side + ".block." + std::to_string(i) + ".layer.";
            auto attention = [&](const std::string& p, bool relative) {
                add(p + ".q.weight", {inner, d});
                add(p + ".k.weight", {inner, d});
                add(p + ".v.weight", {inner, d});
                add(p + ".o.weight", {d, inner});
                if (relative) add(p + ".relative_attention_bias.weight", {o.relative_buckets, h});
            };
            attention(b + "0.SelfAttention", i == 0);
            add(b + "0.layer_norm.weight", {d});
            if (decoder) {
                attention(b + "1.EncDecAttention", false);
                add(b + "1.layer_norm.weight", {d});
            }
            const std::string ff = b + (decoder ? "2" : "1");
            if (o.gated) {
                add(ff + ".DenseReluDense.wi_0.weight", {f, d});
                add(ff + ".DenseReluDense.wi_1.weight", {f, d});
            } else {
                add(ff + ".DenseReluDense.wi.weight", {f, d});
            }
            add(ff + ".DenseReluDense.wo.weight", {d, f});
            add(ff + ".layer_norm.weight", {d});
        }
        add(side + ".final_layer_norm.weight", {d});
    }
    if (!c.tie_word_embeddings) add("lm_head.weight", {mc.tgt_vocab, d}, VocabRows::output);
    return out;
}

}  // namespace attnviz
