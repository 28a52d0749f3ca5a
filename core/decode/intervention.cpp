// Interventions as data: names, JSON, checks and the command line's form.
#include "core/decode/intervention.hpp"

#include <cmath>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/io/error.hpp"
#include "core/io/message.hpp"

namespace attnviz {

std::string to_string(InterventionKind kind) {
    switch (kind) {
    case InterventionKind::none: return "none";
    case InterventionKind::uniform: return "uniform";
    case InterventionKind::permute: return "permute";
    case InterventionKind::zero_token: return "zero";
    case InterventionKind::replace: return "weights";
    case InterventionKind::head_off: return "head-off";
    }
    return "none";
}

std::string Intervention::describe() const {
    std::string what;
    switch (kind) {
    case InterventionKind::none: return "no intervention";
    case InterventionKind::uniform: what = "uniform attention"; break;
    case InterventionKind::permute: what = "permuted attention"; break;
    case InterventionKind::zero_token:
        what = "source token " + std::to_string(source_token) + "'s weight zeroed, the rest renormalised";
        break;
    case InterventionKind::replace: what = "attention replaced by a given distribution"; break;
    case InterventionKind::head_off: what = attnviz::describe(head) + " switched off"; break;
    }
    return what + (step < 0 ? " at every step" : " at step " + std::to_string(step));
}

nlohmann::json Intervention::to_json() const {
    nlohmann::json j{{"kind", to_string(kind)}, {"step", step < 0 ? nlohmann::json() : nlohmann::json(step)}};
    if (kind == InterventionKind::zero_token) j["source_token"] = source_token;
    if (kind == InterventionKind::replace) j["weights"] = weights;
    if (kind == InterventionKind::head_off)
        j["head"] = {{"kind", to_string(head.kind)}, {"layer", head.layer}, {"head", head.head}};
    if (kind == InterventionKind::permute) j["seed"] = seed;
    return j;
}

void Intervention::validate() const {
    if (!active()) return;
    if (step < -1) throw ConfigError("intervention: the step must be >= 0 (or -1 for every step)");
    if (kind == InterventionKind::zero_token && source_token < 0)
        throw ConfigError("intervention: the source token's position must be >= 0");
    if (kind == InterventionKind::replace) {
        if (weights.empty()) throw ConfigError("intervention: the replacement weights are empty");
        double sum = 0;
        for (float w : weights) {
            if (!std::isfinite(w) || w < 0)
                throw ConfigError("intervention: replacement weights must be finite and >= 0");
            sum += w;
        }
        if (sum <= 0) throw ConfigError("intervention: the replacement weights are all 0");
    }
    if (kind == InterventionKind::head_off) {
        if (head.kind == AttentionKind::encoder_self)
            throw ConfigError("intervention: a decoding step can switch off cross or decoder_self heads, not "
                              "encoder_self ones");
        if (head.layer < 0 || head.head < 0) throw ConfigError("intervention: the head's layer and index must be >= 0");
    }
}

namespace {
[[noreturn]] void bad_form(const std::string& text, const std::string& why) {
    throw ConfigError("intervention " + quote(text) + ": " + why +
                      "; expected uniform, permute, zero=POS, weights=W1,W2,... or head-off=[KIND:]LAYER:HEAD");
}

int64_t parse_int(const std::string& text, const std::string& s) {
    size_t used = 0;
    long long v = 0;
    try {
        v = std::stoll(s, &used);
    } catch (const std::exception&) {
        bad_form(text, quote(s) + " is not a whole number");
    }
    if (used != s.size()) bad_form(text, quote(s) + " is not a whole number");
    if (v < -1000000000LL || v > 1000000000LL) bad_form(text, quote(s) + " is out of range");
    return v;
}
}  // namespace

Intervention parse_intervention(const std::string& text) {
    Intervention iv;
    const auto eq = text.find('=');
    const std::string name = text.substr(0, eq), arg = eq == std::string::npos ? "" : text.substr(eq + 1);
    const bool has_arg = eq != std::string::npos;
    if (name == "uniform" || name == "permute") {
        if (has_arg) bad_form(text, name + " takes no value");
        iv.kind = name == "uniform" ? InterventionKind::uniform : InterventionKind::permute;
    } else if (name == "zero" && has_arg) {
        iv.kind = InterventionKind::zero_token;
        iv.source_token = parse_int(text, arg);
    } else if (name == "weights" && has_arg) {
        iv.kind = InterventionKind::replace;
        std::stringstream in(arg);
        for (std::string part; std::getline(in, part, ',');) {
            size_t used = 0;
            float w = 0;
            try {
                w = std::stof(part, &used);
            } catch (const std::exception&) {
                bad_form(text, quote(part) + " is not a number");
            }
            if (used != part.size()) bad_form(text, quote(part) + " is not a number");
            iv.weights.push_back(w);
        }
    } else if (name == "head-off" && has_arg) {
        iv.kind = InterventionKind::head_off;
        std::vector<std::string> parts;
        std::stringstream in(arg);
        for (std::string part; std::getline(in, part, ':');) parts.push_back(part);
        if (parts.size() == 3) {
            iv.head.kind = attention_kind_from_string(parts[0]);
            parts.erase(parts.begin());
        }
        if (parts.size() != 2) bad_form(text, "head-off needs LAYER:HEAD");
        iv.head.layer = static_cast<int>(parse_int(text, parts[0]));
        iv.head.head = static_cast<int>(parse_int(text, parts[1]));
    } else {
        bad_form(text, "unknown form");
    }
    iv.validate();
    return iv;
}

}  // namespace attnviz
