// SentencePiece ModelProto, read and written by hand (the protocol buffers wire
// format: https://protobuf.dev/programming-guides/encoding/), checked on the way in.
// One reader serves both kinds of model; Rules says which: attnviz's own
// (parse_sentencepiece_model) or a pretrained one (check_pretrained_sentencepiece_model).
#include "core/text/sentencepiece_model.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <set>

#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/text/sentencepiece_charsmap.hpp"
#include "core/text/unicode.hpp"

namespace attnviz {

namespace {

// Field numbers of sentencepiece_model.proto.
namespace field {
constexpr uint32_t model_pieces = 1, model_trainer_spec = 2, model_normalizer_spec = 3, model_denormalizer_spec = 5;
constexpr uint32_t piece_piece = 1, piece_score = 2, piece_type = 3;
constexpr uint32_t trainer_model_type = 3, trainer_treat_whitespace_as_suffix = 24,
                   trainer_allow_whitespace_only_pieces = 26, trainer_byte_fallback = 35;
constexpr uint32_t trainer_unk_surface = 44, trainer_unk_piece = 45, trainer_bos_piece = 46, trainer_eos_piece = 47,
                   trainer_pad_piece = 48;
constexpr uint32_t normalizer_name = 1, normalizer_charsmap = 2, normalizer_add_dummy_prefix = 3,
                   normalizer_remove_extra_whitespaces = 4, normalizer_escape_whitespaces = 5;
}  // namespace field

enum WireType : uint32_t { varint = 0, fixed64 = 1, length_delimited = 2, fixed32 = 5 };
constexpr uint64_t model_type_unigram = 1, model_type_bpe = 2, model_type_word = 3, model_type_char = 4;
// ModelProto.SentencePiece.Type (3, CONTROL, needs nothing of its own here).
constexpr uint64_t piece_normal = 1, piece_unknown = 2, piece_user_defined = 4, piece_unused = 5, piece_byte = 6;

/// Whose model is read, and how a refusal reads. attnviz's own models: only what attnviz
/// trains ("the subword model ..."). A pretrained one: whatever SentencePiece may load safely,
/// messages naming the file.
class Rules {
public:
    static Rules own() { return Rules(false, "the subword model "); }
    static Rules pretrained(const std::string& what) { return Rules(true, what + ": "); }
    bool pretrained() const { return m_pretrained; }
    [[noreturn]] void refuse(const std::string& problem) const { throw FileError(m_prefix + problem); }

private:
    Rules(bool pretrained, std::string prefix) : m_pretrained(pretrained), m_prefix(std::move(prefix)) {}
    bool m_pretrained;
    std::string m_prefix;
};

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
    Reader(std::string_view bytes, const char* message, const Rules& rules)
        : m_p(bytes), m_message(message), m_rules(rules) {}
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
        m_rules.refuse("is not a SentencePiece model: its " + std::string(m_message) + " " + what);
    }
    const Rules& rules() const { return m_rules; }

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
    const Rules& m_rules;
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

/// A piece as read: its type is a ModelProto.SentencePiece.Type the rules allow.
struct RawPiece {
    std::string piece;
    float score = 0;
    uint64_t type = piece_normal;  // the proto's default
};

/// A normalizer or denormalizer spec as read. A repeated spec merges into the earlier one, each
/// field's last value winning, as protocol buffers parse it (so as SentencePiece sees it).
struct NormalizerParts {
    bool present = false;
    std::string name;
    std::string charsmap;  ///< pretrained models only (attnviz's own have none)
    bool add_dummy_prefix = true;
    bool remove_extra_whitespaces = true;
    bool escape_whitespaces = true;
};

/// Everything read of a ModelProto; what SentencePiece uses to encode and decode.
struct Parts {
    std::vector<RawPiece> pieces;
    uint64_t model_type = model_type_unigram;
    bool treat_whitespace_as_suffix = false;   ///< pretrained only
    bool allow_whitespace_only_pieces = false;
    bool byte_fallback = false;                ///< pretrained only
    /// Pretrained only: the names of the special pieces and the text that decodes <unk>
    /// (absent: SentencePiece's defaults), in the order of their field numbers 44..48.
    std::optional<std::string> trainer_strings[5];
    NormalizerParts normalizer, denormalizer;
};
constexpr uint32_t trainer_string_fields[5] = {field::trainer_unk_surface, field::trainer_unk_piece,
                                               field::trainer_bos_piece, field::trainer_eos_piece,
                                               field::trainer_pad_piece};
constexpr const char* trainer_string_names[5] = {"unk_surface", "unk_piece", "bos_piece", "eos_piece", "pad_piece"};

RawPiece read_piece(std::string_view bytes, size_t index, const Rules& rules) {
    Reader r(bytes, "piece", rules);
    RawPiece p;
    Field f;
    while (r.next(f)) {
        if (f.number == field::piece_piece) {
            p.piece = std::string(bytes_of(r, f, "piece"));
        } else if (f.number == field::piece_score) {
            if (f.type != fixed32) r.fail("field score is not a float");
            const auto bits = static_cast<uint32_t>(f.number_value);
            std::memcpy(&p.score, &bits, sizeof p.score);
        } else if (f.number == field::piece_type) {
            p.type = number_of(r, f, "type");
        }
    }
    const std::string which = "piece " + std::to_string(index);
    if (p.piece.empty()) rules.refuse("has an empty " + which);
    if (p.piece.size() > max_sentencepiece_piece_bytes)
        rules.refuse(which + " is " + std::to_string(p.piece.size()) + " bytes long, more than the " +
                     std::to_string(max_sentencepiece_piece_bytes) + " a piece may be");
    if (!is_valid_utf8(p.piece)) rules.refuse(which + " " + quote(p.piece) + " is not valid UTF-8");
    // attnviz's vocabularies are one token a line; a pretrained model's only need what
    // SentencePiece's tries (keys ended by NUL) need.
    if (!rules.pretrained() && p.piece.find_first_of(std::string_view("\0\r\n", 3)) != std::string::npos)
        rules.refuse(which + " " + quote(p.piece) + " holds a NUL, CR or LF character");
    if (rules.pretrained() && p.piece.find('\0') != std::string::npos)
        rules.refuse(which + " " + quote(p.piece) + " holds a NUL character");
    if (!std::isfinite(p.score))
        rules.refuse(which + " " + quote(p.piece) + " has a score that is not a finite number");
    if (p.type < piece_normal || p.type > piece_byte)
        rules.refuse(which + " " + quote(p.piece) + " has unknown type " + std::to_string(p.type));
    if (!rules.pretrained() && p.type == piece_user_defined)
        rules.refuse(which + " " + quote(p.piece) + " is user-defined; attnviz's subword models have no such pieces");
    if (!rules.pretrained() && p.type == piece_byte)
        rules.refuse(which + " " + quote(p.piece) + " is a byte piece; attnviz's subword models have no byte fallback");
    return p;
}

void read_trainer_spec(std::string_view bytes, Parts& parts, const Rules& rules) {
    Reader r(bytes, "trainer spec", rules);
    Field f;
    while (r.next(f)) {
        switch (f.number) {
        case field::trainer_model_type: {
            const uint64_t type = number_of(r, f, "model_type");
            const bool known = type >= model_type_unigram && type <= model_type_char;
            if (rules.pretrained() ? !known : type != model_type_unigram && type != model_type_bpe)
                rules.refuse("has model type " + std::to_string(type) + " (" +
                             (type == model_type_word ? "word" : type == model_type_char ? "char" : "unknown") +
                             (rules.pretrained() ? "); SentencePiece's are unigram, BPE, word and char"
                                                 : "); attnviz's subword models are unigram or BPE"));
            parts.model_type = type;
            break;
        }
        case field::trainer_treat_whitespace_as_suffix:
            parts.treat_whitespace_as_suffix = number_of(r, f, "treat_whitespace_as_suffix") != 0;
            if (!rules.pretrained() && parts.treat_whitespace_as_suffix)
                rules.refuse("marks word ends instead of word starts (treat_whitespace_as_suffix); attnviz's "
                             "subword models mark word starts");
            break;
        case field::trainer_allow_whitespace_only_pieces:
            parts.allow_whitespace_only_pieces = number_of(r, f, "allow_whitespace_only_pieces") != 0;
            break;
        case field::trainer_byte_fallback:
            parts.byte_fallback = number_of(r, f, "byte_fallback") != 0;
            if (!rules.pretrained() && parts.byte_fallback) rules.refuse("uses byte fallback; attnviz's subword models do not");
            break;
        default:
            for (size_t i = 0; i < 5 && rules.pretrained(); ++i)
                if (f.number == trainer_string_fields[i])
                    parts.trainer_strings[i] = std::string(bytes_of(r, f, trainer_string_names[i]));
            break;  // training options: not used to encode, not handed on
        }
    }
}

void read_normalizer_spec(std::string_view bytes, NormalizerParts& spec, bool denormalizer, const Rules& rules) {
    Reader r(bytes, denormalizer ? "denormalizer spec" : "normalizer spec", rules);
    const char* which = denormalizer ? "denormalizer" : "normalizer";
    spec.present = true;
    Field f;
    while (r.next(f)) {
        switch (f.number) {
        case field::normalizer_name:
            spec.name = std::string(bytes_of(r, f, "name"));
            if (!rules.pretrained() && !spec.name.empty() && spec.name != "identity")
                rules.refuse("uses the " + quote(spec.name) + " " + which +
                             "; attnviz trains its subword models with the identity normalizer and reads no other");
            break;
        case field::normalizer_charsmap:
            spec.charsmap = std::string(bytes_of(r, f, "precompiled_charsmap"));
            if (!rules.pretrained() && !spec.charsmap.empty())
                rules.refuse(std::string("has a ") + which +
                             " rule table (precompiled_charsmap); attnviz's subword models have none (identity)");
            break;
        // attnviz never read a denormalizer's options: a bad one is no reason to refuse its own model.
        case field::normalizer_add_dummy_prefix:
            if (denormalizer && !rules.pretrained()) break;
            spec.add_dummy_prefix = number_of(r, f, "add_dummy_prefix") != 0;
            break;
        case field::normalizer_remove_extra_whitespaces:
            if (denormalizer && !rules.pretrained()) break;
            spec.remove_extra_whitespaces = number_of(r, f, "remove_extra_whitespaces") != 0;
            break;
        case field::normalizer_escape_whitespaces:
            if (denormalizer && !rules.pretrained()) break;
            spec.escape_whitespaces = number_of(r, f, "escape_whitespaces") != 0;
            break;
        default:
            break;  // normalization_rule_tsv: used by training only
        }
    }
}

/// Reads a ModelProto and makes the checks both kinds of model share, in the order attnviz
/// always made them (parse_sentencepiece_model's messages depend on it).
Parts read_model(std::string_view bytes, const Rules& rules) {
    Parts parts;
    Reader r(bytes, "ModelProto", rules);
    Field f;
    while (r.next(f)) {
        switch (f.number) {
        case field::model_pieces:
            if (parts.pieces.size() >= max_sentencepiece_pieces)
                rules.refuse("has more than " + std::to_string(max_sentencepiece_pieces) + " pieces");
            parts.pieces.push_back(read_piece(bytes_of(r, f, "pieces"), parts.pieces.size(), rules));
            break;
        case field::model_trainer_spec:
            read_trainer_spec(bytes_of(r, f, "trainer_spec"), parts, rules);
            break;
        case field::model_normalizer_spec:
            read_normalizer_spec(bytes_of(r, f, "normalizer_spec"), parts.normalizer, false, rules);
            break;
        case field::model_denormalizer_spec:
            read_normalizer_spec(bytes_of(r, f, "denormalizer_spec"), parts.denormalizer, true, rules);
            break;
        default:
            break;  // self-test samples, extensions: dropped
        }
    }
    size_t unknown = 0, normal = 0;
    // SentencePiece keeps normal, user-defined and unused pieces in one table, the others
    // (unknown, control, byte) in another; a piece twice in one is an error.
    std::set<std::string_view> pieces, reserved;
    for (size_t i = 0; i < parts.pieces.size(); ++i) {
        const auto& p = parts.pieces[i];
        unknown += p.type == piece_unknown;
        normal += p.type == piece_normal;
        const bool in_pieces = p.type == piece_normal || p.type == piece_user_defined || p.type == piece_unused;
        if (!(in_pieces ? pieces : reserved).insert(p.piece).second)
            rules.refuse("has piece " + quote(p.piece) + " twice (the second is piece " + std::to_string(i) + ")");
    }
    if (parts.pieces.empty()) rules.refuse("has no pieces (is it a SentencePiece model?)");
    if (unknown != 1) rules.refuse("has " + std::to_string(unknown) + " unknown pieces (<unk>), expected one");
    if (normal == 0) rules.refuse("has no normal piece");
    return parts;
}

/// SentencePiece's name of the byte piece for b (ModelInterface::ByteToPiece).
std::string byte_piece(int b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    return name;
}

/// What only a pretrained model may have, checked as SentencePiece needs it.
void check_pretrained_parts(const Parts& parts, const Rules& rules) {
    // Byte pieces: SentencePiece refuses them without byte fallback, and with it wants all 256.
    std::vector<bool> byte_found(256, false);
    for (size_t i = 0; i < parts.pieces.size(); ++i) {
        const auto& p = parts.pieces[i];
        if (p.type != piece_byte) continue;
        const std::string which = "piece " + std::to_string(i) + " " + quote(p.piece);
        if (!parts.byte_fallback) rules.refuse(which + " is a byte piece, but the model has no byte fallback");
        static const std::vector<std::string> names = [] {
            std::vector<std::string> all;
            for (int i = 0; i < 256; ++i) all.push_back(byte_piece(i));
            return all;
        }();
        int b = 0;
        while (b < 256 && p.piece != names[static_cast<size_t>(b)]) ++b;
        if (b == 256) rules.refuse(which + " is a byte piece not named <0x00>..<0xFF>");
        byte_found[static_cast<size_t>(b)] = true;
    }
    if (parts.byte_fallback)
        for (int b = 0; b < 256; ++b)
            if (!byte_found[static_cast<size_t>(b)])
                rules.refuse("uses byte fallback but has no byte piece " + byte_piece(b) + " (it needs all 256)");
    for (size_t i = 0; i < 5; ++i) {
        const auto& s = parts.trainer_strings[i];
        if (!s) continue;
        const std::string which = std::string("trainer spec's ") + trainer_string_names[i] + " " + quote(*s);
        if (s->size() > max_sentencepiece_piece_bytes || !is_valid_utf8(*s) || s->find('\0') != std::string::npos)
            rules.refuse(which + " is not " + std::to_string(max_sentencepiece_piece_bytes) +
                         " bytes or fewer of UTF-8 without NUL");
    }
    for (const NormalizerParts* spec : {&parts.normalizer, &parts.denormalizer}) {
        const char* which = spec == &parts.normalizer ? "normalizer" : "denormalizer";
        if (spec->name.size() > max_sentencepiece_piece_bytes || !is_valid_utf8(spec->name) ||
            spec->name.find('\0') != std::string::npos)
            rules.refuse(std::string("has a ") + which + " named " + quote(spec->name) +
                         ", not a short UTF-8 name without NUL");
        const std::string problem = sentencepiece_charsmap_problem(spec->charsmap);
        if (!problem.empty())
            rules.refuse("its " + std::string(which) + " rule table (precompiled_charsmap" +
                         (spec->name.empty() ? "" : " of " + quote(spec->name)) + ") " + problem);
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

void put_piece(std::string& out, std::string_view text, float score, uint64_t type) {
    std::string piece;
    put_bytes(piece, field::piece_piece, text);
    put_float(piece, field::piece_score, score);
    if (type != piece_normal) put_number(piece, field::piece_type, type);
    put_bytes(out, field::model_pieces, piece);
}

void put_normalizer(std::string& out, uint32_t number, const NormalizerParts& spec) {
    std::string n;
    if (!spec.name.empty()) put_bytes(n, field::normalizer_name, spec.name);
    if (!spec.charsmap.empty()) put_bytes(n, field::normalizer_charsmap, spec.charsmap);
    put_number(n, field::normalizer_add_dummy_prefix, spec.add_dummy_prefix);
    put_number(n, field::normalizer_remove_extra_whitespaces, spec.remove_extra_whitespaces);
    put_number(n, field::normalizer_escape_whitespaces, spec.escape_whitespaces);
    put_bytes(out, number, n);
}

/// A pretrained model rebuilt from its checked parts (pieces, the trainer options
/// SentencePiece encodes and decodes with, both normalizers).
std::string serialize_parts(const Parts& parts) {
    std::string out;
    for (const auto& p : parts.pieces) put_piece(out, p.piece, p.score, p.type);
    std::string trainer;
    put_number(trainer, field::trainer_model_type, parts.model_type);
    if (parts.treat_whitespace_as_suffix) put_number(trainer, field::trainer_treat_whitespace_as_suffix, 1);
    if (parts.allow_whitespace_only_pieces) put_number(trainer, field::trainer_allow_whitespace_only_pieces, 1);
    if (parts.byte_fallback) put_number(trainer, field::trainer_byte_fallback, 1);
    for (size_t i = 0; i < 5; ++i)
        if (parts.trainer_strings[i]) put_bytes(trainer, trainer_string_fields[i], *parts.trainer_strings[i]);
    put_bytes(out, field::model_trainer_spec, trainer);
    put_normalizer(out, field::model_normalizer_spec, parts.normalizer);
    if (parts.denormalizer.present) put_normalizer(out, field::model_denormalizer_spec, parts.denormalizer);
    return out;
}

}  // namespace

SentencePieceSpec parse_sentencepiece_model(std::string_view bytes) {
    const Parts parts = read_model(bytes, Rules::own());
    SentencePieceSpec spec;
    for (const auto& p : parts.pieces)
        spec.pieces.push_back({p.piece, p.score, static_cast<SentencePieceSpec::PieceType>(p.type)});
    spec.algorithm = parts.model_type == model_type_bpe ? SubwordModel::bpe : SubwordModel::unigram;
    spec.allow_whitespace_only_pieces = parts.allow_whitespace_only_pieces;
    spec.add_dummy_prefix = parts.normalizer.add_dummy_prefix;
    spec.remove_extra_whitespaces = parts.normalizer.remove_extra_whitespaces;
    spec.escape_whitespaces = parts.normalizer.escape_whitespaces;
    return spec;
}

std::string serialize_sentencepiece_model(const SentencePieceSpec& spec) {
    std::string out;
    for (const auto& p : spec.pieces) put_piece(out, p.piece, p.score, static_cast<uint64_t>(p.type));
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

std::string check_pretrained_sentencepiece_model(std::string_view bytes, const std::string& what) {
    const Rules rules = Rules::pretrained(what);
    if (bytes.empty()) rules.refuse("the file is empty, not a SentencePiece model");
    const Parts parts = read_model(bytes, rules);
    check_pretrained_parts(parts, rules);
    return serialize_parts(parts);
}

PretrainedSentencePiecePieces pretrained_sentencepiece_pieces(std::string_view bytes, const std::string& what) {
    const Rules rules = Rules::pretrained(what);
    if (bytes.empty()) rules.refuse("the file is empty, not a SentencePiece model");
    const Parts parts = read_model(bytes, rules);
    check_pretrained_parts(parts, rules);
    PretrainedSentencePiecePieces out;
    out.pieces.reserve(parts.pieces.size());
    for (const auto& p : parts.pieces) out.pieces.emplace_back(p.piece, p.score);
    out.charsmap = parts.normalizer.charsmap;
    return out;
}

}  // namespace attnviz
