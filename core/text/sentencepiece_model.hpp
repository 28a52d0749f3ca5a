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
//
// Pretrained models (a Hugging Face folder's spm files) are another matter: they use
// SentencePiece's normalizers with their rule tables, control and user-defined pieces, and
// sometimes byte fallback. check_pretrained_sentencepiece_model() reads them with the same
// reader under wider rules, checks the rule tables as SentencePiece walks them
// (core/text/sentencepiece_charsmap.hpp), and rebuilds the model from what it checked.
// Fuzzed by tests/fuzz/fuzz_sentencepiece_pretrained.cpp.
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
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

/// A pretrained model's SentencePiece model (a Hugging Face folder's source.spm, target.spm or
/// sentencepiece.bpe.model), checked so that SentencePiece may load it: unlike attnviz's own
/// models these use SentencePiece's normalizers (nmt_nfkc, ...) with their rule tables. Returns
/// the bytes to load; FileError naming `what` and the problem otherwise.
///
/// The bytes returned are a ModelProto rebuilt from the checked parts only, which SentencePiece
/// encodes and decodes with exactly as with the original: every piece in order (text, score,
/// type), of the trainer spec the model type, treat_whitespace_as_suffix,
/// allow_whitespace_only_pieces, byte_fallback, unk_surface and the unk/bos/eos/pad piece
/// names where set, and the normalizer and denormalizer specs (name, rule table,
/// add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces). Dropped: training options,
/// self-test samples (SentencePiece would run them on load), unknown fields.
///
/// Refused ("WHAT: ..."): not the wire format (cut short, a bad wire type, a field of the wrong
/// type); a piece that is empty, longer than max_sentencepiece_piece_bytes, not UTF-8, holds a
/// NUL, has a non-finite score or an unknown type; a piece twice among the normal,
/// user-defined and unused pieces or among the unknown, control and byte ones; no or two
/// unknown pieces; no normal piece; more than max_sentencepiece_pieces pieces; a model type
/// other than unigram, BPE, word or char; byte pieces without byte fallback, not named
/// <0x00>..<0xFF>, or byte fallback without all 256; an unk/bos/eos/pad piece name,
/// unk_surface or normalizer name that is not UTF-8 without NUL of at most
/// max_sentencepiece_piece_bytes; a normalizer or denormalizer rule table that
/// sentencepiece_charsmap_problem() finds a problem with (a size prefix past its end, a trie of
/// partial units, a reachable unit whose children lie past the trie, a rule whose string
/// lies past the strings, has no NUL or is not UTF-8, a loop, more than 32 matches at one
/// position, a table over max_sentencepiece_charsmap_bytes).
std::string check_pretrained_sentencepiece_model(std::string_view bytes, const std::string& what);

/// A pretrained model's SentencePiece model as transformers' converters read it to build a
/// tokenizer.json (T5's spiece.model in a folder without tokenizer.json): every piece with its
/// score, in id order, and the normalizer's rule table (precompiled_charsmap; empty when it has
/// none). The same checks and FileError as check_pretrained_sentencepiece_model.
struct PretrainedSentencePiecePieces {
    std::vector<std::pair<std::string, float>> pieces;
    std::string charsmap;
};
PretrainedSentencePiecePieces pretrained_sentencepiece_pieces(std::string_view bytes, const std::string& what);

}  // namespace attnviz
