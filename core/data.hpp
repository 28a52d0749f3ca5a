#pragma once
// Corpora: reading Tatoeba/manythings TSV files, splitting, filtering and
// turning sentence pairs into padded batches (with length bucketing).
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <torch/types.h>

#include "core/text.hpp"

namespace attnviz {

/// One source/target pair, already tokenised (no <bos>/<eos>).
struct SentencePair {
    std::vector<std::string> src;  ///< source tokens
    std::vector<std::string> tgt;  ///< target tokens
};

/// A line of the input file that was skipped, and why.
struct SkippedLine {
    size_t line = 0;      ///< 1-based line number in the file
    std::string reason;   ///< e.g. "no tab", "empty source", "invalid UTF-8", "line too long"
};

/// Options for reading a TSV corpus.
struct TsvOptions {
    TokenLevel level = TokenLevel::word;  ///< tokenisation of both sides (default word, as d2l)
    size_t max_pairs = 0;                 ///< stop after this many good pairs; 0 = read all
    size_t max_line_bytes = 10000;        ///< longer lines are skipped as "line too long"
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
/// CRLF and a leading BOM tolerated, blank lines ignored. Bad lines are skipped
/// and recorded. Throws attnviz::FileError when the file cannot be opened or
/// has no usable pair at all.
Corpus read_tsv(const std::string& path, const TsvOptions& options = {});

/// Same as read_tsv on text already in memory (name is used in messages).
Corpus parse_tsv(const std::string& text, const std::string& name, const TsvOptions& options = {});

/// Keeps pairs whose both sides have at most max_len tokens (before <eos>); 0 keeps all.
std::vector<SentencePair> filter_by_length(const std::vector<SentencePair>& pairs, size_t max_len);

/// Splits into (train, validation): the last `val_fraction` of a seeded shuffle
/// goes to validation (shuffle=false keeps file order: first pairs train).
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

/// Encodes one pair list into batches. Pairs are tokenised already; ids come from the vocabularies.
Batch make_batch(const std::vector<SentencePair>& pairs, const std::vector<size_t>& rows,
                 const Vocab& src_vocab, const Vocab& tgt_vocab, int64_t fixed_steps = 0);

/// Produces the batches of one epoch, seeded: the same seed and epoch give the same batches.
std::vector<Batch> make_epoch_batches(const std::vector<SentencePair>& pairs, const Vocab& src_vocab,
                                      const Vocab& tgt_vocab, const BatchOptions& options,
                                      uint64_t seed, int epoch);

}  // namespace attnviz
