#pragma once
// Word alignments read off attention, and how good they are: hard alignments
// (argmax or threshold per target step), Pharaoh files (fairseq's
// --print-alignment, fast_align), the alignment error rate of Och & Ney (2003)
// with sure and possible links, alignment accuracy, and per-step attention
// statistics (entropy, maximum weight, coverage).
//
// Positions are 0-based and refer to real tokens: source position s is the
// s-th source token, target position t the t-th output token; the <eos> of
// either side is not a token here unless asked for (HardAlignmentOptions).
// Attention matrices are attention[t][s] (Hypothesis::attention), always in
// the source's original order (reverse_source models included).
#include <cstddef>
#include <string>
#include <vector>

namespace attnviz {

class TranslationModel;
struct DecodeOptions;
struct SentencePair;
struct Translation;

/// One link: source position src aligned with target position tgt.
struct AlignmentLink {
    int src = 0;
    int tgt = 0;
    bool sure = true;  ///< false: a possible link only (in Och & Ney's P but not in S)
    bool operator==(const AlignmentLink& o) const { return src == o.src && tgt == o.tgt && sure == o.sure; }
};

/// A sentence pair's alignment: links sorted by (src, tgt), each position pair at most
/// once. S = the sure links, P = all links (a sure link is also possible: S is in P).
/// A predicted alignment has sure links only.
class AlignmentLinks {
public:
    /// Adds a link; a link that is there already stays sure when either is sure.
    /// Throws attnviz::Error for a negative position.
    void add(int src, int tgt, bool sure = true);
    const std::vector<AlignmentLink>& links() const { return m_links; }
    size_t size() const { return m_links.size(); }    ///< |P|
    bool empty() const { return m_links.empty(); }
    size_t sure_count() const;                         ///< |S|
    bool contains(int src, int tgt) const;             ///< in P
    bool contains_sure(int src, int tgt) const;        ///< in S
    /// Source and target swapped (for a corpus read with its columns swapped).
    AlignmentLinks transposed() const;
    bool operator==(const AlignmentLinks& o) const { return m_links == o.m_links; }
    bool operator!=(const AlignmentLinks& o) const { return !(*this == o); }

private:
    const AlignmentLink* find(int src, int tgt) const;
    std::vector<AlignmentLink> m_links;
};

/// Sure links from one source position per target token (-1: none), the form
/// core/tasks.hpp's AlignedPair gives: target t links with positions[t].
AlignmentLinks links_from_positions(const std::vector<int>& positions);

// --- hard alignments from attention -------------------------------------------------

/// Links from an attention matrix attention[t][s]. src_len and tgt_len count the real
/// tokens: rows t >= tgt_len and columns s >= src_len (the <eos>) get no links.
/// threshold 0: the argmax of each row, taken over the whole row (first on ties) -- a
/// step whose largest weight is on an excluded column (the source <eos>) gets no link,
/// where fairseq's --print-alignment would take the best real token instead.
/// threshold > 0: every weight >= threshold among the real columns (a row may get none).
AlignmentLinks hard_alignment(const std::vector<std::vector<float>>& attention, size_t src_len, size_t tgt_len,
                              float threshold = 0.0f);

/// Options for reading an alignment off a translation.
struct HardAlignmentOptions {
    float threshold = 0.0f;    ///< 0: argmax per target step; > 0: every weight >= threshold
    bool include_eos = false;  ///< also link the target <eos> row and the source <eos> column
                               ///< (Pharaoh output leaves them out: they are not words)
};

/// The alignment of a translation's hypothesis (hard_alignment over its attention; the
/// real tokens are those before "<eos>" on each side). Throws attnviz::Error when the
/// hypothesis does not exist or has no attention.
AlignmentLinks hard_alignment(const Translation& t, size_t hypothesis = 0, const HardAlignmentOptions& options = {});

// --- Pharaoh format -------------------------------------------------------------------

/// One Pharaoh line (no newline): "src-tgt" per link, space separated, sorted by
/// (src, tgt), 0-based (fairseq, fast_align); possible links are written "srcptgt", the
/// form of SimAlign's and awesome-align's gold files. No links: an empty line.
std::string to_pharaoh(const AlignmentLinks& links);

/// Pharaoh text: one to_pharaoh line per sentence, each ending with '\n'.
std::string to_pharaoh(const std::vector<AlignmentLinks>& alignments);

/// Index base of a Pharaoh file. Not guessed: a 0-based file without a link at word 0
/// reads exactly like a 1-based one, so the caller says which it is (0-based is what
/// fairseq and fast_align write; some gold sets, e.g. Och & Ney's, count from 1).
enum class PharaohBase { zero, one };

/// Parses Pharaoh text, one alignment per line (an empty line: no links). A link is
/// "i-j" (sure), "ipj" or "i?j" (possible; the first as SimAlign/awesome-align gold
/// files, the second as the JHU/Hansards gold files), i the source and j the target
/// position; whitespace separates links; CRLF, a BOM and a last line without '\n' are
/// accepted. Positions come back 0-based. Throws attnviz::FileError "NAME:LINE: ..."
/// naming the bad link and what was expected (also for 0 in a 1-based file).
std::vector<AlignmentLinks> parse_pharaoh(const std::string& text, const std::string& name,
                                          PharaohBase base = PharaohBase::zero);

/// Reads a Pharaoh file (parse_pharaoh); FileError "cannot open 'PATH': reason".
std::vector<AlignmentLinks> read_pharaoh(const std::string& path, PharaohBase base = PharaohBase::zero);

// --- scores ---------------------------------------------------------------------------------

/// Alignment counts, summed over sentences (corpus level, as Och & Ney score).
/// A = predicted links, S = gold sure links, P = all gold links.
struct AlignmentScore {
    size_t sentences = 0;           ///< sentence pairs scored
    size_t predicted = 0;           ///< |A|
    size_t sure = 0;                ///< |S|
    size_t predicted_sure = 0;      ///< |A and S|
    size_t predicted_possible = 0;  ///< |A and P|
    size_t gold_tokens = 0;         ///< target tokens with at least one gold link
    size_t correct_tokens = 0;      ///< of those, the ones with predicted links, all of them gold
                                    ///< (sure or possible); for argmax: "the argmax is a gold link"
    /// AER = 1 - (|A and S| + |A and P|) / (|A| + |S|); NaN when |A| + |S| = 0.
    double aer() const;
    double precision() const;  ///< |A and P| / |A| (NaN when nothing was predicted)
    double recall() const;     ///< |A and S| / |S| (NaN when there are no sure links)
    double accuracy() const;   ///< correct_tokens / gold_tokens (NaN when no token has a gold link)
    AlignmentScore& operator+=(const AlignmentScore& o);
};

/// Scores one sentence's predicted links against its gold links.
AlignmentScore score_alignment(const AlignmentLinks& predicted, const AlignmentLinks& gold);
/// Scores sentence by sentence and sums; throws attnviz::Error when the counts differ.
AlignmentScore score_alignments(const std::vector<AlignmentLinks>& predicted, const std::vector<AlignmentLinks>& gold);

/// The model's attention scored against the gold alignments of pairs
/// (SentencePair::alignment; pairs without one are skipped, sentences = 0 when none has
/// one or the model has no attention). Each pair's reference is forced (teacher-forced:
/// step t produces reference token t, so rows line up with the gold's target
/// positions) and aligned with hard_alignment(attention, src size, tgt size, threshold).
/// Uses options.batch_size; greedy. Defined in attnviz_core (core/alignment_eval.cpp).
AlignmentScore evaluate_alignment(const TranslationModel& model, const std::vector<SentencePair>& pairs,
                                  const DecodeOptions& options, float threshold = 0.0f);

// --- attention statistics ---------------------------------------------------------------

/// Per-step and per-source-token summaries of an attention matrix, for the thin strips
/// beside the heatmap and for export.
struct AttentionStats {
    std::vector<float> entropy;     ///< per step t: -sum_s w ln w in nats (0 one-hot, ln n uniform over n)
    std::vector<float> max_weight;  ///< per step t: the largest weight
    std::vector<float> coverage;    ///< per source position s: sum_t w[t][s], over all steps
                                    ///< (as many as the widest row; <eos> column included)
};

/// Statistics of attention[t][s] (rows as given: not renormalised; 0 ln 0 = 0).
AttentionStats attention_stats(const std::vector<std::vector<float>>& attention);

}  // namespace attnviz
