#pragma once
// Corpora: reading Tatoeba/manythings TSV files, splitting, filtering and
// turning sentence pairs into padded batches (with length bucketing).
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <torch/types.h>

#include "core/alignment.hpp"
#include "core/text.hpp"

namespace attnviz {

/// One source/target pair, already tokenised (no <bos>/<eos>).
struct SentencePair {
    std::vector<std::string> src;  ///< source tokens
    std::vector<std::string> tgt;  ///< target tokens
    /// The true alignment of tgt to src (core/alignment.hpp: 0-based, real tokens only),
    /// when known: built-in tasks and `eval --alignments` set it; filtering and splitting
    /// keep it with its pair. nullopt: unknown (an empty AlignmentLinks is "no links").
    std::optional<AlignmentLinks> alignment = std::nullopt;  // initialised: {src, tgt} stays warning-free
};

/// A line of the input file that was skipped, and why.
struct SkippedLine {
    size_t line = 0;      ///< 1-based line number in the file
    std::string reason;   ///< "no tab", "empty source", "empty target", "invalid UTF-8" or
                          ///< "line too long (N bytes, limit M)"
};

/// Options for reading a TSV corpus.
struct TsvOptions {
    TokenLevel level = TokenLevel::word;  ///< tokenisation of both sides (default word, as d2l)
    size_t max_pairs = 0;                 ///< stop after this many good pairs; 0 = read all
    size_t max_line_bytes = 10000;        ///< longer lines are skipped as "line too long"; 0 = no limit
    bool reverse = false;                 ///< swap columns (French→English)
};

/// A parallel corpus with what was skipped while reading it.
struct Corpus {
    std::string name;                  ///< file name or task name, for display
    TokenLevel level = TokenLevel::word;  ///< how sentences were tokenised
    std::vector<SentencePair> pairs;   ///< the good pairs, in file order
    std::vector<SkippedLine> skipped;  ///< bad lines, in file order
};

/// Reads a Tatoeba-style file: `source<TAB>target[<TAB>attribution]`, UTF-8,
/// CRLF and a leading BOM tolerated, blank lines ignored. Columns are trimmed and
/// tokenised with tokenize(text, level) (word level normalises like d2l). Bad lines
/// are skipped and recorded. Throws attnviz::FileError "cannot open 'PATH': reason"
/// when the file cannot be read, and one naming the file, how many lines were
/// skipped for which reasons and the first bad line when no pair is usable.
/// Corpus::name is the file name without its directory.
Corpus read_tsv(const std::string& path, const TsvOptions& options = {});

/// Same as read_tsv on text already in memory (name is used in messages).
Corpus parse_tsv(const std::string& text, const std::string& name, const TsvOptions& options = {});

/// Keeps pairs whose both sides have at most max_len tokens (before <eos>); 0 keeps all.
std::vector<SentencePair> filter_by_length(const std::vector<SentencePair>& pairs, size_t max_len);

/// Splits into (train, validation): the last `val_fraction` of a seeded shuffle
/// goes to validation (shuffle=false keeps file order: first pairs train).
/// round(n * val_fraction) pairs, at least 1 when val_fraction > 0 and n >= 2, and
/// always leaving one for training. Throws ConfigError unless 0 <= val_fraction < 1.
std::pair<std::vector<SentencePair>, std::vector<SentencePair>> split_train_val(
    const std::vector<SentencePair>& pairs, double val_fraction, uint64_t seed, bool shuffle = true);

/// A padded batch, ready for the model. All tensors are on CPU, int64.
struct Batch {
    torch::Tensor src;      ///< [B, S] source ids followed by <eos>, then <pad>
    torch::Tensor src_len;  ///< [B] valid source lengths (including <eos>)
    torch::Tensor tgt_in;   ///< [B, T] <bos> + target ids (decoder input, teacher forcing)
    torch::Tensor tgt_out;  ///< [B, T] target ids + <eos> (what the decoder must predict)
    torch::Tensor tgt_len;  ///< [B] valid target lengths (including <eos>)
    std::vector<size_t> index;  ///< position of each row in the pair list it came from
    int64_t target_tokens() const;  ///< number of non-pad target tokens
    Batch to(const torch::Device& device) const;
};

/// Options for batching.
struct BatchOptions {
    int64_t batch_size = 64;      ///< sentences per batch
    bool shuffle = true;          ///< shuffle each epoch (seeded)
    int bucket_window = 20;       ///< sort this many batches' worth of pairs by length before cutting
                                  ///< batches (Bahdanau's trick); 0 or 1 = no bucketing
    int64_t fixed_steps = 0;      ///< > 0: pad/truncate every sequence to this many steps (d2l's num_steps)
};

/// Encodes the given rows of a pair list into one batch. Pairs are tokenised already;
/// ids come from the vocabularies (unknown tokens -> <unk>). Without fixed_steps, the
/// width is the longest row (+ <eos>). With fixed_steps = N > 0 (d2l's num_steps): each
/// side is pad_or_trim(ids + <eos>, N) (a long row loses its <eos>), tgt_in = <bos> +
/// the first N-1 entries of tgt_out, lengths count the non-pad entries. Throws Error for
/// a row outside the list.
Batch make_batch(const std::vector<SentencePair>& pairs, const std::vector<size_t>& rows,
                 const Vocab& src_vocab, const Vocab& tgt_vocab, int64_t fixed_steps = 0);

/// Produces the batches of one epoch, seeded: the same seed and epoch give the same batches.
/// Order: pairs shuffled (mt19937_64 from seed and epoch) when options.shuffle; then, with
/// bucket_window > 1, each window of bucket_window * batch_size pairs is sorted by
/// (source + target length, target length), so both sides run few padded steps; cut into batches (the last may be smaller); and the
/// batch order shuffled when options.shuffle and bucketing. Throws ConfigError for
/// batch_size < 1.
std::vector<Batch> make_epoch_batches(const std::vector<SentencePair>& pairs, const Vocab& src_vocab,
                                      const Vocab& tgt_vocab, const BatchOptions& options,
                                      uint64_t seed, int epoch);

}  // namespace attnviz
