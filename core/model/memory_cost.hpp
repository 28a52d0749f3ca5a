#pragma once
// What a piece of work costs in memory, by its shape. Every family states its costs
// through the seam (EncoderDecoder::memory_cost(), core/model/encoder_decoder.hpp), path
// by path, as a polynomial in the shape of the work: rows (target sentences in training,
// hypotheses in decoding, scaled copies of a sentence in attribution), S source positions
// and T target positions. A Transformer's encoder self-attention is S x S per head and
// layer, its decoder self-attention T x T, its cross-attention T x S; the RNN's additive
// attention T x S x its feature width; the output layer T x the vocabulary. Every caller
// asks the one bound (core/model/memory_bound.hpp) before it allocates.
//
// Plain data, no LibTorch: decoding's options (core/decode/translation.hpp) carry a bound.
#include <cstdint>

namespace attnviz {

/// The most memory one piece of work may take at once by default (2 GiB): a step of
/// training, a chunk of sentences decoded together with what they keep, a pass of
/// attribution. Larger work runs in parts; work that cannot fit alone is refused.
constexpr int64_t step_memory_bound = int64_t{2} << 30;

/// The bound in force for this process: set_memory_bound()'s value, else the environment
/// variable ATTNVIZ_MEMORY_BOUND (bytes, or with a K, M or G suffix: "64M"; for tests and
/// small machines) when it is a valid size of at least 1 MiB, else step_memory_bound.
int64_t memory_bound();
/// Sets the process's bound (0: back to the environment's or the default). Not thread-safe
/// with work in flight: set it before work starts (tests, the command line).
void set_memory_bound(int64_t bytes);
/// A size from text: "2147483648", "64M", "2G", "512k" (binary units); -1 when not one.
int64_t parse_memory_size(const char* text);

/// a + b and a x b of non-negative byte counts, INT64_MAX where they would overflow (a
/// negative factor counts as 0).
int64_t bytes_plus(int64_t a, int64_t b);
int64_t bytes_times(int64_t a, int64_t b);

/// Bytes for `rows` alike rows of a piece of work over S source and T target positions:
/// rows x (ss S^2 + st S T + tt T^2 + s S + t T + one). Products and sums saturate at
/// INT64_MAX instead of overflowing, so a hostile shape reads as "too large", never as small.
struct ShapeCost {
    int64_t ss = 0, st = 0, tt = 0, s = 0, t = 0, one = 0;
    int64_t per_row(int64_t S, int64_t T) const;
    int64_t bytes(int64_t rows, int64_t S, int64_t T) const;
    ShapeCost operator+(const ShapeCost& o) const;
    ShapeCost operator*(int64_t k) const;
};

/// What a family's work costs, path by path; every ShapeCost is per row, as its comment says.
/// Derived from the tensors each path allocates (see each family's memory_cost()) and checked
/// by measurement (tests/core/test_memory_cost.cpp: a step's peak resident memory at most 2x the
/// estimate, at least a quarter of it: the estimate adds up phases that run one after the other).
struct MemoryCost {
    /// Per target sentence of a teacher-forced batch (S, T: the batch's widths): the forward
    /// pass, what autograd keeps for the backward pass, the backward pass's transient gradients.
    ShapeCost training;
    /// The same forward without gradients (validation, eval's loss): its transient peak.
    ShapeCost evaluation;
    /// Per sentence decoded: encode()'s peak and what the encoding holds while its sentence
    /// decodes, its maps aside.
    ShapeCost encoding;
    /// Per sentence decoded with every map kept (EncoderDecoder::encode's keep_maps): the
    /// encoder's own maps its encoding holds for the views (a Transformer's self-attention
    /// weights and raw scores, S x S per head and layer).
    ShapeCost encoding_maps;
    /// Per hypothesis (sentences x beam) at decoding step T: the step's transient tensors,
    /// the decoder's cache of T steps, the encoder output it reads (a copy per hypothesis).
    ShapeCost step;
    /// Per hypothesis, what T steps keep on the host for the views and exports: each map's
    /// rows (weights and raw scores). The primary map, the other cross maps (every head of
    /// every layer) and the decoder self-attention maps apart, so that a caller that keeps
    /// only some counts only those (DecodeOptions::maps).
    ShapeCost kept_primary, kept_cross, kept_decoder;
    /// Per returned hypothesis: the encoder self-attention maps copied into it (S x S per
    /// head and layer, weights and raw scores, as rows).
    ShapeCost kept_source;
    /// Per row of an attribution pass (the sentence with its embeddings scaled: S source
    /// positions, T output steps): the forward pass from the embeddings with autograd on,
    /// its backward pass to them.
    ShapeCost attribution;
    /// Bytes whatever the work (a table the network builds, e.g. a position table).
    int64_t fixed = 0;
};

}  // namespace attnviz
