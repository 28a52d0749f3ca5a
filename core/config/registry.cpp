// The parameter registry: the one declaration of every hyperparameter, and the
// checking, parsing and JSON that everything else (config.cpp, the CLI, the
// GUI form) is generated from.
#include "core/config/registry.hpp"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/io/error.hpp"
#include "core/io/json_bounded.hpp"
#include "core/io/message.hpp"

namespace attnviz {

namespace detail {
/// The declarations (core/config/registry_table.cpp), defaults read from ModelConfig{} / TrainConfig{}.
std::vector<ParamSpec> declare_parameters();
}  // namespace detail

namespace {

using json = nlohmann::json;

/// The shortest text that reads back as the same double ("0.005", not "0.0050000000000000001").
std::string number_text(double x) {
    if (x == std::floor(x) && std::abs(x) < 1e16) return std::to_string(static_cast<int64_t>(x));  // "100", not "1e+02"
    char buf[40];
    for (int precision = 1; precision <= 17; ++precision) {
        std::snprintf(buf, sizeof buf, "%.*g", precision, x);
        if (std::strtod(buf, nullptr) == x) break;
    }
    return buf;
}

/// "an integer in 1..4096", "a number in (0, 100]", "one of gru, lstm", ...
std::string expectation(const ParamSpec& p) {
    std::string names;
    switch (p.type) {
        case ParamType::integer: return "an integer in " + describe_range(p);
        case ParamType::real: return "a number in " + describe_range(p);
        case ParamType::boolean: return "true or false";
        case ParamType::choice:
            for (const auto& c : p.choices) names += (names.empty() ? "" : ", ") + c;
            return "one of " + names;
        case ParamType::text: return p.folder ? "a folder (empty: off)" : p.check_text ? p.check_text("") : "text";
    }
    return {};
}

[[noreturn]] void refuse(const ParamSpec& p, const std::string& who, const std::string& got) {
    throw ConfigError(who + ": expected " + expectation(p) + ", got " + got);
}

// Values may come from files: describe_json never recurses and clips long strings.
std::string shown(const json& v) { return v.is_string() ? quote(v.get_ref<const std::string&>(), 160) : describe_json(v); }

bool in_range(const ParamSpec& p, double x) {
    if (!std::isfinite(x)) return false;
    if (p.min && (x < *p.min || (p.min_exclusive && x == *p.min))) return false;
    return !(p.max && x > *p.max);
}

/// The value checked and in its canonical JSON type; errors say `who` and `got`.
json checked(const ParamSpec& p, const json& v, const std::string& who, const std::string& got) {
    switch (p.type) {
        case ParamType::integer: {
            if (!v.is_number()) break;
            const double x = v.get<double>();
            if (v.is_number_float() && (x != std::floor(x) || !(std::abs(x) < 9.0e18))) break;  // int64_t's range
            if (!in_range(p, x)) break;
            if (v.is_number_unsigned()) return json(v.get<uint64_t>());
            return v.is_number_integer() ? json(v.get<int64_t>()) : json(static_cast<int64_t>(x));
        }
        case ParamType::real:
            if (v.is_number() && in_range(p, v.get<double>())) return json(v.get<double>());
            break;
        case ParamType::boolean:
            if (v.is_boolean()) return v;
            break;
        case ParamType::choice:
            if (v.is_string())
                for (const auto& c : p.choices)
                    if (c == v.get<std::string>()) return v;
            break;
        case ParamType::text:
            if (v.is_string() && (!p.check_text || p.check_text(v.get<std::string>()).empty())) return v;
            break;
    }
    refuse(p, who, got);
}

/// "Learning rate" -> "learning rate" (keeps "LR schedule" as it is).
std::string lower_first(std::string s) {
    if (s.size() > 1 && std::islower(static_cast<unsigned char>(s[1])))
        s[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(s[0])));
    return s;
}

/// Each parameter of the group(s) checked, with messages naming the label and the flag.
void check_group(const Hyperparameters& h, bool model) {
    for (const auto& p : parameters()) {
        if ((p.group == ParamGroup::model) != model) continue;
        const json v = p.get(h);
        checked(p, v, lower_first(p.label) + " (--" + p.flag + ")", shown(v));
    }
}

/// The family rule for the model parameters (model = true) or the others: a parameter of the
/// other family than h.model's keeps its default. The message names a training parameter
/// with its value (a choice such as "--precision bf16"), a model parameter by its flag.
void check_family(const Hyperparameters& h, bool model) {
    for (const auto& p : parameters()) {
        if ((p.group == ParamGroup::model) != model || applies_to(p, h.model.arch) || p.get(h) == p.default_value)
            continue;
        const std::string why = p.name == "embed_size"  ? ": a Transformer's embeddings are --hidden wide"
                                : p.name == "precision" ? ": the RNN's fused recurrent kernels compute in fp32"
                                                        : "";
        throw ConfigError((model ? "model: --" + p.flag : "training: --" + p.flag + " " + format_value(p, p.get(h))) +
                          " applies to " + (p.family == ParamFamily::rnn ? "the RNN" : "the Transformer") +
                          " only; a" + (h.model.is_transformer() ? " Transformer" : "n RNN") +
                          " leaves it at its default (" + format_value(p, p.default_value) + ")" + why);
    }
}

/// The rules that tie model parameters together, in one place.
void check_model_rules(const ModelConfig& m) {
    Hyperparameters h;
    h.model = m;
    check_family(h, /*model=*/true);
    if (m.is_transformer() && m.hidden_size % m.num_heads != 0)
        throw ConfigError("model: a Transformer's width (--hidden " + std::to_string(m.hidden_size) +
                          ") must be a multiple of its heads (--heads " + std::to_string(m.num_heads) +
                          "): each head reads hidden / heads features");
    if (m.reverse_source && m.bidirectional)
        throw ConfigError("model: a bidirectional encoder already reads the source both ways; "
                          "reversing the source (--reverse-source) only applies to a unidirectional one");
    if ((m.scoring == Scoring::dot || m.scoring == Scoring::scaled_dot) && m.bidirectional)
        throw ConfigError("model: dot-product scoring needs keys as wide as the decoder state; with a "
                          "bidirectional encoder use 'general' or 'additive' scoring");
}

bool in_group(const ParamSpec& p, ParamGroup g) { return p.group == g; }

}  // namespace

std::string to_string(ParamFamily f) {
    switch (f) {
        case ParamFamily::rnn: return "rnn";
        case ParamFamily::transformer: return "transformer";
        case ParamFamily::all: break;
    }
    return "all";
}

bool applies_to(const ParamSpec& p, ModelArch arch) {
    return p.family == ParamFamily::all || (p.family == ParamFamily::rnn) == (arch == ModelArch::rnn);
}

std::string to_string(ParamType t) {
    switch (t) {
        case ParamType::integer: return "int";
        case ParamType::real: return "float";
        case ParamType::boolean: return "bool";
        case ParamType::choice: return "choice";
        case ParamType::text: return "text";
    }
    return "?";
}

std::string to_string(ParamGroup g) {
    switch (g) {
        case ParamGroup::model: return "model";
        case ParamGroup::training: return "training";
        case ParamGroup::data: return "data";
    }
    return "?";
}

const std::vector<ParamSpec>& parameters() {
    static const std::vector<ParamSpec> ps = detail::declare_parameters();
    return ps;
}

const ParamSpec& find_parameter(const std::string& name_or_flag) {
    for (const auto& p : parameters())
        if (p.name == name_or_flag || p.flag == name_or_flag) return p;
    std::string flags;
    for (const auto& p : parameters()) flags += (flags.empty() ? "" : ", ") + p.flag;
    throw ConfigError("unknown parameter " + quote(name_or_flag) + " (valid: " + flags + ")");
}

std::string describe_range(const ParamSpec& p) {
    auto bound = [&](const std::optional<double>& b, const char* none) {
        return b ? number_text(*b) : std::string(none);
    };
    switch (p.type) {
        case ParamType::integer: return bound(p.min, "-inf") + ".." + bound(p.max, "inf");
        case ParamType::real:
            return std::string(p.min_exclusive || !p.min ? "(" : "[") + bound(p.min, "-inf") + ", " +
                   bound(p.max, "inf") + (p.max ? "]" : ")");
        case ParamType::boolean: return "true | false";
        case ParamType::choice: {
            std::string s;
            for (const auto& c : p.choices) s += (s.empty() ? "" : " | ") + c;
            return s;
        }
        case ParamType::text: return p.folder ? "a folder (empty: off)" : p.check_text ? p.check_text("") : "text";
    }
    return {};
}

void check_value(const ParamSpec& p, const nlohmann::json& value) {
    checked(p, value, "--" + p.flag, shown(value));
}

nlohmann::json parse_value(const ParamSpec& p, const std::string& text) {
    const std::string who = "--" + p.flag, got = quote(text);
    const bool blank = text.empty() || std::isspace(static_cast<unsigned char>(text.front()));
    json v;
    if (p.type == ParamType::integer || p.type == ParamType::real) {
        char* end = nullptr;
        errno = 0;
        if (p.type == ParamType::integer) {
            const long long x = blank ? 0 : std::strtoll(text.c_str(), &end, 10);
            v = x;
        } else {
            const double x = blank ? 0 : std::strtod(text.c_str(), &end);
            v = x;
        }
        if (blank || end != text.c_str() + text.size() || errno == ERANGE) refuse(p, who, got);
    } else if (p.type == ParamType::boolean) {
        std::string s;
        for (char c : text) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (s == "true" || s == "1" || s == "yes" || s == "on") v = true;
        else if (s == "false" || s == "0" || s == "no" || s == "off") v = false;
        else refuse(p, who, got);
    } else {
        v = text;
    }
    return checked(p, v, who, got);
}

std::string format_value(const ParamSpec& p, const nlohmann::json& value) {
    if (value.is_string()) return value.get<std::string>();
    if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
    if (value.is_number_float() && p.type == ParamType::real) return number_text(value.get<double>());
    return value.dump();
}

void set_parameter(Hyperparameters& h, const std::string& name_or_flag, const std::string& text) {
    const ParamSpec& p = find_parameter(name_or_flag);
    p.put(h, parse_value(p, text));
}

void validate_model_parameters(const ModelConfig& m) {
    Hyperparameters h;
    h.model = m;
    check_group(h, true);
    check_model_rules(m);
}

void validate_train_parameters(const TrainConfig& t) {
    Hyperparameters h;
    h.train = t;
    check_group(h, false);
}

void validate_train_for_model(const TrainConfig& t, const ModelConfig& m) {
    Hyperparameters h;
    h.model = m;
    h.train = t;
    check_family(h, /*model=*/false);
}

nlohmann::json parameters_to_json(const Hyperparameters& h, ParamGroup group) {
    json j = json::object();
    for (const auto& p : parameters())
        if (in_group(p, group)) j[p.name] = p.get(h);
    return j;
}

void parameters_from_json(Hyperparameters& h, ParamGroup group, const nlohmann::json& j) {
    if (!j.is_object()) throw ConfigError(to_string(group) + " settings: expected a JSON object, got " + describe_json(j));
    for (const auto& p : parameters()) {
        if (!in_group(p, group)) continue;
        auto it = j.find(p.name);
        if (it == j.end()) continue;  // older files: the value keeps its default
        p.put(h, checked(p, *it, "'" + p.name + "'", shown(*it)));
    }
}

nlohmann::json registry_json() {
    json all = json::array();
    for (const auto& p : parameters()) {
        json o{{"name", p.name},   {"flag", p.flag},   {"label", p.label},
               {"type", to_string(p.type)}, {"group", to_string(p.group)}, {"family", to_string(p.family)},
               {"default", p.default_value},
               {"d2l", p.d2l_value}, {"help", p.help}, {"in_form", p.in_form}, {"range", describe_range(p)}};
        auto bound = [&](double b) { return p.type == ParamType::integer ? json(static_cast<int64_t>(b)) : json(b); };
        if (p.min) o["min"] = bound(*p.min);
        if (p.max) o["max"] = bound(*p.max);
        if (p.type == ParamType::real) o["min_exclusive"] = p.min_exclusive;
        if (p.type == ParamType::choice) {
            o["choices"] = p.choices;
            o["choice_labels"] = p.choice_labels;
        }
        if (!p.zero_means.empty()) o["zero_means"] = p.zero_means;
        if (p.type == ParamType::text) o["folder"] = p.folder;
        all.push_back(std::move(o));
    }
    return all;
}

Hyperparameters d2l_hyperparameters() {
    Hyperparameters h;
    for (const ParamSpec& p : parameters())
        if (!p.d2l_value.is_null()) p.put(h, p.d2l_value);
    return h;
}

Hyperparameters d2l_transformer_hyperparameters() {
    Hyperparameters h = d2l_hyperparameters();
    const Hyperparameters defaults;
    for (const ParamSpec& p : parameters())
        if (p.family == ParamFamily::rnn) p.put(h, p.get(defaults));
    h.model.arch = ModelArch::transformer;
    h.train.lr = 0.001;  // d2l's Transformer trains at 0.001, its RNN at 0.005
    return h;
}

// --- ModelConfig and TrainConfig (core/config/config.hpp): validation and JSON from the registry

void ModelConfig::validate() const { validate_model_parameters(*this); }

void ModelConfig::validate_for_build() const {
    validate();
    if (is_pretrained() && !pretrained)
        throw ConfigError("model: a pretrained network is read from a Hugging Face model folder (--model DIR, "
                          "or --init-from DIR to fine-tune it), not built from settings");
    if (src_vocab < 5 || tgt_vocab < 5)
        throw ConfigError("model: vocabularies must have at least one token besides the 4 special ones");
}

nlohmann::json ModelConfig::to_json() const {
    Hyperparameters h;
    h.model = *this;
    nlohmann::json j = parameters_to_json(h, ParamGroup::model);
    // Not registry parameters: the sizes come from the data, the seed from TrainConfig's.
    j["src_vocab"] = src_vocab;
    j["tgt_vocab"] = tgt_vocab;
    j["seed"] = seed;
    return j;
}

ModelConfig ModelConfig::from_json(const nlohmann::json& j) {
    Hyperparameters h;
    parameters_from_json(h, ParamGroup::model, j);
    ModelConfig c = h.model;
    auto count = [&](const char* key, int64_t& out) {
        auto it = j.find(key);
        if (it == j.end()) return;
        if (!it->is_number_integer() || it->get<int64_t>() < 0)
            throw ConfigError(std::string("'") + key + "': expected an integer >= 0, got " + describe_json(*it));
        out = it->get<int64_t>();
    };
    count("src_vocab", c.src_vocab);
    count("tgt_vocab", c.tgt_vocab);
    if (j.contains("seed")) {
        Hyperparameters s;
        parameters_from_json(s, ParamGroup::training, nlohmann::json{{"seed", j.at("seed")}});
        c.seed = s.train.seed;
    }
    return c;
}

void TrainConfig::validate() const { validate_train_parameters(*this); }

nlohmann::json TrainConfig::to_json() const {
    Hyperparameters h;
    h.train = *this;
    nlohmann::json j = parameters_to_json(h, ParamGroup::training);
    j.update(parameters_to_json(h, ParamGroup::data));
    return j;
}

TrainConfig TrainConfig::from_json(const nlohmann::json& j) {
    Hyperparameters h;
    parameters_from_json(h, ParamGroup::training, j);
    parameters_from_json(h, ParamGroup::data, j);
    return h.train;
}

}  // namespace attnviz
