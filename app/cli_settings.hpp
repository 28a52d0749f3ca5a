#pragma once
// The hyperparameter flags of attnviz-cli (train, bench, compare's --vary).
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/config.hpp"

namespace attnviz::cli {

// --- hyperparameters ---------------------------------------------------------

/// One hyperparameter: a flag `--name VALUE` and a `--vary name=v1,v2` key.
struct Setting {
    std::string name;   ///< flag name without dashes
    std::string type;   ///< INT, FLOAT, NAME, BOOL (shown in --help)
    std::string help;
    bool model = false;  ///< part of ModelConfig (cannot change when resuming)
    std::function<std::string(const ModelConfig&, const TrainConfig&)> get;
    /// Parses value into the configs; throws UsageError naming the flag.
    std::function<void(ModelConfig&, TrainConfig&, const std::string&)> set;
};

/// Every hyperparameter of ModelConfig and TrainConfig, in --help order.
const std::vector<Setting>& settings();
/// The setting called name; throws UsageError listing the valid names.
const Setting& find_setting(const std::string& name);

/// The hyperparameter flags of one subcommand, remembering which were given.
class SettingFlags {
public:
    /// Adds every setting as a flag, showing the defaults of the given configs.
    void add_to(CLI::App& app, const ModelConfig& m, const TrainConfig& t, const std::string& group);
    /// Applies the flags given on the command line (only those) to the configs.
    void apply(ModelConfig& m, TrainConfig& t) const;
    /// Names of the model-shape flags that were given.
    std::vector<std::string> given_model_flags() const;
    bool given(const std::string& name) const;

private:
    struct Entry {
        const Setting* setting;
        CLI::Option* option;
        std::shared_ptr<std::string> value;
        std::shared_ptr<bool> flag;
    };
    std::vector<Entry> m_entries;
};

}  // namespace attnviz::cli
