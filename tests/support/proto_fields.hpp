#pragma once
// Protocol buffer fields written by hand (the wire format), for tests that craft
// SentencePiece models: a checkpoint's subword model is a serialized ModelProto.
#include <cstdint>
#include <cstring>
#include <string>

namespace attnviz::testing {

inline std::string varint(uint64_t v) {
    std::string out;
    while (v >= 0x80) {
        out += static_cast<char>((v & 0x7F) | 0x80);
        v >>= 7;
    }
    return out + static_cast<char>(v);
}
/// Field n, length-delimited (a string, bytes or a message).
inline std::string bytes_field(uint32_t n, const std::string& payload) {
    return varint(uint64_t{n} << 3 | 2) + varint(payload.size()) + payload;
}
/// Field n, a varint (a number, a bool, an enum).
inline std::string number_field(uint32_t n, uint64_t v) { return varint(uint64_t{n} << 3) + varint(v); }
/// Field n, a float (fixed 32 bits).
inline std::string float_field(uint32_t n, float f) {
    uint32_t bits = 0;
    std::memcpy(&bits, &f, 4);
    std::string out = varint(uint64_t{n} << 3 | 5);
    for (int i = 0; i < 4; ++i) out += static_cast<char>((bits >> (8 * i)) & 0xFF);
    return out;
}
/// A ModelProto's `pieces` entry: piece, score and (other than NORMAL, 1) type.
inline std::string piece_field(const std::string& text, float score, int type = 1) {
    return bytes_field(1, bytes_field(1, text) + float_field(2, score) + (type != 1 ? number_field(3, type) : ""));
}
/// A normalizer rule table whose double-array trie points outside itself, as the audit's
/// crafted model had (SentencePiece followed it and crashed on load).
inline std::string broken_rule_table() {
    std::string blob("\x00\x04\x00\x00", 4);  // 1024 bytes of trie follow
    for (int i = 0; i < 256; ++i) blob += std::string("\xff\xfe\xfd\x7f", 4);
    return blob + std::string("x\0", 2);
}

}  // namespace attnviz::testing
