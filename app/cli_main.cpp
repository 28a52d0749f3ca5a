// attnviz-cli: train, translate, evaluate, benchmark and compare seq2seq
// models with attention, headless. Each subcommand lives in app/cli_*.cpp.
//
// Errors: exactly one line on stderr, `attnviz-cli: error: MESSAGE`; exit code
// 2 for usage errors (bad flag or value), 1 for runtime errors (unreadable or
// corrupt file, training failure), 130 after Ctrl+C, 143 after SIGTERM (both
// after saving what was asked; app/cli_signals.hpp).
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>

#include "app/cli_app.hpp"
#include "app/cli_common.hpp"
#include "core/model/cuda_runtime.hpp"
#include "core/model/device.hpp"
#include "core/model/mkl_dispatch.hpp"
#include "core/model/small_linear.hpp"
#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/io/process_memory.hpp"
#include "core/model/work_cost.hpp"

namespace {

/// The message on one line, and nothing a terminal would take for a command: every site
/// quotes what it repeats (quote()), this catches what a library's message may hold.
std::string one_line(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
    for (char& c : s)
        if (c == '\n' || c == '\r') c = ' ';
    return attnviz::escape_controls(s);
}

int fail(int code, const std::string& message) {
    std::cerr << "attnviz-cli: error: " << one_line(message) << std::endl;
    return code;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace attnviz::cli;
    attnviz::tune_heap_for_training();  // before any thread allocates (process_memory.hpp)
    attnviz::load_cuda_runtime();       // before LibTorch is asked about CUDA (cuda_runtime.hpp)
    install_signal_handlers();
    const auto cli = make_cli_app();
    CLI::App& app = cli->app;
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion&) {
        std::cout << "attnviz-cli " << ATTNVIZ_VERSION << " (LibTorch " << attnviz::libtorch_version()
                  << "; CUDA: " << attnviz::load_cuda_runtime().status << ")\n";
        // The code path MKL's float products take (mkl_dispatch.hpp: AMD CPUs).
        if (const auto mkl = attnviz::mkl_code_path(); !mkl.empty()) std::cout << "MKL code path: " << mkl << "\n";
        std::cout << "int8 kernels (--int8-kernels rowwise): "
                  << attnviz::int8_rows_isa_name(attnviz::Int8RowsIsa::automatic) << "\n";
        return exit_ok;
    } catch (const CLI::ParseError& e) {
        return fail(exit_usage, std::string(e.what()) + " (see --help)");
    }

    // Commands that train keep large blocks in the heap, on one arena (process_memory.hpp):
    // before any other thread starts, LibTorch's included.
    if (const Command* c = cli->parsed(); c && c->trains) attnviz::keep_large_blocks_in_heap();
    try {
        if (cli->threads > 0) {
            // More threads than cores only wait on each other (a step 50 times slower): at most one each.
            const int cores = attnviz::available_cores();
            if (cli->threads > cores)
                warn("--threads " + std::to_string(cli->threads) + " is more than the " + std::to_string(cores) +
                     " CPU cores this process may use: using " + std::to_string(cores));
            at::set_num_threads(std::min(cli->threads, cores));
        }
        attnviz::set_work_threads(at::get_num_threads());  // the default work bound is a time (work_cost.hpp)
        // A value the int8 kernels would ignore is refused, not ignored (small_linear.hpp).
        if (const char* isa = std::getenv("ATTNVIZ_FORCE_CPU_ISA"); isa && *isa) {
            try {
                (void)attnviz::int8_rows_isa_named(isa);
            } catch (const std::invalid_argument& e) {
                throw UsageError(e.what());
            }
        }
        if (const Command* c = cli->parsed()) {
            check_file_flags(*c->app);  // every path, before any work
            keep_objects_until_exit();
            return end_process(c->run());
        }
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
