#pragma once
// SentencePiece models from files, checked before SentencePiece sees them.
//
// A checkpoint carries its subword model as a serialized SentencePiece
// ModelProto (protocol buffers). SentencePiece trusts parts of it: a normalizer
// rule table (`precompiled_charsmap`) is a double-array trie whose offsets it
// follows unchecked, so a crafted one reads out of bounds. attnviz trains its
// models with SentencePiece's identity normalizer (core/text/tokenizer.hpp), so it
// never needs such a table: parse_sentencepiece_model() reads the ModelProto
// itself (the wire format, no protobuf library), refuses what attnviz models do
// not have, and serialize_sentencepiece_model() writes a new ModelProto from the
// checked parts only. That rebuilt model is what SentencePiece loads.
//
// What is read (ModelProto of sentencepiece_model.proto): the pieces (piece, score,
// type); of the trainer spec the model type and the two options that change how
// text is split into words (treat_whitespace_as_suffix, allow_whitespace_only_pieces)
// and byte_fallback; of the normalizer spec its name, rule table and whitespace
// options; a denormalizer spec's rule table. Everything else (self-test samples,
// training options, unknown fields) is dropped. Torch-free (attnviz_base), fuzzed by
// tests/fuzz/fuzz_sentencepiece.cpp.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/config/config.hpp"

namespace attnviz {

/// The most pieces a subword model may have (the registry allows 100000).
constexpr size_t max_sentencepiece_pieces = size_t{1} << 20;
/// The longest piece, in bytes (SentencePiece's own limit is 16 characters by default).
constexpr size_t max_sentencepiece_piece_bytes = 1024;

/// A SentencePiece model as attnviz uses it: what survives the checks.
struct SentencePieceSpec {
    /// SentencePiece's piece types (ModelProto.SentencePiece.Type) that attnviz accepts.
    enum class PieceType { normal = 1, unknown = 2, control = 3, unused = 5 };
    struct Piece {
        std::string piece;  ///< non-empty UTF-8 without NUL, CR or LF, at most max_sentencepiece_piece_bytes
        float score = 0;    ///< finite
        PieceType type = PieceType::normal;
        bool operator==(const Piece& o) const { return piece == o.piece && score == o.score && type == o.type; }
    };
    std::vector<Piece> pieces;  ///< one of type unknown, at least one normal; no piece twice
    SubwordModel algorithm = SubwordModel::unigram;  ///< trainer spec model_type (UNIGRAM or BPE)
    bool allow_whitespace_only_pieces = false;       ///< trainer spec option (changes how words are split)
    bool add_dummy_prefix = true;                    ///< normalizer spec options (identity normalizer)
    bool remove_extra_whitespaces = true;
    bool escape_whitespaces = true;
    bool operator==(const SentencePieceSpec& o) const {
        return pieces == o.pieces && algorithm == o.algorithm &&
               allow_whitespace_only_pieces == o.allow_whitespace_only_pieces &&
               add_dummy_prefix == o.add_dummy_prefix && remove_extra_whitespaces == o.remove_extra_whitespaces &&
               escape_whitespaces == o.escape_whitespaces;
    }
};

/// Parses and checks a serialized ModelProto. Throws FileError "the subword model ..."
/// saying what is wrong: not a ModelProto (truncated, a bad wire type), a normalizer other
/// than identity or any rule table (normalizer or denormalizer), a model type other than
/// unigram or BPE, byte fallback or suffix whitespace (attnviz models have neither), a piece
/// that is empty, too long, not UTF-8, holds NUL/CR/LF, is there twice, has a non-finite
/// score or a type attnviz does not use (user-defined, byte), no or two unknown pieces, no
/// normal piece, more than max_sentencepiece_pieces pieces.
SentencePieceSpec parse_sentencepiece_model(std::string_view bytes);

/// A serialized ModelProto of exactly the spec (identity normalizer); parse gives it back.
std::string serialize_sentencepiece_model(const SentencePieceSpec& spec);

}  // namespace attnviz
