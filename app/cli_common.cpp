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

#include "core/error.hpp"
#include "core/tasks.hpp"

namespace attnviz::cli {

namespace {

std::atomic<bool> g_interrupted{false};
std::atomic<int> g_sigint_count{0};

extern "C" void on_sigint(int) {
    // Only lock-free atomics here; the main thread turns this into TrainingSession::stop().
    if (g_sigint_count.fetch_add(1) >= 1) {
        std::signal(SIGINT, SIG_DFL);
        std::raise(SIGINT);
    }
    g_interrupted.store(true);
}

}  // namespace

std::vector<std::string> task_names() {
    std::vector<std::string> names;
    for (TaskKind k : all_tasks()) names.push_back(task_name(k));
    return names;
}

void CorpusFlags::add_to(CLI::App& app, bool required) {
    const std::string g = "data";
    task_opt = app.add_option("--task", task, "built-in task: reverse | lookup | dates | toy-french (see `tasks`)")
                   ->type_name("NAME")
                   ->group(g);
    data_opt = app.add_option("--data", data, "Tatoeba-style TSV file: source<TAB>target[<TAB>attribution]")
                   ->type_name("FILE")
                   ->group(g);
    task_opt->excludes(data_opt);
    if (required) {
        // One of the two: CLI11 cannot express "exactly one of" on options, checked in load().
    }
    app.add_option("--level", level,
                   "TSV tokenisation: word | char | subword (SentencePiece pieces of the words, trained on the "
                   "training pairs: --subword-vocab, --subword-model)")
        ->type_name("NAME")
        ->check(CLI::IsMember({"word", "char", "subword"}))
        ->default_str(level)
        ->group(g);
    app.add_option("--max-pairs", max_pairs, "TSV: read at most this many pairs, in file order; 0 = all")
        ->type_name("INT")
        ->default_str("0")
        ->check(non_negative_int())
        ->group(g);
    app.add_flag("--reverse", reverse, "TSV: swap the columns (translate target to source)")->group(g);
    app.add_option("--pairs", pairs, "task: how many pairs to generate")
        ->type_name("INT")
        ->default_str(std::to_string(pairs))
        ->check(positive_int())
        ->group(g);
    app.add_option("--task-seed", task_seed, "task: generator seed (same seed, same pairs)")
        ->type_name("INT")
        ->default_str("0")
        ->check(non_negative_int())
        ->group(g);
}

Corpus CorpusFlags::load(bool verbose) const {
    if (task.empty() && data.empty()) throw UsageError("give --task NAME or --data FILE");
    if (!task.empty()) {
        TaskKind kind;
        try {
            kind = task_from_name(task);
        } catch (const Error& e) {
            throw UsageError(std::string("--task: ") + e.what());
        }
        TaskOptions o;
        o.num_pairs = pairs;
        o.seed = task_seed;
        return task_corpus(kind, o);
    }
    TsvOptions o;
    o.level = token_level_from_string(level);
    o.max_pairs = max_pairs;
    o.reverse = reverse;
    Corpus c = read_tsv(data, o);
    if (verbose && !c.skipped.empty()) {
        std::ostringstream s;
        s << data << ": skipped " << c.skipped.size() << " bad line(s), first at line " << c.skipped.front().line
          << " (" << c.skipped.front().reason << ")";
        warn(s.str());
    }
    return c;
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
    s << m_prefix << batch_part(b, m_total_epochs) << "  | train " << fixed(r.train_loss, 4) << "  val "
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

// --- running ------------------------------------------------------------------------

bool interrupted() { return g_interrupted.load(); }

StopReason wait_with_interrupt(TrainingSession& session) {
    auto previous = std::signal(SIGINT, on_sigint);
    bool stop_sent = false;
    while (!session.wait_for(std::chrono::milliseconds(50))) {
        if (g_interrupted.load() && !stop_sent) {
            session.stop();
            stop_sent = true;
            std::fputs("\nattnviz-cli: stopping after this batch (Ctrl+C again to abort)\n", stderr);
        }
    }
    std::signal(SIGINT, previous == SIG_ERR ? SIG_DFL : previous);
    return session.stop_reason();
}

void check_writable(const std::string& flag, const std::string& path) {
    auto slash = path.find_last_of('/');
    std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    if (access(dir.c_str(), W_OK) != 0)
        throw FileError(path + ": cannot write here (" + flag + "): directory '" + dir +
                        "' does not exist or is not writable");
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