// attnviz-cli bench: d2l's Bahdanau configuration (or with --arch transformer, d2l's
// Transformer) on the d2l data, timed, with d2l's four sample sentences and their
// BLEU (k=2). JSON keys follow ../shared/bench/d2l_reference.py (and
// d2l_transformer_reference.py) so the two outputs compare side by side.
#include <ATen/Parallel.h>

#include <chrono>
#include <iostream>

#include "app/cli_common.hpp"
#include "core/io/message.hpp"
#include "core/session/session.hpp"
#include "core/model/device.hpp"
#include "core/io/error.hpp"
#include "core/analysis/metrics.hpp"
#include "core/config/registry.hpp"
#include "core/model/families.hpp"
#include "core/model/mkl_dispatch.hpp"
#include "core/train/precision.hpp"

namespace attnviz::cli {

namespace {

struct BenchOptions {
    std::string data, save;
    size_t num_train = 512, num_val = 128;
    SettingFlags settings;
    bool quiet = false;
};

/// What `bench` trains unless flags say otherwise: d2l 1.0.3's configuration (seed 003)
/// from the registry's d2l values (GRU, additive attention, 256 wide, 2 layers, dropout 0.2,
/// Adam at 0.005, batch 128, 30 epochs, min_freq 2, d2l's split and vocabularies), or for
/// the Transformer d2l's (256 wide, 2 blocks, 4 heads, feed-forward 64, dropout 0.2, Adam
/// at 0.001; d2l_transformer_hyperparameters), and:
void d2l_config(ModelConfig& m, TrainConfig& t, ModelArch arch = ModelArch::rnn) {
    const Hyperparameters d2l = arch == ModelArch::transformer ? d2l_transformer_hyperparameters() : d2l_hyperparameters();
    m = d2l.model;
    t = d2l.train;
    // d2l pads/truncates to 9 steps; none of the first 640 pairs is longer than 9
    // tokens, so natural lengths with bucketing see the same tokens, only faster.
    // --steps 9 --bucket-window 0 reproduces d2l's batches exactly.
    m.source_steps = 0;
    t.fixed_steps = 0;
    t.bucket_window = 20;
    t.eval_sample = 0;  // d2l measures only the validation loss each epoch
}

const char* const d2l_sources[] = {"go .", "i lost .", "he's calm .", "i'm home ."};
const char* const d2l_references[] = {"va !", "j'ai perdu .", "il est calme .", "je suis chez moi ."};

/// Greedy translations of d2l's four sentences (d2l's predict_step: at most num_steps
/// tokens) with d2l's BLEU; their mean in *mean.
nlohmann::json d2l_samples(const TranslationModel& model, const DecodeOptions& d, bool print, double* mean) {
    std::vector<std::string> sources(std::begin(d2l_sources), std::end(d2l_sources));
    std::vector<Translation> ts = model.translate(sources, d);
    nlohmann::json samples = nlohmann::json::array();
    double bleu_sum = 0;
    for (size_t i = 0; i < ts.size(); ++i) {
        std::string pred = ts[i].empty() ? "" : ts[i].best().text;
        double b = pred.empty() ? 0.0 : d2l_bleu(pred, d2l_references[i], 2);
        bleu_sum += b;
        samples.push_back({{"src", sources[i]}, {"pred", pred}, {"ref", d2l_references[i]}, {"bleu", b}});
        if (print) std::cerr << sources[i] << " => " << pred << ", bleu " << fixed(b, 3) << "\n";
    }
    *mean = ts.empty() ? 0.0 : bleu_sum / double(ts.size());
    return samples;
}

/// The same weights decoding as d2l's predict_step does (ModelConfig::d2l_decode_positions).
TranslationModelPtr with_d2l_positions(const TranslationModel& model) {
    ModelConfig c = model.config();
    c.d2l_decode_positions = true;
    Network network = build_network(c);
    copy_weights(*network, *model.network());
    return std::make_shared<const TranslationModel>(network, model.src_vocab_ptr(), model.tgt_vocab_ptr(),
                                                    model.tokenizer_ptr());
}

int run_bench(BenchOptions& o) {
    ModelConfig m;
    TrainConfig t;
    {
        ModelConfig asked;  // --arch picks the d2l configuration the other flags change
        TrainConfig unused;
        o.settings.apply(asked, unused);
        d2l_config(m, t, asked.arch);
    }
    for (const char* name : {"val-fraction", "split-shuffle"})
        if (o.settings.given(name))
            throw UsageError(std::string("bench: --") + name +
                             " does not apply; it splits as d2l does, set by --num-train and --num-val");
    o.settings.apply(m, t);
    m.seed = t.seed;
    t.validate();
    m.validate();
    torch::Device device = resolve_device(t.device);
    if (!o.save.empty()) check_writable("--save", o.save);

    // d2l's data: the first num_train + num_val pairs in file order (first two
    // columns, word level), train first; one vocabulary per side over all of them.
    TsvOptions tsv;
    tsv.max_pairs = o.num_train + o.num_val;
    Corpus corpus = read_tsv(o.data, tsv);
    if (corpus.pairs.size() <= o.num_train)
        throw FileError(o.data + ": has " + std::to_string(corpus.pairs.size()) + " pairs, bench needs more than " +
                        std::to_string(o.num_train));
    // The core's preparation does d2l's split when told to keep file order
    // (split_shuffle = false, set by d2l_config): the first num_train pairs train.
    t.val_fraction = double(corpus.pairs.size() - o.num_train) / double(corpus.pairs.size());  // also recorded in the checkpoint
    size_t longer_than_steps = 0;  // pairs d2l's 9 steps would truncate
    for (const auto& p : corpus.pairs)
        if (p.src.size() + 1 > 9 || p.tgt.size() + 1 > 9) ++longer_than_steps;

    ProgressPrinter progress(t.epochs, o.quiet);
    progress.on_ready = [&](const SessionInfo& info) {
        if (!o.quiet)
            std::cerr << escape_controls(info.describe_data()) << "\n"
                      << info.parameters << " parameters, " << info.device << ", " << at::get_num_threads()
                      << " threads\n";
    };
    set_signal_mode(SignalMode::defer);  // signals wait for the final save (cli_signals.hpp)
    TrainingSession session(&progress);
    auto t0 = std::chrono::steady_clock::now();
    session.start(std::make_shared<const Corpus>(std::move(corpus)), m, t);
    PeriodicSave periodic(session, progress, o.save, t.checkpoint_every_minutes);
    StopReason reason = wait_with_interrupt(session, [&periodic] { periodic.tick(); });
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (reason == StopReason::error || reason == StopReason::diverged) throw TrainingError(session.message());
    if (!o.save.empty()) session.save(o.save);
    const SessionInfo info = session.info().value();

    // d2l's predict_step: greedy, at most num_steps tokens.
    DecodeOptions d;
    d.max_length = t.fixed_steps > 0 ? t.fixed_steps : 9;
    double mean_bleu = 0;
    const TranslationModelPtr model = session.model();
    nlohmann::json samples = d2l_samples(*model, d, !o.quiet, &mean_bleu);
    nlohmann::json d2l_positions;  // a Transformer also as d2l's predict_step decodes (every token at position 0)
    if (m.is_transformer()) {
        double mean = 0;
        if (!o.quiet) std::cerr << "decoding as d2l's predict_step does (every output token at position 0):\n";
        d2l_positions = {{"samples", d2l_samples(*with_d2l_positions(*model), d, !o.quiet, &mean)}};
        d2l_positions["mean_bleu"] = mean;
    }

    const TrainHistory h = session.history();
    double tokens = progress.tokens_trained();
    nlohmann::json j;
    j["train_seconds"] = seconds;
    j["target_tokens"] = int64_t(tokens);
    j["tokens_per_second"] = seconds > 0 ? tokens / seconds : 0.0;  // validation included, as d2l times it
    j["batch_tokens_per_second"] = progress.batch_tokens_per_second();
    j["last_val_loss"] = h.epochs.empty() ? nlohmann::json(nullptr) : number_or_null(h.epochs.back().val_loss);
    j["last_train_loss"] = h.epochs.empty() ? nlohmann::json(nullptr) : number_or_null(h.epochs.back().train_loss);
    j["val_bleu"] = h.epochs.empty() ? nlohmann::json(nullptr) : number_or_null(h.epochs.back().val_bleu);
    j["epochs"] = h.epochs_done;
    j["stop_reason"] = to_string(reason);
    j["src_vocab"] = info.src_vocab;
    j["tgt_vocab"] = info.tgt_vocab;
    j["num_train"] = info.train_pairs;
    j["num_val"] = info.val_pairs;
    j["mean_bleu"] = mean_bleu;
    j["samples"] = samples;
    if (!d2l_positions.is_null()) j["d2l_decode_positions"] = d2l_positions;
    j["device"] = describe_device(device);
    j["threads"] = at::get_num_threads();
    j["torch"] = libtorch_version();
    j["mkl_code_path"] = mkl_code_path();  // MKL's kernels (mkl_dispatch.hpp)
    j["precision"] = to_string(t.precision);
    j["cpu_bf16_hardware"] = cpu_bf16_hardware();
    j["cpu_subnormals_flushed"] = ScopedFlushDenormal::supported();  // training's CPU threads (core/train/precision.hpp)
    j["pipeline"] = {{"steps", t.fixed_steps},
                     {"bucket_window", t.bucket_window},
                     {"pairs_longer_than_9_tokens", longer_than_steps},
                     {"vocab", "min_freq " + std::to_string(t.min_freq) + " over train+val (d2l)"}};
    j["model"] = info.model.to_json();
    j["train"] = t.to_json();
    j["saved"] = o.save.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.save);
    std::cout << j.dump() << std::endl;
    return reason == StopReason::stopped && interrupted() ? exit_interrupted : exit_ok;
}

}  // namespace

Command add_bench_command(CLI::App& parent) {
    auto o = std::make_shared<BenchOptions>();
    CLI::App* app = parent.add_subcommand(
        "bench", "Time d2l's Bahdanau configuration (--arch transformer: d2l's Transformer) on a TSV file; prints JSON");
    app->footer(
        "Data as d2l: the first --num-train + --num-val pairs in file order, vocabularies with min_freq 2\n"
        "over all of them. By default batches use natural lengths with bucketing (same tokens as d2l's\n"
        "9 padded steps on this data, faster); --steps 9 --bucket-window 0 gives d2l's padded batches.\n"
        "--arch transformer starts from d2l's Transformer instead (width 256, 2 blocks, 4 heads,\n"
        "feed-forward 64, dropout 0.2, Adam at 0.001); its samples are also decoded as d2l's\n"
        "predict_step does (\"d2l_decode_positions\": every output token at position 0).\n"
        "Output keys follow ../shared/bench/d2l_reference.py. Examples:\n"
        "  attnviz-cli bench --data ../shared/data/tatoeba-eng-fra-5000.tsv\n"
        "  attnviz-cli bench --arch transformer --data ../shared/data/tatoeba-eng-fra-5000.tsv");
    app->add_option("--data", o->data, "Tatoeba-style TSV file")->type_name("FILE")->required()->group("data");
    app->add_option("--num-train", o->num_train, "training pairs (first in the file)")
        ->type_name("INT")->default_str("512")->check(positive_int())->group("data");
    app->add_option("--num-val", o->num_val, "validation pairs (those after the training pairs)")
        ->type_name("INT")->default_str("128")->check(positive_int())->group("data");
    ModelConfig m;
    TrainConfig t;
    d2l_config(m, t);
    o->settings.add_to(*app, m, t, "");
    app->add_option("--save", o->save, "keep the trained model as a checkpoint")->type_name("FILE")->group("output");
    app->add_flag("-q,--quiet", o->quiet, "no progress on stderr")->group("output");
    return {app, [o] { return run_bench(*o); }, /*trains=*/true};
}

}  // namespace attnviz::cli
