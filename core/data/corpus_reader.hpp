#pragma once
// Reading parallel corpora: Tatoeba/manythings TSV files (2-3 columns),
// Tatoeba-Challenge files (4 columns: lang, lang, source, target), chosen
// columns of any TSV, and two-file parallel text (one sentence per line).
// Streaming and bounded: lines are read one at a time with a bounded length,
// reading stops as soon as max_pairs pairs are in, only regular files are
// opened (never a FIFO or a device), UTF-16 and CR-only files are refused with
// a message saying how to convert them. Free of LibTorch, so a fuzzer can link
// it (parse_tsv / parse_parallel take bytes in memory).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/io/line_reader.hpp"  // hard_line_limit

#include "core/data/alignment_links.hpp"
#include "core/io/error.hpp"
#include "core/text/text.hpp"

namespace attnviz {

/// One source/target pair, already tokenised (no <bos>/<eos>).
struct SentencePair {
    std::vector<std::string> src;  ///< source tokens
    std::vector<std::string> tgt;  ///< target tokens
    /// The true alignment of tgt to src (core/data/alignment_links.hpp: 0-based, real tokens only),
    /// when known: built-in tasks and `eval --alignments` set it; filtering and splitting
    /// keep it with its pair. nullopt: unknown (an empty AlignmentLinks is "no links").
    std::optional<AlignmentLinks> alignment = std::nullopt;  // initialised: {src, tgt} stays warning-free
    /// The 1-based line of the file it was read from (of both files for parallel text), for
    /// messages about the pair; 0 when it was not read from a file (a built-in task).
    size_t line = 0;
};

/// A line of the input that was skipped, and why.
struct SkippedLine {
    size_t line = 0;      ///< 1-based line number in the file (in both files for parallel text)
    std::string reason;   ///< "no tab", "empty source", "empty target", "invalid UTF-8", "NUL byte" or
                          ///< "line too long (N bytes, limit M)"
};

/// How far reading has come (TsvOptions::progress).
struct ReadProgress {
    uint64_t bytes_read = 0;   ///< bytes consumed so far (both files for parallel text)
    uint64_t total_bytes = 0;  ///< the file size(s) when reading started (0: unknown, e.g. in memory)
    size_t lines = 0;          ///< lines read (of the source file for parallel text)
    size_t pairs = 0;          ///< good pairs so far
};

/// Thrown when TsvOptions::progress asked to stop.
class ReadCancelled : public Error {
public:
    using Error::Error;
};

/// The default of TsvOptions::max_file_bytes: 2 GiB.
constexpr uint64_t default_max_file_bytes = uint64_t{2} << 30;

/// Options for reading a corpus.
struct TsvOptions {
    TokenLevel level = TokenLevel::word;  ///< tokenisation of both sides (default word, as d2l)
    size_t max_pairs = 0;                 ///< stop reading as soon as this many good pairs are in; 0 = read all
    size_t max_line_bytes = 10000;        ///< longer lines are skipped as "line too long"; 0 = only the hard
                                          ///< limit (hard_line_limit, 1 MiB) applies
    bool reverse = false;                 ///< swap source and target after the columns are chosen
    /// Which columns hold the sentences (TSV only): "" = detect the layout; "SRC,TGT" = two
    /// 1-based column numbers ("3,4"), or two language codes of a Tatoeba-Challenge file
    /// ("fra,eng": the sentence whose code is fra is the source). See parse_column_choice.
    std::string columns;
    /// A file larger than this is refused when it would be read whole (max_pairs 0);
    /// 0 = no bound. With max_pairs only what is needed is read, so any size is fine.
    uint64_t max_file_bytes = default_max_file_bytes;
    /// When set, cuts each side instead of `level` (a pretrained model's tokenizer: sentences as they
    /// are, neither normalised nor lower-cased); `target` says the text is a target sentence.
    /// Corpus::level is then subword and Corpus::model_pieces true.
    std::function<std::vector<std::string>(const std::string& text, bool target)> encode;
    /// Called about every 64 KiB read (and once at the end) on the reading thread;
    /// returning false stops reading with ReadCancelled. Empty: no reports.
    std::function<bool(const ReadProgress&)> progress;
};

/// How the sentences were laid out in what was read.
enum class CorpusLayout {
    generated,  ///< a built-in task (nothing was read)
    pairs,      ///< TSV `source<TAB>target[<TAB>attribution]` (Tatoeba/manythings)
    challenge,  ///< TSV `lang<TAB>lang<TAB>source<TAB>target` (Tatoeba-Challenge)
    columns,    ///< TSV with the columns chosen by TsvOptions::columns
    parallel    ///< two files, one sentence per line, line N of one translating line N of the other
};
std::string to_string(CorpusLayout layout);  ///< "generated", "pairs", "challenge", "columns", "parallel"

/// A parallel corpus with what was skipped while reading it.
struct Corpus {
    std::string name;                  ///< file name (without its directory), "SRC + TGT" for two
                                       ///< files, or the task's name
    TokenLevel level = TokenLevel::word;  ///< how sentences were tokenised
    std::vector<SentencePair> pairs;   ///< the good pairs, in file order
    std::vector<SkippedLine> skipped;  ///< bad lines, in file order
    CorpusLayout layout = CorpusLayout::generated;  ///< what the reader found (or was told)
    /// One line saying what was detected and used, for the CLI and the GUI, e.g.
    /// "Tatoeba-Challenge file (lang<TAB>lang<TAB>source<TAB>target): source = column 3 (eng),
    /// target = column 4 (fra)". Empty for built-in tasks.
    std::string detected;
    size_t lines_read = 0;             ///< lines read (reading may have stopped early at max_pairs)
    bool model_pieces = false;         ///< the sides were cut by a pretrained model's tokenizer (TsvOptions::encode)
    uint64_t bytes_read = 0;           ///< bytes read
    bool stopped_early = false;        ///< max_pairs was reached before the end of the input
};

/// The sentence columns a TsvOptions::columns text names.
struct ColumnChoice {
    size_t src = 0, tgt = 0;        ///< 1-based column numbers (0 when named by language)
    std::string src_lang, tgt_lang;  ///< language codes of a Tatoeba-Challenge file (empty when numbered)
    bool by_language() const { return !src_lang.empty(); }
};
/// Parses "3,4" (two different 1-based numbers) or "fra,eng" (two different language codes:
/// 2-3 lower-case letters with optional _Script/_region parts, as Tatoeba-Challenge writes
/// them, e.g. "zho_Hans"). Throws ConfigError saying what is expected.
ColumnChoice parse_column_choice(const std::string& text);

/// True for a Tatoeba-Challenge language code: "eng", "fr", "zho_Hans", "cmn_Hans_CN".
bool is_language_code(const std::string& text);

/// Reads a TSV corpus file. UTF-8; CRLF and a leading BOM tolerated; blank lines ignored.
/// The layout is detected from the first line with a tab, unless options.columns chooses:
///  - 2 or 3 columns: `source<TAB>target[<TAB>attribution]` (Tatoeba/manythings); each line
///    then has 2 or 3 columns;
///  - 4 columns whose first two are language codes: Tatoeba-Challenge, `eng<TAB>fra<TAB>
///    source<TAB>target`; each line then has 4 columns and two language codes.
/// Anything else (5+ columns, 4 columns without codes, a line whose column count does not
/// fit the layout) throws FileError naming the file, the line and what was expected -- a
/// layout is never guessed silently. A line without a tab, an empty side, invalid UTF-8, a
/// NUL byte or a line over the length limit is skipped and recorded. Columns are trimmed and
/// tokenised with tokenize(text, level). FileError also when: the file cannot be opened; it
/// is not a regular file (directory, FIFO, device, socket); it is larger than
/// max_file_bytes and would be read whole; it is UTF-16 (BOM or NUL bytes) or binary; it
/// has CR-only line endings; no pair is usable (with a count of skipped lines per reason
/// and the first bad line). Corpus::name is the file name without its directory.
Corpus read_tsv(const std::string& path, const TsvOptions& options = {});

/// Same as read_tsv on bytes already in memory (name is used in messages and as
/// Corpus::name). The entry point of the corpus fuzzer.
Corpus parse_tsv(const std::string& text, const std::string& name, const TsvOptions& options = {});

/// Reads two-file parallel text: line N of src_path is the source of pair N, line N of
/// tgt_path its target (Joey NMT / OpenNMT / fairseq `train.en` + `train.fr`). Both files
/// get read_tsv's checks. Blank on both sides: ignored; blank on one side: skipped as
/// "empty source"/"empty target". A tab in a line is an error (a TSV given as parallel
/// text); different line counts are an error naming both files, their counts and the first
/// line without a partner (unless max_pairs stopped reading first: the rest is not read).
/// options.columns must be empty. Corpus::name is "SRC + TGT" (file names).
Corpus read_parallel(const std::string& src_path, const std::string& tgt_path, const TsvOptions& options = {});

/// Same as read_parallel on two texts in memory.
Corpus parse_parallel(const std::string& src_text, const std::string& tgt_text, const std::string& src_name,
                      const std::string& tgt_name, const TsvOptions& options = {});

}  // namespace attnviz
