#pragma once
// Alignment flags of attnviz-cli: translate --alignment-out (Pharaoh lines read off
// the attention) and eval --alignments (a gold Pharaoh file for a TSV corpus, scored
// as alignment error rate and accuracy). Kept apart from cli_translate.cpp.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/analysis/alignment.hpp"
#include "core/data/data.hpp"
#include "core/decode/translation.hpp"
#include "core/decode/translation_model.hpp"

namespace attnviz::cli {

struct CorpusFlags;

/// --alignment-layer L and --alignment-heads H (fairseq's alignment_layer and alignment_heads):
/// which cross-attention heads align, for translate's --alignment-out and eval's scores.
struct AlignmentHeadFlags {
    int layer = -1;              ///< -1: the last layer
    std::string heads = "mean";  ///< "mean" or a list of heads ("0,3"), averaged

    void add_to(CLI::App& app);
    /// The selection for this model; UsageError when it has no such layer or head.
    HeadSelection selection(const TranslationModel& model) const;
};

/// translate's --alignment-out FILE and --alignment-threshold T.
struct AlignmentOutFlags {
    std::string path;        ///< Pharaoh file to write ("" = none)
    double threshold = 0.0;  ///< 0: argmax per target token; > 0: every weight >= threshold
    AlignmentHeadFlags heads;  ///< which heads align
    HeadSelection selection;   ///< heads resolved for the model by check()

    void add_to(CLI::App& app);
    bool given() const { return !path.empty(); }
    /// Before decoding: the model must have attention, the heads exist and the file's directory be writable.
    void check(const TranslationModel& model);
    /// Writes one Pharaoh line per translation, in input order (best hypothesis; an
    /// empty input gives an empty line), atomically.
    void write(const std::vector<Translation>& translations) const;
};

/// eval's --alignments GOLD and --alignments-one-based.
struct GoldAlignmentFlags {
    std::string path;        ///< gold Pharaoh file, one line per pair of the TSV corpus
    bool one_based = false;  ///< its positions count from 1

    void add_to(CLI::App& app);
    bool given() const { return !path.empty(); }
    /// Reads the gold file and gives each corpus pair its line (before any split),
    /// transposed when the corpus columns were swapped (--reverse). Throws UsageError
    /// for a task corpus, FileError when the line count differs from the pair count
    /// (both files and counts named) or a link lies outside its pair.
    void attach(Corpus& corpus, const CorpusFlags& flags) const;
};

/// Scores the model's alignments on the pairs that have gold alignments
/// (evaluate_alignment, from the heads selected) into j: "align_pairs", "align_accuracy", "aer",
/// "align_precision", "align_recall" (null when no pair has one), "align_heads". Returns the score.
AlignmentScore alignment_metrics(const TranslationModel& model, const std::vector<SentencePair>& pairs,
                                 const DecodeOptions& options, const HeadSelection& heads, nlohmann::json& j);

/// eval --per-head-aer: the alignment scores of every cross-attention head and every layer's
/// mean (evaluate_alignment_per_head) into j["per_head"] (layer, head or "mean", aer,
/// align_accuracy, precision, recall), and as a table for people. Empty when no pair has a
/// gold alignment.
std::string per_head_table(const TranslationModel& model, const std::vector<SentencePair>& pairs,
                           const DecodeOptions& options, nlohmann::json& j);

}  // namespace attnviz::cli
