#pragma once
// "Is attention an explanation here?" over a corpus: every sentence translated,
// its steps attributed (core/analysis/attribution.hpp) and compared with the
// attention and method against method (core/analysis/agreement.hpp), as Jain &
// Wallace's table does, with each sentence's own numbers for a sortable list.
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/analysis/agreement.hpp"
#include "core/analysis/attribution.hpp"
#include "core/analysis/erasure.hpp"

namespace attnviz {

/// What a corpus agreement run does.
struct CorpusAgreementOptions {
    /// The attribution per sentence. Its methods default here to saliency, gradient x input and
    /// occlusion: integrated gradients costs ig_steps gradient passes, so it is asked for by name.
    AttributionOptions attribution = default_attribution();
    DecodeOptions decode;       ///< how each sentence is translated (greedy by default)
    size_t max_sentences = 0;   ///< at most this many sentences, the first ones (0: all)
    /// Erasure flip curves too (core/analysis/erasure.hpp): per output step, source positions
    /// erased in each order until the decision changes. Off by default: it costs S decoder steps
    /// per step and order (batched), and integrated gradients' when that order is asked for.
    bool erasure = false;
    ErasureOptions erasure_options;  ///< the orders, integrated gradients' points, the seed
    static AttributionOptions default_attribution();
};

/// One sentence's agreement, for the per-sentence table.
struct SentenceAgreement {
    size_t index = 0;            ///< its position in the corpus given
    std::string input, output;   ///< the source and the translation, as text (tokens joined by spaces)
    std::string text;            ///< the source as a user types it (the tokenizer's decode: a subword
                                 ///< model's pieces joined into words, characters into text)
    size_t steps = 0;            ///< output steps
    std::map<std::string, double> kendall_tau;  ///< per pair ("attention vs saliency"), the mean over steps (NaN: none)
    std::map<std::string, double> top1;         ///< per pair, the share of steps with the same top token
    std::optional<SentenceErasure> erasure;     ///< with CorpusAgreementOptions::erasure
};

/// The result: the corpus table and every sentence's row.
struct CorpusAgreement {
    AgreementTable table;
    std::vector<SentenceAgreement> sentences;
    std::vector<AttributionMethod> methods;
    std::optional<ErasureSummary> erasure;  ///< with CorpusAgreementOptions::erasure: over every step
    double seconds = 0;  ///< wall time of the run
    /// {"sentences_count", "methods", "seconds", "table": AgreementTable::to_json()["pairs"],
    /// "sentences": [{"index", "input", "text", "output", "steps", "kendall_tau": {pair: tau}, "top1": {pair: rate}}]};
    /// with erasure also "erasure": ErasureSummary::to_json() and each sentence's "erasure":
    /// SentenceErasure::to_json().
    nlohmann::json to_json() const;
};

/// Runs it over `sources` (tokens as the model reads them). `progress`, when given, is called
/// after each sentence with (done, total) and stops the run early by returning false (the
/// result then holds the sentences done).
CorpusAgreement corpus_agreement(const TranslationModel& model, const std::vector<std::vector<std::string>>& sources,
                                 const CorpusAgreementOptions& options = {},
                                 const std::function<bool(size_t, size_t)>& progress = {});

}  // namespace attnviz
