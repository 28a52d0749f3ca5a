#pragma once
// SentencePiece's normalizer rule table (NormalizerSpec.precompiled_charsmap), checked so
// that no text SentencePiece normalizes with it makes SentencePiece read outside it.
//
// Pretrained models (Marian's source.spm, M2M100/NLLB's sentencepiece.bpe.model) carry
// the table of their normalizer (nmt_nfkc, ...). SentencePiece 0.1.97 (normalizer.cc,
// DecodePrecompiledCharsMap and NormalizePrefix; darts_clone's DoubleArray) follows its
// offsets unchecked. sentencepiece_charsmap_problem() walks every state of the table's
// trie that some input can reach, exactly as SentencePiece's search steps through it, and
// says what would read out of bounds. Torch-free (attnviz_base); the layout and the walk
// are described in sentencepiece_charsmap.cpp.
#include <cstddef>
#include <string>
#include <string_view>

namespace attnviz {

/// The largest rule table checked (nmt_nfkc's is 240 KB, nfkc_cf's 247 KB): the walk costs up
/// to 256 steps per trie unit, so a bound keeps a hostile file from taking long.
constexpr size_t max_sentencepiece_charsmap_bytes = size_t{16} << 20;

/// The most rules that may match the prefixes of one text: SentencePiece 0.1.97 keeps the
/// matches of one position in an array of this many (Normalizer::kMaxTrieResultsSize) but
/// reads as many as matched.
constexpr size_t max_sentencepiece_charsmap_matches = 32;

/// What is wrong with a non-empty rule table, in a phrase that follows "its normalizer rule
/// table", or "" when SentencePiece may use it. An empty table is no table (identity).
std::string sentencepiece_charsmap_problem(std::string_view table);

}  // namespace attnviz
