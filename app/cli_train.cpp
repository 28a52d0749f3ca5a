// attnviz-cli train: a corpus or built-in task, every hyperparameter, --save,
// --resume, a live progress line and --json metrics.
#include <unistd.h>

#include <chrono>
#include <iostream>

#include "app/cli_common.hpp"
#include "core/checkpoint.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/tasks.hpp"

namespace attnviz::cli {

namespace {

struct TrainOptions {
    CorpusFlags corpus;
    SettingFlags settings;
    std::string save, resume;
    bool json = false, quiet = false;
};

/// The corpus a resumed run continues on when no --task/--data is given.
Corpus corpus_of_checkpoint(const Checkpoint& c, const CorpusFlags& flags) {
    try {
        TaskKind kind = task_from_name(c.corpus_name);
        TaskOptions o;
        o.num_pairs = flags.pairs;
        o.seed = flags.task_seed;
        return task_corpus(kind, o);
    } catch (const ConfigError&) {
    }
    if (access(c.corpus_name.c_str(), R_OK) == 0) {
        TsvOptions o;
        o.level = c.level;
        o.max_pairs = flags.max_pairs;
        o.reverse = flags.reverse;
        return read_tsv(c.corpus_name, o);
    }
    throw UsageError("--resume: the checkpoint was trained on '" + c.corpus_name +
                     "', which is neither a task nor a readable file: give --task or --data");
}

int run_train(TrainOptions& o) {
    ModelConfig m;
    TrainConfig t;
    std::unique_ptr<Checkpoint> ckpt;
    if (!o.resume.empty()) {
        ckpt = std::make_unique<Checkpoint>(load_checkpoint(o.resume));
        m = ckpt->model_config;
        t = ckpt->train_config;
        auto fixed_flags = o.settings.given_model_flags();
        if (!fixed_flags.empty())
            throw UsageError(fixed_flags.front() + " cannot change when resuming (the model's shape is in the checkpoint)");
    }
    o.settings.apply(m, t);
    if (!o.settings.given("seed") && !ckpt) m.seed = t.seed;
    t.validate();
    validate_model(m);
    if (!o.save.empty()) check_writable("--save", o.save);
    resolve_device(t.device);  // unknown or absent device: an error now, not in the worker

    Corpus corpus = o.corpus.given() || !ckpt ? o.corpus.load(!o.quiet) : corpus_of_checkpoint(*ckpt, o.corpus);
    TrainingData data = prepare_data(corpus, t);
    if (data.train.empty()) throw ConfigError(corpus.name + ": no training pairs left after filtering and splitting");

    std::unique_ptr<Trainer> trainer;
    if (ckpt) {
        if (corpus.level != ckpt->level)
            throw UsageError("--resume: the checkpoint works on " +
                             std::string(ckpt->level == TokenLevel::word ? "words" : "characters") +
                             " but the corpus is tokenised differently (see --level)");
        data.src_vocab = ckpt->src_vocab;  // a resumed model keeps its vocabularies
        data.tgt_vocab = ckpt->tgt_vocab;
        trainer = resume_trainer(*ckpt, std::move(data), t);
    } else {
        trainer = std::make_unique<Trainer>(std::move(data), m, t);
    }
    const int epochs_before = trainer->history().epochs_done;
    if (!o.quiet) {
        std::cerr << describe_data(trainer->data()) << "\n"
                  << count_parameters(*trainer->model()) << " parameters, "
                  << describe_device(trainer->device()) << ", " << to_string(trainer->model_config().scoring)
                  << " attention, " << t.epochs << " epochs"
                  << (epochs_before > 0 ? " (resuming after " + std::to_string(epochs_before) + ")" : "") << "\n";
    }

    ProgressPrinter progress(t.epochs, o.quiet);
    auto t0 = std::chrono::steady_clock::now();
    StopReason reason = run_with_interrupt(*trainer, &progress);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    const TrainHistory& h = trainer->history();
    std::string saved;
    if (!o.save.empty() && reason != StopReason::error) {
        save_checkpoint(*trainer, o.save);
        saved = o.save;
        if (!o.quiet) std::cerr << "saved " << o.save << "\n";
    }
    if (reason == StopReason::diverged || reason == StopReason::error)
        std::cerr << "attnviz-cli: error: " << progress.message() << "\n";

    if (o.json) {
        int epochs_run = h.epochs_done - epochs_before;
        double tokens = progress.tokens_trained();
        nlohmann::json j;
        const char* reasons[] = {"finished", "stopped", "diverged", "error"};
        j["stop_reason"] = reasons[int(reason)];
        j["epochs"] = h.epochs_done;
        j["epochs_this_run"] = epochs_run;
        j["global_step"] = h.global_step;
        if (!h.epochs.empty()) {
            const EpochReport& e = h.epochs.back();
            j["train_loss"] = number_or_null(e.train_loss);
            j["val_loss"] = number_or_null(e.val_loss);
            j["val_accuracy"] = number_or_null(e.val_accuracy);
            j["val_token_accuracy"] = number_or_null(e.val_token_accuracy);
            j["val_bleu"] = number_or_null(e.val_bleu);
        } else {
            for (const char* k : {"train_loss", "val_loss", "val_accuracy", "val_token_accuracy", "val_bleu"})
                j[k] = nullptr;
        }
        j["target_tokens"] = int64_t(tokens);
        j["tokens_per_second"] = seconds > 0 ? tokens / seconds : 0.0;
        j["batch_tokens_per_second"] = progress.batch_tokens_per_second();
        j["seconds"] = seconds;
        j["device"] = describe_device(trainer->device());
        j["corpus"] = trainer->data().name;
        j["train_pairs"] = trainer->data().train.size();
        j["val_pairs"] = trainer->data().val.size();
        j["src_vocab"] = trainer->data().src_vocab.size();
        j["tgt_vocab"] = trainer->data().tgt_vocab.size();
        j["parameters"] = count_parameters(*trainer->model());
        j["saved"] = saved.empty() ? nlohmann::json(nullptr) : nlohmann::json(saved);
        j["model"] = trainer->model_config().to_json();
        j["train"] = trainer->train_config().to_json();
        std::cout << j.dump() << std::endl;
    }
    if (reason == StopReason::diverged || reason == StopReason::error) return exit_runtime;
    if (reason == StopReason::stopped && interrupted()) return exit_interrupted;
    return exit_ok;
}

}  // namespace

Command add_train_command(CLI::App& parent) {
    auto o = std::make_shared<TrainOptions>();
    CLI::App* app = parent.add_subcommand("train", "Train a model on a built-in task or a TSV corpus");
    app->footer(
        "Progress goes to stderr: one line per epoch, updated in place when stderr is a terminal.\n"
        "Ctrl+C stops after the current batch, still saves (--save) and prints --json; exit code 130.\n"
        "Example: attnviz-cli train --task reverse --epochs 10 --save reverse.ckpt");
    o->corpus.add_to(*app, true);
    o->settings.add_to(*app, ModelConfig{}, TrainConfig{}, "");
    app->add_option("--save", o->save, "write a checkpoint here when training ends (atomically)")
        ->type_name("FILE")
        ->group("output");
    app->add_option("--resume", o->resume,
                    "continue training from this checkpoint (model flags are fixed; data defaults to its corpus)")
        ->type_name("FILE")
        ->group("output");
    app->add_flag("--json", o->json, "print the final metrics as one JSON object on stdout")->group("output");
    app->add_flag("-q,--quiet", o->quiet, "no progress on stderr")->group("output");
    return {app, [o] { return run_train(*o); }};
}

}  // namespace attnviz::cli
