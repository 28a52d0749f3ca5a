// config.json and generation_config.json of a Hugging Face model folder, checked field by field.
#include "core/config/pretrained_config.hpp"

#include "core/config/config.hpp"
#include "core/config/config_fields.hpp"
#include "core/config/registry.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/io/error.hpp"
#include "core/io/json_bounded.hpp"
#include "core/io/message.hpp"

namespace attnviz {

using json = nlohmann::json;

namespace {

using config_fields::Fields;
using config_fields::max_width;
using config_fields::k_max_layers;
using config_fields::k_max_heads;
using config_fields::k_max_ffn;
using config_fields::k_max_vocab;
using config_fields::k_max_positions;

Activation activation_from(const std::string& name, const std::string& what) {
    if (const auto a = activation_named(name)) return *a;
    throw FileError(what + ": \"activation_function\" is " + quote(name) + ", expected one of " + k_activation_names);
}

}  // namespace

const char* const k_activation_names = "relu, gelu, gelu_python, gelu_new, gelu_pytorch_tanh, gelu_fast, swish, silu, tanh";

std::optional<Activation> activation_named(const std::string& name) {
    if (name == "relu") return Activation::relu;
    if (name == "gelu" || name == "gelu_python") return Activation::gelu;  // gelu_python: the same erf GELU
    if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") return Activation::gelu_tanh;
    if (name == "swish" || name == "silu") return Activation::silu;
    if (name == "tanh") return Activation::tanh;
    return std::nullopt;
}

std::string to_string(PretrainedFamily f) {
    switch (f) {
    case PretrainedFamily::marian: return "marian";
    case PretrainedFamily::m2m100: return "m2m_100";
    case PretrainedFamily::bart: return "bart";
    case PretrainedFamily::mbart: return "mbart";
    case PretrainedFamily::t5: return "t5";
    }
    return "?";
}
std::string supported_model_types() { return "marian, m2m_100 (M2M100 and NLLB), bart, mbart (mBART-50), t5, mt5 (T5, Flan-T5, mT5)"; }

std::string to_string(Activation a) {
    switch (a) {
    case Activation::relu: return "relu";
    case Activation::gelu: return "gelu";
    case Activation::gelu_tanh: return "gelu_new";
    case Activation::silu: return "swish";
    case Activation::tanh: return "tanh";
    }
    return "?";
}

std::string PretrainedConfig::describe() const {
    if (family == PretrainedFamily::t5) return t5_describe(*this);
    const std::string family_name = family == PretrainedFamily::marian   ? "Marian"
                                    : family == PretrainedFamily::m2m100 ? "M2M100"
                                    : family == PretrainedFamily::bart   ? "BART"
                                                                         : "mBART";
    std::string s = family_name + ", d " + std::to_string(d_model) + ", " + std::to_string(encoder_layers) + "+" +
                    std::to_string(decoder_layers) + " layers, " + count_of(encoder_heads, "head", "heads") + ", ffn " +
                    std::to_string(encoder_ffn) + ", vocabulary " + std::to_string(vocab_size);
    if (!share_embeddings) s += "/" + std::to_string(decoder_vocab_size);
    return s;
}

PretrainedConfig PretrainedConfig::from_json(const json& j, const std::string& what) {
    const Fields f(j, what);
    if (is_t5_model_type(f.text_or("model_type", ""))) return t5_config_from_json(j, what);  // core/config/t5_config.cpp
    PretrainedConfig c;
    const std::string type = f.text_or("model_type", "");
    if (type.empty())
        throw FileError(what + ": no \"model_type\" (attnviz reads " + supported_model_types() + ")");
    if (type == "marian") c.family = PretrainedFamily::marian;
    else if (type == "m2m_100") c.family = PretrainedFamily::m2m100;
    else if (type == "bart") c.family = PretrainedFamily::bart;
    else if (type == "mbart") c.family = PretrainedFamily::mbart;
    else throw FileError(what + ": model_type " + quote(type) + " is not one attnviz reads (it reads " +
                         supported_model_types() + ")");
    const bool marian = c.family == PretrainedFamily::marian;
    // BART and mBART (BartConfig, MBartConfig): learned positions, layernorm_embedding, GELU; mBART pre-norm.
    const bool bart_like = c.family == PretrainedFamily::bart || c.family == PretrainedFamily::mbart;
    const bool pre_norm = c.family == PretrainedFamily::m2m100 || c.family == PretrainedFamily::mbart;
    c.raw = j;
    c.vocab_size = f.integer("vocab_size", 4, k_max_vocab);
    c.decoder_vocab_size = marian ? f.integer_or("decoder_vocab_size", c.vocab_size, 4, k_max_vocab) : c.vocab_size;
    c.d_model = f.integer("d_model", 2, max_width());
    c.encoder_layers = f.integer("encoder_layers", 1, k_max_layers);
    c.decoder_layers = f.integer("decoder_layers", 1, k_max_layers);
    c.encoder_heads = f.integer("encoder_attention_heads", 1, k_max_heads);
    c.decoder_heads = f.integer("decoder_attention_heads", 1, k_max_heads);
    c.encoder_ffn = f.integer("encoder_ffn_dim", 1, k_max_ffn);
    c.decoder_ffn = f.integer("decoder_ffn_dim", 1, k_max_ffn);
    c.max_positions = f.integer("max_position_embeddings", 1, k_max_positions);
    for (const auto& [heads, name] : {std::pair{c.encoder_heads, "encoder_attention_heads"},
                                      std::pair{c.decoder_heads, "decoder_attention_heads"}})
        if (c.d_model % heads != 0)
            throw FileError(what + ": d_model " + std::to_string(c.d_model) + " is not a multiple of \"" + name +
                            "\" " + std::to_string(heads));
    c.activation_name = f.text_or("activation_function", marian || bart_like ? "gelu" : "relu");
    c.activation = activation_from(c.activation_name, what);
    c.scale_embedding = f.boolean_or("scale_embedding", !marian && !bart_like);
    c.normalize_before = pre_norm;
    c.final_layer_norms = pre_norm;
    c.layernorm_embedding = bart_like;
    c.positions = marian ? PositionTable::marian : bart_like ? PositionTable::learned : PositionTable::fairseq;
    c.final_logits_bias = marian || bart_like;
    c.tie_word_embeddings = f.boolean_or("tie_word_embeddings", true);
    // transformers 5 ties the encoder's and decoder's embed_tokens to model.shared only with
    // tie_word_embeddings (Marian: with share_encoder_decoder_embeddings); untied, all three are apart.
    c.share_embeddings = marian ? f.boolean_or("share_encoder_decoder_embeddings", true) : c.tie_word_embeddings;
    if (c.positions == PositionTable::marian && c.d_model % 2 != 0)
        throw FileError(what + ": d_model " + std::to_string(c.d_model) + " is odd; Marian's position table needs an even width");
    const int64_t V = std::min(c.vocab_size, c.target_vocab_size());
    c.pad_token_id = f.integer_or("pad_token_id", marian ? 58100 : 1, 0, V - 1);
    const auto eos = f.ids_or("eos_token_id", {marian ? 0 : 2}, V);
    if (eos.size() > 1)
        throw FileError(what + ": \"eos_token_id\" lists " + std::to_string(eos.size()) +
                        " tokens; attnviz reads models with one end-of-sentence token");
    c.eos_token_id = eos.front();
    c.bos_token_id = f.integer_or("bos_token_id", marian ? -1 : 0, -1, V - 1);
    // mBART's config has no default start: generate() then starts from bos_token_id.
    const int64_t start = marian ? c.pad_token_id
                          : c.family == PretrainedFamily::mbart && c.bos_token_id >= 0 ? c.bos_token_id
                                                                                      : c.eos_token_id;
    c.decoder_start_token_id = f.integer_or("decoder_start_token_id", start, 0, V - 1);
    if (c.pad_token_id == c.eos_token_id)
        throw FileError(what + ": pad_token_id and eos_token_id are both " + std::to_string(c.eos_token_id) +
                        "; attnviz needs them apart");
    c.dropout = f.real_or("dropout", 0.1, 0.0, 0.99);
    c.attention_dropout = f.real_or("attention_dropout", 0.0, 0.0, 0.99);
    c.activation_dropout = f.real_or("activation_dropout", 0.0, 0.0, 0.99);
    // layer_norm_eps is not read: transformers' Marian, M2M100, BART and mBART build every LayerNorm with
    // PyTorch's default 1e-5 whatever config.json says (T5 reads its layer_norm_epsilon: t5_config.cpp).
    return c;
}

json PretrainedConfig::to_json() const {
    if (family == PretrainedFamily::t5) return t5_config_to_json(*this);
    json j = raw.is_object() ? raw : json::object();
    j["model_type"] = to_string(family);
    j["vocab_size"] = vocab_size;
    if (family == PretrainedFamily::marian) {
        j["decoder_vocab_size"] = decoder_vocab_size;
        j["share_encoder_decoder_embeddings"] = share_embeddings;
    }
    j["d_model"] = d_model;
    j["encoder_layers"] = encoder_layers;
    j["decoder_layers"] = decoder_layers;
    j["encoder_attention_heads"] = encoder_heads;
    j["decoder_attention_heads"] = decoder_heads;
    j["encoder_ffn_dim"] = encoder_ffn;
    j["decoder_ffn_dim"] = decoder_ffn;
    j["max_position_embeddings"] = max_positions;
    j["activation_function"] = activation_name.empty() ? to_string(activation) : activation_name;
    j["scale_embedding"] = scale_embedding;
    j["tie_word_embeddings"] = tie_word_embeddings;
    j["pad_token_id"] = pad_token_id;
    j["eos_token_id"] = eos_token_id;
    if (bos_token_id >= 0) j["bos_token_id"] = bos_token_id;
    j["decoder_start_token_id"] = decoder_start_token_id;
    j["dropout"] = dropout;
    j["attention_dropout"] = attention_dropout;
    j["activation_dropout"] = activation_dropout;
    return j;
}

GenerationConfig GenerationConfig::from_json(const json& j, const PretrainedConfig& model, const std::string& what) {
    const Fields f(j, what);
    GenerationConfig g;
    g.raw = j;
    const int64_t V = model.target_vocab_size();
    g.num_beams = f.integer_or("num_beams", 1, 1, 1024);
    g.max_length_set = f.has("max_length");
    g.max_length = f.integer_or("max_length", 20, 1, 1 << 20);
    g.max_new_tokens = f.integer_or("max_new_tokens", 0, 0, 1 << 20);
    g.min_length = f.integer_or("min_length", 0, 0, 1 << 20);
    g.length_penalty = f.real_or("length_penalty", 1.0, -100.0, 100.0);
    if (f.has("early_stopping")) {
        const json& e = j.at("early_stopping");
        if (e.is_boolean()) g.early_stopping = e.get<bool>() ? EarlyStopping::on_full : EarlyStopping::heuristic;
        else if (e.is_string() && e.get<std::string>() == "never") g.early_stopping = EarlyStopping::never;
        else throw f.bad("early_stopping", "true, false or \"never\"", e);
    }
    g.num_return_sequences = f.integer_or("num_return_sequences", 1, 1, g.num_beams);
    g.no_repeat_ngram_size = f.integer_or("no_repeat_ngram_size", 0, 0, 1024);
    if (f.has("bad_words_ids")) {
        const json& b = j.at("bad_words_ids");
        if (!b.is_array() || b.size() > 100000) throw f.bad("bad_words_ids", "a list of token id lists", b);
        for (size_t i = 0; i < b.size(); ++i) {
            const std::string entry = "bad_words_ids[" + std::to_string(i) + "]";
            if (!b[i].is_array() || b[i].empty())
                throw f.bad(entry.c_str(), "a non-empty list of token ids (bad_words_ids is a list of such lists)", b[i]);
            g.bad_words_ids.push_back(f.flat_ids(b[i], entry, V));
        }
    }
    g.forced_bos_token_id = f.integer_or("forced_bos_token_id", -1, -1, V - 1);
    // transformers forces any of a list's ids; attnviz forces one (the usual single id, or a list of one).
    const auto forced_eos = f.ids_or("forced_eos_token_id", {}, V);
    if (forced_eos.size() > 1)
        throw FileError(what + ": \"forced_eos_token_id\" lists " + std::to_string(forced_eos.size()) +
                        " tokens; attnviz forces one token at the last position: keep one id");
    g.forced_eos_token_id = forced_eos.empty() ? -1 : forced_eos.front();
    g.eos_token_ids = f.ids_or("eos_token_id", {model.eos_token_id}, V);
    g.pad_token_id = f.integer_or("pad_token_id", model.pad_token_id, 0, V - 1);
    g.decoder_start_token_id = f.integer_or("decoder_start_token_id", model.decoder_start_token_id, 0, V - 1);
    if (g.eos_token_ids.size() > 1)
        throw FileError(what + ": \"eos_token_id\" lists " + std::to_string(g.eos_token_ids.size()) +
                        " tokens; attnviz generates with one end-of-sentence token, the model's (" +
                        std::to_string(model.eos_token_id) + "): keep that one");
    if (g.eos_token_ids.front() != model.eos_token_id)
        throw FileError(what + ": \"eos_token_id\" " + std::to_string(g.eos_token_ids.front()) + " differs from the model's (" +
                        std::to_string(model.eos_token_id) + "); attnviz generates with the model's one end-of-sentence token");
    if (g.decoder_start_token_id != model.decoder_start_token_id)
        throw FileError(what + ": \"decoder_start_token_id\" " + std::to_string(g.decoder_start_token_id) +
                        " differs from config.json's " + std::to_string(model.decoder_start_token_id));
    // The logits processors attnviz applies as generate() does (core/decode/search.hpp).
    g.repetition_penalty = f.real_or("repetition_penalty", 1.0, 1e-6, 1e6);
    g.suppress_tokens = f.ids_or("suppress_tokens", {}, V, true);
    g.begin_suppress_tokens = f.ids_or("begin_suppress_tokens", {}, V, true);
    g.min_new_tokens = f.integer_or("min_new_tokens", 0, 0, 1 << 20);
    // What generate() would do that attnviz does not (it searches greedily or by beams, as it may):
    // named in a warning when the model is opened.
    if (f.boolean_or("do_sample", false)) g.ignored.push_back("do_sample");
    if (f.real_or("diversity_penalty", 0.0, -1e6, 1e6) != 0.0) g.ignored.push_back("diversity_penalty");
    if (f.integer_or("num_beam_groups", 1, 1, 1024) != 1) g.ignored.push_back("num_beam_groups");
    if (f.integer_or("encoder_no_repeat_ngram_size", 0, 0, 1024) != 0) g.ignored.push_back("encoder_no_repeat_ngram_size");
    if (f.real_or("encoder_repetition_penalty", 1.0, 0.0, 1e6) != 1.0) g.ignored.push_back("encoder_repetition_penalty");
    if (f.boolean_or("renormalize_logits", false)) g.ignored.push_back("renormalize_logits");
    for (const char* key : {"sequence_bias", "exponential_decay_length_penalty", "forced_decoder_ids", "epsilon_cutoff",
                            "eta_cutoff", "guidance_scale", "watermarking_config"})
        if (f.has(key)) g.ignored.push_back(key);
    return g;
}

int64_t GenerationConfig::max_generated(const PretrainedConfig& model) const {
    if (max_new_tokens > 0) return max_new_tokens;
    if (max_length_set) return std::max<int64_t>(max_length - 1, 0);
    return std::max<int64_t>(std::min<int64_t>(max_length + 1, model.max_positions) - 1, 0);
}

json GenerationConfig::to_json() const {
    json j = raw.is_object() ? raw : json::object();
    j["num_beams"] = num_beams;
    if (max_length_set) j["max_length"] = max_length;
    if (max_new_tokens > 0) j["max_new_tokens"] = max_new_tokens;
    if (min_length > 0) j["min_length"] = min_length;
    j["length_penalty"] = length_penalty;
    if (early_stopping == EarlyStopping::never) j["early_stopping"] = "never";
    else j["early_stopping"] = early_stopping == EarlyStopping::on_full;
    if (!bad_words_ids.empty()) j["bad_words_ids"] = bad_words_ids;
    if (forced_bos_token_id >= 0) j["forced_bos_token_id"] = forced_bos_token_id;
    if (forced_eos_token_id >= 0) j["forced_eos_token_id"] = forced_eos_token_id;
    if (no_repeat_ngram_size > 0) j["no_repeat_ngram_size"] = no_repeat_ngram_size;
    j["eos_token_id"] = eos_token_ids.size() == 1 ? json(eos_token_ids.front()) : json(eos_token_ids);
    if (pad_token_id >= 0) j["pad_token_id"] = pad_token_id;
    if (decoder_start_token_id >= 0) j["decoder_start_token_id"] = decoder_start_token_id;
    return j;
}

int64_t position_limit(const ModelConfig& config) {
    if (!config.is_pretrained() || !config.pretrained || config.pretrained->model.positions == PositionTable::fairseq)
        return 0;
    return config.pretrained->model.max_positions;
}

}  // namespace attnviz
