// attnviz-cli's option tree (see cli_app.hpp).
#include "app/cli_app.hpp"

#include "app/cli_common.hpp"

namespace attnviz::cli {

CliApp::CliApp()
    : app("attnviz-cli: train and inspect encoder-decoders with attention (RNN with Bahdanau or Luong attention, Transformer)") {
    app.name("attnviz-cli");
    app.require_subcommand(1);
    app.fallthrough();
    app.set_version_flag("--version", std::string("attnviz-cli ") + ATTNVIZ_VERSION);
    app.add_option("--threads", threads,
                   "CPU threads for LibTorch, 1.." + std::to_string(max_threads) +
                       " (default: LibTorch's choice; more than the CPU cores: as many as cores, with a warning);"
                       " GRU training splits batches of 64+ rows across them")
        ->type_name("INT")
        ->check(int_in_range(0, max_threads));
    app.footer(
        "Exit codes: 0 ok, 1 runtime error (bad file, training failed), 2 usage error, 130 Ctrl+C, 143 SIGTERM.\n"
        "Errors are one line on stderr: `attnviz-cli: error: ...`. Run `attnviz-cli COMMAND --help`.");
    commands = {add_train_command(app),         add_translate_command(app), add_eval_command(app),
                add_bench_command(app),         add_bench_decode_command(app), add_compare_command(app),
                add_compare_attention_command(app), add_tasks_command(app), add_params_command(app),
                add_upgrade_command(app),       add_export_command(app),    add_attribute_command(app),
                add_agreement_command(app),     add_bench_attribute_command(app), add_heads_command(app),
                add_download_command(app),      add_cache_command(app),     add_position_bias_command(app),
                add_prefixes_command(app)};
}

CliApp::~CliApp() = default;

const Command* CliApp::parsed() const {
    for (const auto& c : commands)
        if (c.app->parsed()) return &c;
    return nullptr;
}

std::unique_ptr<CliApp> make_cli_app() { return std::make_unique<CliApp>(); }

}  // namespace attnviz::cli
