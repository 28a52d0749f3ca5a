// attnviz-cli eval: a checkpoint scored on a corpus -- teacher-forced loss, exact match,
// token accuracy, BLEU, alignments -- and with --intervene, the same decoding with its
// attention changed at every step ("does this model need its attention?").
#include <iostream>

#include "app/cli_alignment.hpp"
#include "app/cli_common.hpp"
#include "core/io/message.hpp"
#include "app/cli_decode.hpp"
#include "core/analysis/metrics.hpp"
#include "core/io/error.hpp"
#include "core/model/memory_bound.hpp"
#include "core/train/split_step.hpp"

namespace attnviz::cli {

namespace {

struct EvalOptions {
    std::string model, split = "val";
    CorpusFlags corpus;
    DecodeFlags decode;
    InterventionFlags intervene;
    MaskHeadsFlag mask;  ///< --mask-heads
    PrecisionFlag precision;  ///< --precision
    bool json = false;
    GoldAlignmentFlags gold;  ///< --alignments, --alignments-one-based
    AlignmentHeadFlags heads;  ///< --alignment-layer, --alignment-heads
    bool per_head = false;     ///< --per-head-aer
};

/// Free-running decoding's scores: exact match, token accuracy, BLEU.
struct DecodeScores {
    double accuracy = 0, token_accuracy = 0;
    BleuResult bleu;
};

DecodeScores decode_scores(const TranslationModel& model, const std::vector<SentencePair>& pairs,
                           const DecodeOptions& d) {
    std::vector<std::vector<std::string>> sources, refs, hyps;
    for (const auto& p : pairs) {
        sources.push_back(p.src);
        refs.push_back(p.tgt);
    }
    DecodeOptions text = d;  // the scores read the tokens alone
    text.maps = MapsKept::none;
    for (const auto& t : model.translate_tokens(sources, text))
        hyps.push_back(t.empty() ? std::vector<std::string>{} : until_eos(t.best().tokens));
    return {exact_match(hyps, refs), token_accuracy(hyps, refs), corpus_bleu(hyps, refs)};
}

int run_eval(EvalOptions& o) {
    const Intervention intervention = o.intervene.at_every_step();
    o.precision.rows = o.decode.batch * std::max<int64_t>(o.decode.beam, 1);
    TranslationModelPtr model = o.precision.load(o.model, o.decode.device);
    o.mask.apply(*model);  // every figure below with those heads off
    DecodeOptions d = o.decode.options(*model);
    check_languages(*model, d.source_lang, d.target_lang);  // before any work; a missing target named by its flag
    d.num_hypotheses = 1;
    if (intervention.active() && d.beam_size > 1)
        throw UsageError("--intervene decodes greedily: leave out --beam");
    const HeadSelection heads = o.heads.selection(*model);
    Corpus corpus = load_corpus_for(o.corpus, *model);
    o.gold.attach(corpus, o.corpus);  // before the split, so each pair keeps its line
    // The held-out pairs are re-derived exactly as training split them.
    const std::vector<SentencePair> pairs = evaluation_pairs(*model, corpus, o.split);

    // Teacher-forced loss and token accuracy, token-weighted like the trainer's (and with
    // its --steps padding/truncation, so the numbers match training's validation), in chunks
    // within the memory bound; a pair too long for it is refused first, naming its line.
    const torch::Device dev = model->device();
    Network network = model->network();  // teacher-forced loss: read-only use of the weights
    // A multilingual pretrained model (M2M100, NLLB, mBART-50) is teacher-forced with its language
    // codes, as transformers' labels and training have them (core/data/training_data.hpp); the
    // decoding below puts them itself. Any other model's pairs stay as they are.
    std::vector<SentencePair> forced = pairs;
    if (model->config().is_pretrained()) add_language_codes(forced, model->tokenizer(), d.source_lang, d.target_lang);
    check_pairs_fit(forced, evaluation_cost(*network), model->trained_with().fixed_steps, model->config().source_steps,
                    corpus.name, "pair");
    const ValidationSums sums = validation_sums(*network, forced, model->src_vocab(), model->tgt_vocab(), d.batch_size,
                                                model->trained_with().fixed_steps, dev);
    const double loss_sum = sums.loss, tf_correct = sums.correct;
    const int64_t tokens = static_cast<int64_t>(sums.tokens);
    // Free-running decoding for exact match, token accuracy and BLEU: with the intervention
    // when there is one, and as usual beside it.
    DecodeOptions changed = d;
    changed.intervention = intervention;
    const DecodeScores scores = decode_scores(*model, pairs, changed);
    DecodeScores usual;
    if (intervention.active()) usual = decode_scores(*model, pairs, d);

    nlohmann::json j;
    j["pairs"] = pairs.size();
    j["split"] = o.split;
    j["corpus"] = corpus.name;
    j["val_loss"] = number_or_null(loss_sum / double(std::max<int64_t>(tokens, 1)));
    j["accuracy"] = scores.accuracy;
    j["token_accuracy"] = scores.token_accuracy;
    j["teacher_forced_token_accuracy"] = tf_correct / double(std::max<int64_t>(tokens, 1));
    j["bleu"] = scores.bleu.score;
    j["bleu_precisions"] = scores.bleu.precisions;
    j["brevity_penalty"] = scores.bleu.brevity_penalty;
    j["beam"] = d.beam_size;
    j["precision"] = precision_of(*model);
    if (const auto k = int8_kernels_text(*model); !k.empty()) j["int8_kernels"] = k;
    if (o.mask.given()) j["mask_heads"] = o.mask.text;
    if (intervention.active()) {
        j["intervention"] = intervention.to_json();
        j["without_intervention"] = {{"accuracy", usual.accuracy},
                                     {"token_accuracy", usual.token_accuracy},
                                     {"bleu", usual.bleu.score}};
        // The intervention changes free-running decoding only: say which figures it did not touch.
        j["intervention_applies_to"] = {"accuracy", "token_accuracy", "bleu", "bleu_precisions", "brevity_penalty"};
        j["teacher_forced_without_intervention"] = {"val_loss", "teacher_forced_token_accuracy", "align_accuracy", "aer",
                                                    "align_precision", "align_recall", "per_head"};
    }
    // Where the pairs know their alignment (a task, --alignments): the attention on the forced references.
    const AlignmentScore align = alignment_metrics(*model, pairs, d, heads, j);
    const std::string per_head = o.per_head ? per_head_table(*model, pairs, d, j) : std::string();
    if (o.json) {
        std::cout << j.dump() << std::endl;
        return exit_ok;
    }
    std::cout << escape_controls(corpus.name) << " (" << pairs.size() << " pairs, split " << o.split << ")\n"
              << "loss             " << fixed(loss_sum / double(std::max<int64_t>(tokens, 1)), 4) << "\n";
    if (intervention.active())
        std::cout << "decoding with    " << intervention.describe() << " (loss: teacher-forced, as usual)\n"
                  << "exact match      " << fixed(scores.accuracy, 4) << "  (as usual " << fixed(usual.accuracy, 4)
                  << ")\n"
                  << "token accuracy   " << fixed(scores.token_accuracy, 4) << "  (as usual "
                  << fixed(usual.token_accuracy, 4) << ")\n"
                  << "BLEU-4           " << fixed(scores.bleu.score, 2) << "  (as usual " << fixed(usual.bleu.score, 2)
                  << ")\n";
    else
        std::cout << "exact match      " << fixed(scores.accuracy, 4) << "\n"
                  << "token accuracy   " << fixed(scores.token_accuracy, 4) << "  (teacher-forced "
                  << fixed(j["teacher_forced_token_accuracy"].get<double>(), 4) << ")\n"
                  << "BLEU-4           " << fixed(scores.bleu.score, 2) << "\n";
    if (align.sentences > 0)
        std::cout << "alignment acc    " << fixed(align.accuracy(), 4) << "  (" << align.sentences
                  << " pairs, attention argmax on the forced reference)\n"
                  << "AER              " << fixed(align.aer(), 4) << "  (precision " << fixed(align.precision(), 4)
                  << ", recall " << fixed(align.recall(), 4) << ")\n"
                  << "aligned from     " << heads.describe() << "\n";
    if (o.per_head)
        std::cout << (per_head.empty() ? "per-head AER: no pair has a gold alignment\n"
                                       : "\nper head (attention argmax on the forced reference):\n" + per_head);
    return exit_ok;
}

}  // namespace

Command add_eval_command(CLI::App& parent) {
    auto o = std::make_shared<EvalOptions>();
    CLI::App* app = parent.add_subcommand("eval", "Loss, exact match, token accuracy and BLEU of a checkpoint on a corpus");
    app->footer(
        "--split val re-splits the corpus as training did (the checkpoint's seed, --val-fraction and\n"
        "--max-length), so the same --task/--data gives the held-out pairs; --split all uses every pair.\n"
        "Pairs with a known alignment (built-in tasks, --alignments) also get alignment accuracy and\n"
        "AER (Och & Ney) of the attention argmax on the teacher-forced reference, <eos> left out,\n"
        "from the heads --alignment-layer/--alignment-heads choose (default: the last layer's mean);\n"
        "--per-head-aer adds the same for every cross-attention head and every layer's mean, so the\n"
        "heads that align can be found (JSON: \"per_head\").\n"
        "--intervene uniform|permute decodes with the attention changed at every step (greedy) and\n"
        "prints the scores beside the usual ones (JSON: \"intervention\", \"without_intervention\"):\n"
        "does this model need its attention?");
    app->add_option("--model", o->model, "checkpoint written by train --save")->type_name("FILE")->required();
    o->corpus.add_to(*app, true);
    app->add_option("--split", o->split, "val | all")->type_name("NAME")->default_str("val")
        ->check(CLI::IsMember({"val", "all"}))->group("data");
    o->decode.add_to(*app, false);
    o->intervene.add_to(*app, "uniform | permute | zero=POS | weights=W,... | head-off=L:H");
    o->mask.add_to(*app);
    o->precision.add_to(*app);
    app->add_flag("--json", o->json, "print the metrics as one JSON object")->group("output");
    o->gold.add_to(*app);
    o->heads.add_to(*app);
    app->add_flag("--per-head-aer", o->per_head,
                  "also score every cross-attention head of every layer, and each layer's mean")
        ->group("alignment");
    return {app, [o] { return run_eval(*o); }};
}

}  // namespace attnviz::cli
