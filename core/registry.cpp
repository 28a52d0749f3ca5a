// The parameter registry: the one declaration of every hyperparameter, and the
// checking, parsing and JSON that everything else (config.cpp, the CLI, the
// GUI form) is generated from.
#include "core/registry.hpp"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.hpp"

namespace attnviz {

namespace {

using H = Hyperparameters;
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

/// Fluent declaration of one parameter: `add.integer(...).d2l(256).field(&H::model, &ModelConfig::x)`.
class Decl {
public:
    explicit Decl(ParamSpec& p) : m_p(p) {}
    Decl& d2l(json v) { m_p.d2l_value = std::move(v); return *this; }
    Decl& zero(std::string meaning) { m_p.zero_means = std::move(meaning); return *this; }
    Decl& advanced() { m_p.in_form = false; return *this; }
    Decl& exclusive_min() { m_p.min_exclusive = true; return *this; }
    /// A plain number, bool or string member of ModelConfig or TrainConfig.
    template <class S, class F>
    Decl& field(S H::*part, F S::*member) {
        m_p.get = [part, member](const H& h) { return json((h.*part).*member); };
        m_p.put = [part, member](H& h, const json& v) { (h.*part).*member = v.get<F>(); };
        return *this;
    }
    /// An enum member: its names come from the core's to_string, its labels are the GUI's.
    template <class S, class E>
    Decl& options(S H::*part, E S::*member, const std::vector<std::pair<E, std::string>>& values) {
        for (const auto& [value, label] : values) {
            m_p.choices.push_back(to_string(value));
            m_p.choice_labels.push_back(label);
        }
        m_p.get = [part, member](const H& h) { return json(to_string((h.*part).*member)); };
        m_p.put = [part, member, values](H& h, const json& v) {
            for (const auto& entry : values)
                if (to_string(entry.first) == v.get<std::string>()) (h.*part).*member = entry.first;
        };
        return *this;
    }

private:
    ParamSpec& m_p;
};

class Declarations {
public:
    explicit Declarations(std::vector<ParamSpec>& out) : m_out(out) { m_out.reserve(64); }
    ParamGroup group = ParamGroup::model;

    Decl integer(const char* name, const char* flag, const char* label, double lo, double hi, const char* help) {
        return add(name, flag, label, ParamType::integer, help, lo, hi);
    }
    Decl real(const char* name, const char* flag, const char* label, double lo, double hi, const char* help) {
        return add(name, flag, label, ParamType::real, help, lo, hi);
    }
    Decl boolean(const char* name, const char* flag, const char* label, const char* help) {
        return add(name, flag, label, ParamType::boolean, help, {}, {});
    }
    Decl choice(const char* name, const char* flag, const char* label, const char* help) {
        return add(name, flag, label, ParamType::choice, help, {}, {});
    }
    Decl text(const char* name, const char* flag, const char* label, const char* help) {
        return add(name, flag, label, ParamType::text, help, {}, {});
    }

private:
    Decl add(const char* name, const char* flag, const char* label, ParamType type, const char* help,
             std::optional<double> lo, std::optional<double> hi) {
        ParamSpec p;
        p.name = name;
        p.flag = flag;
        p.label = label;
        p.type = type;
        p.group = group;
        p.help = help;
        p.min = lo;
        p.max = hi;
        m_out.push_back(std::move(p));
        return Decl(m_out.back());
    }
    std::vector<ParamSpec>& m_out;
};

std::string check_device(const std::string& s) {
    if (s == "auto" || s == "cpu" || s == "cuda") return {};
    if (s.rfind("cuda:", 0) == 0 && s.size() > 5 && s.size() <= 8) {
        bool digits = true;
        for (size_t i = 5; i < s.size(); ++i) digits = digits && std::isdigit(static_cast<unsigned char>(s[i]));
        if (digits) return {};
    }
    return "auto, cpu, cuda or cuda:N";
}

std::vector<ParamSpec> declare() {
    std::vector<ParamSpec> ps;
    Declarations add(ps);
    using M = ModelConfig;
    using T = TrainConfig;

    add.group = ParamGroup::model;
    add.integer("embed_size", "embed", "Embedding size", 1, 4096, "embedding width of both sides")
        .d2l(256).field(&H::model, &M::embed_size);
    add.integer("hidden_size", "hidden", "Hidden size", 1, 4096, "recurrent hidden width of encoder and decoder")
        .d2l(256).field(&H::model, &M::hidden_size);
    add.integer("num_layers", "layers", "Layers", 1, 8, "recurrent layers of encoder and decoder")
        .d2l(2).field(&H::model, &M::num_layers);
    add.choice("cell", "cell", "Cell", "recurrent cell of both sides")
        .d2l("gru").options(&H::model, &M::cell, {{CellType::gru, "GRU"}, {CellType::lstm, "LSTM"}});
    add.boolean("bidirectional", "bidirectional", "Bidirectional encoder",
                "bidirectional encoder (keys have 2*hidden features)")
        .d2l(false).field(&H::model, &M::bidirectional);
    add.boolean("reverse_source", "reverse-source", "Read the source reversed (Sutskever)",
                "unidirectional encoder reads the source right to left; heatmap columns stay in reading order")
        .d2l(false).field(&H::model, &M::reverse_source);
    add.choice("scoring", "scoring", "Scoring", "how the decoder state scores each encoder state")
        .d2l("additive")
        .options(&H::model, &M::scoring,
                 {{Scoring::additive, "additive (Bahdanau)"}, {Scoring::dot, "dot (Luong)"},
                  {Scoring::scaled_dot, "scaled dot"}, {Scoring::general, "general (Luong bilinear)"},
                  {Scoring::none, "none (no attention baseline)"}});
    add.integer("attention_size", "attention-size", "Attention size", 0, 4096,
                "hidden width of additive attention; 0 = the hidden size")
        .d2l(0).zero("= hidden").field(&H::model, &M::attention_size);
    add.real("dropout", "dropout", "Dropout", 0, 0.99, "dropout between recurrent layers and on attention weights")
        .d2l(0.2).field(&H::model, &M::dropout);
    add.choice("init", "init", "Init", "weight initialisation")
        .d2l("xavier")
        .options(&H::model, &M::init,
                 {{InitScheme::xavier, "Xavier (d2l)"}, {InitScheme::uniform, "uniform ±0.08 (Sutskever)"},
                  {InitScheme::orthogonal, "orthogonal (Bahdanau)"}});

    add.group = ParamGroup::training;
    add.choice("optimizer", "optimizer", "Optimiser", "optimiser")
        .d2l("adam")
        .options(&H::train, &T::optimizer,
                 {{OptimizerKind::adam, "Adam"}, {OptimizerKind::sgd, "SGD"}, {OptimizerKind::adadelta, "Adadelta"}});
    add.real("lr", "lr", "Learning rate", 0, 100, "learning rate (Adam: 0.005 as d2l; SGD: 0.1; Adadelta: 1.0)")
        .exclusive_min().d2l(0.005).field(&H::train, &T::lr);
    add.real("momentum", "momentum", "Momentum", 0, 0.99, "SGD momentum (other optimisers ignore it)")
        .field(&H::train, &T::momentum);
    add.integer("batch_size", "batch", "Batch size", 1, 65536, "sentences per batch")
        .d2l(128).field(&H::train, &T::batch_size);
    add.integer("epochs", "epochs", "Epochs", 1, 100000,
                "passes over the training pairs (CLI --resume: the total to reach)")
        .d2l(30).field(&H::train, &T::epochs);
    add.real("teacher_forcing", "teacher-forcing", "Teacher forcing", 0, 1,
             "probability of feeding the true previous token to the decoder")
        .d2l(1.0).field(&H::train, &T::teacher_forcing);
    add.real("grad_clip", "clip", "Gradient clip", 0, 1e6, "clip the global gradient norm to this; 0 = off")
        .d2l(1.0).zero("off").field(&H::train, &T::grad_clip);
    add.integer("seed", "seed", "Seed", 0, 9007199254740991.0,  // 2^53 - 1: exact as a double and in any JSON reader
                "seeds weights, split, shuffling, dropout and teacher forcing");
    ps.back().get = [](const H& h) { return json(h.train.seed); };
    ps.back().put = [](H& h, const json& v) { h.train.seed = h.model.seed = v.get<uint64_t>(); };
    add.text("device", "device", "Device", "where to train: auto (CUDA if available), cpu, cuda or cuda:N")
        .field(&H::train, &T::device);
    ps.back().check_text = check_device;
    add.integer("patience", "patience", "Early stopping patience", 0, 10000,
                "stop after this many epochs without a lower validation loss; 0 = off")
        .zero("off").field(&H::train, &T::patience);
    add.boolean("keep_best", "keep-best", "Keep the best epoch's model",
                "the model kept at the end is the one of the epoch with the lowest validation loss")
        .field(&H::train, &T::keep_best);
    add.choice("lr_schedule", "lr-schedule", "LR schedule", "how the learning rate changes between epochs")
        .options(&H::train, &T::lr_schedule,
                 {{LrSchedule::none, "constant"}, {LrSchedule::plateau, "reduce on plateau"},
                  {LrSchedule::step, "step decay"}});
    add.real("lr_factor", "lr-factor", "LR factor", 0.01, 0.99,
             "plateau and step schedules multiply the learning rate by this")
        .field(&H::train, &T::lr_factor);
    add.integer("lr_step", "lr-step", "LR step (epochs)", 1, 100000,
                "step schedule: multiply the learning rate by --lr-factor every this many epochs")
        .field(&H::train, &T::lr_step);
    add.integer("lr_patience", "lr-patience", "LR patience (epochs)", 0, 10000,
                "plateau schedule: epochs without a lower validation loss before the rate is reduced")
        .field(&H::train, &T::lr_patience);
    add.integer("eval_sample", "eval-sample", "Evaluation sample", 0, 1000000,
                "validation pairs greedily decoded each epoch for accuracy and BLEU; 0 = none (not measured)")
        .zero("none").advanced().field(&H::train, &T::eval_sample);
    add.integer("max_batches", "max-batches", "Max batches", 0, 1e12,
                "stop after this many batches in total; 0 = no limit")
        .zero("no limit").advanced().field(&H::train, &T::max_batches);
    add.integer("snapshot_every", "snapshot-every", "Snapshot every", 0, 1000000,
                "also publish the weights every this many batches; 0 = once per epoch")
        .zero("once per epoch").advanced().field(&H::train, &T::snapshot_every);

    add.group = ParamGroup::data;
    add.integer("max_length", "max-length", "Max length", 0, 100000,
                "drop pairs with more tokens than this on either side; 0 = keep all")
        .zero("no limit").field(&H::train, &T::max_length);
    add.real("val_fraction", "val-fraction", "Validation share", 0, 0.9, "share of pairs held out for validation")
        .field(&H::train, &T::val_fraction);
    add.integer("min_freq", "min-freq", "Min frequency", 1, 1000000, "tokens seen fewer times map to <unk>")
        .d2l(2).field(&H::train, &T::min_freq);
    add.integer("bucket_window", "bucket-window", "Bucket window", 0, 100000,
                "sort this many batches' worth of pairs by length before batching; 0 = off")
        .zero("off").advanced().field(&H::train, &T::bucket_window);
    add.integer("fixed_steps", "steps", "Fixed steps", 0, 100000,
                "pad/truncate every sequence to this many steps like d2l; 0 = natural lengths")
        .d2l(9).zero("natural lengths").advanced().field(&H::train, &T::fixed_steps);
    add.boolean("split_shuffle", "split-shuffle", "Shuffle before splitting",
                "shuffle before splitting off validation (false: the last pairs validate, as d2l)")
        .d2l(false).advanced().field(&H::train, &T::split_shuffle);
    add.boolean("vocab_includes_val", "vocab-includes-val", "Vocabulary includes validation",
                "build the vocabularies from train + validation pairs (as d2l)")
        .d2l(true).advanced().field(&H::train, &T::vocab_includes_val);

    const Hyperparameters defaults;
    for (auto& p : ps) p.default_value = p.get(defaults);
    return ps;
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
        case ParamType::text: return p.check_text ? p.check_text("") : "text";
    }
    return {};
}

[[noreturn]] void refuse(const ParamSpec& p, const std::string& who, const std::string& got) {
    throw ConfigError(who + ": expected " + expectation(p) + ", got " + got);
}

std::string shown(const json& v) { return v.is_string() ? "'" + v.get<std::string>() + "'" : v.dump(); }

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
            if (v.is_number_float() && x != std::floor(x)) break;
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

/// The rules that tie model parameters together, in one place.
void check_model_rules(const ModelConfig& m) {
    if (m.reverse_source && m.bidirectional)
        throw ConfigError("model: a bidirectional encoder already reads the source both ways; "
                          "reversing the source (--reverse-source) only applies to a unidirectional one");
    if ((m.scoring == Scoring::dot || m.scoring == Scoring::scaled_dot) && m.bidirectional)
        throw ConfigError("model: dot-product scoring needs keys as wide as the decoder state; with a "
                          "bidirectional encoder use 'general' or 'additive' scoring");
}

bool in_group(const ParamSpec& p, ParamGroup g) { return p.group == g; }

}  // namespace

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
    static const std::vector<ParamSpec> ps = declare();
    return ps;
}

const ParamSpec& find_parameter(const std::string& name_or_flag) {
    for (const auto& p : parameters())
        if (p.name == name_or_flag || p.flag == name_or_flag) return p;
    std::string flags;
    for (const auto& p : parameters()) flags += (flags.empty() ? "" : ", ") + p.flag;
    throw ConfigError("unknown parameter '" + name_or_flag + "' (valid: " + flags + ")");
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
        case ParamType::text: return p.check_text ? p.check_text("") : "text";
    }
    return {};
}

void check_value(const ParamSpec& p, const nlohmann::json& value) {
    checked(p, value, "--" + p.flag, shown(value));
}

nlohmann::json parse_value(const ParamSpec& p, const std::string& text) {
    const std::string who = "--" + p.flag, got = "'" + text + "'";
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

nlohmann::json parameters_to_json(const Hyperparameters& h, ParamGroup group) {
    json j = json::object();
    for (const auto& p : parameters())
        if (in_group(p, group)) j[p.name] = p.get(h);
    return j;
}

void parameters_from_json(Hyperparameters& h, ParamGroup group, const nlohmann::json& j) {
    if (!j.is_object()) throw ConfigError(to_string(group) + " settings: expected a JSON object, got " + j.dump());
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
               {"type", to_string(p.type)}, {"group", to_string(p.group)}, {"default", p.default_value},
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
        all.push_back(std::move(o));
    }
    return all;
}

}  // namespace attnviz
