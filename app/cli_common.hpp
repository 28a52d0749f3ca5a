#pragma once
// Shared pieces of attnviz-cli: exit codes, the hyperparameter flags (one table
// used by train, bench and compare's --vary), corpus selection, the progress
// line and waiting for a TrainingSession with Ctrl+C handling.
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app/cli_settings.hpp"  // the hyperparameter flags (SettingFlags, find_setting)
#include "core/data.hpp"
#include "core/model.hpp"
#include "core/session.hpp"

namespace attnviz::cli {

/// Exit codes (documented in --help).
constexpr int exit_ok = 0;
constexpr int exit_runtime = 1;      ///< a file could not be read/written, training failed
constexpr int exit_usage = 2;        ///< bad flag, bad value, missing argument
constexpr int exit_interrupted = 130;  ///< stopped by Ctrl+C (after saving what was asked)

/// A bad argument detected by the CLI itself (exit code 2).
class UsageError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// A subcommand: its CLI11 app and what runs it once parsed.
struct Command {
    CLI::App* app = nullptr;
    std::function<int()> run;
};

Command add_train_command(CLI::App& parent);
Command add_translate_command(CLI::App& parent);
Command add_eval_command(CLI::App& parent);
Command add_bench_command(CLI::App& parent);
Command add_bench_decode_command(CLI::App& parent);  ///< decoding time with and without top-k / beam tree
Command add_compare_command(CLI::App& parent);
Command add_compare_attention_command(CLI::App& parent);  ///< two models' attention on the same sentences
Command add_tasks_command(CLI::App& parent);
Command add_params_command(CLI::App& parent);  ///< `params [--json]`: the parameter registry
Command add_upgrade_command(CLI::App& parent);  ///< `upgrade-checkpoint OLD NEW --trust`: format 1 -> current

/// CLI11 checks whose messages are one clear line ("--beam: expected ..., got 'x'").
CLI::Validator positive_int();
CLI::Validator non_negative_int();
CLI::Validator non_negative_number();

// --- corpora -------------------------------------------------------------------

/// Where the pairs come from: --task or --data.
struct CorpusFlags {
    std::string task;           ///< built-in task name
    std::string data;           ///< TSV file
    std::string level = "word";  ///< word | char | subword (TSV only)
    size_t max_pairs = 0;       ///< TSV: read at most this many pairs
    size_t pairs = 2000;        ///< task: pairs to generate
    uint64_t task_seed = 0;     ///< task: generator seed
    bool reverse = false;       ///< TSV: swap the columns
    CLI::Option* task_opt = nullptr;
    CLI::Option* data_opt = nullptr;

    void add_to(CLI::App& app, bool required);
    bool given() const { return !task.empty() || !data.empty(); }
    /// Reads or generates the corpus; prints skipped-line counts to stderr.
    Corpus load(bool verbose = true) const;
};

/// Valid task names, for --help and checks.
std::vector<std::string> task_names();

// --- training --------------------------------------------------------------------

/// Prints the progress line on stderr: `\r`-updated when stderr is a terminal,
/// one line per epoch otherwise. Called on the session's worker thread.
class ProgressPrinter : public SessionObserver {
public:
    ProgressPrinter(int total_epochs, bool quiet, std::string prefix = {});
    /// Called once the data and model are ready (e.g. to describe them on stderr).
    std::function<void(const SessionInfo&)> on_ready;
    void on_prepared(const SessionInfo& info) override;
    void on_batch(const BatchReport& r) override;
    void on_epoch(const EpochReport& r) override;
    void on_finished(StopReason reason, const std::string& message) override;
    const std::string& message() const { return m_message; }
    /// Target tokens trained on in this run (the trainer's tokens/s times its active seconds).
    double tokens_trained() const { return m_last.tokens_per_second * m_last.elapsed; }
    /// Tokens/s of the batches alone (validation excluded), as the trainer measures it.
    double batch_tokens_per_second() const { return m_last.tokens_per_second; }

private:
    void clear_line();
    int m_total_epochs;
    bool m_quiet, m_tty;
    std::string m_prefix, m_message;
    BatchReport m_last;
    double m_last_print = -1.0;
    bool m_line_open = false;
};

/// Waits for a started session; Ctrl+C asks it to stop after the current batch
/// (a second Ctrl+C kills). Returns why training ended.
StopReason wait_with_interrupt(TrainingSession& session);
/// True once Ctrl+C was pressed during wait_with_interrupt.
bool interrupted();

/// Throws FileError when path's directory does not exist or is not writable
/// (checked before training rather than after an hour of it).
void check_writable(const std::string& flag, const std::string& path);

// --- output ------------------------------------------------------------------------

/// Prints `attnviz-cli: warning: ...` on stderr.
void warn(const std::string& message);
/// "12.3" style fixed formatting.
std::string fixed(double value, int decimals);
/// "1:02:03" / "2:03".
std::string clock_time(double seconds);
/// NaN and infinities become null.
nlohmann::json number_or_null(double value);
/// Lower-cased file extension without the dot ("" when none).
std::string extension_of(const std::string& path);

}  // namespace attnviz::cli
