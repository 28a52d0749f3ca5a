// The hyperparameter table behind every training flag and compare's --vary,
// and CLI11 validators whose messages fit on one line.
#include <cmath>
#include <limits>
#include <sstream>

#include "app/cli_common.hpp"
#include "core/error.hpp"

namespace attnviz::cli {

namespace {

// Parsing of flag values: the message names the flag so the user knows which to fix.
int64_t parse_int(const std::string& flag, const std::string& v, int64_t min_value) {
    try {
        size_t used = 0;
        long long x = std::stoll(v, &used);
        if (used == v.size() && x >= min_value) return x;
    } catch (const std::exception&) {
    }
    throw UsageError("--" + flag + ": expected an integer >= " + std::to_string(min_value) + ", got '" + v + "'");
}

double parse_float(const std::string& flag, const std::string& v, double lo, double hi) {
    try {
        size_t used = 0;
        double x = std::stod(v, &used);
        if (used == v.size() && std::isfinite(x) && x >= lo && x <= hi) return x;
    } catch (const std::exception&) {
    }
    std::ostringstream range;
    range << "a number in [" << lo << ", " << (std::isinf(hi) ? std::string("inf") : fixed(hi, 1)) << "]";
    throw UsageError("--" + flag + ": expected " + range.str() + ", got '" + v + "'");
}

bool parse_bool(const std::string& flag, const std::string& v) {
    std::string s = v;
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
    if (s == "0" || s == "false" || s == "no" || s == "off") return false;
    throw UsageError("--" + flag + ": expected true or false, got '" + v + "'");
}

// Core's *_from_string throw ConfigError listing the valid names; prefix the flag.
template <class F>
auto parse_name(const std::string& flag, const std::string& v, F from_string) {
    try {
        return from_string(v);
    } catch (const Error& e) {
        throw UsageError("--" + flag + ": " + e.what());
    }
}

std::string num(double x) {
    std::ostringstream s;
    s << x;
    return s.str();
}

constexpr double inf = std::numeric_limits<double>::infinity();

std::vector<Setting> make_settings() {
    using M = ModelConfig;
    using T = TrainConfig;
    std::vector<Setting> s;
    auto add = [&](Setting x) { s.push_back(std::move(x)); };
    // model shape
    add({"embed", "INT", "embedding width of both sides (d2l: 256)", true,
         [](const M& m, const T&) { return std::to_string(m.embed_size); },
         [](M& m, T&, const std::string& v) { m.embed_size = parse_int("embed", v, 1); }});
    add({"hidden", "INT", "RNN hidden width (d2l: 256)", true,
         [](const M& m, const T&) { return std::to_string(m.hidden_size); },
         [](M& m, T&, const std::string& v) { m.hidden_size = parse_int("hidden", v, 1); }});
    add({"layers", "INT", "RNN layers of encoder and decoder (d2l: 2)", true,
         [](const M& m, const T&) { return std::to_string(m.num_layers); },
         [](M& m, T&, const std::string& v) { m.num_layers = parse_int("layers", v, 1); }});
    add({"attention-size", "INT", "additive attention's hidden width; 0 = --hidden", true,
         [](const M& m, const T&) { return std::to_string(m.attention_size); },
         [](M& m, T&, const std::string& v) { m.attention_size = parse_int("attention-size", v, 0); }});
    add({"cell", "NAME", "recurrent cell: gru | lstm", true,
         [](const M& m, const T&) { return to_string(m.cell); },
         [](M& m, T&, const std::string& v) { m.cell = parse_name("cell", v, cell_from_string); }});
    add({"bidirectional", "BOOL", "bidirectional encoder (keys have 2*hidden features)", true,
         [](const M& m, const T&) { return std::string(m.bidirectional ? "true" : "false"); },
         [](M& m, T&, const std::string& v) { m.bidirectional = parse_bool("bidirectional", v); }});
    add({"reverse-source", "BOOL", "encoder reads the source right to left (Sutskever et al.)", true,
         [](const M& m, const T&) { return std::string(m.reverse_source ? "true" : "false"); },
         [](M& m, T&, const std::string& v) { m.reverse_source = parse_bool("reverse-source", v); }});
    add({"scoring", "NAME", "attention scoring: additive | dot | scaled-dot | general | none", true,
         [](const M& m, const T&) { return to_string(m.scoring); },
         [](M& m, T&, const std::string& v) { m.scoring = parse_name("scoring", v, scoring_from_string); }});
    add({"dropout", "FLOAT", "dropout between RNN layers and on attention weights (d2l: 0.2)", true,
         [](const M& m, const T&) { return num(m.dropout); },
         [](M& m, T&, const std::string& v) { m.dropout = parse_float("dropout", v, 0.0, 0.99); }});
    add({"init", "NAME", "initialisation: xavier (d2l) | uniform (Sutskever) | orthogonal (Bahdanau)", true,
         [](const M& m, const T&) { return to_string(m.init); },
         [](M& m, T&, const std::string& v) { m.init = parse_name("init", v, init_from_string); }});
    // optimisation
    add({"optimizer", "NAME", "adam | sgd | adadelta", false,
         [](const M&, const T& t) { return to_string(t.optimizer); },
         [](M&, T& t, const std::string& v) { t.optimizer = parse_name("optimizer", v, optimizer_from_string); }});
    add({"lr", "FLOAT", "learning rate (Adadelta: try 1.0)", false,
         [](const M&, const T& t) { return num(t.lr); },
         [](M&, T& t, const std::string& v) { t.lr = parse_float("lr", v, 0.0, inf); }});
    add({"momentum", "FLOAT", "SGD momentum", false,
         [](const M&, const T& t) { return num(t.momentum); },
         [](M&, T& t, const std::string& v) { t.momentum = parse_float("momentum", v, 0.0, 1.0); }});
    add({"batch", "INT", "sentences per batch", false,
         [](const M&, const T& t) { return std::to_string(t.batch_size); },
         [](M&, T& t, const std::string& v) { t.batch_size = parse_int("batch", v, 1); }});
    add({"epochs", "INT", "passes over the training pairs (with --resume: the total to reach)", false,
         [](const M&, const T& t) { return std::to_string(t.epochs); },
         [](M&, T& t, const std::string& v) { t.epochs = int(parse_int("epochs", v, 0)); }});
    add({"teacher-forcing", "FLOAT", "probability of feeding the true previous token", false,
         [](const M&, const T& t) { return num(t.teacher_forcing); },
         [](M&, T& t, const std::string& v) { t.teacher_forcing = parse_float("teacher-forcing", v, 0.0, 1.0); }});
    add({"clip", "FLOAT", "clip the global gradient norm to this; 0 = off", false,
         [](const M&, const T& t) { return num(t.grad_clip); },
         [](M&, T& t, const std::string& v) { t.grad_clip = parse_float("clip", v, 0.0, inf); }});
    add({"seed", "INT", "seeds weights, split, shuffling, dropout, teacher forcing", false,
         [](const M&, const T& t) { return std::to_string(t.seed); },
         [](M& m, T& t, const std::string& v) {
             t.seed = uint64_t(parse_int("seed", v, 0));
             m.seed = t.seed;
         }});
    add({"device", "NAME", "auto | cpu | cuda | cuda:N", false,
         [](const M&, const T& t) { return t.device; },
         [](M&, T& t, const std::string& v) { t.device = v; }});
    // data handling
    add({"max-length", "INT", "drop pairs with more tokens than this on a side; 0 = keep all", false,
         [](const M&, const T& t) { return std::to_string(t.max_length); },
         [](M&, T& t, const std::string& v) { t.max_length = parse_int("max-length", v, 0); }});
    add({"val-fraction", "FLOAT", "share of pairs held out for validation", false,
         [](const M&, const T& t) { return num(t.val_fraction); },
         [](M&, T& t, const std::string& v) { t.val_fraction = parse_float("val-fraction", v, 0.0, 0.9); }});
    add({"min-freq", "INT", "vocabulary: rarer tokens map to <unk>", false,
         [](const M&, const T& t) { return std::to_string(t.min_freq); },
         [](M&, T& t, const std::string& v) { t.min_freq = int(parse_int("min-freq", v, 1)); }});
    add({"bucket-window", "INT", "sort this many batches by length before batching; 0 = off", false,
         [](const M&, const T& t) { return std::to_string(t.bucket_window); },
         [](M&, T& t, const std::string& v) { t.bucket_window = int(parse_int("bucket-window", v, 0)); }});
    add({"steps", "INT", "pad/truncate every sequence to this many steps like d2l; 0 = natural lengths", false,
         [](const M&, const T& t) { return std::to_string(t.fixed_steps); },
         [](M&, T& t, const std::string& v) { t.fixed_steps = parse_int("steps", v, 0); }});
    add({"split-shuffle", "BOOL", "shuffle before splitting off validation (false: last pairs validate, as d2l)", false,
         [](const M&, const T& t) { return std::string(t.split_shuffle ? "true" : "false"); },
         [](M&, T& t, const std::string& v) { t.split_shuffle = parse_bool("split-shuffle", v); }});
    add({"vocab-includes-val", "BOOL", "build vocabularies from train + validation pairs (as d2l)", false,
         [](const M&, const T& t) { return std::string(t.vocab_includes_val ? "true" : "false"); },
         [](M&, T& t, const std::string& v) { t.vocab_includes_val = parse_bool("vocab-includes-val", v); }});
    add({"eval-sample", "INT", "validation pairs decoded each epoch for accuracy and BLEU; 0 = none", false,
         [](const M&, const T& t) { return std::to_string(t.eval_sample); },
         [](M&, T& t, const std::string& v) { t.eval_sample = size_t(parse_int("eval-sample", v, 0)); }});
    add({"max-batches", "INT", "stop after this many batches in total; 0 = no limit", false,
         [](const M&, const T& t) { return std::to_string(t.max_batches); },
         [](M&, T& t, const std::string& v) { t.max_batches = parse_int("max-batches", v, 0); }});
    return s;
}

}  // namespace

namespace {
CLI::Validator number_check(const std::string& what, std::function<bool(const std::string&)> ok) {
    return CLI::Validator(
        [what, ok](std::string& v) { return ok(v) ? std::string() : "expected " + what + ", got '" + v + "'"; }, "");
}
bool is_int_at_least(const std::string& v, long long min_value) {
    try {
        size_t used = 0;
        long long x = std::stoll(v, &used);
        return used == v.size() && x >= min_value;
    } catch (const std::exception&) {
        return false;
    }
}
}  // namespace

CLI::Validator positive_int() {
    return number_check("a positive integer", [](const std::string& v) { return is_int_at_least(v, 1); });
}

CLI::Validator non_negative_int() {
    return number_check("an integer >= 0", [](const std::string& v) { return is_int_at_least(v, 0); });
}

CLI::Validator non_negative_number() {
    return number_check("a number >= 0", [](const std::string& v) {
        try {
            size_t used = 0;
            double x = std::stod(v, &used);
            return used == v.size() && std::isfinite(x) && x >= 0;
        } catch (const std::exception&) {
            return false;
        }
    });
}

const std::vector<Setting>& settings() {
    static const std::vector<Setting> s = make_settings();
    return s;
}

const Setting& find_setting(const std::string& name) {
    for (const auto& s : settings())
        if (s.name == name) return s;
    std::string names;
    for (const auto& s : settings()) names += (names.empty() ? "" : ", ") + s.name;
    throw UsageError("unknown setting '" + name + "' (valid: " + names + ")");
}

void SettingFlags::add_to(CLI::App& app, const ModelConfig& m, const TrainConfig& t, const std::string& group) {
    for (const auto& s : settings()) {
        Entry e{&s, nullptr, std::make_shared<std::string>(), nullptr};
        std::string group_name = group + (s.model ? "model" : "training");
        if (s.type == "BOOL") {
            e.flag = std::make_shared<bool>(false);
            e.option = app.add_flag("--" + s.name, *e.flag, s.help + " [default: " + s.get(m, t) + "]");
        } else {
            e.option = app.add_option("--" + s.name, *e.value, s.help)
                           ->type_name(s.type)
                           ->default_str(s.get(m, t));
        }
        e.option->group(group_name);
        m_entries.push_back(e);
    }
}

void SettingFlags::apply(ModelConfig& m, TrainConfig& t) const {
    for (const auto& e : m_entries) {
        if (e.option->count() == 0) continue;
        e.setting->set(m, t, e.flag ? std::string(*e.flag ? "true" : "false") : *e.value);
    }
}

std::vector<std::string> SettingFlags::given_model_flags() const {
    std::vector<std::string> names;
    for (const auto& e : m_entries)
        if (e.setting->model && e.option->count() > 0) names.push_back("--" + e.setting->name);
    return names;
}

bool SettingFlags::given(const std::string& name) const {
    for (const auto& e : m_entries)
        if (e.setting->name == name) return e.option->count() > 0;
    return false;
}

}  // namespace attnviz::cli
