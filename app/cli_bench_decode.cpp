// attnviz-cli bench-decode: what the "why this word" records cost at decoding
// time -- greedy vs greedy with top-k, beam search vs beam search with its tree
// or with top-k -- on a checkpoint and a corpus's source sentences. Prints JSON.

#include <algorithm>
#include <chrono>
#include <iostream>

#include "app/cli_bench_report.hpp"
#include "app/cli_common.hpp"
#include "app/cli_decode.hpp"
#include "core/persist/model_file.hpp"
#include "core/decode/beam_tree.hpp"
#include "core/io/error.hpp"
#include "core/decode/translation_model.hpp"

namespace attnviz::cli {

namespace {

struct BenchDecodeOptions {
    std::string model, device = "cpu";
    CorpusFlags corpus;
    size_t sentences = 200;
    int64_t beam = 4, topk = 5, repeat = 5, max_length = 30, batch = 64;
    MaskHeadsFlag mask;        ///< --mask-heads: decoding timed with those heads off
    PrecisionFlag precision;   ///< --precision: decoding timed with int8 / bf16 weights
    int64_t fixed_length = 0;  ///< > 0: every output exactly this long (no <eos> before), so untrained models time alike
    std::vector<std::string> only;  ///< --runs: the runs timed (empty: all five)
};

struct Run {
    std::string name, baseline;  ///< baseline: the run it adds to ("" for none)
    DecodeOptions options;
    std::vector<double> seconds;
    int64_t tree_nodes = 0;
};

int run_bench_decode(BenchDecodeOptions& o) {
    // The kernels for the smallest products timed: the batch's rows of a greedy run.
    o.precision.rows = std::min<int64_t>(o.batch, static_cast<int64_t>(o.sentences));
    TranslationModelPtr model = o.precision.load(o.model, o.device);
    o.mask.apply(*model);
    const bool pretrained = model->tokenizer().pretrained() != nullptr;
    Corpus corpus = load_corpus_for(o.corpus, *model, false);
    if (corpus.level != model->level())
        throw UsageError("the model works on " + level_noun(model->level()) +
                         " but the corpus is tokenised differently (see --level)");
    std::vector<std::vector<std::string>> sources;
    for (const auto& p : corpus.pairs) {
        if (sources.size() >= o.sentences) break;
        sources.push_back(pretrained ? p.src : model->tokenizer().split_words(p.src));  // subword: the model's pieces
    }
    if (sources.empty()) throw ConfigError(corpus.name + ": no sentences to decode");

    DecodeOptions base = model->decode_defaults();  // a pretrained model's generate() rules
    base.max_length = o.max_length;
    base.batch_size = o.batch;
    if (o.fixed_length > 0) {
        base.max_length = o.fixed_length;
        base.generation.min_length = o.fixed_length + 1;  // <eos> barred before the last step (start token counted)
        base.generation.forced_last = -1;
        base.generation.early_stopping = 2;  // a beam search that stops only at the length limit
    }
    auto run = [&](std::string name, std::string baseline, int64_t beam, int64_t topk, bool tree) {
        Run r;
        r.name = std::move(name);
        r.baseline = std::move(baseline);
        r.options = base;
        r.options.beam_size = beam;
        r.options.top_k = topk;
        r.options.beam_tree = tree;
        return r;
    };
    const std::string beam = "beam" + std::to_string(o.beam);
    std::vector<Run> runs{run("greedy", "", 1, 0, false), run("greedy+topk", "greedy", 1, o.topk, false),
                          run(beam, "", o.beam, 0, false), run(beam + "+tree", beam, o.beam, 0, true),
                          run(beam + "+topk", beam, o.beam, o.topk, false)};
    if (!o.only.empty()) {
        for (const auto& name : o.only)
            if (std::none_of(runs.begin(), runs.end(), [&](const Run& r) { return r.name == name; }))
                throw UsageError("--runs: no run named '" + name + "' (greedy, greedy+topk, " + beam + ", " + beam +
                                 "+tree, " + beam + "+topk)");
        // A run kept without the run it adds to loses its overhead, not its times.
        runs.erase(std::remove_if(runs.begin(), runs.end(),
                                  [&](const Run& r) { return std::find(o.only.begin(), o.only.end(), r.name) == o.only.end(); }),
                   runs.end());
        for (auto& r : runs)
            if (std::none_of(runs.begin(), runs.end(), [&](const Run& x) { return x.name == r.baseline; })) r.baseline.clear();
    }
    // One untimed round, then rounds in turn so that drifts of the machine hit every run alike.
    for (int64_t round = 0; round <= o.repeat; ++round)
        for (auto& r : runs) {
            const auto t0 = std::chrono::steady_clock::now();
            auto ts = model->translate_tokens(sources, r.options);
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (round == 0) {
                for (const auto& t : ts) r.tree_nodes += t.beam_tree ? static_cast<int64_t>(t.beam_tree->nodes.size()) : 0;
                continue;
            }
            r.seconds.push_back(s);
        }

    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : runs) {
        const double m = median(r.seconds);
        const double fastest = *std::min_element(r.seconds.begin(), r.seconds.end());
        nlohmann::json j{{"name", r.name},
                         {"median_seconds", m},
                         {"ms_per_sentence", 1000.0 * m / static_cast<double>(sources.size())},
                         {"min_seconds", fastest},
                         {"seconds", r.seconds},
                         {"sentences_per_second", m > 0 ? double(sources.size()) / m : 0.0},
                         {"decode", r.options.to_json()}};
        if (!r.baseline.empty()) {
            const auto& b = *std::find_if(runs.begin(), runs.end(), [&](const Run& x) { return x.name == r.baseline; });
            j["overhead_vs"] = r.baseline;
            j["overhead"] = median(b.seconds) > 0 ? m / median(b.seconds) - 1.0 : 0.0;
            // The fastest rounds, less disturbed by other load on the machine.
            const double b_fastest = *std::min_element(b.seconds.begin(), b.seconds.end());
            j["overhead_of_min"] = b_fastest > 0 ? fastest / b_fastest - 1.0 : 0.0;
        }
        if (r.options.beam_tree) j["tree_nodes"] = r.tree_nodes;
        out.push_back(std::move(j));
    }
    nlohmann::json report = bench_environment(*model, o.repeat);
    report.update({{"runs", out},
                   {"sentences", sources.size()},
                   {"corpus", corpus.name},
                   {"parameters", model->parameter_count()},
                   {"precision", precision_of(*model)}});
    if (const auto k = int8_kernels_text(*model); !k.empty()) report["int8_kernels"] = k;
    std::cout << report.dump() << std::endl;
    return exit_ok;
}

}  // namespace

Command add_bench_decode_command(CLI::App& parent) {
    auto o = std::make_shared<BenchDecodeOptions>();
    CLI::App* app = parent.add_subcommand(
        "bench-decode", "Time decoding with and without top-k and the beam tree on a checkpoint; prints JSON");
    app->footer(
        "Decodes the source side of the first --sentences pairs of the corpus in five ways: greedy,\n"
        "greedy with --topk, beam search, beam search recording its tree, beam search with --topk;\n"
        "after one untimed round, --repeat rounds in turn (--runs picks some of them). Each run reports its median and fastest\n"
        "seconds and, against the run it adds to, \"overhead\" (of the medians; 0.10 = 10% slower)\n"
        "and \"overhead_of_min\" (of the fastest rounds). Example:\n"
        "  attnviz-cli --threads 2 bench-decode --model m.ckpt --data ../shared/data/tatoeba-eng-fra-5000.tsv");
    app->add_option("--model", o->model, "checkpoint written by train --save")->type_name("FILE")->required();
    o->corpus.add_to(*app, true);
    app->add_option("--sentences", o->sentences, "source sentences decoded per run (the corpus's first)")
        ->type_name("INT")->default_str("200")->check(positive_int());
    app->add_option("--beam", o->beam, "beam width of the beam runs")->type_name("INT")->default_str("4")
        ->check(CLI::Range(int64_t{2}, int64_t{100}));
    app->add_option("--topk", o->topk, "candidates per step of the top-k runs")->type_name("INT")->default_str("5")
        ->check(CLI::Range(int64_t{1}, int64_t{100}));
    app->add_option("--repeat", o->repeat, "timed rounds")->type_name("INT")->default_str("5")->check(positive_int());
    app->add_option("--max-length", o->max_length, "maximum output tokens per sentence")
        ->type_name("INT")->default_str("30")->check(positive_int());
    app->add_option("--fixed-length", o->fixed_length,
                    "every output exactly N tokens (no <eos> before): untrained models decode as long as trained ones")
        ->type_name("N")->check(CLI::Range(int64_t{1}, max_decode_length));
    app->add_option("--decode-batch,--batch", o->batch, "sentences decoded together")->type_name("INT")->default_str("64")
        ->check(positive_int());
    app->add_option("--device", o->device, "auto | cpu | cuda | cuda:N")->type_name("NAME")->default_str("cpu");
    app->add_option("--runs", o->only, "time only these runs (comma-separated names as the JSON gives them, e.g. greedy,beam4)")
        ->type_name("LIST")->delimiter(',');
    o->mask.add_to(*app);
    o->precision.add_to(*app);
    return {app, [o] { return run_bench_decode(*o); }};
}

}  // namespace attnviz::cli
