#pragma once
// The parameter registry: every hyperparameter of ModelConfig and TrainConfig
// declared once -- name, flag, type, default, allowed range or choices, one
// line of help, d2l's value where it has one. Validation, the checkpoint's
// JSON, the CLI flags (attnviz-cli params --json prints this table) and the
// GUI's settings form are all generated from it, so they cannot disagree.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config/config.hpp"

namespace attnviz {

/// A full set of hyperparameters: the model's shape and how it is trained.
struct Hyperparameters {
    ModelConfig model;  ///< shape (fixed once a model exists)
    TrainConfig train;  ///< optimisation, data handling and training controls
};

/// The kind of value a parameter takes.
enum class ParamType {
    integer,  ///< whole number in [min, max]
    real,     ///< floating-point number in [min, max] (min exclusive when min_exclusive)
    boolean,  ///< true / false
    choice,   ///< one of `choices`
    text      ///< free text checked by the parameter's own rule (e.g. device names)
};
std::string to_string(ParamType t);  ///< "int", "float", "bool", "choice", "text"

/// Where a parameter belongs (the CLI's --help groups and the GUI form's boxes).
enum class ParamGroup {
    model,     ///< ModelConfig: the shape; cannot change when a model is resumed
    training,  ///< TrainConfig: optimisation and training controls
    data       ///< TrainConfig: how the corpus is split, filtered and batched
};
std::string to_string(ParamGroup g);  ///< "model", "training", "data"

/// Which model family a model parameter applies to; a model of the other family must
/// leave it at its default (validation says so).
enum class ParamFamily {
    all,          ///< every family (training and data parameters too)
    rnn,          ///< ModelArch::rnn only (cell, scoring, ...)
    transformer   ///< ModelArch::transformer only (heads, ffn, ...)
};
std::string to_string(ParamFamily f);  ///< "all", "rnn", "transformer"

/// One hyperparameter.
struct ParamSpec {
    std::string name;    ///< key in the checkpoint's JSON and in `params --json` ("hidden_size")
    std::string flag;    ///< CLI flag without dashes ("hidden"); also compare's --vary key
    std::string label;   ///< GUI form label ("Hidden size")
    ParamType type = ParamType::integer;
    ParamGroup group = ParamGroup::model;
    std::string help;    ///< one line, shown in --help and as the form's tooltip
    nlohmann::json default_value;  ///< the core's default (ModelConfig{} / TrainConfig{})
    std::optional<double> min, max;  ///< integer/real: inclusive bounds (absent: unbounded)
    bool min_exclusive = false;      ///< real: min itself is not allowed (e.g. the learning rate's 0)
    std::vector<std::string> choices;  ///< choice: the allowed names
    std::vector<std::string> choice_labels;  ///< choice: GUI labels, same order (empty: the names)
    nlohmann::json d2l_value;        ///< d2l's value (null when d2l has none)
    std::string zero_means;          ///< integer/real: what 0 means when it is special ("off", "no limit")
    bool in_form = true;             ///< shown in the GUI's settings form
    ParamFamily family = ParamFamily::all;  ///< the model family it applies to (the form greys the others out)
    /// Reads the parameter from a configuration (a JSON number, bool or string).
    std::function<nlohmann::json(const Hyperparameters&)> get;
    /// Writes an already checked value into a configuration.
    std::function<void(Hyperparameters&, const nlohmann::json&)> put;
    /// text parameters: empty when the value is acceptable, else the forms that are
    /// ("auto, cpu, cuda or cuda:N"; the empty text is never acceptable, so
    /// check_text("") describes the forms for --help).
    std::function<std::string(const std::string&)> check_text;
    /// text parameters: a folder's path, any text, "" meaning off (the CLI says DIR, the form
    /// offers a folder chooser); check_text is then null.
    bool folder = false;
};

/// Every parameter, in the order of the CLI's --help and the GUI form.
const std::vector<ParamSpec>& parameters();

/// The parameter with this name or flag; throws ConfigError listing the valid flags.
const ParamSpec& find_parameter(const std::string& name_or_flag);

/// The allowed values as a user reads them: "1..4096", "(0, 100]", "gru | lstm",
/// "true | false", or for text what check_text("") says.
std::string describe_range(const ParamSpec& p);

/// Checks a value against a parameter's type and range; throws ConfigError
/// naming the flag, the allowed values and what was given
/// ("--dropout: expected a number in [0, 0.99], got 1.5").
void check_value(const ParamSpec& p, const nlohmann::json& value);

/// Parses text ("0.2", "true", "gru") into a checked value; throws ConfigError as check_value.
nlohmann::json parse_value(const ParamSpec& p, const std::string& text);

/// The value as a user types it ("0.2", "true", "gru").
std::string format_value(const ParamSpec& p, const nlohmann::json& value);

/// Parses and sets one parameter by name or flag (e.g. from --vary hidden=128).
void set_parameter(Hyperparameters& h, const std::string& name_or_flag, const std::string& text);

/// Every parameter of the given group(s) checked against its declaration, then
/// the rules that tie parameters together (a bidirectional encoder cannot read
/// the source reversed; dot scoring needs a unidirectional encoder; a Transformer's
/// heads divide its width; a parameter of the other family keeps its default). Throws ConfigError.
void validate_model_parameters(const ModelConfig& m);
void validate_train_parameters(const TrainConfig& t);
/// The training parameters that apply to one model family (--precision: the Transformer's)
/// left at their defaults for a model of the other family. Throws ConfigError.
void validate_train_for_model(const TrainConfig& t, const ModelConfig& m);
inline void validate(const Hyperparameters& h) {
    validate_model_parameters(h.model);
    validate_train_parameters(h.train);
    validate_train_for_model(h.train, h.model);
}

/// The group's parameters as a JSON object keyed by name (checkpoint metadata).
nlohmann::json parameters_to_json(const Hyperparameters& h, ParamGroup group);
/// Reads the group's parameters from a JSON object; absent keys keep h's values,
/// present ones are checked (ConfigError naming the key on a bad value).
void parameters_from_json(Hyperparameters& h, ParamGroup group, const nlohmann::json& j);

/// d2l 1.0.3's configuration (seed 003): every parameter that has a d2l value set to it,
/// the others at their defaults (`attnviz-cli bench` starts from it).
Hyperparameters d2l_hyperparameters();

/// d2l 1.0.3's Transformer (section 11.7): d2l_hyperparameters() with the RNN's own
/// parameters at their defaults, arch transformer, and where the Transformer's d2l values
/// differ from the RNN's, the Transformer's: width 256, 2 blocks, 4 heads, feed-forward 64,
/// dropout 0.2, Adam at 0.001, batch 128, 30 epochs, num_steps 9
/// (`attnviz-cli bench --arch transformer` starts from it).
Hyperparameters d2l_transformer_hyperparameters();

/// Whether a parameter applies to a model of this family.
bool applies_to(const ParamSpec& p, ModelArch arch);

/// The registry itself, one object per parameter with name, flag, label, type,
/// group, family, default, min/max or choices, d2l, help (`attnviz-cli params --json`).
nlohmann::json registry_json();

}  // namespace attnviz
