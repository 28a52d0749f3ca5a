// The hyperparameter flags of train, bench and compare, generated from the
// parameter registry, and CLI11 validators whose messages fit on one line.
#include <cmath>

#include "app/cli_common.hpp"
#include "core/io/error.hpp"
#include "core/io/message.hpp"

namespace attnviz::cli {

namespace {

/// "dropout between ... (range [0, 0.99]; d2l: 0.2)": the help, the allowed values and d2l's value.
std::string flag_help(const ParamSpec& p, const std::string& shown_default) {
    std::vector<std::string> parts;
    if (p.type == ParamType::integer || p.type == ParamType::real) parts.push_back("range " + describe_range(p));
    if (p.type == ParamType::choice) parts.push_back(describe_range(p));
    if (!p.zero_means.empty() && p.help.find("0 = ") == std::string::npos) parts.push_back("0 = " + p.zero_means);
    if (!shown_default.empty()) parts.push_back("default: " + shown_default);
    if (!p.d2l_value.is_null()) parts.push_back("d2l: " + format_value(p, p.d2l_value));
    std::string h = p.help;
    for (size_t i = 0; i < parts.size(); ++i) h += (i == 0 ? " (" : "; ") + parts[i];
    return parts.empty() ? h : h + ")";
}

const char* type_name(const ParamSpec& p) {
    switch (p.type) {
        case ParamType::integer: return "INT";
        case ParamType::real: return "FLOAT";
        case ParamType::boolean: return "BOOL";
        case ParamType::choice: return "NAME";
        case ParamType::text: return p.folder ? "DIR" : "TEXT";
    }
    return "VALUE";
}

std::vector<Setting> make_settings() {
    std::vector<Setting> s;
    for (const auto& p : parameters()) s.push_back(Setting{p.flag, p.group == ParamGroup::model, &p});
    return s;
}

}  // namespace

namespace {
CLI::Validator number_check(const std::string& what, std::function<bool(const std::string&)> ok) {
    return CLI::Validator(
        [what, ok](std::string& v) { return ok(v) ? std::string() : "expected " + what + ", got " + quote(v); }, "");
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

CLI::Validator int_in_range(long long lo, long long hi) {
    return number_check("an integer in " + std::to_string(lo) + ".." + std::to_string(hi),
                        [lo, hi](const std::string& v) {
                            try {
                                size_t used = 0;
                                const long long x = std::stoll(v, &used);
                                return used == v.size() && x >= lo && x <= hi;
                            } catch (const std::exception&) {
                                return false;
                            }
                        });
}

CLI::Option* add_ig_steps_option(CLI::App& app, int64_t& points, const std::string& help) {
    points = 0;
    return app
        .add_option("--ig-steps", points,
                    help + ": auto (each output step doubles its points from 16 until the sum of its\n"
                           "attributions is within 1% of what it explains, at most 1024) or a number in 1..1024")
        ->type_name("auto|INT")
        ->default_str("auto")
        ->transform(CLI::Validator(
            [](std::string& v) -> std::string {
                if (v == "auto") {
                    v = "0";
                    return {};
                }
                try {
                    size_t used = 0;
                    const long long x = std::stoll(v, &used);
                    if (used == v.size() && x >= 1 && x <= 1024) return {};
                } catch (const std::exception&) {
                }
                return "expected auto or a number of points in 1..1024, got " + quote(v);
            },
            ""));
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

void set_from_text(Hyperparameters& h, const ParamSpec& p, const std::string& text) {
    try {
        p.put(h, parse_value(p, text));
    } catch (const ConfigError& e) {
        throw UsageError(e.what());
    }
}

void Setting::set(ModelConfig& m, TrainConfig& t, const std::string& value) const {
    Hyperparameters h{m, t};
    set_from_text(h, *spec, value);
    m = h.model;
    t = h.train;
}

const Setting& find_setting(const std::string& name) {
    static const std::vector<Setting> all = make_settings();
    for (const auto& s : all)
        if (s.name == name || s.spec->name == name) return s;
    try {
        find_parameter(name);  // throws, listing the valid flags
    } catch (const ConfigError& e) {
        throw UsageError(e.what());
    }
    throw UsageError("unknown setting " + quote(name));
}

void SettingFlags::add_to(CLI::App& app, const ModelConfig& m, const TrainConfig& t, const std::string& group) {
    const Hyperparameters shown{m, t};
    for (const auto& p : parameters()) {
        Entry e{&p, nullptr, std::make_shared<std::string>(), nullptr};
        const std::string current = format_value(p, p.get(shown));
        if (p.type == ParamType::boolean) {
            // A flag as before (--bidirectional); --bidirectional=false also works.
            e.flag = std::make_shared<bool>(false);
            e.option = app.add_flag("--" + p.flag, *e.flag, flag_help(p, current));
        } else {
            e.option = app.add_option("--" + p.flag, *e.value, flag_help(p, ""))
                           ->type_name(type_name(p))
                           ->default_str(current);
        }
        e.option->group(group + to_string(p.group));
        m_entries.push_back(e);
    }
}

void SettingFlags::apply(ModelConfig& m, TrainConfig& t) const {
    Hyperparameters h{m, t};
    for (const auto& e : m_entries) {
        if (e.option->count() == 0) continue;
        set_from_text(h, *e.spec, e.flag ? std::string(*e.flag ? "true" : "false") : *e.value);
    }
    m = h.model;
    t = h.train;
}

std::vector<std::string> SettingFlags::given_model_flags() const {
    std::vector<std::string> flags;
    for (const auto& e : m_entries)
        if (e.spec->group == ParamGroup::model && e.option->count() > 0) flags.push_back("--" + e.spec->flag);
    return flags;
}

bool SettingFlags::given(const std::string& name) const {
    for (const auto& e : m_entries)
        if (e.spec->flag == name || e.spec->name == name) return e.option->count() > 0;
    return false;
}

}  // namespace attnviz::cli
