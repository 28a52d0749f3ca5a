#pragma once
// Word alignments as links between source and target positions: the gold
// alignments a corpus or a task carries (SentencePair::alignment) and the ones
// read off attention (core/analysis/alignment.hpp), and Pharaoh files (fairseq's
// --print-alignment, fast_align) to read and write them.
//
// Positions are 0-based and refer to real tokens: source position s is the
// s-th source token, target position t the t-th target token; the <eos> of
// either side is not a token here.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace attnviz {

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
/// core/data/tasks.hpp's AlignedPair gives: target t links with positions[t].
AlignmentLinks links_from_positions(const std::vector<int>& positions);

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

/// The largest Pharaoh file read_pharaoh reads (1 GiB).
constexpr uint64_t max_pharaoh_file_bytes = uint64_t{1} << 30;

/// Reads a Pharaoh file (parse_pharaoh) through the corpus reader's checked, bounded line
/// reader (core/io/line_reader.hpp): FileError "cannot open 'PATH': reason", and FileError
/// before anything is read when it is not a regular file (a FIFO, /dev/zero, a directory)
/// or larger than max_pharaoh_file_bytes; a line over hard_line_limit, UTF-16 text or NUL
/// bytes are refused too.
std::vector<AlignmentLinks> read_pharaoh(const std::string& path, PharaohBase base = PharaohBase::zero);

}  // namespace attnviz
