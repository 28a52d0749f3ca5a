// attnviz-cli heads: which heads matter -- every head's importance (Michel et al. 2019),
// confidence and role (Voita et al. 2019), sinks and alignment, over a corpus' pairs forced on
// their references (core/analysis/heads.hpp); --prune-curve masks more and more of them.
#include <cmath>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "app/cli_common.hpp"
#include "core/io/message.hpp"
#include "app/cli_decode.hpp"
#include "core/analysis/heads.hpp"
#include "core/analysis/prune_curve.hpp"
#include "core/io/atomic_file.hpp"
#include "core/io/error.hpp"
#include "core/text/pretrained_tokenizer.hpp"

namespace attnviz::cli {

namespace {

struct HeadsOptions {
    std::string model, split = "val", device = "cpu", out, csv;
    std::string source_lang, target_lang;  ///< a multilingual pretrained model's pair (its codes on the pairs)
    CorpusFlags corpus;
    MaskHeadsFlag mask;        ///< --mask-heads: measured with those heads off
    PrecisionFlag precision;   ///< --precision
    size_t sentences = 1000;   ///< the split's first N pairs
    int64_t batch = 64;        ///< pairs per batch (one backward pass each)
    bool json = false;
    bool prune_curve = false;  ///< --prune-curve
    int prune_seeds = 3;       ///< random orders of the curve
};

nlohmann::json number(double v) { return number_or_null(v); }

std::string cell(double v, int decimals) { return std::isfinite(v) ? fixed(v, decimals) : "-"; }

std::string table(const HeadReport& r) {
    std::ostringstream out;
    out << std::left << std::setw(13) << "kind" << std::right << std::setw(6) << "layer" << std::setw(5) << "head"
        << std::setw(11) << "importance" << std::setw(11) << "confidence" << std::setw(9) << "entropy"
        << std::setw(12) << "positional" << std::setw(7) << "rare" << std::setw(7) << "sink" << std::setw(7) << "aer"
        << "\n";
    for (const auto& h : r.heads) {
        std::string pos = "-";
        if (h.positional)
            pos = (h.positional->offset > 0 ? "+" : "") + std::to_string(h.positional->offset) + " " +
                  fixed(h.positional->share, 2) + (h.positional->positional() ? "*" : "");
        out << std::left << std::setw(13) << to_string(h.id.kind) << std::right << std::setw(6) << h.id.layer
            << std::setw(5) << h.id.head << std::setw(11) << cell(h.importance, 3) << std::setw(11)
            << cell(h.confidence, 3) << std::setw(9) << cell(h.entropy, 3) << std::setw(12) << pos << std::setw(7)
            << cell(h.rare_share, 2) << std::setw(7) << cell(h.sink_share, 2) << std::setw(7)
            << (h.aer ? cell(*h.aer, 3) : std::string("-")) << "\n";
    }
    return out.str();
}

int run_heads(HeadsOptions& o) {
    if (!o.csv.empty() && !o.prune_curve) throw UsageError("--csv writes the pruning curve: add --prune-curve");
    TranslationModelPtr model = o.precision.load(o.model, o.device);
    o.mask.apply(*model);  // measured with those heads off
    if (model->network()->head_groups().empty())
        throw UsageError("the model has no attention heads (an RNN without attention): nothing to measure");
    // The pairs are scored with their language codes, as eval's loss and fine-tuning have them.
    check_languages(*model, o.source_lang, o.target_lang);
    if (const auto& pt = model->tokenizer().pretrained(); pt && pt->kind() == PretrainedTokenizerKind::marian && !o.target_lang.empty())
        (void)pt->with_default_languages(o.source_lang, o.target_lang);  // a Marian model's >>fra<< is in the sources: says so
    Corpus corpus = load_corpus_for(o.corpus, *model);
    std::vector<SentencePair> pairs = evaluation_pairs(*model, corpus, o.split);
    if (pairs.size() > o.sentences) pairs.resize(o.sentences);

    HeadStatsOptions options;
    options.batch_size = o.batch;
    options.fixed_steps = model->trained_with().fixed_steps;
    options.source_lang = o.source_lang;
    options.target_lang = o.target_lang;
    // Rare words by the corpus's own counts, its source tokens as the model splits them (a word
    // the vocabulary left out is rarest).
    for (const auto& p : evaluation_pairs(*model, corpus, "all"))
        for (const auto& token : p.src) ++options.source_counts[token];
    const HeadReport report = head_stats(*model, pairs, options);

    nlohmann::json j;
    j["corpus"] = corpus.name;
    j["split"] = o.split;
    j["sentences"] = report.sentences;
    j["tokens"] = report.tokens;
    j["loss"] = number(report.loss);
    j["precision"] = precision_of(*model);
    if (!o.source_lang.empty()) j["source_lang"] = o.source_lang;
    if (!o.target_lang.empty()) j["target_lang"] = o.target_lang;
    j["importance_normalisation"] =
        "per kind and layer: the raw importances E|dL/dxi| divided by their L2 norm over the layer's heads "
        "(Michel et al. 2019)";
    if (o.mask.given()) j["mask_heads"] = o.mask.text;
    j["heads"] = heads_to_json(report.heads);

    std::vector<PrunePoint> curve;
    if (o.prune_curve) {
        PruneCurveOptions p;
        p.batch_size = o.batch;
        p.fixed_steps = options.fixed_steps;
        p.random_orders = o.prune_seeds;
        p.source_lang = o.source_lang;
        p.target_lang = o.target_lang;
        curve = prune_curve(*model, pairs, report, p);
        j["prune_curve"] = prune_curve_json(curve);
        if (!o.csv.empty()) write_file_atomic(o.csv, prune_curve_csv(curve));
    }
    if (!o.out.empty()) write_file_atomic(o.out, j.dump(2) + "\n");
    if (o.json) {
        std::cout << j.dump() << std::endl;
        return exit_ok;
    }
    std::cout << escape_controls(corpus.name) << " (" << report.sentences << " pairs, split " << o.split << "), loss "
              << cell(report.loss, 4) << (o.mask.given() ? ", masked: " + o.mask.text : std::string()) << "\n"
              << "importance: Michel's E|dL/dxi|, normalised per kind and layer (L2); positional: offset, share "
                 "(* at >= 0.9)\n"
              << table(report);
    if (o.prune_curve) {
        std::cout << "\npruning curve (loss / BLEU as heads are masked):\n";
        for (const auto& pt : curve)
            std::cout << "  " << std::left << std::setw(12) << pt.order << std::setw(14) << pt.kinds << std::right
                      << std::setw(5) << static_cast<int>(pt.fraction * 100 + 0.5) << "%" << std::setw(5)
                      << pt.heads_masked << "  loss " << cell(pt.loss, 4) << "  BLEU " << cell(pt.bleu, 2) << "\n";
    }
    return exit_ok;
}

}  // namespace

Command add_heads_command(CLI::App& parent) {
    auto o = std::make_shared<HeadsOptions>();
    CLI::App* app = parent.add_subcommand("heads", "Which attention heads matter: importance, confidence, roles");
    app->footer(
        "Over the pairs of --split (val: re-split as training did; all: every pair), teacher-forced on\n"
        "their references, for every head of every kind: importance (Michel et al. 2019: E|dL/dxi| of a\n"
        "gate xi on the head's output, one backward pass per batch, normalised per kind and layer by the\n"
        "L2 norm), confidence (Voita et al. 2019: mean max weight, <eos> keys excluded), mean entropy,\n"
        "positional role (self-attention: the argmax's most frequent relative offset and its share),\n"
        "rare_share (argmax on the sentence's rarest source token), sink_share, AER where gold alignments\n"
        "exist (built-in tasks). --prune-curve masks 0..90% of the heads in order of importance, of\n"
        "confidence and at random, re-measuring loss and BLEU (greedy). A multilingual model (M2M100,\n"
        "NLLB, mBART-50) is scored with its language codes, as eval and fine-tuning score it:\n"
        "--source-lang / --target-lang choose them (--target-lang is needed when its\n"
        "tokenizer_config.json names no tgt_lang).");
    app->add_option("--model", o->model, "checkpoint written by train --save")->type_name("FILE")->required();
    o->corpus.add_to(*app, true);
    app->add_option("--split", o->split, "val | all")->type_name("NAME")->default_str("val")
        ->check(CLI::IsMember({"val", "all"}))->group("data");
    app->add_option("--sentences", o->sentences, "measure the split's first N pairs")->type_name("N")
        ->default_str("1000")->check(positive_int())->group("data");
    app->add_option("--source-lang", o->source_lang,
                    "a multilingual pretrained model's source language (M2M100 en, NLLB eng_Latn, mBART-50 en_XX; "
                    "default: its tokenizer_config.json's src_lang)")
        ->type_name("LANG")->group("data");
    app->add_option("--target-lang", o->target_lang,
                    "its target language (fr, fra_Latn, fr_XX; default: tokenizer_config.json's tgt_lang, needed when "
                    "it names none)")
        ->type_name("LANG")->group("data");
    app->add_option("--batch", o->batch, "pairs per batch (one backward pass each)")->type_name("INT")
        ->default_str("64")->check(positive_int());
    app->add_option("--device", o->device, "auto | cpu | cuda | cuda:N")->type_name("NAME")->default_str("cpu");
    o->mask.add_to(*app);
    o->precision.add_to(*app);
    app->add_flag("--prune-curve", o->prune_curve,
                  "mask 0, 10, ..., 90% of the heads (all kinds, each kind) by importance, confidence, at random")
        ->group("pruning");
    app->add_option("--prune-seeds", o->prune_seeds, "random orders of the pruning curve")->type_name("N")
        ->default_str("3")->check(CLI::Range(0, 100))->group("pruning");
    app->add_option("--csv", o->csv, "also write the pruning curve as CSV")->type_name("FILE")->group("pruning");
    app->add_flag("--json", o->json, "print the report as one JSON object")->group("output");
    app->add_option("--out", o->out, "also write the JSON report to FILE")->type_name("FILE")->group("output");
    return {app, [o] { return run_heads(*o); }};
}

}  // namespace attnviz::cli
