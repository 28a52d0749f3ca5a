// attnviz-cli translate: a checkpoint applied to sentences -- translations, attention
// files, alignments, the beam tree, forced decoding, what-if interventions and the
// shareable web page. (eval: app/cli_eval.cpp.)
#include <cmath>
#include <iostream>

#include "app/cli_alignment.hpp"
#include "app/cli_common.hpp"
#include "app/cli_decode.hpp"
#include "core/analysis/attribution.hpp"
#include "core/persist/model_file.hpp"
#include "core/decode/beam_tree.hpp"
#include "core/persist/checkpoint.hpp"
#include "core/decode/translation.hpp"
#include "core/model/device.hpp"
#include "core/model/memory_bound.hpp"
#include "core/model/work_cost.hpp"
#include "core/train/split_step.hpp"
#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/analysis/export.hpp"
#include "core/analysis/sinks.hpp"
#include "core/analysis/subword_merge.hpp"
#include "core/analysis/web_page.hpp"
#include "core/config/model_description.hpp"
#include "core/decode/what_if.hpp"

namespace attnviz::cli {

namespace {

// --- translate ----------------------------------------------------------------

struct TranslateOptions {
    std::string model, attention_out, attention_format, beam_tree;
    std::vector<std::string> sentences;
    DecodeFlags decode;
    bool show_unk = false;
    bool merge_subwords = false;    ///< --merge-subwords: attention and alignments over words, not pieces
    int64_t topk = 0;               ///< --topk: candidates per step in --attention-out
    bool force = false, prefix = false;  ///< input lines are `source ||| target`
    AlignmentOutFlags alignment;    ///< --alignment-out, --alignment-threshold
    bool exclude_sinks = false;     ///< --exclude-sinks: files without <eos> and punctuation, rows renormalised
    InterventionFlags intervene;    ///< --intervene, --intervene-seed
    MaskHeadsFlag mask;             ///< --mask-heads
    PrecisionFlag precision;        ///< --precision
    int64_t intervene_at = -1;      ///< --intervene-at: only this step, then the what-if report
    std::string html_out;           ///< --html-out: the shareable web page
    int64_t ig_steps = 0;           ///< --ig-steps: integrated gradients on the web page (0: automatic)
};

/// `source ||| target` lines for --force / --prefix.
std::vector<std::pair<std::string, std::string>> split_pairs(const std::vector<std::string>& lines, bool from_stdin,
                                                             const std::string& flag) {
    std::vector<std::pair<std::string, std::string>> pairs;
    for (size_t i = 0; i < lines.size(); ++i) {
        const auto bar = lines[i].find("|||");
        if (bar == std::string::npos)
            throw UsageError((from_stdin ? "<stdin>:" + std::to_string(i + 1) : "sentence " + std::to_string(i + 1)) +
                             ": " + flag + " expects 'SOURCE ||| TARGET', got " + quote(lines[i]));
        pairs.emplace_back(lines[i].substr(0, bar), lines[i].substr(bar + 3));
    }
    return pairs;
}

std::string attention_format_of(const TranslateOptions& o) {
    if (!o.attention_format.empty()) return o.attention_format;
    std::string ext = extension_of(o.attention_out);
    if (ext == "json" || ext == "csv") return ext;
    throw UsageError("--attention-out " + quote(o.attention_out, quote_path_max) +
                     ": cannot tell the format from the extension; use .json or .csv, or --attention-format");
}

/// --attention-out written as it is made (write_file_atomic_streamed): one sentence's and
/// hypothesis's entry at a time, its maps row by row, so a summarization's maps are never held
/// twice (as text or as a JSON tree) beside the translations.
void write_attention_file(const std::string& path, const std::vector<Translation>& ts, const std::string& format,
                          const TranslationModel& m, const DecodeOptions& d) {
    write_file_atomic_streamed(path, [&](const AtomicWrite& write) {
        std::string pending;  // small pieces gathered into writes of ~1 MB
        auto out = [&](const std::string& piece) {
            pending += piece;
            if (pending.size() >= (size_t(1) << 20)) write(pending.data(), pending.size()), pending.clear();
        };
        if (format == "json") {
            const nlohmann::json model = m.config().to_json();
            nlohmann::json decoding = d.to_json();
            decoding["precision"] = precision_of(m);  // the weights the maps came from
            if (const auto k = int8_kernels_text(m); !k.empty()) decoding["int8_kernels"] = k;
            out("[");
            bool first = true;
            for (size_t i = 0; i < ts.size(); ++i) {
                if (ts[i].empty()) {  // keep one entry per sentence so indices line up
                    nlohmann::json none = {{"sentence", i}, {"hypothesis", 0}, {"input", ts[i].input},
                                           {"source", nlohmann::json::array()}, {"output", nlohmann::json::array()},
                                           {"weights", nlohmann::json::array()}, {"raw_scores", nlohmann::json::array()},
                                           {"text", ""}};
                    out((first ? "\n" : ",\n") + none.dump());
                    first = false;
                    continue;
                }
                for (size_t h = 0; h < ts[i].hypotheses.size(); ++h) {
                    out(first ? "\n" : ",\n");
                    first = false;
                    // "hypothesis" (the rank) is write_attention_json's own
                    write_attention_json(ts[i], h, model, decoding, {{"sentence", i}}, out);
                }
            }
            out("\n]\n");
        } else {
            bool first = true;
            for (const auto& t : ts)
                for (size_t h = 0; h < t.hypotheses.size(); ++h) {
                    std::string table = attention_csv(t, h);
                    if (table.empty() || table.back() != '\n') table += "\n";
                    out((first ? "" : "\n") + table);  // blank line between tables
                    first = false;
                }
        }
        if (!pending.empty()) write(pending.data(), pending.size());
    });
}

/// --beam-tree: one tree per sentence in input order, with "sentence" and "input" added
/// (an empty input keeps an entry with no nodes, so indices line up).
std::string beam_tree_file(const std::vector<Translation>& ts, const TranslationModel& m, const DecodeOptions& d) {
    nlohmann::json all = nlohmann::json::array();
    for (size_t i = 0; i < ts.size(); ++i) {
        BeamTree none;
        none.level = m.level();
        none.beam_size = d.beam_size;
        none.num_hypotheses = d.num_hypotheses;
        none.length_penalty = d.length_penalty;
        none.attention_available = m.has_attention();
        nlohmann::json j = (ts[i].beam_tree ? *ts[i].beam_tree : none).to_json();
        j["sentence"] = i;
        j["input"] = ts[i].input;
        j["model"] = m.config().to_json();
        j["decode"] = d.to_json();
        all.push_back(std::move(j));
    }
    return all.dump(1) + "\n";
}

/// --intervene and --intervene-at: the intervention at every step (set in d) or at one step
/// (returned, for the what-if report). UsageError for a combination that does not apply.
Intervention what_if_flags(const TranslateOptions& o, DecodeOptions& d) {
    Intervention iv = o.intervene.at_every_step();
    if (!iv.active()) {
        if (o.intervene_at >= 0) throw UsageError("--intervene-at needs --intervene");
        return {};
    }
    if (d.beam_size > 1 || !o.beam_tree.empty())
        throw UsageError("--intervene decodes greedily: leave out --beam, --nbest and --beam-tree");
    if (o.intervene_at < 0) {
        d.intervention = iv;
        return {};
    }
    if (o.force || o.prefix) throw UsageError("--intervene-at re-decodes the model's own output: leave out --force and --prefix");
    iv.step = o.intervene_at;
    return iv;
}

/// --html-out: every translation attributed by the four methods, on one self-contained page.
/// The page's attribution as a whole is held to the work bound (issue 46: 16 sentences of 400
/// words ran for minutes, each within it): the methods that do not fit together are left out,
/// the costliest first, and the page and stderr say so; a page whose gradient methods alone do
/// not fit is refused with the numbers. Work past a tenth of the bound shows progress on stderr.
void write_web_page(const TranslateOptions& o, const TranslationModel& model, const std::vector<Translation>& ts) {
    AttributionOptions asked;
    asked.ig_steps = o.ig_steps;
    std::vector<AttributionMethod> left_out;
    AttributionOptions a = fit_attribution_work(model, ts, asked, left_out);
    check_attribution_fits(model, ts, a);  // within the memory bound, or refused by number before any
    const AttributionWork work = count_attribution_work(model, ts, a);
    WebPageOptions page;
    page.model = o.model + ": " + describe_model(model.config());
    if (!left_out.empty()) {
        std::string names;
        for (size_t i = 0; i < left_out.size(); ++i)
            names += (i ? (i + 1 == left_out.size() ? " and " : ", ") : "") + cli_name(left_out[i]);
        const AttributionWork all = count_attribution_work(model, ts, asked);
        page.note = "Left out: " + names + ". With " + (left_out.size() == 1 ? "it" : "them") +
                    " the page's attribution would take " + all.text() + ", more than the " + work_text(all.bound) +
                    " a command's attribution may take (ATTNVIZ_WORK_BOUND); this page takes " + work.text() + ".";
        warn("--html-out: " + page.note);
    }
    const bool progress = work.shows_progress();
    size_t attributing = 0;
    a.on_method = [&](AttributionMethod m) {
        if (progress)
            std::cerr << "attnviz-cli: --html-out: sentence " << attributing + 1 << " of " << ts.size() << ": "
                      << cli_name(m) << std::endl;
    };
    PassProgress within;
    a.on_pass = [&](AttributionMethod m, int64_t points, double done) {
        if (progress)
            within("attnviz-cli: --html-out: sentence " + std::to_string(attributing + 1) + " of " +
                       std::to_string(ts.size()),
                   m, points, done);
    };
    std::vector<SentenceAttribution> sentences;
    std::vector<AttentionRecord> maps;  // every head, for the page's head view
    for (size_t i = 0; i < ts.size(); ++i) {
        attributing = i;
        AttributionOptions mine = a;
        mine.work_bound = work.sentence_bound(i);  // its share: automatic integrated gradients' points
        sentences.push_back(attribute_sentence(model, ts[i], mine, i));
        maps.push_back(ts[i].empty() || ts[i].hypotheses.empty() ? AttentionRecord{} : ts[i].best().attention);
    }
    write_file_atomic(o.html_out, web_page(sentences, page, maps));
}

int run_translate(TranslateOptions& o) {
    std::string format = o.attention_out.empty() ? "" : attention_format_of(o);
    const int64_t together = o.sentences.empty() ? o.decode.batch
                                                 : std::min<int64_t>(o.decode.batch, static_cast<int64_t>(o.sentences.size()));
    o.precision.rows = together * std::max<int64_t>(o.decode.beam, 1);
    TranslationModelPtr model = o.precision.load(o.model, o.decode.device);
    o.mask.apply(*model);
    DecodeOptions d = o.decode.options(*model);
    if (o.merge_subwords && model->level() != TokenLevel::subword)
        throw UsageError("--merge-subwords: the model works on " + level_noun(model->level()) +
                         ", not subwords: there are no pieces to merge");
    if (format == "csv" && !model->has_attention())
        throw UsageError("--attention-out " + quote(o.attention_out, quote_path_max) +
                         ": the model has no attention (scoring none), so there is no CSV table; use .json");
    o.alignment.check(*model);
    if (!o.attention_out.empty()) check_writable("--attention-out", o.attention_out);

    const std::vector<std::string> sentences = read_sentences(o.sentences);
    if (o.force && o.prefix) throw UsageError("--force and --prefix exclude each other");
    // A reference is one given path: there is nothing to search.
    if (o.force && (d.beam_size > 1 || !o.beam_tree.empty()))
        throw UsageError(std::string(d.beam_size > 1 ? "--beam and --nbest" : "--beam-tree") +
                         " do not apply to --force, which scores the given reference as it is");
    if (!o.beam_tree.empty()) check_writable("--beam-tree", o.beam_tree);
    if (!o.html_out.empty()) check_writable("--html-out", o.html_out);
    d.top_k = o.html_out.empty() ? o.topk : std::max<int64_t>(o.topk, 5);  // the page shows the top 5
    d.beam_tree = !o.beam_tree.empty();
    // The hypotheses keep the maps the outputs show, and the memory bound counts them with the
    // copies the outputs make (core/decode/translation.hpp): the attention file is written as it
    // is made (write_attention_file: a row of numbers at a time), so only --merge-subwords' and
    // --exclude-sinks' changed translations are one.
    if (format.empty() && o.html_out.empty()) d.maps = o.alignment.given() ? MapsKept::cross : MapsKept::none;
    if (!format.empty()) d.kept_copies = o.merge_subwords || o.exclude_sinks ? 1 : 0;
    const Intervention at_step = what_if_flags(o, d);
    std::vector<Translation> ts;
    if (o.force || o.prefix)
        ts = model->force(split_pairs(sentences, o.sentences.empty(), o.force ? "--force" : "--prefix"),
                          o.force ? ForceMode::reference : ForceMode::prefix, d);
    else
        ts = model->translate(sentences, d);

    if (o.show_unk)
        for (size_t i = 0; i < ts.size(); ++i)
            if (!ts[i].unknown.empty()) {
                std::string words;
                for (const auto& w : ts[i].unknown) words += (words.empty() ? "" : " ") + quote(w);
                std::cerr << "attnviz-cli: sentence " << i + 1 << ": unknown words (read as <unk>): " << words << "\n";
            }
    // --merge-subwords: the files show words (pieces' columns summed, rows averaged); the
    // printed text and the beam tree are the same either way.
    std::vector<Translation> shown;
    // --intervene-at: the files show each sentence as the changed step left it.
    std::vector<WhatIf> changes;
    if (at_step.active())
        for (auto& t : ts) {
            if (t.empty()) continue;
            changes.push_back(what_if(*model, t, at_step, d));
            t.hypotheses[0] = changes.back().changed;
        }
    if (o.merge_subwords)
        for (const auto& t : ts) shown.push_back(merge_subwords(t));
    if (o.exclude_sinks) {
        if (!model->has_attention()) throw UsageError("--exclude-sinks: the model has no attention");
        if (!o.merge_subwords) shown = ts;
        for (auto& t : shown) t = exclude_sinks(t);
    }
    const std::vector<Translation>& files = o.merge_subwords || o.exclude_sinks ? shown : ts;
    if (!o.html_out.empty()) write_web_page(o, *model, ts);
    if (!format.empty()) write_attention_file(o.attention_out, files, format, *model, d);
    if (d.beam_tree) write_file_atomic(o.beam_tree, beam_tree_file(ts, *model, d));
    if (o.alignment.given()) o.alignment.write(files);

    std::string out;
    size_t change = 0;
    for (size_t i = 0; i < ts.size(); ++i) {
        if (at_step.active()) {  // "NEW ||| ORIGINAL ||| DELTA_LOG_P" of the step's original token
            if (!ts[i].empty()) {
                const WhatIf& w = changes[change++];
                out += w.changed.text + " ||| " + detokenize(until_eos(w.original_output), model->level()) + " ||| " +
                       fixed(w.delta_log_prob(), 6);
            }
            out += "\n";
            continue;
        }
        if (o.force) {  // the reference as the model saw it: "TEXT ||| LOG_PROB ||| FIRST_DIVERGENCE"
            const Hypothesis* h = ts[i].empty() ? nullptr : &ts[i].best();
            out += h ? h->text + " ||| " + fixed(h->log_prob, 6) + " ||| " + std::to_string(h->first_divergence) : "";
            out += "\n";
            continue;
        }
        if (d.num_hypotheses <= 1) {
            out += ts[i].empty() ? "" : ts[i].best().text;
            out += "\n";
            continue;
        }
        // N-best: Moses-style "index ||| text ||| score", best first.
        for (const auto& h : ts[i].hypotheses)
            out += std::to_string(i) + " ||| " + h.text + " ||| " + fixed(h.score, 6) + "\n";
    }
    std::cout << out << std::flush;
    return exit_ok;
}

}  // namespace

Command add_translate_command(CLI::App& parent) {
    auto o = std::make_shared<TranslateOptions>();
    CLI::App* app = parent.add_subcommand("translate", "Translate sentences with a trained checkpoint");
    app->footer(
        "Sentences come from the arguments or, when there are none, from stdin (one per line);\n"
        "stdout gets one translation per line in input order (an empty input gives an empty line).\n"
        "With --nbest N > 1 each sentence gives N lines `INDEX ||| TRANSLATION ||| SCORE` (0-based, best first).\n"
        "--attention-out: JSON is an array with one object per sentence and hypothesis, in input order:\n"
        "the fields of attention_json (source, output, weights, raw_scores, ..., \"hypothesis\" = rank)\n"
        "plus \"sentence\" (0-based); an empty input keeps its entry with empty arrays. CSV holds one\n"
        "table per sentence and hypothesis in the same order, separated by a blank line (empty inputs\n"
        "have no table; a model without attention has no CSV). Both are written atomically.\n"
        "--beam-tree: JSON array with one tree per sentence, in input order: every candidate beam search\n"
        "looked at, per step the 2K best (K = --beam; 1 = the tree of greedy decoding), as \"nodes\"\n"
        "{id, parent (null: first token), step, token, token_log_prob, log_prob, score, status\n"
        "kept | pruned | finished, rank, token_rank, forced, attention}; \"finished\" lists the finished\n"
        "nodes best first, the first --nbest of them being the printed hypotheses (same scores).");
    app->add_option("--model", o->model, "checkpoint written by train --save")->type_name("FILE")->required();
    app->add_option("sentences", o->sentences, "sentences to translate (default: read stdin)")->type_name("SENTENCE");
    o->decode.add_to(*app, true);
    app->add_option("--attention-out", o->attention_out, "write the attention matrices here (.json or .csv)")
        ->type_name("FILE")->group("output");
    app->add_option("--attention-format", o->attention_format, "json | csv (default: from the file extension)")
        ->type_name("NAME")->check(CLI::IsMember({"json", "csv"}))->group("output");
    app->add_option("--beam-tree", o->beam_tree, "write every candidate of the search here (JSON, see below)")
        ->type_name("FILE")->group("output");
    app->add_flag("--show-unk", o->show_unk, "report words missing from the vocabulary on stderr")->group("output");
    app->add_flag("--merge-subwords", o->merge_subwords,
                  "subword models: --attention-out and --alignment-out over words, not pieces (a word's\n"
                  "columns summed, its rows averaged; the files say \"merged\")")
        ->group("output");
    app->add_option("--topk", o->topk, "per step, the K most probable tokens (in --attention-out JSON as top_k)")
        ->type_name("INT")->default_str("0")->check(CLI::Range(int64_t{0}, int64_t{100}))->group("why");
    app->add_flag("--force", o->force,
                  "inputs are 'SOURCE ||| REFERENCE': score the reference teacher-forced; prints\n"
                  "'TEXT ||| LOG_PROB ||| FIRST_DIVERGENCE' (the first step where the model would have\n"
                  "chosen otherwise, -1: none); per-token log-probabilities and ranks in --attention-out")
        ->group("why");
    app->add_flag("--prefix", o->prefix,
                  "inputs are 'SOURCE ||| PREFIX': force the prefix, then decode on (greedy,\n"
                  "or beam search with --beam / --nbest)")
        ->group("why");
    o->alignment.add_to(*app);
    app->add_flag("--exclude-sinks", o->exclude_sinks,
                  "--attention-out and --alignment-out without attention sinks: weights on <eos> and\n"
                  "punctuation set to 0 and each row renormalised (the files say so in \"merged\")")
        ->group("output");
    o->intervene.add_to(*app, "uniform | permute | zero=POS | weights=W1,W2,... | head-off=L:H");
    o->mask.add_to(*app);
    o->precision.add_to(*app);
    app->add_option("--intervene-at", o->intervene_at,
                    "change only this output step (0-based) of the model's own translation and decode on\n"
                    "greedily; prints 'NEW ||| ORIGINAL ||| DELTA_LOG_P' (the original token's log-probability\n"
                    "change at the step); the files show the new decoding")
        ->type_name("STEP")->check(non_negative_int())->group("what if");
    app->add_option("--html-out", o->html_out,
                    "write one self-contained web page (no network access): attention, attributions by\n"
                    "four methods, top-k; hovering an output token lights up its source weights")
        ->type_name("FILE")->group("output");
    add_ig_steps_option(*app, o->ig_steps, "integrated gradients' interpolation points on the --html-out page")
        ->group("output");
    return {app, [o] { return run_translate(*o); }};
}

}  // namespace attnviz::cli
