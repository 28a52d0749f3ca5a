// translate --alignment-out and eval --alignments.
#include "app/cli_alignment.hpp"

#include "app/cli_common.hpp"
#include "core/analysis/alignment_eval.hpp"
#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/analysis/export.hpp"

#include <cstdio>

namespace attnviz::cli {

void AlignmentHeadFlags::add_to(CLI::App& app) {
    app.add_option("--alignment-layer", layer,
                   "align from this layer's cross-attention (a Transformer's; -1 = the last, the RNN has 0)")
        ->type_name("L")->default_str("-1")->check(CLI::Range(-1, 63))->group("alignment");
    app.add_option("--alignment-heads", heads,
                   "... from these of its heads, averaged: mean (all) or a list such as 0,3 (fairseq's\n"
                   "alignment_heads); the default, the last layer's mean, is the primary map")
        ->type_name("H")->default_str("mean")->group("alignment");
}

HeadSelection AlignmentHeadFlags::selection(const TranslationModel& model) const {
    try {
        return cross_heads(model.config(), layer, heads);
    } catch (const ConfigError& e) {
        throw UsageError(std::string("--alignment-layer/--alignment-heads: ") + e.what());
    }
}

void AlignmentOutFlags::add_to(CLI::App& app) {
    app.add_option("--alignment-out", path,
                   "write the attention's word alignment here: Pharaoh lines 'SRC-TGT ...' (0-based, as\n"
                   "fairseq --print-alignment), one per input sentence (best hypothesis), <eos> left out")
        ->type_name("FILE")->group("alignment");
    app.add_option("--alignment-threshold", threshold,
                   "--alignment-out: link every source token with weight >= T instead of the argmax")
        ->type_name("T")->default_str("0 (argmax)")->check(CLI::Range(0.0, 1.0))->group("alignment");
    heads.add_to(app);
}

void AlignmentOutFlags::check(const TranslationModel& model) {
    if (!given()) return;
    if (!model.has_attention())
        throw UsageError("--alignment-out " + quote(path, quote_path_max) + ": the model has no attention (scoring none) to align with");
    selection = heads.selection(model);
    check_writable("--alignment-out", path);
}

void AlignmentOutFlags::write(const std::vector<Translation>& translations) const {
    HardAlignmentOptions options;
    options.threshold = static_cast<float>(threshold);
    options.heads = selection;
    std::vector<AlignmentLinks> lines;
    for (const auto& t : translations) lines.push_back(t.empty() ? AlignmentLinks{} : hard_alignment(t, 0, options));
    write_file_atomic(path, to_pharaoh(lines));
}

void GoldAlignmentFlags::add_to(CLI::App& app) {
    app.add_option("--alignments", path,
                   "gold word alignment of a --data corpus (Pharaoh: one line per pair in file order, 'i-j'\n"
                   "sure, 'ipj' or 'i?j' possible, positions of the tokens as attnviz splits them):\n"
                   "prints alignment accuracy and AER of the attention on the forced references")
        ->type_name("FILE")->group("alignment");
    app.add_flag("--alignments-one-based", one_based, "--alignments: positions count from 1 (default: from 0)")
        ->group("alignment");
}

void GoldAlignmentFlags::attach(Corpus& corpus, const CorpusFlags& flags) const {
    if (!given()) return;
    if (!flags.task.empty())
        throw UsageError("--alignments: built-in tasks know their alignments; give a --data corpus instead");
    const auto gold = read_pharaoh(path, one_based ? PharaohBase::one : PharaohBase::zero);
    const size_t n = corpus.pairs.size();
    // --max-pairs reads the first pairs of the file: the gold may go on past them.
    if (gold.size() != n && !(flags.max_pairs > 0 && n == flags.max_pairs && gold.size() > n))
        throw FileError("--alignments: " + path + " has " + std::to_string(gold.size()) + " lines but " + flags.data +
                        " has " + std::to_string(n) + " sentence pairs" +
                        (corpus.skipped.empty() ? std::string()
                                                : " (" + std::to_string(corpus.skipped.size()) +
                                                      " bad lines skipped: the gold needs one line per pair read)") +
                        "; expected one line per pair, in file order");
    for (size_t i = 0; i < n; ++i) {
        SentencePair& p = corpus.pairs[i];
        // The gold counts the file's columns; with --reverse the pair's sides are swapped.
        AlignmentLinks links = flags.reverse ? gold[i].transposed() : gold[i];
        for (const auto& l : links.links())
            if (static_cast<size_t>(l.src) >= p.src.size() || static_cast<size_t>(l.tgt) >= p.tgt.size())
                throw FileError(path + ":" + std::to_string(i + 1) + ": link " + std::to_string(l.src) + "-" +
                                std::to_string(l.tgt) + " (0-based source-target) lies outside pair " +
                                std::to_string(i + 1) + " of " + flags.data + ", which has " +
                                std::to_string(p.src.size()) + " source and " + std::to_string(p.tgt.size()) +
                                " target tokens" + (one_based ? "" : " (1-based file? see --alignments-one-based)"));
        p.alignment = std::move(links);
    }
}

AlignmentScore alignment_metrics(const TranslationModel& model, const std::vector<SentencePair>& pairs,
                                 const DecodeOptions& options, const HeadSelection& heads, nlohmann::json& j) {
    const AlignmentScore s = evaluate_alignment(model, pairs, options, 0.0f, heads);
    j["align_heads"] = heads.describe();
    j["align_pairs"] = s.sentences;
    j["align_accuracy"] = number_or_null(s.accuracy());
    j["aer"] = number_or_null(s.aer());
    j["align_precision"] = number_or_null(s.precision());
    j["align_recall"] = number_or_null(s.recall());
    return s;
}

std::string per_head_table(const TranslationModel& model, const std::vector<SentencePair>& pairs,
                           const DecodeOptions& options, nlohmann::json& j) {
    const auto table = evaluate_alignment_per_head(model, pairs, options);
    nlohmann::json rows = nlohmann::json::array();
    std::string text;
    if (!table.empty()) text = "layer  head  AER     align acc  precision  recall\n";
    for (const auto& row : table) {
        const bool mean = row.heads.heads.empty();
        const std::string head = mean ? "mean" : std::to_string(row.heads.heads.front());
        rows.push_back({{"layer", row.heads.layer},
                        {"head", mean ? nlohmann::json("mean") : nlohmann::json(row.heads.heads.front())},
                        {"aer", number_or_null(row.score.aer())},
                        {"align_accuracy", number_or_null(row.score.accuracy())},
                        {"align_precision", number_or_null(row.score.precision())},
                        {"align_recall", number_or_null(row.score.recall())}});
        char line[160];
        std::snprintf(line, sizeof line, "%-6d %-5s %-7s %-10s %-10s %s\n", row.heads.layer, head.c_str(),
                      fixed(row.score.aer(), 4).c_str(), fixed(row.score.accuracy(), 4).c_str(),
                      fixed(row.score.precision(), 4).c_str(), fixed(row.score.recall(), 4).c_str());
        text += line;
    }
    j["per_head"] = std::move(rows);
    return text;
}

}  // namespace attnviz::cli
