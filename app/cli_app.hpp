#pragma once
// attnviz-cli's whole command line: the CLI11 option tree of every subcommand,
// built in one place so that main() and the command-line fuzz harness
// (tests/fuzz/fuzz_cli.cpp) parse exactly the same thing. Building and parsing
// run nothing; main() then runs the parsed command.
#include <memory>
#include <vector>

#include <CLI/CLI.hpp>

namespace attnviz::cli {

struct Command;

/// --threads accepts 0 (LibTorch's choice) .. this: more threads than this only
/// slow training down, and a huge number hangs creating them.
constexpr int max_threads = 1024;

/// The parsed command line. Not copyable (CLI11 options point into it).
struct CliApp {
    CLI::App app;
    int threads = 0;                ///< --threads (0: LibTorch's choice)
    std::vector<Command> commands;  ///< one per subcommand, in --help order

    CliApp();
    ~CliApp();
    CliApp(const CliApp&) = delete;
    CliApp& operator=(const CliApp&) = delete;
    /// The subcommand given on the command line (after parse), or nullptr.
    const Command* parsed() const;
};

/// Builds the full option tree.
std::unique_ptr<CliApp> make_cli_app();

}  // namespace attnviz::cli
