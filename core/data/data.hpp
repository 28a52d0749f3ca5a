#pragma once
// Corpora: splitting, filtering and turning sentence pairs into padded batches
// (with length bucketing). Reading files is core/data/corpus_reader.hpp's (included).
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <torch/types.h>

#include "core/data/alignment_links.hpp"
#include "core/data/corpus_reader.hpp"
#include "core/text/text.hpp"
#include "core/text/vocab.hpp"

namespace attnviz {

/// Keeps pairs whose both sides have at most max_len tokens (before <eos>); 0 keeps all.
std::vector<SentencePair> filter_by_length(const std::vector<SentencePair>& pairs, size_t max_len);

/// Splits into (train, validation): the last `val_fraction` of a seeded shuffle
/// goes to validation (shuffle=false keeps file order: first pairs train).
/// round(n * val_fraction) pairs, at least 1 when val_fraction > 0 and n >= 2, and
/// always leaving one for training. Throws ConfigError unless 0 <= val_fraction < 1.
std::pair<std::vector<SentencePair>, std::vector<SentencePair>> split_train_val(
    const std::vector<SentencePair>& pairs, double val_fraction, uint64_t seed, bool shuffle = true);
/// split_train_val's partition of n pairs as positions: (train, validation) indices, each
/// in the order split_train_val lists its pairs. Lets a caller copy each pair once.
std::pair<std::vector<size_t>, std::vector<size_t>> split_indices(size_t n, double val_fraction, uint64_t seed,
                                                                  bool shuffle = true);

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
