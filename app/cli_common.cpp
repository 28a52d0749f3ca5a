#include "app/cli_common.hpp"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>

#include "core/io/atomic_file.hpp"
#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/data/tasks.hpp"
#include "core/persist/model_file.hpp"
#include "core/text/unicode.hpp"

namespace attnviz::cli {

std::vector<std::string> task_names() {
    std::vector<std::string> names;
    for (TaskKind k : all_tasks()) names.push_back(task_name(k));
    return names;
}

// --- progress --------------------------------------------------------------------

ProgressPrinter::ProgressPrinter(int total_epochs, bool quiet, std::string prefix)
    : m_total_epochs(total_epochs), m_quiet(quiet), m_tty(isatty(fileno(stderr)) != 0),
      m_prefix(std::move(prefix)) {}

namespace {
std::string batch_part(const BatchReport& r, int total_epochs) {
    std::ostringstream s;
    s << "epoch " << r.epoch << "/" << total_epochs << "  batch " << r.batch << "/" << r.batches_per_epoch
      << "  loss " << fixed(r.loss, 4) << "  " << fixed(r.tokens_per_second, 0) << " tok/s  ETA "
      << clock_time(r.eta);
    return s.str();
}
}  // namespace

void ProgressPrinter::clear_line() {
    if (m_tty && m_line_open) std::fputs("\r\033[K", stderr);
    m_line_open = false;
}

void ProgressPrinter::on_prepared(const SessionInfo& info) {
    if (on_ready) on_ready(info);
}

void ProgressPrinter::on_batch(const BatchReport& r) {
    m_last = r;
    if (m_quiet || !m_tty) return;
    // At most ~10 updates a second: a fast GPU must not flood the terminal.
    if (m_last_print >= 0 && r.elapsed - m_last_print < 0.1 && r.batch != r.batches_per_epoch) return;
    m_last_print = r.elapsed;
    std::string line = "\r" + m_prefix + batch_part(r, m_total_epochs) + "\033[K";
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
    m_line_open = true;
}

void ProgressPrinter::on_epoch(const EpochReport& r) {
    if (m_quiet) return;
    clear_line();
    BatchReport b = m_last;
    b.epoch = r.epoch;
    std::ostringstream s;
    s << m_prefix << batch_part(b, m_total_epochs) << "  | train "
      << (std::isfinite(r.train_loss) ? fixed(r.train_loss, 4) : std::string("-")) << "  val "
      << (std::isfinite(r.val_loss) ? fixed(r.val_loss, 4) : std::string("-")) << "  acc "
      << fixed(r.val_accuracy, 3) << "  bleu " << fixed(r.val_bleu, 1)
      << (std::isfinite(r.val_align_accuracy) ? "  align " + fixed(r.val_align_accuracy, 3) : std::string()) << "  "
      << fixed(r.tokens_per_second, 0) << " tok/s  " << fixed(r.elapsed, 1) << " s\n";
    std::fputs(s.str().c_str(), stderr);
    std::fflush(stderr);
}

void ProgressPrinter::on_finished(StopReason reason, const std::string& message) {
    clear_line();
    m_message = message;
}

void ProgressPrinter::on_saved(const SaveResult& result) {
    std::lock_guard<std::mutex> lock(m_save_mutex);
    ++m_saves;
    m_save_error = result.ok ? std::string() : result.error;
}

void ProgressPrinter::on_warning(const std::string& message) {
    clear_line();
    warn(message);
}

int ProgressPrinter::saves() const {
    std::lock_guard<std::mutex> lock(m_save_mutex);
    return m_saves;
}

std::string ProgressPrinter::last_save_error() const {
    std::lock_guard<std::mutex> lock(m_save_mutex);
    return m_save_error;
}

// --- running ------------------------------------------------------------------------

StopReason wait_with_interrupt(TrainingSession& session, const std::function<void()>& tick) {
    SignalScope graceful(SignalMode::graceful);
    bool stop_sent = false;
    while (!session.wait_for(std::chrono::milliseconds(50))) {
        if (interrupted() && !stop_sent) {
            session.stop();
            stop_sent = true;
            std::fputs(interrupt_signal() == SIGTERM
                           ? "\nattnviz-cli: terminated: stopping after this batch (another signal aborts)\n"
                           : "\nattnviz-cli: stopping after this batch (Ctrl+C again to abort)\n",
                       stderr);
        }
        if (tick && !stop_sent) tick();
    }
    return session.stop_reason();
}

PeriodicSave::PeriodicSave(TrainingSession& session, const ProgressPrinter& progress, std::string path, double minutes)
    : m_session(session), m_progress(progress), m_path(std::move(path)),
      m_every(std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(minutes * 60.0))),
      m_next(std::chrono::steady_clock::now() + m_every) {}

void PeriodicSave::tick() {
    if (m_path.empty() || m_every <= std::chrono::steady_clock::duration::zero()) return;
    const auto now = std::chrono::steady_clock::now();
    if (m_pending) {
        if (m_progress.saves() == m_saves_before) return;  // still being written
        m_pending = false;
        const std::string error = m_progress.last_save_error();
        if (!error.empty()) warn("periodic checkpoint not written (training goes on): " + error);
        m_next = now + m_every;
    }
    if (now < m_next || m_session.state() != SessionState::running) return;
    m_saves_before = m_progress.saves();
    try {
        m_session.save(m_path);  // queued: the worker writes it between two batches
        m_pending = true;
    } catch (const Error& e) {  // the run ended meanwhile and the save failed at once
        warn(std::string("periodic checkpoint not written: ") + e.what());
        m_next = now + m_every;
    }
}

void check_writable(const std::string& flag, const std::string& path) {
    try {
        check_writable_path(path);
    } catch (const FileError& e) {
        throw FileError(flag + ": " + e.what());
    }
}

FileRole file_role(const std::string& command, const std::string& flag) {
    static const char* const inputs[] = {"--model", "--with",      "--data", "--target-data",
                                         "--resume", "--init-from", "--alignments", "OLD"};
    static const char* const outputs[] = {"--save",         "--out",    "--attention-out", "--beam-tree", "--html-out",
                                          "--alignment-out", "--curves", "--memory-log",    "--csv", "NEW"};
    if (command == "export" && flag == "--out") return FileRole::output_file_or_folder;  // alias export-model
    for (const char* name : inputs)
        if (flag == name) return FileRole::input;
    for (const char* name : outputs)
        if (flag == name) return FileRole::output;
    return FileRole::none;
}

std::string flag_name(const CLI::Option& option) {
    return option.get_lnames().empty() ? option.get_single_name() : "--" + option.get_lnames().front();
}

namespace {

/// A path given to a flag, and what it names on disk (when it exists).
struct GivenPath {
    std::string flag, path;
    FileRole role = FileRole::none;
    bool exists = false;
    dev_t dev = 0;
    ino_t ino = 0;
    std::string resolved;  ///< the path with its existing directories resolved (outputs)
};

/// Outputs that may replace the input they name: the command reads all of it first and
/// writes atomically (a checkpoint trained on, or upgraded, in place).
bool may_replace(const std::string& output, const std::string& input) {
    return (output == "--save" && input == "--resume") || (output == "NEW" && input == "OLD");
}

/// The path with its directory resolved (symbolic links, "." and ".."), its last part as
/// given; the path itself when the directory does not exist. POSIX rather than
/// std::filesystem, whose symbols LibTorch's library exports too (tests/support/cli_support.hpp).
std::string resolved_path(const std::string& path) {
    const size_t slash = path.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    char buf[PATH_MAX];
    if (::realpath(dir.c_str(), buf) == nullptr) return path;
    return std::string(buf) + "/" + (slash == std::string::npos ? path : path.substr(slash + 1));
}

std::string flag_and_path(const GivenPath& p) { return p.flag + " " + quote(p.path, 200); }

}  // namespace

void check_file_flags(const CLI::App& command) {
    std::vector<GivenPath> given;
    for (const CLI::Option* opt : command.get_options()) {
        if (opt->count() == 0) continue;
        const std::string flag = flag_name(*opt);
        const FileRole role = file_role(command.get_name(), flag);
        if (role == FileRole::none) continue;
        for (const std::string& path : opt->results()) {
            if (path.empty()) throw UsageError(flag + ": the path is empty; give a file name");
            if (role == FileRole::input && !is_valid_utf8(path))
                throw UsageError(flag + " " + quote(path, 200) +
                                 ": the path is not UTF-8; attnviz writes the paths it reads into its JSON, pages and "
                                 "checkpoints, which hold UTF-8 text: rename the file");
            GivenPath g;
            g.flag = flag;
            g.path = path;
            g.role = role;
            struct stat st;
            if (::stat(path.c_str(), &st) == 0) {
                g.exists = true;
                g.dev = st.st_dev;
                g.ino = st.st_ino;
            }
            if (role != FileRole::input) g.resolved = resolved_path(path);
            given.push_back(std::move(g));
        }
    }
    for (size_t i = 0; i < given.size(); ++i) {
        const GivenPath& out = given[i];
        if (out.role == FileRole::input) continue;
        for (size_t j = 0; j < given.size(); ++j) {
            const GivenPath& other = given[j];
            if (j == i || (other.role != FileRole::input && j > i)) continue;  // each pair of outputs once
            const bool same = (out.exists && other.exists && out.dev == other.dev && out.ino == other.ino) ||
                              (other.role != FileRole::input && out.resolved == other.resolved);
            if (!same || (other.role == FileRole::input && may_replace(out.flag, other.flag))) continue;
            if (other.role == FileRole::input)
                throw UsageError(flag_and_path(out) + " is the same file as " + flag_and_path(other) +
                                 ": writing it would replace what the command reads; give another path");
            throw UsageError(flag_and_path(out) + " and " + flag_and_path(other) +
                             " are the same file: one would replace the other; give each its own path");
        }
    }
    // A model folder (or a hub snapshot) is read file by file: an output on any of its files, or
    // anywhere in the folder, would change the model the command reads (issue 46: `heads --out
    // DIR/config.json`, `train --init-from DIR --save DIR/model.safetensors`).
    for (const GivenPath& in : given) {
        if (in.role != FileRole::input) continue;
        const ModelSources sources = model_sources(in.path);
        if (sources.folders.empty()) continue;
        const std::string in_resolved = resolve_existing_prefix(in.path);
        for (const GivenPath& out : given) {
            if (out.role == FileRole::input) continue;
            const std::string resolved = resolve_existing_prefix(out.path);
            if (sources.holds(resolved))
                throw UsageError(flag_and_path(out) + " is in the model folder " + flag_and_path(in) +
                                 " reads: writing there would change or replace the model; give a path outside it");
            if (out.role == FileRole::output_file_or_folder && in_resolved.rfind(resolved + "/", 0) == 0)
                throw UsageError(flag_and_path(out) + " holds the model folder " + flag_and_path(in) +
                                 " reads: writing the folder there would replace it; give another path");
        }
    }
    for (const GivenPath& p : given)
        if (p.role == FileRole::output) check_writable(p.flag, p.path);
}

// --- output ------------------------------------------------------------------------

namespace {
std::atomic<bool> g_keep_until_exit{false};
}  // namespace

void keep_objects_until_exit() { g_keep_until_exit.store(true); }

void keep_until_exit(std::shared_ptr<const void> object) {
    if (!g_keep_until_exit.load() || !object) return;
    static std::mutex mutex;
    static auto* kept = new std::vector<std::shared_ptr<const void>>();  // never destroyed: the OS frees it
    const std::lock_guard<std::mutex> lock(mutex);
    kept->push_back(std::move(object));
}

int end_process(int code) {
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    return code;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
    return code;
#else
    std::_Exit(code);
#endif
#else
    std::_Exit(code);
#endif
}

void warn(const std::string& message) { std::cerr << "attnviz-cli: warning: " << escape_controls(message) << "\n"; }

std::string fixed(double value, int decimals) {
    std::ostringstream s;
    s << std::fixed << std::setprecision(decimals) << value;
    return s.str();
}

std::string clock_time(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0) return "-";
    auto t = int64_t(seconds + 0.5);
    char buf[32];
    if (t >= 3600)
        std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)(t / 3600), (long long)(t / 60 % 60),
                      (long long)(t % 60));
    else
        std::snprintf(buf, sizeof buf, "%lld:%02lld", (long long)(t / 60), (long long)(t % 60));
    return buf;
}

nlohmann::json number_or_null(double value) {
    return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

std::string extension_of(const std::string& path) {
    auto slash = path.find_last_of('/');
    auto dot = path.find_last_of('.');
    if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return {};
    std::string e = path.substr(dot + 1);
    std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return e;
}

void PassProgress::operator()(const std::string& prefix, AttributionMethod method, int64_t points, double done) {
    const auto now = std::chrono::steady_clock::now();
    if (now - m_last < std::chrono::seconds(5)) return;
    m_last = now;
    std::cerr << prefix << ": " << cli_name(method)
              << (points > 0 ? " at " + std::to_string(points) + " points" : std::string()) << ": "
              << static_cast<int>(done * 100.0) << "% done" << std::endl;
}

}  // namespace attnviz::cli
