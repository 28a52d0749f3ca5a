#pragma once
// The hyperparameter flags of attnviz-cli (train, bench, compare's --vary),
// one per parameter of the registry (core/config/registry.hpp).
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/config/config.hpp"
#include "core/config/registry.hpp"

namespace attnviz::cli {

// --- hyperparameters ---------------------------------------------------------

/// One registry parameter seen by its flag: compare's `--vary name=v1,v2` key.
/// (A view of the registry, not a second table; new code can use
/// find_parameter / set_parameter directly.)
struct Setting {
    std::string name;               ///< the flag without dashes ("hidden"), also the --vary key
    bool model = false;             ///< part of ModelConfig (cannot change when resuming)
    const ParamSpec* spec = nullptr;  ///< the registry's declaration
    /// Parses value into the configs (the seed into both); throws UsageError naming the flag.
    void set(ModelConfig& m, TrainConfig& t, const std::string& value) const;
};

/// The setting whose flag (or checkpoint key) is name; throws UsageError listing the valid flags.
const Setting& find_setting(const std::string& name);

/// The registry's ConfigError as the CLI's UsageError (exit code 2), e.g.
/// "--dropout: expected a number in [0, 0.99], got '1.5'".
void set_from_text(Hyperparameters& h, const ParamSpec& p, const std::string& text);

/// The hyperparameter flags of one subcommand, remembering which were given.
class SettingFlags {
public:
    /// Adds every registry parameter as a flag, showing the defaults of the given configs.
    /// Options are grouped as group + "model" / "training" / "data".
    void add_to(CLI::App& app, const ModelConfig& m, const TrainConfig& t, const std::string& group);
    /// Applies the flags given on the command line (only those) to the configs;
    /// throws UsageError naming the flag for a bad value.
    void apply(ModelConfig& m, TrainConfig& t) const;
    /// The model-shape flags that were given, with dashes ("--hidden").
    std::vector<std::string> given_model_flags() const;
    /// Whether the flag (without dashes, or the checkpoint key) was given.
    bool given(const std::string& name) const;

private:
    struct Entry {
        const ParamSpec* spec;
        CLI::Option* option;
        std::shared_ptr<std::string> value;  ///< value flags: the text as typed
        std::shared_ptr<bool> flag;          ///< boolean flags (`--bidirectional`, `--bidirectional=false`)
    };
    std::vector<Entry> m_entries;
};

}  // namespace attnviz::cli
