// attnviz-cli compare: several configurations on the same data and seed, a
// table of the results and the per-epoch curves as CSV (seed 002, Q27, Q31-34).
// Also the `tasks` listing.
#include <chrono>
#include <filesystem>
#include <iostream>

#include "app/cli_common.hpp"
#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/analysis/export.hpp"
#include "core/data/tasks.hpp"

namespace attnviz::cli {

namespace {

struct CompareOptions {
    CorpusFlags corpus;
    SettingFlags settings;
    std::vector<std::string> vary;
    std::string curves;
    bool json = false, quiet = false;
};

struct Variation {
    const Setting* setting;
    std::vector<std::string> values;
};

Variation parse_vary(const std::string& spec) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
        throw UsageError("--vary " + quote(spec) + ": expected NAME=VALUE,VALUE,... (e.g. scoring=additive,dot,none)");
    Variation v{&find_setting(spec.substr(0, eq)), {}};
    std::string rest = spec.substr(eq + 1);
    for (size_t start = 0;;) {
        size_t comma = rest.find(',', start);
        std::string value = rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (value.empty()) throw UsageError("--vary " + quote(spec) + ": empty value");
        v.values.push_back(value);
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return v;
}

struct ComparedRun {
    std::string label;
    ModelConfig model;
    TrainConfig train;
    // results
    std::string status = "not run";
    std::vector<EpochReport> epochs;
    double seconds = 0.0, tokens_per_second = 0.0;
    int64_t parameters = 0;
};

std::string pad(const std::string& s, size_t width) { return s.size() >= width ? s : s + std::string(width - s.size(), ' '); }

void print_table(const std::vector<ComparedRun>& runs) {
    size_t w = 3;
    for (const auto& r : runs) w = std::max(w, r.label.size());
    std::cout << pad("run", w) << "  val_loss  val_bleu  val_acc  tok_acc  train_loss  seconds    tok/s  status\n";
    for (const auto& r : runs) {
        std::cout << pad(r.label, w) << "  ";
        if (r.epochs.empty()) {
            std::cout << pad("-", 8) << "  " << pad("-", 8) << "  " << pad("-", 7) << "  " << pad("-", 7) << "  "
                      << pad("-", 10);
        } else {
            const EpochReport& e = r.epochs.back();
            std::cout << pad(std::isfinite(e.val_loss) ? fixed(e.val_loss, 4) : "-", 8) << "  "
                      << pad(fixed(e.val_bleu, 2), 8) << "  " << pad(fixed(e.val_accuracy, 3), 7) << "  "
                      << pad(fixed(e.val_token_accuracy, 3), 7) << "  " << pad(fixed(e.train_loss, 4), 10);
        }
        std::cout << "  " << pad(fixed(r.seconds, 1), 7) << "  " << pad(fixed(r.tokens_per_second, 0), 7) << "  "
                  << r.status << "\n";
    }
    std::cout << std::flush;
}

std::string curves_csv(const std::vector<ComparedRun>& runs) {
    std::string out = "run,epoch,train_loss,val_loss,val_bleu,val_accuracy,val_token_accuracy,tokens_per_second,elapsed,"
                      "val_align_accuracy,val_aer\n";
    auto num = [](double x) { return std::isfinite(x) ? fixed(x, 6) : std::string(); };
    for (const auto& r : runs)
        for (const auto& e : r.epochs)
            out += "\"" + r.label + "\"," + std::to_string(e.epoch) + "," + num(e.train_loss) + "," + num(e.val_loss) +
                   "," + num(e.val_bleu) + "," + num(e.val_accuracy) + "," + num(e.val_token_accuracy) + "," +
                   num(e.tokens_per_second) + "," + num(e.elapsed) + "," + num(e.val_align_accuracy) + "," +
                   num(e.val_aer) + "\n";
    return out;
}

int run_compare(CompareOptions& o) {
    ModelConfig base_m;
    TrainConfig base_t;
    o.settings.apply(base_m, base_t);
    base_m.seed = base_t.seed;

    // Every configuration is built and checked before the first one trains.
    std::vector<Variation> vars;
    for (const auto& spec : o.vary) vars.push_back(parse_vary(spec));
    std::vector<ComparedRun> runs(1);
    runs[0].model = base_m;
    runs[0].train = base_t;
    for (const auto& v : vars) {
        std::vector<ComparedRun> next;
        for (const auto& r : runs)
            for (const auto& value : v.values) {
                ComparedRun x = r;
                v.setting->set(x.model, x.train, value);
                x.label += (x.label.empty() ? "" : " ") + v.setting->name + "=" + value;
                next.push_back(std::move(x));
            }
        runs = std::move(next);
    }
    if (runs.size() < 2) throw UsageError("--vary: give at least two values to compare");
    // --tensorboard DIR: each run in a folder of its own named by its settings, which TensorBoard
    // lists as runs side by side (one folder would mix their curves into one run).
    for (auto& r : runs)
        if (!r.train.tensorboard.empty() && r.train.tensorboard == base_t.tensorboard) {
            std::string name = r.label;
            for (char& c : name)
                if (c == ' ' || c == '/') c = '_';
            r.train.tensorboard = (std::filesystem::path(base_t.tensorboard) / name).string();
        }
    for (auto& r : runs) {
        try {
            r.train.validate();
            r.model.validate();
        } catch (const ConfigError& e) {
            throw ConfigError(r.label + ": " + e.what());
        }
    }
    if (!o.curves.empty()) check_writable("--curves", o.curves);

    auto corpus = std::make_shared<const Corpus>(o.corpus.load(!o.quiet));
    set_signal_mode(SignalMode::defer);  // --curves is written before a signal ends the program
    bool failed = false;
    for (size_t i = 0; i < runs.size() && !interrupted(); ++i) {
        ComparedRun& r = runs[i];
        TrainConfig data_config = r.train;
        data_config.seed = base_t.seed;  // same split for every run, even when the seed varies
        auto data = std::make_shared<const TrainingData>(prepare_data(*corpus, data_config));
        std::string prefix = "[" + std::to_string(i + 1) + "/" + std::to_string(runs.size()) + " " + r.label + "] ";
        ProgressPrinter progress(r.train.epochs, o.quiet, prefix);
        if (i == 0)  // every run shares this split: describe it once
            progress.on_ready = [&](const SessionInfo& info) {
                if (!o.quiet) std::cerr << info.describe_data() << "\n";
            };
        TrainingSession session(&progress);
        auto t0 = std::chrono::steady_clock::now();
        session.start(data, r.model, r.train);
        StopReason reason = wait_with_interrupt(session);
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (auto info = session.info()) {
            r.parameters = info->parameters;
            r.model = info->model;  // with the vocabulary sizes filled in
        }
        r.epochs = session.history().epochs;
        r.status = to_string(reason);
        r.tokens_per_second = r.seconds > 0 ? progress.tokens_trained() / r.seconds : 0.0;
        if (reason == StopReason::error || reason == StopReason::diverged) {
            std::cerr << "attnviz-cli: " << (reason == StopReason::error ? "error: " : "warning: ") << r.label
                      << ": " << session.message() << "\n";
            failed = failed || reason == StopReason::error;
        }
    }

    if (!o.curves.empty()) write_file_atomic(o.curves, curves_csv(runs));
    if (o.json) {
        nlohmann::json all = nlohmann::json::array();
        for (const auto& r : runs) {
            nlohmann::json j{{"run", r.label}, {"status", r.status}, {"seconds", r.seconds},
                             {"tokens_per_second", r.tokens_per_second}, {"parameters", r.parameters},
                             {"epochs", r.epochs.size()}, {"model", r.model.to_json()}, {"train", r.train.to_json()}};
            const EpochReport* e = r.epochs.empty() ? nullptr : &r.epochs.back();
            j["train_loss"] = e ? number_or_null(e->train_loss) : nlohmann::json(nullptr);
            j["val_loss"] = e ? number_or_null(e->val_loss) : nlohmann::json(nullptr);
            j["val_bleu"] = e ? number_or_null(e->val_bleu) : nlohmann::json(nullptr);
            j["val_accuracy"] = e ? number_or_null(e->val_accuracy) : nlohmann::json(nullptr);
            j["val_token_accuracy"] = e ? number_or_null(e->val_token_accuracy) : nlohmann::json(nullptr);
            j["val_align_accuracy"] = e ? number_or_null(e->val_align_accuracy) : nlohmann::json(nullptr);
            j["val_aer"] = e ? number_or_null(e->val_aer) : nlohmann::json(nullptr);
            all.push_back(std::move(j));
        }
        std::cout << all.dump() << std::endl;
    } else {
        print_table(runs);
    }
    if (interrupted()) return interrupt_exit_code();
    return failed ? exit_runtime : exit_ok;
}

int run_tasks(bool json) {
    nlohmann::json all = nlohmann::json::array();
    for (TaskKind k : all_tasks()) {
        std::string examples;
        auto ex = task_examples(k);
        if (!ex.empty()) examples = ex.front();
        if (json)
            all.push_back({{"name", task_name(k)}, {"level", task_level(k) == TokenLevel::word ? "word" : "char"},
                           {"description", task_description(k)}, {"examples", ex}});
        else
            std::cout << pad(task_name(k), 11) << " " << pad(task_level(k) == TokenLevel::word ? "word" : "char", 5)
                      << " " << task_description(k) << (examples.empty() ? "" : "  e.g. \"" + examples + "\"")
                      << "\n";
    }
    if (json) std::cout << all.dump() << std::endl;
    return exit_ok;
}

}  // namespace

Command add_compare_command(CLI::App& parent) {
    auto o = std::make_shared<CompareOptions>();
    CLI::App* app = parent.add_subcommand("compare", "Train several configurations on the same data and seed; compare");
    app->footer(
        "--vary NAME=V1,V2,... takes any hyperparameter flag's name; several --vary give every combination.\n"
        "All runs share the data split (the base --seed) and the other flags. The table goes to stdout,\n"
        "progress to stderr. --curves CSV columns: run,epoch,train_loss,val_loss,val_bleu,val_accuracy,\n"
        "val_token_accuracy,tokens_per_second,elapsed,val_align_accuracy,val_aer (alignment: tasks only).\n"
        "--tensorboard DIR logs each run in DIR/<its settings> (e.g. DIR/scoring=dot), side by side in TensorBoard.\n"
        "Examples:\n"
        "  attnviz-cli compare --task toy-french --epochs 10 --vary scoring=additive,dot,none --curves c.csv\n"
        "  attnviz-cli compare --task reverse --vary teacher-forcing=1.0,0.5 --vary hidden=64,128");
    o->corpus.add_to(*app, true);
    app->add_option("--vary", o->vary, "a setting and its values, e.g. scoring=additive,dot,none (repeatable)")
        ->type_name("NAME=V,V")
        ->required()
        ->group("compare");
    o->settings.add_to(*app, ModelConfig{}, TrainConfig{}, "");
    app->add_option("--curves", o->curves, "write per-epoch curves of every run as CSV")->type_name("FILE")->group("output");
    app->add_flag("--json", o->json, "print the results as a JSON array instead of the table")->group("output");
    app->add_flag("-q,--quiet", o->quiet, "no progress on stderr")->group("output");
    return {app, [o] { return run_compare(*o); }, /*trains=*/true};
}

Command add_tasks_command(CLI::App& parent) {
    auto json = std::make_shared<bool>(false);
    CLI::App* app = parent.add_subcommand("tasks", "List the built-in tasks");
    app->add_flag("--json", *json, "as a JSON array");
    return {app, [json] { return run_tasks(*json); }};
}

}  // namespace attnviz::cli
