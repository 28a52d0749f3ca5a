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

// Parsing of flag values: the message names the flag so the user knows which to fix.
int64_t parse_int(const std::string& flag, const std::string& v, int64_t min_value) {
    try {
        size_t used = 0;
        long long x = std::stoll(v, &used);
        if (used == v.size() && x >= min_value) return x;
    } catch (const std::exception&) {
    }
    throw UsageError("--" + flag + ": expected an integer >= " + std::to_string(min_value) + ", got '" + v + "'");
}

double parse_float(const std::string& flag, const std::string& v, double lo, double hi) {
    try {
        size_t used = 0;
        double x = std::stod(v, &used);
        if (used == v.size() && std::isfinite(x) && x >= lo && x <= hi) return x;
    } catch (const std::exception&) {
    }
    std::ostringstream range;
    range << "a number in [" << lo << ", " << (std::isinf(hi) ? std::string("inf") : fixed(hi, 1)) << "]";
    throw UsageError("--" + flag + ": expected " + range.str() + ", got '" + v + "'");
}

bool parse_bool(const std::string& flag, const std::string& v) {
    std::string s = v;
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
    if (s == "0" || s == "false" || s == "no" || s == "off") return false;
    throw UsageError("--" + flag + ": expected true or false, got '" + v + "'");
}

// Core's *_from_string throw ConfigError listing the valid names; prefix the flag.
template <class F>
auto parse_name(const std::string& flag, const std::string& v, F from_string) {
    try {
        return from_string(v);
    } catch (const Error& e) {
        throw UsageError("--" + flag + ": " + e.what());
    }
}

std::string num(double x) {
    std::ostringstream s;
    s << x;
    return s.str();
}

constexpr double inf = std::numeric_limits<double>::infinity();

std::vector<Setting> make_settings() {
    using M = ModelConfig;
    using T = TrainConfig;
    std::vector<Setting> s;
    auto add = [&](Setting x) { s.push_back(std::move(x)); };
    // model shape
    add({"embed", "INT", "embedding width of both sides (d2l: 256)", true,
         [](const M& m, const T&) { return std::to_string(m.embed_size); },
         [](M& m, T&, const std::string& v) { m.embed_size = parse_int("embed", v, 1); }});
    add({"hidden", "INT", "RNN hidden width (d2l: 256)", true,
         [](const M& m, const T&) { return std::to_string(m.hidden_size); },
         [](M& m, T&, const std::string& v) { m.hidden_size = parse_int("hidden", v, 1); }});
    add({"layers", "INT", "RNN layers of encoder and decoder (d2l: 2)", true,
         [](const M& m, const T&) { return std::to_string(m.num_layers); },
         [](M& m, T&, const std::string& v) { m.num_layers = parse_int("layers", v, 1); }});
    add({"attention-size", "INT", "additive attention's hidden width; 0 = --hidden", true,
         [](const M& m, const T&) { return std::to_string(m.attention_size); },
         [](M& m, T&, const std::string& v) { m.attention_size = parse_int("attention-size", v, 0); }});
    add({"cell", "NAME", "recurrent cell: gru | lstm", true,
         [](const M& m, const T&) { return to_string(m.cell); },
         [](M& m, T&, const std::string& v) { m.cell = parse_name("cell", v, cell_from_string); }});
    add({"bidirectional", "BOOL", "bidirectional encoder (keys have 2*hidden features)", true,
         [](const M& m, const T&) { return std::string(m.bidirectional ? "true" : "false"); },
         [](M& m, T&, const std::string& v) { m.bidirectional = parse_bool("bidirectional", v); }});
    add({"reverse-source", "BOOL", "encoder reads the source right to left (Sutskever et al.)", true,
         [](const M& m, const T&) { return std::string(m.reverse_source ? "true" : "false"); },
         [](M& m, T&, const std::string& v) { m.reverse_source = parse_bool("reverse-source", v); }});
    add({"scoring", "NAME", "attention scoring: additive | dot | scaled-dot | general | none", true,
         [](const M& m, const T&) { return to_string(m.scoring); },
         [](M& m, T&, const std::string& v) { m.scoring = parse_name("scoring", v, scoring_from_string); }});
    add({"dropout", "FLOAT", "dropout between RNN layers and on attention weights (d2l: 0.2)", true,
         [](const M& m, const T&) { return num(m.dropout); },
         [](M& m, T&, const std::string& v) { m.dropout = parse_float("dropout", v, 0.0, 0.99); }});
    add({"init", "NAME", "initialisation: xavier (d2l) | uniform (Sutskever) | orthogonal (Bahdanau)", true,
         [](const M& m, const T&) { return to_string(m.init); },
         [](M& m, T&, const std::string& v) { m.init = parse_name("init", v, init_from_string); }});
    // optimisation
    add({"optimizer", "NAME", "adam | sgd | adadelta", false,
         [](const M&, const T& t) { return to_string(t.optimizer); },
         [](M&, T& t, const std::string& v) { t.optimizer = parse_name("optimizer", v, optimizer_from_string); }});
    add({"lr", "FLOAT", "learning rate (Adadelta: try 1.0)", false,
         [](const M&, const T& t) { return num(t.lr); },
         [](M&, T& t, const std::string& v) { t.lr = parse_float("lr", v, 0.0, inf); }});
    add({"momentum", "FLOAT", "SGD momentum", false,
         [](const M&, const T& t) { return num(t.momentum); },
         [](M&, T& t, const std::string& v) { t.momentum = parse_float("momentum", v, 0.0, 1.0); }});
    add({"batch", "INT", "sentences per batch", false,
         [](const M&, const T& t) { return std::to_string(t.batch_size); },
         [](M&, T& t, const std::string& v) { t.batch_size = parse_int("batch", v, 1); }});
    add({"epochs", "INT", "passes over the training pairs (with --resume: the total to reach)", false,
         [](const M&, const T& t) { return std::to_string(t.epochs); },
         [](M&, T& t, const std::string& v) { t.epochs = int(parse_int("epochs", v, 0)); }});
    add({"teacher-forcing", "FLOAT", "probability of feeding the true previous token", false,
         [](const M&, const T& t) { return num(t.teacher_forcing); },
         [](M&, T& t, const std::string& v) { t.teacher_forcing = parse_float("teacher-forcing", v, 0.0, 1.0); }});
    add({"clip", "FLOAT", "clip the global gradient norm to this; 0 = off", false,
         [](const M&, const T& t) { return num(t.grad_clip); },
         [](M&, T& t, const std::string& v) { t.grad_clip = parse_float("clip", v, 0.0, inf); }});
    add({"seed", "INT", "seeds weights, split, shuffling, dropout, teacher forcing", false,
         [](const M&, const T& t) { return std::to_string(t.seed); },
         [](M& m, T& t, const std::string& v) {
             t.seed = uint64_t(parse_int("seed", v, 0));
             m.seed = t.seed;
         }});
    add({"device", "NAME", "auto | cpu | cuda | cuda:N", false,
         [](const M&, const T& t) { return t.device; },
         [](M&, T& t, const std::string& v) { t.device = v; }});
    // data handling
    add({"max-length", "INT", "drop pairs with more tokens than this on a side; 0 = keep all", false,
         [](const M&, const T& t) { return std::to_string(t.max_length); },
         [](M&, T& t, const std::string& v) { t.max_length = parse_int("max-length", v, 0); }});
    add({"val-fraction", "FLOAT", "share of pairs held out for validation", false,
         [](const M&, const T& t) { return num(t.val_fraction); },
         [](M&, T& t, const std::string& v) { t.val_fraction = parse_float("val-fraction", v, 0.0, 0.9); }});
    add({"min-freq", "INT", "vocabulary: rarer tokens map to <unk>", false,
         [](const M&, const T& t) { return std::to_string(t.min_freq); },
         [](M&, T& t, const std::string& v) { t.min_freq = int(parse_int("min-freq", v, 1)); }});
    add({"bucket-window", "INT", "sort this many batches by length before batching; 0 = off", false,
         [](const M&, const T& t) { return std::to_string(t.bucket_window); },
         [](M&, T& t, const std::string& v) { t.bucket_window = int(parse_int("bucket-window", v, 0)); }});
    add({"steps", "INT", "pad/truncate every sequence to this many steps like d2l; 0 = natural lengths", false,
         [](const M&, const T& t) { return std::to_string(t.fixed_steps); },
         [](M&, T& t, const std::string& v) { t.fixed_steps = parse_int("steps", v, 0); }});
    add({"split-shuffle", "BOOL", "shuffle before splitting off validation (false: last pairs validate, as d2l)", false,
         [](const M&, const T& t) { return std::string(t.split_shuffle ? "true" : "false"); },
         [](M&, T& t, const std::string& v) { t.split_shuffle = parse_bool("split-shuffle", v); }});
    add({"vocab-includes-val", "BOOL", "build vocabularies from train + validation pairs (as d2l)", false,
         [](const M&, const T& t) { return std::string(t.vocab_includes_val ? "true" : "false"); },
         [](M&, T& t, const std::string& v) { t.vocab_includes_val = parse_bool("vocab-includes-val", v); }});
    add({"eval-sample", "INT", "validation pairs decoded each epoch for accuracy and BLEU; 0 = all", false,
         [](const M&, const T& t) { return std::to_string(t.eval_sample); },
         [](M&, T& t, const std::string& v) { t.eval_sample = size_t(parse_int("eval-sample", v, 0)); }});
    add({"max-batches", "INT", "stop after this many batches in total; 0 = no limit", false,
         [](const M&, const T& t) { return std::to_string(t.max_batches); },
         [](M&, T& t, const std::string& v) { t.max_batches = parse_int("max-batches", v, 0); }});
    return s;
}

std::atomic<bool> g_interrupted{false};
std::atomic<int> g_sigint_count{0};

extern "C" void on_sigint(int) {
    // Only lock-free atomics here; the main thread turns this into Trainer::stop().
    if (g_sigint_count.fetch_add(1) >= 1) {
        std::signal(SIGINT, SIG_DFL);
        std::raise(SIGINT);
    }
    g_interrupted.store(true);
}

}  // namespace

namespace {
CLI::Validator number_check(const std::string& what, std::function<bool(const std::string&)> ok) {
    return CLI::Validator(
        [what, ok](std::string& v) { return ok(v) ? std::string() : "expected " + what + ", got '" + v + "'"; }, "");
}
bool is_int_at_least(const std::string& v, long long min_value) {
    try {
        size_t used = 0;
        long long x = std::stoll(v, &used);
        return used == v.size() && x >= min_value;
    } catch (const std::exception&) {
        return false;
    }
}
}  // namespace

CLI::Validator positive_int() {
    return number_check("a positive integer", [](const std::string& v) { return is_int_at_least(v, 1); });
}

CLI::Validator non_negative_int() {
    return number_check("an integer >= 0", [](const std::string& v) { return is_int_at_least(v, 0); });
}

CLI::Validator non_negative_number() {
    return number_check("a number >= 0", [](const std::string& v) {
        try {
            size_t used = 0;
            double x = std::stod(v, &used);
            return used == v.size() && std::isfinite(x) && x >= 0;
        } catch (const std::exception&) {
            return false;
        }
    });
}

const std::vector<Setting>& settings() {
    static const std::vector<Setting> s = make_settings();
    return s;
}

const Setting& find_setting(const std::string& name) {
    for (const auto& s : settings())
        if (s.name == name) return s;
    std::string names;
    for (const auto& s : settings()) names += (names.empty() ? "" : ", ") + s.name;
    throw UsageError("unknown setting '" + name + "' (valid: " + names + ")");
}

void SettingFlags::add_to(CLI::App& app, const ModelConfig& m, const TrainConfig& t, const std::string& group) {
    for (const auto& s : settings()) {
        Entry e{&s, nullptr, std::make_shared<std::string>(), nullptr};
        std::string group_name = group + (s.model ? "model" : "training");
        if (s.type == "BOOL") {
            e.flag = std::make_shared<bool>(false);
            e.option = app.add_flag("--" + s.name, *e.flag, s.help + " [default: " + s.get(m, t) + "]");
        } else {
            e.option = app.add_option("--" + s.name, *e.value, s.help)
                           ->type_name(s.type)
                           ->default_str(s.get(m, t));
        }
        e.option->group(group_name);
        m_entries.push_back(e);
    }
}

void SettingFlags::apply(ModelConfig& m, TrainConfig& t) const {
    for (const auto& e : m_entries) {
        if (e.option->count() == 0) continue;
        e.setting->set(m, t, e.flag ? std::string(*e.flag ? "true" : "false") : *e.value);
    }
}

std::vector<std::string> SettingFlags::given_model_flags() const {
    std::vector<std::string> names;
    for (const auto& e : m_entries)
        if (e.setting->model && e.option->count() > 0) names.push_back("--" + e.setting->name);
    return names;
}

bool SettingFlags::given(const std::string& name) const {
    for (const auto& e : m_entries)
        if (e.setting->name == name) return e.option->count() > 0;
    return false;
}

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
    app.add_option("--level", level, "TSV tokenisation: word | char")
        ->type_name("NAME")
        ->check(CLI::IsMember({"word", "char"}))
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
    o.level = level == "char" ? TokenLevel::character : TokenLevel::word;
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
      << fixed(r.val_accuracy, 3) << "  bleu " << fixed(r.val_bleu, 1) << "  " << fixed(r.tokens_per_second, 0)
      << " tok/s  " << fixed(r.elapsed, 1) << " s\n";
    std::fputs(s.str().c_str(), stderr);
    std::fflush(stderr);
}

void ProgressPrinter::on_finished(StopReason reason, const std::string& message) {
    clear_line();
    m_message = message;
}

// --- running ------------------------------------------------------------------------

bool interrupted() { return g_interrupted.load(); }

StopReason run_with_interrupt(Trainer& trainer, TrainObserver* observer) {
    std::atomic<bool> done{false};
    StopReason reason = StopReason::error;
    auto previous = std::signal(SIGINT, on_sigint);
    std::thread worker([&] {
        reason = trainer.run(observer);
        done.store(true);
    });
    bool stop_sent = false;
    while (!done.load()) {
        if (g_interrupted.load() && !stop_sent) {
            trainer.stop();
            stop_sent = true;
            std::fputs("\nattnviz-cli: stopping after this batch (Ctrl+C again to abort)\n", stderr);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    worker.join();
    std::signal(SIGINT, previous == SIG_ERR ? SIG_DFL : previous);
    return reason;
}

void validate_model(ModelConfig m) {
    if (m.src_vocab == 0) m.src_vocab = 5;  // the Trainer sets the real sizes from the data
    if (m.tgt_vocab == 0) m.tgt_vocab = 5;
    m.validate();
}

void check_writable(const std::string& flag, const std::string& path) {
    auto slash = path.find_last_of('/');
    std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    if (access(dir.c_str(), W_OK) != 0)
        throw FileError(path + ": cannot write here (" + flag + "): directory '" + dir +
                        "' does not exist or is not writable");
}

std::string describe_data(const TrainingData& d) {
    std::ostringstream s;
    s << d.name << ": " << d.train.size() << " training + " << d.val.size() << " validation pairs, vocabularies "
      << d.src_vocab.size() << " / " << d.tgt_vocab.size() << " tokens ("
      << (d.level == TokenLevel::character ? "characters" : "words") << ")";
    if (d.skipped_lines > 0) s << ", " << d.skipped_lines << " bad lines skipped";
    return s.str();
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
