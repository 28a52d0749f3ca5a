// attnviz-cli params: the parameter registry -- every hyperparameter with its
// flag, type, range or choices, default and d2l's value -- as an aligned table
// or, with --json, as registry_json() for scripts and documentation.
#include <algorithm>
#include <iostream>

#include "app/cli_common.hpp"
#include "core/config/registry.hpp"

namespace attnviz::cli {

namespace {

struct ParamsOptions {
    bool json = false;
};

void print_table(std::ostream& out) {
    const std::vector<std::string> heads{"FLAG", "TYPE", "RANGE", "DEFAULT", "D2L", "HELP"};
    std::vector<std::vector<std::string>> rows;
    std::vector<ParamGroup> row_group;
    for (const auto& p : parameters()) {
        rows.push_back({"--" + p.flag, to_string(p.type), describe_range(p), format_value(p, p.default_value),
                        p.d2l_value.is_null() ? "-" : format_value(p, p.d2l_value), p.help});
        row_group.push_back(p.group);
    }
    std::vector<size_t> width(heads.size());
    for (size_t c = 0; c < heads.size(); ++c) {
        width[c] = heads[c].size();
        for (const auto& r : rows) width[c] = std::max(width[c], r[c].size());
    }
    auto line = [&](const std::vector<std::string>& cells) {
        std::string s;
        for (size_t c = 0; c < cells.size(); ++c)
            s += c + 1 == cells.size() ? cells[c] : cells[c] + std::string(width[c] - cells[c].size() + 2, ' ');
        out << s << '\n';
    };
    line(heads);
    for (size_t i = 0; i < rows.size(); ++i) {
        if (i == 0 || row_group[i] != row_group[i - 1]) out << "# " << to_string(row_group[i]) << '\n';
        line(rows[i]);
    }
}

}  // namespace

Command add_params_command(CLI::App& parent) {
    auto o = std::make_shared<ParamsOptions>();
    CLI::App* app = parent.add_subcommand("params", "list every hyperparameter: flag, range, default, d2l's value");
    app->footer("The same table generates the flags of train/bench/compare, the checkpoint's JSON keys\n"
                "(--json: \"name\") and the GUI's settings form.");
    app->add_flag("--json", o->json, "print the registry as a JSON array (name, flag, type, default, min/max or "
                                     "choices, help, label, group, d2l)");
    return {app, [o] {
                if (o->json)
                    std::cout << registry_json().dump(2) << '\n';
                else
                    print_table(std::cout);
                return exit_ok;
            }};
}

}  // namespace attnviz::cli
