// translate --alignment-out and eval --alignments.
#include "app/cli_alignment.hpp"

#include "app/cli_common.hpp"
#include "core/analysis/alignment_eval.hpp"
#include "core/io/error.hpp"
#include "core/analysis/export.hpp"

namespace attnviz::cli {

void AlignmentOutFlags::add_to(CLI::App& app) {
    app.add_option("--alignment-out", path,
                   "write the attention's word alignment here: Pharaoh lines 'SRC-TGT ...' (0-based, as\n"
                   "fairseq --print-alignment), one per input sentence (best hypothesis), <eos> left out")
        ->type_name("FILE")->group("alignment");
    app.add_option("--alignment-threshold", threshold,
                   "--alignment-out: link every source token with weight >= T instead of the argmax")
        ->type_name("T")->default_str("0 (argmax)")->check(CLI::Range(0.0, 1.0))->group("alignment");
}

void AlignmentOutFlags::check(const TranslationModel& model) const {
    if (!given()) return;
    if (!model.has_attention())
        throw UsageError("--alignment-out " + path + ": the model has no attention (scoring none) to align with");
    check_writable("--alignment-out", path);
}

void AlignmentOutFlags::write(const std::vector<Translation>& translations) const {
    HardAlignmentOptions options;
    options.threshold = static_cast<float>(threshold);
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
                                 const DecodeOptions& options, nlohmann::json& j) {
    const AlignmentScore s = evaluate_alignment(model, pairs, options);
    j["align_pairs"] = s.sentences;
    j["align_accuracy"] = number_or_null(s.accuracy());
    j["aer"] = number_or_null(s.aer());
    j["align_precision"] = number_or_null(s.precision());
    j["align_recall"] = number_or_null(s.recall());
    return s;
}

}  // namespace attnviz::cli
