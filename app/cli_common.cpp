#include "app/cli_common.hpp"

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
#include "core/data/tasks.hpp"

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

// --- output ------------------------------------------------------------------------

void warn(const std::string& message) { std::cerr << "attnviz-cli: warning: " << message << "\n"; }

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

}  // namespace attnviz::cli