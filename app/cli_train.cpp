// attnviz-cli train: a corpus or built-in task, every hyperparameter, --save,
// --resume, a live progress line and --json metrics.
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>

#include "app/cli_common.hpp"
#include "core/persist/checkpoint.hpp"
#include "core/persist/model_file.hpp"
#include "core/session/session.hpp"
#include "core/model/device.hpp"
#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/io/process_memory.hpp"
#include "core/data/tasks.hpp"

namespace attnviz::cli {

namespace {

struct TrainOptions {
    CorpusFlags corpus;
    SettingFlags settings;
    std::string save, resume, init_from;
    std::string source_lang, target_lang;  ///< a multilingual pretrained model's pair to fine-tune on
    std::string memory_log;  ///< hidden --memory-log FILE: memory figures every 10 s (soak tests)
    bool json = false, quiet = false;
};

/// Heap bytes in use (glibc's count over all arenas); 0 where it cannot be known. The
/// difference around loading is what the corpus takes (docs/corpora.md, "Large corpora": bytes per pair).
size_t heap_in_use() {
    const HeapStats h = heap_stats();
    return h.available ? static_cast<size_t>(h.in_use_mb * 1024.0 * 1024.0) : 0;
}

/// --memory-log: one JSON line every 10 s of training with the resident memory and the
/// heap's figures (tools/soak.sh reads it), so a slow rise can be told apart: bytes in
/// use (something kept) or held free (the allocator's pages).
class MemoryLog {
public:
    explicit MemoryLog(const std::string& path) : m_start(std::chrono::steady_clock::now()), m_next(m_start) {
        if (path.empty()) return;
        m_out.open(path, std::ios::out | std::ios::trunc);
        if (!m_out) throw FileError("--memory-log: cannot write " + quote(path, quote_path_max));
    }
    void tick() {
        if (!m_out.is_open()) return;
        const auto now = std::chrono::steady_clock::now();
        if (now < m_next) return;
        m_next += std::chrono::seconds(10);
        const HeapStats h = heap_stats();
        nlohmann::json j = {{"t", std::chrono::duration<double>(now - m_start).count()}, {"rss_mb", resident_mb()}};
        if (h.available)
            j.update({{"heap_in_use_mb", h.in_use_mb}, {"heap_free_mb", h.free_mb}, {"heap_mapped_mb", h.mapped_mb}});
        m_out << j.dump() << std::endl;
    }

private:
    std::ofstream m_out;
    std::chrono::steady_clock::time_point m_start, m_next;
};

/// The corpus a resumed run continues on when no --task/--data is given.
Corpus corpus_of_checkpoint(const TranslationModel& m, const CorpusFlags& flags) {
    try {
        TaskKind kind = task_from_name(m.corpus_name());
        TaskOptions o;
        o.num_pairs = flags.pairs;
        o.seed = flags.task_seed;
        return task_corpus(kind, o);
    } catch (const ConfigError&) {
    }
    if (access(m.corpus_name().c_str(), R_OK) == 0) {
        // The path comes from the file: it gets every check a --data path gets (a regular
        // file only, bounded reading), and the message says where the path came from.
        TsvOptions o = flags.tsv_options();
        o.level = m.level();
        if (const TokenizerPtr t = m.tokenizer().pretrained() ? m.tokenizer_ptr() : nullptr)
            o.encode = [t](const std::string& text, bool target) { return target ? t->encode_target(text) : t->encode(text); };
        try {
            return read_tsv(m.corpus_name(), o);
        } catch (const FileError& e) {
            throw FileError("--resume: the checkpoint's corpus: " + std::string(e.what()) +
                            " (give --task or --data to train on something else)");
        }
    }
    throw UsageError("--resume: the checkpoint was trained on " + quote(m.corpus_name(), quote_path_max) +
                     ", which is neither a task nor a readable file: give --task or --data");
}

nlohmann::json final_json(const TrainingSession& session, StopReason reason, const ProgressPrinter& progress,
                          double seconds, const std::string& saved) {
    const TrainHistory h = session.history();
    const SessionInfo info = session.info().value_or(SessionInfo{});
    double tokens = progress.tokens_trained();
    nlohmann::json j;
    j["stop_reason"] = to_string(reason);
    j["epochs"] = h.epochs_done;
    j["epochs_this_run"] = h.epochs_done - info.epochs_before;
    j["global_step"] = h.global_step;
    j["best_epoch"] = h.best_epoch > 0 ? nlohmann::json(h.best_epoch) : nlohmann::json(nullptr);
    j["best_val_loss"] = number_or_null(h.best_val_loss());
    // A pretrained model's own validation loss before fine-tuning (epoch 0).
    j["start_val_loss"] = h.start ? number_or_null(h.start->val_loss) : nlohmann::json(nullptr);
    j["kept_epoch"] = info.train.keep_best && h.best_epoch > 0 ? h.best_epoch : h.epochs_done;
    if (!h.epochs.empty()) {
        const EpochReport& e = h.epochs.back();
        j["train_loss"] = number_or_null(e.train_loss);
        j["val_loss"] = number_or_null(e.val_loss);
        j["val_accuracy"] = number_or_null(e.val_accuracy);
        j["val_token_accuracy"] = number_or_null(e.val_token_accuracy);
        j["val_bleu"] = number_or_null(e.val_bleu);
        j["val_align_accuracy"] = number_or_null(e.val_align_accuracy);
        j["val_aer"] = number_or_null(e.val_aer);
        j["lr"] = e.lr;
        if (!e.heads.empty()) {  // --head-stats: the last validation's importance and confidence per head
            auto& heads = j["heads"] = nlohmann::json::array();
            for (const auto& h : e.heads)
                heads.push_back({{"kind", h.kind},
                                 {"layer", h.layer},
                                 {"head", h.head},
                                 {"importance", number_or_null(h.importance)},
                                 {"confidence", number_or_null(h.confidence)}});
        }
    } else {
        for (const char* k : {"train_loss", "val_loss", "val_accuracy", "val_token_accuracy", "val_bleu",
                              "val_align_accuracy", "val_aer", "lr"})
            j[k] = nullptr;
    }
    j["target_tokens"] = int64_t(tokens);
    j["tokens_per_second"] = seconds > 0 ? tokens / seconds : 0.0;
    j["batch_tokens_per_second"] = progress.batch_tokens_per_second();
    j["seconds"] = seconds;
    j["device"] = info.device;
    j["corpus"] = info.corpus_name;
    j["train_pairs"] = info.train_pairs;
    j["val_pairs"] = info.val_pairs;
    j["src_vocab"] = info.src_vocab;
    j["tgt_vocab"] = info.tgt_vocab;
    j["parameters"] = info.parameters;
    j["saved"] = saved.empty() ? nlohmann::json(nullptr) : nlohmann::json(saved);
    j["model"] = info.model.to_json();
    j["train"] = info.train.to_json();
    return j;
}

int run_train(TrainOptions& o) {
    ModelConfig m;
    TrainConfig t;
    std::shared_ptr<const Checkpoint> ckpt;
    if (!o.resume.empty() && !o.init_from.empty()) throw UsageError("--resume and --init-from exclude each other");
    if (!o.resume.empty() || !o.init_from.empty()) {
        // A checkpoint, or a d2l file (its weights, a fresh optimiser): fine-tuning d2l's model.
        const std::string& from = o.resume.empty() ? o.init_from : o.resume;
        ckpt = std::make_shared<const Checkpoint>(open_model_file(from));
        if (!o.init_from.empty()) {
            // Its weights, vocabularies and tokenizer; a fresh optimiser and history.
            auto fresh = std::make_shared<Checkpoint>();
            fresh->model = std::make_shared<const TranslationModel>(
                ckpt->model->network(), ckpt->model->src_vocab_ptr(), ckpt->model->tgt_vocab_ptr(),
                ckpt->model->tokenizer_ptr(), TrainConfig{}, TrainHistory{}, ckpt->model->corpus_name());
            ckpt = fresh;
        }
        if (!o.source_lang.empty() || !o.target_lang.empty()) {
            // The model's tokenizer with this pair as its own languages (tokenizer_config.json's src_lang
            // and tgt_lang): the pairs are fine-tuned with their codes, and the saved model keeps them.
            auto with = std::make_shared<Checkpoint>(*ckpt);
            with->model = std::make_shared<const TranslationModel>(
                ckpt->model->network(), ckpt->model->src_vocab_ptr(), ckpt->model->tgt_vocab_ptr(),
                ckpt->model->tokenizer().with_default_languages(o.source_lang, o.target_lang), ckpt->model->trained_with(),
                ckpt->model->history(), ckpt->model->corpus_name());
            ckpt = with;
        }
        m = ckpt->model->config();
        t = ckpt->model->trained_with();
        if (m.is_pretrained() && !o.settings.given("lr")) t.lr = 5e-5;  // fine-tuning, not training from scratch
        if (m.is_pretrained() && !o.settings.given("batch")) t.batch_size = 16;
        auto fixed_flags = o.settings.given_model_flags();
        if (!fixed_flags.empty())
            throw UsageError(fixed_flags.front() + " cannot change when resuming (the model's shape is in the checkpoint)");
    }
    if (!ckpt && (!o.source_lang.empty() || !o.target_lang.empty()))
        throw UsageError("--source-lang and --target-lang choose the languages of a multilingual pretrained model to "
                         "fine-tune (with --init-from or --resume)");
    o.settings.apply(m, t);
    if (!o.settings.given("seed") && !ckpt) m.seed = t.seed;
    t.validate();
    m.validate();
    if (!o.save.empty()) check_writable("--save", o.save);
    MemoryLog memory_log(o.memory_log);
    resolve_device(t.device);  // unknown or absent device: an error now, not in the worker

    const auto load_start = std::chrono::steady_clock::now();
    const size_t heap_before = heap_in_use();
    // A pretrained model reads the corpus's sentences as they are, with its own tokenizer.
    const TokenizerPtr model_tokenizer = ckpt && ckpt->model->tokenizer().pretrained() ? ckpt->model->tokenizer_ptr() : nullptr;
    auto corpus = std::make_shared<const Corpus>(o.corpus.given() || !ckpt ? o.corpus.load(!o.quiet, model_tokenizer)
                                                                          : corpus_of_checkpoint(*ckpt->model, o.corpus));
    const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
    const size_t heap_after = heap_in_use();
    if (ckpt && corpus->level != ckpt->model->level() && !model_tokenizer)
        throw UsageError("--resume: the checkpoint works on " + level_noun(ckpt->model->level()) +
                         " but the corpus is tokenised differently (see --level)");

    ProgressPrinter progress(t.epochs, o.quiet);
    progress.on_ready = [&](const SessionInfo& info) {
        if (o.quiet) return;
        std::cerr << escape_controls(info.describe_data()) << "\n"
                  << info.parameters << " parameters, " << info.device << ", " << to_string(info.model.scoring)
                  << " attention, " << info.epochs_planned << " epochs"
                  << (info.epochs_before > 0 ? " (resuming after " + std::to_string(info.epochs_before) + ")" : "")
                  << "\n";
    };
    // From here on a signal never cuts a save: while training the first one stops the
    // run (wait_with_interrupt), afterwards they wait for the final save and the exit
    // (cli_signals.hpp).
    set_signal_mode(SignalMode::defer);
    TrainingSession session(&progress);
    auto t0 = std::chrono::steady_clock::now();
    if (ckpt) session.start_from(ckpt, corpus, t);
    else session.start(corpus, m, t);
    PeriodicSave periodic(session, progress, o.save, t.checkpoint_every_minutes);
    StopReason reason = wait_with_interrupt(session, [&] {
        periodic.tick();
        memory_log.tick();
    });
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    // What was trained is saved even when training failed afterwards (e.g. in an
    // epoch's evaluation): the weights of every batch done are valid weights.
    const int64_t steps_before = ckpt ? ckpt->model->history().global_step : 0;
    const bool trained = session.history().global_step > steps_before;
    std::string saved;
    if (!o.save.empty() && session.has_model() && (reason != StopReason::error || trained)) {
        if (!o.quiet) std::cerr << "saving " << quote(o.save, quote_path_max) << " ...\n";
        try {
            session.save(o.save);
            saved = o.save;
            if (!o.quiet)
                std::cerr << "saved " << quote(o.save, quote_path_max)
                          << (reason == StopReason::error ? " (the model as it was when training failed)" : "") << "\n";
        } catch (const FileError& e) {
            // A diverged run whose weights are no longer finite: nothing is written over --save,
            // and the error below says why training stopped.
            if (reason != StopReason::diverged) throw;
            if (!o.quiet) std::cerr << "not saved: " << e.what() << "\n";
        }
    }
    if (reason == StopReason::diverged || reason == StopReason::error)
        std::cerr << "attnviz-cli: error: " << session.message() << "\n";
    else if (reason == StopReason::early_stop && !o.quiet)
        std::cerr << session.message() << "\n";
    if (o.json) {
        nlohmann::json j = final_json(session, reason, progress, seconds, saved);
        j["corpus_layout"] = to_string(corpus->layout);
        j["corpus_detected"] = corpus->detected;
        j["corpus_lines_read"] = corpus->lines_read;
        j["load_seconds"] = load_seconds;
        j["corpus_pairs"] = corpus->pairs.size();
        j["corpus_heap_bytes"] = heap_after > heap_before && heap_before > 0 ? nlohmann::json(heap_after - heap_before)
                                                                             : nlohmann::json(nullptr);
        std::cout << j.dump() << std::endl;
    }
    // Refused before it began (a pair too long for the memory bound...): the input's fault, as
    // decoding's and attribution's refusals: 2. A run that failed once begun: 1.
    if (reason == StopReason::error && session.refused()) return exit_usage;
    if (reason == StopReason::diverged || reason == StopReason::error) return exit_runtime;
    if (interrupted()) return interrupt_exit_code();  // 130 Ctrl+C, 143 SIGTERM
    return exit_ok;
}

}  // namespace

Command add_train_command(CLI::App& parent) {
    auto o = std::make_shared<TrainOptions>();
    CLI::App* app = parent.add_subcommand("train", "Train a model on a built-in task or a TSV corpus");
    app->footer(
        "Progress goes to stderr: one line per epoch, updated in place when stderr is a terminal.\n"
        "Ctrl+C stops after the current batch, still saves (--save) and prints --json; exit code 130\n"
        "(SIGTERM: the same, 143). Another one while training aborts (no temporary file is left); while\n"
        "the final checkpoint is written they wait for it. --checkpoint-every-minutes M also saves every\n"
        "M minutes while training, so a crash or a kill loses little.\n"
        "Example: attnviz-cli train --task reverse --epochs 10 --save reverse.ckpt");
    o->corpus.add_to(*app, true);
    o->settings.add_to(*app, ModelConfig{}, TrainConfig{}, "");
    app->add_option("--save", o->save,
                    "write a checkpoint here when training ends (atomically; see --checkpoint-every-minutes)")
        ->type_name("FILE")
        ->group("output");
    app->add_option("--resume", o->resume,
                    "continue training from this checkpoint, or from a d2l .safetensors file's weights (model flags are "
                    "fixed; data defaults to its corpus)")
        ->type_name("FILE")
        ->group("output");
    app->add_option("--init-from", o->init_from,
                    "start from this model's weights with a fresh optimiser and history: a Hugging Face model folder "
                    "or hub id (fine-tuning: learning rate 5e-5 and batch 16 unless given), a checkpoint or a d2l file")
        ->type_name("MODEL")
        ->group("output");
    app->add_option("--source-lang", o->source_lang,
                    "a multilingual pretrained model's source language to fine-tune on (M2M100 en, NLLB eng_Latn, mBART-50 "
                    "en_XX; default: its tokenizer_config.json's src_lang); saved with the model")
        ->type_name("LANG")
        ->group("output");
    app->add_option("--target-lang", o->target_lang,
                    "its target language (fr, fra_Latn, fr_XX; default: tokenizer_config.json's tgt_lang); saved with the model")
        ->type_name("LANG")
        ->group("output");
    app->add_flag("--json", o->json, "print the final metrics as one JSON object on stdout")->group("output");
    app->add_flag("-q,--quiet", o->quiet, "no progress on stderr")->group("output");
    app->add_option("--memory-log", o->memory_log, "soak tests: memory figures every 10 s as JSON lines")
        ->type_name("FILE")
        ->group("");  // hidden from --help: a measuring aid (tools/soak.sh)
    return {app, [o] { return run_train(*o); }, /*trains=*/true};
}

}  // namespace attnviz::cli
