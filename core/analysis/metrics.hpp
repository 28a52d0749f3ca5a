#pragma once
// Evaluation measures: corpus BLEU-4 (Papineni et al., as sacreBLEU with
// tokenize='none'), d2l's sentence-level bleu(pred, label, k), accuracies.
#include <string>
#include <vector>

namespace attnviz {

/// Corpus BLEU with the details needed to check it against sacreBLEU.
struct BleuResult {
    double score = 0.0;                 ///< 0..100, like sacreBLEU
    std::vector<double> precisions;     ///< modified n-gram precisions, 0..100, n = 1..max_order
    double brevity_penalty = 1.0;
    size_t hyp_len = 0, ref_len = 0;    ///< total tokens
};

/// Corpus BLEU on tokenised text, one reference per hypothesis: the same numbers as
/// sacreBLEU's corpus_bleu(hyps, [refs], tokenize='none') with its defaults
/// (smooth_method='exp', i.e. mteval's NIST smoothing: the k-th order with no match
/// gets precision 1 / (2^k * total); clipped counts; brevity penalty exp(1 - r/c)).
/// The score is 0 when no n-gram matches or the hypotheses have fewer than max_order
/// tokens in all. Tokens should hold no whitespace (sacreBLEU re-splits on it).
/// Throws attnviz::Error when the list sizes differ.
BleuResult corpus_bleu(const std::vector<std::vector<std::string>>& hypotheses,
                       const std::vector<std::vector<std::string>>& references, int max_order = 4);

/// d2l's bleu(pred_seq, label_seq, k) (seed 003): sentence level, on space-separated text, 0..1.
/// Splits like Python's str.split(' ') (empty pieces kept), as d2l does.
double d2l_bleu(const std::string& pred, const std::string& label, int k);

/// Share of hypotheses identical to their reference (0..1; 0 for no sentences).
double exact_match(const std::vector<std::vector<std::string>>& hypotheses,
                   const std::vector<std::vector<std::string>>& references);

/// Share of reference positions where the hypothesis has the same token (0..1; 0 when
/// there are no reference tokens). Extra hypothesis tokens are not counted.
double token_accuracy(const std::vector<std::vector<std::string>>& hypotheses,
                      const std::vector<std::vector<std::string>>& references);

}  // namespace attnviz
