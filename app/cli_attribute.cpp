// attnviz-cli attribute and agreement: "is attention an explanation?" -- per output
// step, which source tokens mattered by four attribution methods beside the attention
// (attribute), and how far they agree over a corpus (agreement, Jain & Wallace's table).

#include <algorithm>
#include <chrono>
#include <iostream>
#include <sstream>

#include "app/cli_bench_report.hpp"
#include "app/cli_common.hpp"
#include "app/cli_decode.hpp"
#include "core/analysis/attribution.hpp"
#include "core/analysis/corpus_agreement.hpp"
#include "core/analysis/erasure.hpp"
#include "core/analysis/web_page.hpp"
#include "core/config/model_description.hpp"
#include "core/io/atomic_file.hpp"
#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/model/memory_cost.hpp"
#include "core/model/work_cost.hpp"

namespace attnviz::cli {

namespace {

/// --method NAME (repeatable, or comma-separated; "all": the four) -> the methods. Every name
/// is checked, "all" among them too (method_check() has already, as CLI11 parsed them).
std::vector<AttributionMethod> parse_methods(const std::vector<std::string>& names,
                                             const std::vector<AttributionMethod>& fallback) {
    if (names.empty()) return fallback;
    std::vector<AttributionMethod> methods;
    bool all = false;
    for (const auto& list : names) {
        if (list.empty()) throw UsageError("--method: expected a method name, got ''");
        std::stringstream in(list);
        for (std::string name; std::getline(in, name, ',');) {
            if (name == "all") {
                all = true;
                continue;
            }
            try {
                methods.push_back(attribution_method_from_string(name));
            } catch (const ConfigError& e) {
                throw UsageError(std::string("--method: ") + e.what());
            }
        }
    }
    return all ? all_attribution_methods() : methods;
}

/// --method's values checked as CLI11 reads them: a wrong name is one usage line before any work.
CLI::Validator method_check() {
    return CLI::Validator(
        [](std::string& value) {
            try {
                parse_methods({value}, {});
            } catch (const UsageError& e) {
                return std::string(e.what()).substr(std::string("--method: ").size());
            }
            return std::string();
        },
        "");
}

struct AttributeOptions {
    std::string model, out, html_out;
    std::vector<std::string> sentences, methods, contrast;
    int64_t ig_steps = 0, topk = 0;  // ig_steps 0: automatic
    bool no_target = false;
    bool erasure = false;       ///< --erasure: flip curves (Serrano & Smith) per sentence
    uint64_t erasure_seed = 1;  ///< --erasure-seed: the random order's seed
    DecodeFlags decode;
    MaskHeadsFlag mask;  ///< --mask-heads
    PrecisionFlag precision;  ///< --precision
};

/// --contrast STEP:TOKEN -> step -> token.
std::map<int64_t, std::string> parse_contrast(const std::vector<std::string>& given) {
    std::map<int64_t, std::string> out;
    for (const auto& c : given) {
        const auto colon = c.find(':');
        size_t used = 0;
        long long step = -1;
        try {
            step = colon == std::string::npos ? -1 : std::stoll(c.substr(0, colon), &used);
        } catch (const std::exception&) {
            step = -1;
        }
        if (colon == std::string::npos || used != colon || step < 0 || colon + 1 >= c.size())
            throw UsageError("--contrast: expected STEP:TOKEN (a 0-based output step and a target token), got " +
                             quote(c));
        out[step] = c.substr(colon + 1);
    }
    return out;
}

int run_attribute(AttributeOptions& o) {
    TranslationModelPtr loaded = o.precision.load(o.model, o.decode.device);
    o.mask.apply(*loaded);
    DecodeOptions d = o.decode.options(*loaded);
    d.num_hypotheses = 1;
    d.top_k = o.topk;
    AttributionOptions a;
    a.methods = parse_methods(o.methods, all_attribution_methods());
    a.ig_steps = o.ig_steps;
    a.target = !o.no_target;
    a.contrast = parse_contrast(o.contrast);
    if (!o.out.empty()) check_writable("--out", o.out);
    if (!o.html_out.empty()) check_writable("--html-out", o.html_out);
    ErasureOptions e;
    e.seed = o.erasure_seed;
    e.memory_bound = a.memory_bound;  // the bound attribution works in, as agreement --erasure
    if (o.erasure) e.validate();
    TranslationModelPtr model = loaded;
    const auto sentences = read_sentences(o.sentences);
    std::vector<Translation> translations;
    // Progress on stderr where the attribution is long (past a tenth of the work bound), per
    // sentence and method (the whole command's work is counted and held to the bound first).
    size_t current = 0, count = 0;
    a.on_method = [&](AttributionMethod m) {
        if (count > 0) std::cerr << "attnviz-cli: sentence " << current + 1 << " of " << count << ": " << cli_name(m) << std::endl;
    };
    PassProgress within;
    a.on_pass = [&](AttributionMethod m, int64_t points, double done) {
        if (count > 0)
            within("attnviz-cli: sentence " + std::to_string(current + 1) + " of " + std::to_string(count), m, points, done);
    };
    const auto on_sentence = [&](size_t i, size_t n) {
        current = i;
        count = n;
    };
    const auto results = attribute_sentences(*model, sentences, a, d, o.erasure ? &translations : nullptr, on_sentence);
    a.on_method = nullptr;
    a.on_pass = nullptr;
    if (o.erasure) check_erasure_fits(*model, translations, e);  // before any sentence is erased
    std::vector<SentenceErasure> erasures;
    // The gradient orders read the attributions just made (no second gradient pass), unless a
    // contrast changed what some step's attribution explains.
    for (size_t i = 0; i < translations.size(); ++i)
        erasures.push_back(erase_sentence(*model, translations[i], e, i, a.contrast.empty() ? &results[i] : nullptr));
    nlohmann::json all = nlohmann::json::array();
    for (size_t i = 0; i < results.size(); ++i) {
        nlohmann::json j = to_json(results[i]);
        j["sentence"] = i;
        j["precision"] = precision_of(*model);  // the weights the maps and attributions came from
        if (i < erasures.size()) j["erasure"] = erasures[i].to_json();
        all.push_back(std::move(j));
    }
    if (!o.html_out.empty()) {
        WebPageOptions page;
        page.model = o.model + ": " + describe_model(model->config());
        page.memory_bound = a.memory_bound;
        write_file_atomic(o.html_out, web_page(results, page, {}, erasures));
    }
    if (o.out.empty()) {
        std::cout << all.dump(1) << std::endl;
        return exit_ok;
    }
    write_file_atomic(o.out, all.dump(1) + "\n");
    for (const auto& r : results) std::cout << r.text << "\n";
    std::cout << std::flush;
    return exit_ok;
}

struct AgreementOptions {
    std::string model, split = "val", out;
    std::vector<std::string> methods;
    int64_t ig_steps = 0;  // automatic
    size_t max_sentences = 0;
    bool json = false;
    bool erasure = false;       ///< --erasure: flip curves (Serrano & Smith)
    uint64_t erasure_seed = 1;  ///< --erasure-seed: the random order's seed
    CorpusFlags corpus;
    DecodeFlags decode;
    MaskHeadsFlag mask;  ///< --mask-heads
    PrecisionFlag precision;  ///< --precision
};

int run_agreement(AgreementOptions& o) {
    CorpusAgreementOptions c;
    c.attribution.methods = parse_methods(o.methods, c.attribution.methods);
    c.attribution.ig_steps = o.ig_steps;
    TranslationModelPtr model = o.precision.load(o.model, o.decode.device);
    o.mask.apply(*model);
    c.decode = o.decode.options(*model);
    c.decode.num_hypotheses = 1;
    c.max_sentences = o.max_sentences;
    c.erasure = o.erasure;
    c.erasure_options.seed = o.erasure_seed;
    c.erasure_options.memory_bound = c.attribution.memory_bound;
    if (!o.out.empty()) check_writable("--out", o.out);
    const Corpus corpus = load_corpus_for(o.corpus, *model);
    std::vector<std::vector<std::string>> sources;
    for (const auto& p : evaluation_pairs(*model, corpus, o.split)) sources.push_back(p.src);
    SignalScope signals(SignalMode::graceful);  // Ctrl+C: stop after the current sentence, report what was done
    const CorpusAgreement result = corpus_agreement(*model, sources, c, [](size_t, size_t) { return !interrupted(); });
    nlohmann::json j = result.to_json();
    j["corpus"] = corpus.name;
    j["split"] = o.split;
    j["model"] = o.model;
    j["precision"] = precision_of(*model);
    if (!o.out.empty()) write_file_atomic(o.out, j.dump(1) + "\n");
    if (o.json) {
        j.erase("sentences");  // per sentence: --out
        std::cout << j.dump() << std::endl;
    } else {
        std::cout << escape_controls(corpus.name) << ": " << result.sentences.size() << " sentences (split " << o.split << "), "
                  << fixed(result.seconds, 1) << " s\n"
                  << result.table.to_text();
        if (result.erasure) std::cout << "\n" << result.erasure->to_text();
    }
    return interrupted() ? interrupt_exit_code() : exit_ok;
}

struct BenchAttributeOptions {
    std::string model, sentence, device = "cpu";
    CorpusFlags corpus;
    size_t words = 10;
    int64_t repeat = 5, ig_steps = 0;  // ig_steps 0: automatic
};

int run_bench_attribute(BenchAttributeOptions& o) {
    TranslationModelPtr model = load_model_on(o.model, o.device);
    std::vector<std::string> source;
    if (!o.sentence.empty()) {
        source = model->tokenizer().encode(o.sentence, true);
    } else {
        if (!o.corpus.given()) throw UsageError("give a SENTENCE or a corpus (--task / --data) to pick one from");
        for (const auto& p : o.corpus.load(false).pairs)
            if (p.src.size() == o.words) {
                source = model->tokenizer().split_words(p.src);
                break;
            }
        if (source.empty()) throw ConfigError("the corpus has no source sentence of " + std::to_string(o.words) + " tokens");
    }
    DecodeOptions d;
    d.maps = MapsKept::primary;  // what attribution reads
    const Translation t = model->translate_tokens({source}, d).at(0);
    if (t.empty()) throw ConfigError("the sentence is empty");
    AttributionOptions every;
    every.methods = all_attribution_methods();
    every.ig_steps = o.ig_steps;
    check_attribution_fits(*model, {t}, every);  // within the memory bound, or refused before any run
    struct Run {
        std::string name;
        std::vector<AttributionMethod> methods;
        std::vector<double> ms;
        int64_t work = 0;  ///< one attribute() call's committed operations
    };
    std::vector<Run> runs{{"saliency+grad_input", {AttributionMethod::saliency, AttributionMethod::grad_input}, {}},
                          {"integrated_gradients", {AttributionMethod::integrated_gradients}, {}},
                          {"occlusion", {AttributionMethod::occlusion}, {}},
                          {"all", all_attribution_methods(), {}}};
    // The whole command within the work bound (issue 46: one 300-word sentence took 78.5 s, each
    // of its 24 attributions within the bound): every run of every round counted before any.
    const int64_t rounds = o.repeat + 1;
    int64_t round_work = 0;
    for (auto& r : runs) {
        AttributionOptions a = every;
        a.methods = r.methods;
        r.work = count_attribution_work(*model, {t}, a).total;
        round_work = bytes_plus(round_work, r.work);
    }
    const int64_t bound = work_bound(), total = bytes_times(rounds, round_work);
    if (total > bound) {
        const int64_t fitting = round_work > 0 ? bound / round_work - 1 : 0;  // timed rounds beside the untimed one
        throw ConfigError("bench-attribute: " + std::to_string(rounds) + " rounds (one untimed, --repeat " +
                          std::to_string(o.repeat) + ") of the four runs of a sentence of " +
                          std::to_string(t.src_tokens.size()) + " source and " + std::to_string(t.best().ids.size()) +
                          " output tokens would take about " + work_text(total) + " (" + work_text(round_work) +
                          " a round), more than the " + work_text(bound) +
                          " a command's attribution may take (ATTNVIZ_WORK_BOUND); " +
                          (fitting >= 1 ? "use --repeat " + std::to_string(fitting) + " or less, or a shorter sentence"
                                        : "use a shorter sentence (or fewer --ig-steps)"));
    }
    // What the bound leaves beside the runs, shared out: automatic integrated gradients' points.
    const int64_t spare = (bound - total) / (rounds * static_cast<int64_t>(runs.size()));
    const bool progress = total > bound / 10;
    int64_t ig_used = 0;  // the points integrated gradients took (the most of any step)
    double ig_error = 0;  // and its largest relative completeness error
    // One untimed round, then rounds in turn so that drifts of the machine hit every run alike.
    for (int64_t round = 0; round <= o.repeat; ++round)
        for (auto& r : runs) {
            AttributionOptions a;
            a.methods = r.methods;
            a.ig_steps = o.ig_steps;
            a.work_bound = std::max<int64_t>(bytes_plus(r.work, spare), 1);
            if (progress)
                std::cerr << "attnviz-cli: bench-attribute: round " << round + 1 << " of " << rounds << ": " << r.name
                          << std::endl;
            const auto t0 = std::chrono::steady_clock::now();
            const SentenceAttribution result = attribute(*model, t, a);
            const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            if (round > 0) r.ms.push_back(ms);
            if (result.ig_steps > 0) {
                ig_used = result.ig_steps;
                ig_error = result.ig_relative_error;
            }
        }
    nlohmann::json runs_json = nlohmann::json::array();
    for (const auto& r : runs)
        runs_json.push_back({{"name", r.name},
                             {"median_ms", median(r.ms)},
                             {"min_ms", *std::min_element(r.ms.begin(), r.ms.end())},
                             {"ms", r.ms}});
    nlohmann::json report = bench_environment(*model, o.repeat);
    report.update({{"runs", runs_json},
                   {"source_tokens", t.src_tokens.size()},
                   {"output_tokens", t.best().tokens.size()},
                   {"sentence", t.src_tokens},
                   {"ig_steps", o.ig_steps == 0 ? nlohmann::json("auto") : nlohmann::json(o.ig_steps)},
                   {"ig_steps_used", ig_used},
                   {"ig_relative_error", ig_error}});
    std::cout << report.dump() << std::endl;
    return exit_ok;
}

}  // namespace

Command add_attribute_command(CLI::App& parent) {
    auto o = std::make_shared<AttributeOptions>();
    CLI::App* app = parent.add_subcommand(
        "attribute", "Which source tokens mattered to each output token: four attribution methods beside attention");
    app->footer(
        "Translates each sentence (greedy unless --beam) and attributes every output step's log-probability\n"
        "to the source tokens (<eos> included) and the target prefix (<bos> and the tokens before it):\n"
        "saliency (L2 norm of the gradient over the embedding), grad-input (gradient x embedding, summed),\n"
        "integrated-gradients (from the zero embedding; baseline_log_prob and completeness_error per step)\n"
        "and occlusion (log p minus log p with the token replaced by <unk>, the same target prefix).\n"
        "Writes a JSON list, one entry per sentence: {input, source, output, text, methods, ig_steps, ig,\n"
        "steps: [{token, log_prob, attention, attributions: {method: [...]}, target_attributions,\n"
        "baseline_log_prob, completeness_error, sink_share, agreement: {method: {kendall_tau, top1}}}]}\n"
        "to --out (then stdout gets the translations) or stdout. Kendall's tau-b compares the attention\n"
        "row with |attribution|; top1: both pick the same source token.\n"
        "--erasure adds Serrano & Smith's flip curves to each sentence: at every output step, source\n"
        "positions erased from every cross map (the rest renormalised) in order of attention, |grad x input|,\n"
        "|integrated gradients| (the attribution's own, or 32 points when not computed) and at random\n"
        "(--erasure-seed), until the step's decision changes: \"erasure\": {steps: [{step, token, removals:\n"
        "{order: n|null}}], mean_removals, never}; --html-out shows it as a table per sentence. It costs S\n"
        "decoder steps per output step and order.");
    app->add_option("--model", o->model, "checkpoint written by train --save")->type_name("FILE")->required();
    app->add_option("sentences", o->sentences, "sentences (default: read stdin)")->type_name("SENTENCE");
    app->add_option("--method", o->methods, "saliency | grad-input | integrated-gradients | occlusion | all\n"
                                            "(repeat or separate with commas; default all)")
        ->type_name("NAME")->allow_extra_args(false)->check(method_check());  // one value each: the sentences follow
    add_ig_steps_option(*app, o->ig_steps, "integrated gradients' interpolation points");
    app->add_option("--contrast", o->contrast,
                    "STEP:TOKEN: at that output step attribute log p(output) - log p(TOKEN) (repeatable)")
        ->type_name("STEP:TOKEN")->allow_extra_args(false);
    app->add_flag("--no-target", o->no_target, "attribute to the source only, not the target prefix");
    app->add_option("--topk", o->topk, "per step, the K most probable tokens in the file")
        ->type_name("INT")->default_str("0")->check(CLI::Range(int64_t{0}, int64_t{100}));
    app->add_option("--out", o->out, "write the JSON here (stdout: the translations)")->type_name("FILE.json");
    app->add_option("--html-out", o->html_out, "also write the self-contained web page")->type_name("FILE");
    app->add_flag("--erasure", o->erasure, "also erasure flip curves per sentence (see below)");
    app->add_option("--erasure-seed", o->erasure_seed, "the random erasure order's seed")
        ->type_name("INT")->default_str("1");
    o->decode.add_to(*app, false);
    o->mask.add_to(*app);
    o->precision.add_to(*app);
    return {app, [o] { return run_attribute(*o); }};
}

Command add_agreement_command(CLI::App& parent) {
    auto o = std::make_shared<AgreementOptions>();
    CLI::App* app = parent.add_subcommand(
        "agreement", "How far attention and attribution agree over a corpus (Jain & Wallace's table)");
    app->footer(
        "Translates each source sentence of the corpus (greedy), attributes every step and compares:\n"
        "attention against each method and the methods against each other, by Kendall's tau-b over the\n"
        "source tokens (of |attribution|) and by whether both pick the same top token. Prints mean +- std\n"
        "and median tau-b, the top-1 agreement and the steps compared per pair; --json the same with\n"
        "quartiles and histograms; --out adds every sentence's own numbers. Methods default to saliency,\n"
        "grad-input and occlusion (integrated gradients costs --ig-steps gradient passes: ask for it).\n"
        "--erasure adds Serrano & Smith's flip curves: at every output step, source positions erased from\n"
        "every cross map (the rest renormalised) in order of attention, |grad x input|, |integrated\n"
        "gradients| (32 points) and at random, until the step's decision changes: removals per order per\n"
        "step (--out), their mean and median over the corpus, and how often attention's order flips first.\n"
        "It costs S decoder steps per output step and order, and integrated gradients' passes.");
    app->add_option("--model", o->model, "checkpoint written by train --save")->type_name("FILE")->required();
    o->corpus.add_to(*app, true);
    app->add_option("--split", o->split, "val | all")->type_name("NAME")->default_str("val")
        ->check(CLI::IsMember({"val", "all"}))->group("data");
    app->add_option("--max-sentences", o->max_sentences, "at most this many sentences (the first; 0: all)")
        ->type_name("INT")->default_str("0")->group("data");
    app->add_option("--method", o->methods, "saliency | grad-input | integrated-gradients | occlusion | all")
        ->type_name("NAME")->allow_extra_args(false)->check(method_check());
    add_ig_steps_option(*app, o->ig_steps, "integrated gradients' interpolation points");
    app->add_flag("--erasure", o->erasure, "also erasure flip curves (slow: see below)");
    app->add_option("--erasure-seed", o->erasure_seed, "the random erasure order's seed")
        ->type_name("INT")->default_str("1");
    app->add_flag("--json", o->json, "print the table as one JSON object")->group("output");
    app->add_option("--out", o->out, "write the table and every sentence's numbers here (JSON)")
        ->type_name("FILE.json")->group("output");
    o->decode.add_to(*app, false);
    o->mask.add_to(*app);
    o->precision.add_to(*app);
    return {app, [o] { return run_agreement(*o); }};
}

Command add_bench_attribute_command(CLI::App& parent) {
    auto o = std::make_shared<BenchAttributeOptions>();
    CLI::App* app = parent.add_subcommand("bench-attribute", "Time attribution of one sentence by each method; prints JSON");
    app->footer(
        "Translates the sentence (or the corpus's first source of --words tokens) and times attributing its\n"
        "output: saliency with gradient x input (one gradient pass), integrated gradients, occlusion, and all\n"
        "four; after one untimed round, --repeat rounds in turn; median and fastest milliseconds. Example:\n"
        "  attnviz-cli --threads 2 bench-attribute --model d2l.ckpt --data ../shared/data/tatoeba-eng-fra-5000.tsv");
    app->add_option("--model", o->model, "checkpoint written by train --save")->type_name("FILE")->required();
    app->add_option("sentence", o->sentence, "the sentence (default: one from the corpus)")->type_name("SENTENCE");
    o->corpus.add_to(*app, false);
    app->add_option("--words", o->words, "the corpus sentence's source tokens")->type_name("INT")->default_str("10");
    app->add_option("--repeat", o->repeat, "timed rounds")->type_name("INT")->default_str("5")->check(positive_int());
    add_ig_steps_option(*app, o->ig_steps, "integrated gradients' interpolation points");
    app->add_option("--device", o->device, "auto | cpu | cuda | cuda:N")->type_name("NAME")->default_str("cpu");
    return {app, [o] { return run_bench_attribute(*o); }};
}

}  // namespace attnviz::cli
