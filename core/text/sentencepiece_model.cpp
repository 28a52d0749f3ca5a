// SentencePiece ModelProto, read and written by hand (the protocol buffers wire
// format: https://protobuf.dev/programming-guides/encoding/), checked on the way in.
#include "core/text/sentencepiece_model.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>

#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/text/unicode.hpp"

namespace attnviz {

namespace {

// Field numbers of sentencepiece_model.proto.
namespace field {
constexpr uint32_t model_pieces = 1, model_trainer_spec = 2, model_normalizer_spec = 3, model_denormalizer_spec = 5;
constexpr uint32_t piece_piece = 1, piece_score = 2, piece_type = 3;
constexpr uint32_t trainer_model_type = 3, trainer_treat_whitespace_as_suffix = 24,
                   trainer_allow_whitespace_only_pieces = 26, trainer_byte_fallback = 35;
constexpr uint32_t normalizer_name = 1, normalizer_charsmap = 2, normalizer_add_dummy_prefix = 3,
                   normalizer_remove_extra_whitespaces = 4, normalizer_escape_whitespaces = 5;
}  // namespace field

enum WireType : uint32_t { varint = 0, fixed64 = 1, length_delimited = 2, fixed32 = 5 };
constexpr uint64_t model_type_unigram = 1, model_type_bpe = 2;

[[noreturn]] void refuse(const std::string& what) { throw FileError("the subword model " + what); }

/// One field of a message: its number, wire type and value.
struct Field {
    uint32_t number = 0;
    WireType type = varint;
    uint64_t number_value = 0;   ///< varint, fixed32, fixed64
    std::string_view bytes;      ///< length_delimited
};

/// Reads the fields of one message in order; refuses what is not the wire format.
class Reader {
public:
    Reader(std::string_view bytes, const char* message) : m_p(bytes), m_message(message) {}
    bool next(Field& f) {
        if (m_p.empty()) return false;
        const uint64_t key = read_varint();
        const uint64_t number = key >> 3;
        if (number == 0 || number > 536870911) fail("has a field numbered " + std::to_string(number));
        f.number = static_cast<uint32_t>(number);
        switch (key & 7) {
        case varint:
            f.type = varint;
            f.number_value = read_varint();
            break;
        case fixed64:
            f.type = fixed64;
            f.number_value = read_fixed(8);
            break;
        case fixed32:
            f.type = fixed32;
            f.number_value = read_fixed(4);
            break;
        case length_delimited: {
            f.type = length_delimited;
            const uint64_t n = read_varint();
            if (n > m_p.size()) fail("is cut short (a field of " + std::to_string(n) + " bytes runs past its end)");
            f.bytes = m_p.substr(0, static_cast<size_t>(n));
            m_p.remove_prefix(static_cast<size_t>(n));
            break;
        }
        default:
            fail("has wire type " + std::to_string(key & 7) + " (field " + std::to_string(number) +
                 "), which no ModelProto field has");
        }
        return true;
    }
    [[noreturn]] void fail(const std::string& what) const {
        refuse("is not a SentencePiece model: its " + std::string(m_message) + " " + what);
    }

private:
    uint64_t read_varint() {
        uint64_t v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (m_p.empty()) fail("is cut short (in a number)");
            const auto b = static_cast<uint8_t>(m_p.front());
            m_p.remove_prefix(1);
            v |= uint64_t{b & 0x7Fu} << shift;
            if (!(b & 0x80)) return v;
        }
        fail("has a number longer than 10 bytes");
    }
    uint64_t read_fixed(size_t n) {
        if (m_p.size() < n) fail("is cut short (in a fixed-size number)");
        uint64_t v = 0;
        for (size_t i = 0; i < n; ++i) v |= uint64_t{static_cast<uint8_t>(m_p[i])} << (8 * i);
        m_p.remove_prefix(n);
        return v;
    }
    std::string_view m_p;
    const char* m_message;
};

/// The field's value as a varint-coded number, else a refusal naming it.
uint64_t number_of(const Reader& r, const Field& f, const char* name) {
    if (f.type != varint) r.fail("field " + std::string(name) + " is not a number");
    return f.number_value;
}

std::string_view bytes_of(const Reader& r, const Field& f, const char* name) {
    if (f.type != length_delimited) r.fail("field " + std::string(name) + " is not a string");
    return f.bytes;
}

SentencePieceSpec::Piece read_piece(std::string_view bytes, size_t index) {
    Reader r(bytes, "piece");
    SentencePieceSpec::Piece p;
    uint64_t type = 1;  // NORMAL, the proto's default
    Field f;
    while (r.next(f)) {
        if (f.number == field::piece_piece) {
            p.piece = std::string(bytes_of(r, f, "piece"));
        } else if (f.number == field::piece_score) {
            if (f.type != fixed32) r.fail("field score is not a float");
            const auto bits = static_cast<uint32_t>(f.number_value);
            std::memcpy(&p.score, &bits, sizeof p.score);
        } else if (f.number == field::piece_type) {
            type = number_of(r, f, "type");
        }
    }
    const std::string which = "piece " + std::to_string(index);
    if (p.piece.empty()) refuse("has an empty " + which);
    if (p.piece.size() > max_sentencepiece_piece_bytes)
        refuse(which + " is " + std::to_string(p.piece.size()) + " bytes long, more than the " +
               std::to_string(max_sentencepiece_piece_bytes) + " a piece may be");
    if (!is_valid_utf8(p.piece)) refuse(which + " " + quote(p.piece) + " is not valid UTF-8");
    if (p.piece.find_first_of(std::string_view("\0\r\n", 3)) != std::string::npos)
        refuse(which + " " + quote(p.piece) + " holds a NUL, CR or LF character");
    if (!std::isfinite(p.score)) refuse(which + " " + quote(p.piece) + " has a score that is not a finite number");
    switch (type) {
    case 1: p.type = SentencePieceSpec::PieceType::normal; break;
    case 2: p.type = SentencePieceSpec::PieceType::unknown; break;
    case 3: p.type = SentencePieceSpec::PieceType::control; break;
    case 5: p.type = SentencePieceSpec::PieceType::unused; break;
    case 4: refuse(which + " " + quote(p.piece) + " is user-defined; attnviz's subword models have no such pieces");
    case 6: refuse(which + " " + quote(p.piece) + " is a byte piece; attnviz's subword models have no byte fallback");
    default: refuse(which + " " + quote(p.piece) + " has unknown type " + std::to_string(type));
    }
    return p;
}

void read_trainer_spec(std::string_view bytes, SentencePieceSpec& spec) {
    Reader r(bytes, "trainer spec");
    Field f;
    while (r.next(f)) {
        switch (f.number) {
        case field::trainer_model_type: {
            const uint64_t type = number_of(r, f, "model_type");
            if (type == model_type_unigram) spec.algorithm = SubwordModel::unigram;
            else if (type == model_type_bpe) spec.algorithm = SubwordModel::bpe;
            else
                refuse("has model type " + std::to_string(type) + " (" +
                       (type == 3 ? "word" : type == 4 ? "char" : "unknown") +
                       "); attnviz's subword models are unigram or BPE");
            break;
        }
        case field::trainer_treat_whitespace_as_suffix:
            if (number_of(r, f, "treat_whitespace_as_suffix"))
                refuse("marks word ends instead of word starts (treat_whitespace_as_suffix); attnviz's subword "
                       "models mark word starts");
            break;
        case field::trainer_allow_whitespace_only_pieces:
            spec.allow_whitespace_only_pieces = number_of(r, f, "allow_whitespace_only_pieces") != 0;
            break;
        case field::trainer_byte_fallback:
            if (number_of(r, f, "byte_fallback"))
                refuse("uses byte fallback; attnviz's subword models do not");
            break;
        default:
            break;  // training options: not used to encode, not handed on
        }
    }
}

void read_normalizer_spec(std::string_view bytes, SentencePieceSpec& spec, bool denormalizer) {
    Reader r(bytes, denormalizer ? "denormalizer spec" : "normalizer spec");
    const char* which = denormalizer ? "denormalizer" : "normalizer";
    Field f;
    while (r.next(f)) {
        switch (f.number) {
        case field::normalizer_name: {
            const std::string_view name = bytes_of(r, f, "name");
            if (!name.empty() && name != "identity")
                refuse("uses the " + quote(name) + " " + which +
                       "; attnviz trains its subword models with the identity normalizer and reads no other");
            break;
        }
        case field::normalizer_charsmap:
            if (!bytes_of(r, f, "precompiled_charsmap").empty())
                refuse(std::string("has a ") + which +
                       " rule table (precompiled_charsmap); attnviz's subword models have none (identity)");
            break;
        case field::normalizer_add_dummy_prefix:
            if (!denormalizer) spec.add_dummy_prefix = number_of(r, f, "add_dummy_prefix") != 0;
            break;
        case field::normalizer_remove_extra_whitespaces:
            if (!denormalizer) spec.remove_extra_whitespaces = number_of(r, f, "remove_extra_whitespaces") != 0;
            break;
        case field::normalizer_escape_whitespaces:
            if (!denormalizer) spec.escape_whitespaces = number_of(r, f, "escape_whitespaces") != 0;
            break;
        default:
            break;  // normalization_rule_tsv: used by training only
        }
    }
}

// --- writing -----------------------------------------------------------------------

void put_varint(std::string& out, uint64_t v) {
    while (v >= 0x80) {
        out += static_cast<char>((v & 0x7F) | 0x80);
        v >>= 7;
    }
    out += static_cast<char>(v);
}

void put_key(std::string& out, uint32_t number, WireType type) { put_varint(out, (uint64_t{number} << 3) | type); }

void put_number(std::string& out, uint32_t number, uint64_t v) {
    put_key(out, number, varint);
    put_varint(out, v);
}

void put_bytes(std::string& out, uint32_t number, std::string_view bytes) {
    put_key(out, number, length_delimited);
    put_varint(out, bytes.size());
    out.append(bytes.data(), bytes.size());
}

void put_float(std::string& out, uint32_t number, float v) {
    put_key(out, number, fixed32);
    uint32_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    for (int i = 0; i < 4; ++i) out += static_cast<char>((bits >> (8 * i)) & 0xFF);
}

}  // namespace

SentencePieceSpec parse_sentencepiece_model(std::string_view bytes) {
    SentencePieceSpec spec;
    Reader r(bytes, "ModelProto");
    Field f;
    while (r.next(f)) {
        switch (f.number) {
        case field::model_pieces:
            if (spec.pieces.size() >= max_sentencepiece_pieces)
                refuse("has more than " + std::to_string(max_sentencepiece_pieces) + " pieces");
            spec.pieces.push_back(read_piece(bytes_of(r, f, "pieces"), spec.pieces.size()));
            break;
        case field::model_trainer_spec:
            read_trainer_spec(bytes_of(r, f, "trainer_spec"), spec);
            break;
        case field::model_normalizer_spec:
            read_normalizer_spec(bytes_of(r, f, "normalizer_spec"), spec, false);
            break;
        case field::model_denormalizer_spec:
            read_normalizer_spec(bytes_of(r, f, "denormalizer_spec"), spec, true);
            break;
        default:
            break;  // self-test samples, extensions: dropped
        }
    }
    size_t unknown = 0, normal = 0;
    // SentencePiece keeps normal and unused pieces in one table, the others in another.
    std::set<std::string_view> pieces, reserved;
    for (size_t i = 0; i < spec.pieces.size(); ++i) {
        const auto& p = spec.pieces[i];
        unknown += p.type == SentencePieceSpec::PieceType::unknown;
        normal += p.type == SentencePieceSpec::PieceType::normal;
        const bool in_pieces =
            p.type == SentencePieceSpec::PieceType::normal || p.type == SentencePieceSpec::PieceType::unused;
        if (!(in_pieces ? pieces : reserved).insert(p.piece).second)
            refuse("has piece " + quote(p.piece) + " twice (the second is piece " + std::to_string(i) + ")");
    }
    if (spec.pieces.empty()) refuse("has no pieces (is it a SentencePiece model?)");
    if (unknown != 1) refuse("has " + std::to_string(unknown) + " unknown pieces (<unk>), expected one");
    if (normal == 0) refuse("has no normal piece");
    return spec;
}

std::string serialize_sentencepiece_model(const SentencePieceSpec& spec) {
    std::string out;
    for (const auto& p : spec.pieces) {
        std::string piece;
        put_bytes(piece, field::piece_piece, p.piece);
        put_float(piece, field::piece_score, p.score);
        if (p.type != SentencePieceSpec::PieceType::normal) put_number(piece, field::piece_type, static_cast<uint64_t>(p.type));
        put_bytes(out, field::model_pieces, piece);
    }
    std::string trainer;
    put_number(trainer, field::trainer_model_type,
               spec.algorithm == SubwordModel::bpe ? model_type_bpe : model_type_unigram);
    if (spec.allow_whitespace_only_pieces) put_number(trainer, field::trainer_allow_whitespace_only_pieces, 1);
    put_bytes(out, field::model_trainer_spec, trainer);
    std::string normalizer;
    put_bytes(normalizer, field::normalizer_name, "identity");
    put_number(normalizer, field::normalizer_add_dummy_prefix, spec.add_dummy_prefix);
    put_number(normalizer, field::normalizer_remove_extra_whitespaces, spec.remove_extra_whitespaces);
    put_number(normalizer, field::normalizer_escape_whitespaces, spec.escape_whitespaces);
    put_bytes(out, field::model_normalizer_spec, normalizer);
    return out;
}

}  // namespace attnviz
