// The parameter table of core/persist/parameter_names.hpp. Its test builds a Seq2Seq
// for every variant and checks that named_parameters() matches it exactly.
#include "core/persist/parameter_names.hpp"

#include "core/config/pretrained_config.hpp"
#include "core/io/error.hpp"
#include "core/io/message.hpp"

namespace attnviz {

namespace {

std::vector<ParameterName> transformer_names(const ModelConfig& c) {
    const int64_t H = c.hidden_size, F = c.ffn_size, L = c.num_layers;
    std::vector<ParameterName> out;
    auto add = [&](const std::string& name, std::vector<int64_t> shape, VocabRows rows = VocabRows::none) {
        out.push_back({name, name, std::move(shape), rows});
    };
    auto attention = [&](const std::string& p) {
        for (const char* w : {"W_q", "W_k", "W_v", "W_o"}) add(p + "." + w + ".weight", {H, H});
    };
    auto addnorm = [&](const std::string& p) {
        add(p + ".ln.weight", {H});
        add(p + ".ln.bias", {H});
    };
    auto ffn = [&](const std::string& p) {
        add(p + ".dense1.weight", {F, H});
        add(p + ".dense1.bias", {F});
        add(p + ".dense2.weight", {H, F});
        add(p + ".dense2.bias", {H});
    };
    add("encoder.embedding.weight", {c.src_vocab, H}, VocabRows::source);
    for (int64_t l = 0; l < L; ++l) {
        const std::string b = "encoder.blks.block" + std::to_string(l) + ".";
        attention(b + "attention");
        addnorm(b + "addnorm1");
        ffn(b + "ffn");
        addnorm(b + "addnorm2");
    }
    add("decoder.embedding.weight", {c.tgt_vocab, H}, VocabRows::target);
    for (int64_t l = 0; l < L; ++l) {
        const std::string b = "decoder.blks.block" + std::to_string(l) + ".";
        attention(b + "attention1");
        addnorm(b + "addnorm1");
        attention(b + "attention2");
        addnorm(b + "addnorm2");
        ffn(b + "ffn");
        addnorm(b + "addnorm3");
    }
    add("decoder.dense.weight", {c.tgt_vocab, H}, VocabRows::output);
    add("decoder.dense.bias", {c.tgt_vocab}, VocabRows::output);
    return out;
}

/// transformers' state_dict names (core/model/pretrained_model.hpp), rows in attnviz's vocabulary order.
std::vector<ParameterName> pretrained_names(const ModelConfig& mc) {
    const PretrainedConfig& c = mc.pretrained->model;
    const int64_t d = c.d_model;
    std::vector<ParameterName> out;
    auto add = [&](const std::string& name, std::vector<int64_t> shape, VocabRows rows = VocabRows::none) {
        out.push_back({name, name, std::move(shape), rows});
    };
    auto linear = [&](const std::string& p, int64_t out_features, int64_t in_features) {
        add(p + ".weight", {out_features, in_features});
        add(p + ".bias", {out_features});
    };
    auto norm = [&](const std::string& p) {
        add(p + ".weight", {d});
        add(p + ".bias", {d});
    };
    auto attention = [&](const std::string& p) {
        for (const char* w : {"k_proj", "v_proj", "q_proj", "out_proj"}) linear(p + "." + w, d, d);
    };
    if (c.share_embeddings) add("model.shared.weight", {mc.src_vocab, d}, VocabRows::source);
    if (!c.share_embeddings) add("model.encoder.embed_tokens.weight", {mc.src_vocab, d}, VocabRows::source);
    // BART / mBART: learned positions (2 rows past max_position_embeddings) and layernorm_embedding.
    const bool learned = c.positions == PositionTable::learned;
    if (learned) add("model.encoder.embed_positions.weight", {c.max_positions + 2, d});
    for (int64_t l = 0; l < c.encoder_layers; ++l) {
        const std::string b = "model.encoder.layers." + std::to_string(l) + ".";
        attention(b + "self_attn");
        norm(b + "self_attn_layer_norm");
        linear(b + "fc1", c.encoder_ffn, d);
        linear(b + "fc2", d, c.encoder_ffn);
        norm(b + "final_layer_norm");
    }
    if (c.layernorm_embedding) norm("model.encoder.layernorm_embedding");
    if (c.final_layer_norms) norm("model.encoder.layer_norm");
    if (!c.share_embeddings) add("model.decoder.embed_tokens.weight", {mc.tgt_vocab, d}, VocabRows::target);
    if (learned) add("model.decoder.embed_positions.weight", {c.max_positions + 2, d});
    for (int64_t l = 0; l < c.decoder_layers; ++l) {
        const std::string b = "model.decoder.layers." + std::to_string(l) + ".";
        attention(b + "self_attn");
        norm(b + "self_attn_layer_norm");
        attention(b + "encoder_attn");
        norm(b + "encoder_attn_layer_norm");
        linear(b + "fc1", c.decoder_ffn, d);
        linear(b + "fc2", d, c.decoder_ffn);
        norm(b + "final_layer_norm");
    }
    if (c.layernorm_embedding) norm("model.decoder.layernorm_embedding");
    if (c.final_layer_norms) norm("model.decoder.layer_norm");
    if (!c.tie_word_embeddings) add("lm_head.weight", {mc.tgt_vocab, d}, VocabRows::output);
    if (c.final_logits_bias) add("final_logits_bias", {1, mc.tgt_vocab}, VocabRows::output);
    return out;
}

}  // namespace

std::vector<ParameterName> parameter_names(const ModelConfig& c) {
    c.validate_for_build();
    if (c.is_transformer()) return transformer_names(c);
    if (c.is_pretrained() && c.pretrained && c.pretrained->model.family == PretrainedFamily::t5)
        return t5_parameter_names(c);  // core/persist/t5_parameter_names.cpp
    if (c.is_pretrained()) return pretrained_names(c);
    const int64_t E = c.embed_size, H = c.hidden_size, L = c.num_layers;
    const int64_t D = c.bidirectional ? 2 : 1, K = D * H;
    const int64_t G = c.cell == CellType::gru ? 3 : 4;
    const int64_t A = c.attention_size > 0 ? c.attention_size : H;
    std::vector<ParameterName> out;
    auto add = [&](std::string module, std::string file, std::vector<int64_t> shape,
                   VocabRows rows = VocabRows::none) {
        out.push_back({std::move(module), std::move(file), std::move(shape), rows});
    };

    add("enc_embedding.weight", "encoder.embedding.weight", {c.src_vocab, E}, VocabRows::source);
    for (int64_t l = 0; l < L; ++l)
        for (int64_t d = 0; d < D; ++d) {
            const std::string s = "_l" + std::to_string(l) + (d == 1 ? "_reverse" : "");
            const int64_t in = l == 0 ? E : K;
            for (const auto& [what, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
                     {"weight_ih", {G * H, in}}, {"weight_hh", {G * H, H}}, {"bias_ih", {G * H}}, {"bias_hh", {G * H}}})
                add("enc_rnn." + what + s, "encoder.rnn." + what + s, shape);
        }
    if (c.bidirectional) {
        add("bridge.weight", "decoder.bridge.weight", {H, 2 * H});
        add("bridge.bias", "decoder.bridge.bias", {H});
    }
    if (c.scoring == Scoring::additive) {
        add("attention.W_k.weight", "decoder.attention.W_k.weight", {A, K});
        add("attention.W_q.weight", "decoder.attention.W_q.weight", {A, H});
        add("attention.w_v.weight", "decoder.attention.w_v.weight", {1, A});
    } else if (c.scoring == Scoring::general) {
        add("attention.W_k.weight", "decoder.attention.W_k.weight", {H, K});
    }
    add("dec_embedding.weight", "decoder.embedding.weight", {c.tgt_vocab, E}, VocabRows::target);
    for (int64_t l = 0; l < L; ++l) {
        const std::string s = "_l" + std::to_string(l);
        add("dec_rnn_weight_ih" + s, "decoder.rnn.weight_ih" + s, {G * H, l == 0 ? K + E : H});
        add("dec_rnn_weight_hh" + s, "decoder.rnn.weight_hh" + s, {G * H, H});
        add("dec_rnn_bias_ih" + s, "decoder.rnn.bias_ih" + s, {G * H});
        add("dec_rnn_bias_hh" + s, "decoder.rnn.bias_hh" + s, {G * H});
    }
    add("dense.weight", "decoder.dense.weight", {c.tgt_vocab, H}, VocabRows::output);
    add("dense.bias", "decoder.dense.bias", {c.tgt_vocab}, VocabRows::output);
    return out;
}

uint64_t parameter_bytes(const std::vector<ParameterName>& params) {
    uint64_t total = 0;
    for (const auto& p : params) {
        uint64_t n = sizeof(float);
        for (const int64_t d : p.shape)
            if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n))
                throw ConfigError("parameter '" + p.file + "' has an impossible shape " + shape_to_string(p.shape));
        if (__builtin_add_overflow(total, n, &total)) throw ConfigError("the model's parameters do not fit in memory");
    }
    return total;
}

bool has_d2l_shape(const ModelConfig& c) {
    if (c.is_pretrained()) return false;
    if (c.is_transformer()) return c.hidden_size % 2 == 0;
    return c.cell == CellType::gru && !c.bidirectional && !c.reverse_source && c.scoring == Scoring::additive &&
           (c.attention_size == 0 || c.attention_size == c.hidden_size);
}


}  // namespace attnviz
