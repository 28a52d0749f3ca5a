// attnviz-cli: train, translate, evaluate, benchmark and compare seq2seq
// models with attention, headless. Each subcommand lives in app/cli_*.cpp.
//
// Errors: exactly one line on stderr, `attnviz-cli: error: MESSAGE`; exit code
// 2 for usage errors (bad flag or value), 1 for runtime errors (unreadable or
// corrupt file, training failure), 130 after Ctrl+C.
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <iostream>
#include <string>

#include "app/cli_common.hpp"
#include "core/device.hpp"
#include "core/error.hpp"

namespace {

std::string one_line(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
    for (char& c : s)
        if (c == '\n' || c == '\r') c = ' ';
    return s;
}

int fail(int code, const std::string& message) {
    std::cerr << "attnviz-cli: error: " << one_line(message) << std::endl;
    return code;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace attnviz::cli;
    CLI::App app{"attnviz-cli: train and inspect RNN encoder-decoders with attention (Bahdanau, Luong)"};
    app.name("attnviz-cli");
    app.require_subcommand(1);
    app.fallthrough();
    app.set_version_flag("--version", std::string("attnviz-cli ") + ATTNVIZ_VERSION);
    int threads = 0;
    app.add_option("--threads", threads, "CPU threads for LibTorch (default: LibTorch's choice)")
        ->type_name("INT")
        ->check(non_negative_int());
    app.footer(
        "Exit codes: 0 ok, 1 runtime error (bad file, training failed), 2 usage error, 130 Ctrl+C.\n"
        "Errors are one line on stderr: `attnviz-cli: error: ...`. Run `attnviz-cli COMMAND --help`.");

    std::vector<Command> commands{add_train_command(app), add_translate_command(app), add_eval_command(app),
                                  add_bench_command(app), add_bench_decode_command(app), add_compare_command(app),
                                  add_compare_attention_command(app),
                                  add_tasks_command(app), add_params_command(app), add_upgrade_command(app)};
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion&) {
        std::cout << "attnviz-cli " << ATTNVIZ_VERSION << " (LibTorch " << attnviz::libtorch_version() << ")\n";
        return exit_ok;
    } catch (const CLI::ParseError& e) {
        return fail(exit_usage, std::string(e.what()) + " (see --help)");
    }

    try {
        if (threads > 0) at::set_num_threads(threads);
        for (auto& c : commands)
            if (c.app->parsed()) return c.run();
        return fail(exit_usage, "no command given (see --help)");
    } catch (const UsageError& e) {
        return fail(exit_usage, e.what());
    } catch (const attnviz::ConfigError& e) {
        return fail(exit_usage, e.what());
    } catch (const attnviz::Error& e) {
        return fail(exit_runtime, e.what());
    } catch (const c10::Error& e) {
        return fail(exit_runtime, e.what_without_backtrace());
    } catch (const std::exception& e) {
        return fail(exit_runtime, e.what());
    }
}
