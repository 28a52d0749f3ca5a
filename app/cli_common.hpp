#pragma once
// Shared pieces of attnviz-cli: exit codes, the hyperparameter flags (one table
// used by train, bench and compare's --vary), corpus selection, the progress
// line and waiting for a TrainingSession with Ctrl+C handling.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app/cli_corpus.hpp"    // the corpus flags (CorpusFlags)
#include "app/cli_settings.hpp"  // the hyperparameter flags (SettingFlags, find_setting)
#include "app/cli_signals.hpp"   // Ctrl+C and SIGTERM (interrupted(), SignalScope)
#include "core/analysis/attribution_result.hpp"
#include "core/data/data.hpp"
#include "core/model/rnn_model.hpp"
#include "core/session/session.hpp"

namespace attnviz::cli {

/// Exit codes (documented in --help).
constexpr int exit_ok = 0;
constexpr int exit_runtime = 1;      ///< a file could not be read/written, training failed
constexpr int exit_usage = 2;        ///< bad flag, bad value, missing argument
constexpr int exit_interrupted = 130;  ///< stopped by Ctrl+C (after saving what was asked); 143 for SIGTERM

/// A bad argument detected by the CLI itself (exit code 2).
class UsageError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// A subcommand: its CLI11 app and what runs it once parsed.
struct Command {
    CLI::App* app = nullptr;
    std::function<int()> run;
    /// It trains a model: main keeps large blocks in the heap before any thread starts
    /// (keep_large_blocks_in_heap, core/io/process_memory.hpp).
    bool trains = false;
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
Command add_export_command(CLI::App& parent);  ///< a model as safetensors in d2l's PyTorch layout
Command add_attribute_command(CLI::App& parent);  ///< attribution per output step beside the attention
Command add_agreement_command(CLI::App& parent);  ///< attention vs attribution over a corpus
Command add_bench_attribute_command(CLI::App& parent);  ///< attribution time per method; JSON
Command add_heads_command(CLI::App& parent);  ///< which heads matter (importance, confidence, roles)
Command add_download_command(CLI::App& parent);  ///< a model from the Hugging Face Hub into its cache
Command add_cache_command(CLI::App& parent);  ///< `cache list|delete`: the Hugging Face cache
Command add_position_bias_command(CLI::App& parent);  ///< a T5 model's relative position bias per head (app/cli_t5.cpp)
Command add_prefixes_command(CLI::App& parent);  ///< a T5 model's task prefixes (app/cli_t5.cpp)

/// CLI11 checks whose messages are one clear line ("--beam: expected ..., got 'x'").
CLI::Validator positive_int();
CLI::Validator non_negative_int();
CLI::Validator non_negative_number();
/// An integer in lo..hi, checked on the text before CLI11 narrows it to the option's type.
CLI::Validator int_in_range(long long lo, long long hi);
/// --ig-steps into `points`: "auto" (the default; 0 in AttributionOptions::ig_steps: each step
/// doubles its points until integrated gradients add up to within 1%) or a number in 1..1024.
CLI::Option* add_ig_steps_option(CLI::App& app, int64_t& points, const std::string& help);

// --- corpora -------------------------------------------------------------------

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
    void on_saved(const SaveResult& result) override;
    /// "attnviz-cli: warning: ..." on stderr, also with --quiet (it is not progress).
    void on_warning(const std::string& message) override;
    const std::string& message() const { return m_message; }
    /// Saves reported so far, and the last one's error ("" when it succeeded); any thread.
    int saves() const;
    std::string last_save_error() const;
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
    mutable std::mutex m_save_mutex;  ///< on_saved comes from the worker (periodic saves)
    int m_saves = 0;
    std::string m_save_error;
};

/// Waits for a started session; the first Ctrl+C or SIGTERM asks it to stop after
/// the current batch, a second one aborts (cli_signals.hpp). `tick`, when given,
/// runs on this thread every 50 ms while it trains. Returns why training ended.
StopReason wait_with_interrupt(TrainingSession& session, const std::function<void()>& tick = {});

/// --checkpoint-every-minutes: asks a running session to save `path` every `minutes`
/// (the worker writes it between two batches, atomically). One save at a time: the
/// next is asked for `minutes` after the last one was written. A failed save is a
/// warning on stderr and training goes on (the final save tries again).
class PeriodicSave {
public:
    PeriodicSave(TrainingSession& session, const ProgressPrinter& progress, std::string path, double minutes);
    /// Pass to wait_with_interrupt.
    void tick();

private:
    TrainingSession& m_session;
    const ProgressPrinter& m_progress;
    std::string m_path;
    std::chrono::steady_clock::duration m_every;
    std::chrono::steady_clock::time_point m_next;
    bool m_pending = false;
    int m_saves_before = 0;
};

/// Progress within one attribution method (AttributionOptions::on_pass) on stderr: a line
/// "PREFIX: METHOD[ at N points]: P% done" at most every few seconds, so that a method running
/// for most of the work bound is seen moving while a short one prints nothing.
class PassProgress {
public:
    /// prefix: what the line starts with, e.g. "attnviz-cli: sentence 2 of 4".
    void operator()(const std::string& prefix, AttributionMethod method, int64_t points, double done);

private:
    std::chrono::steady_clock::time_point m_last = std::chrono::steady_clock::now();
};

/// Throws FileError naming the flag when a file cannot be written at path: it is a
/// directory, its directory is missing or not writable (core's check_writable_path).
/// Checked before training rather than after an hour of it.
void check_writable(const std::string& flag, const std::string& path);

/// What a command does with the path a flag names (the same in every command that has the flag).
enum class FileRole {
    none,    ///< not a path
    input,   ///< read: --model, --with, --data, --target-data, --resume, --init-from, --alignments, OLD
    output,  ///< written (a file): --save, --out, --attention-out, --beam-tree, --html-out, --alignment-out,
             ///< --curves, --memory-log, NEW
    output_file_or_folder,  ///< export-model's --out: a file (d2l) or a folder (hf); the command checks which
};
/// The role of a flag of `command` (e.g. "translate", "--html-out"; a positional: "OLD").
FileRole file_role(const std::string& command, const std::string& flag);
/// An option's name as file_role() takes it: "--" and its first long name, else its positional
/// name (hidden options too, which CLI11's get_name() leaves nameless).
std::string flag_name(const CLI::Option& option);

/// Checks every path given to a parsed command before it runs, in one place for all
/// commands (main calls it). UsageError, one line naming the flag, for: an empty path; an
/// input path that is not UTF-8 (attnviz writes the paths it reads into its JSON, pages and
/// checkpoints, which hold UTF-8); an output that is the same file as an input or as another
/// output (same device and inode: a hard link or a symbolic link is the same file; two
/// outputs that do not exist yet by their resolved paths). Allowed: train's --save over its
/// --resume and upgrade-checkpoint's NEW over OLD (both read the whole file first and write
/// atomically: a checkpoint trained or upgraded in place). Then each output file as
/// check_writable() checks it (FileError).
void check_file_flags(const CLI::App& command);

// --- output ------------------------------------------------------------------------

/// Prints `attnviz-cli: warning: ...` on stderr, control characters escaped (escape_controls).
void warn(const std::string& message);

/// Keeps `object` (a loaded model) until the process ends, once main asked for it
/// (keep_objects_until_exit); otherwise does nothing. Why: main ends with end_process, which leaves
/// the memory to the OS; destroying an NLLB-sized model's tokenizer tables and heap took ~0.4 s
/// after the output was written.
void keep_until_exit(std::shared_ptr<const void> object);
/// From now on keep_until_exit keeps what it is given (main only: a command run in-process elsewhere
/// frees its models as before).
void keep_objects_until_exit();
/// Flushes stdout and stderr and ends the process with `code` at once, without static destructors
/// (nothing of attnviz's writes at exit: files are committed by the commands). Under a sanitizer it
/// returns `code` instead, so that the leak check at exit still runs.
int end_process(int code);
/// "12.3" style fixed formatting.
std::string fixed(double value, int decimals);
/// "1:02:03" / "2:03".
std::string clock_time(double seconds);
/// NaN and infinities become null.
nlohmann::json number_or_null(double value);
/// Lower-cased file extension without the dot ("" when none).
std::string extension_of(const std::string& path);

}  // namespace attnviz::cli
