// A SentencePiece normalizer rule table, walked as SentencePiece walks it.
//
// The table (SentencePiece 0.1.97 normalizer.cc, EncodePrecompiledCharsMap; unchanged in
// later versions):
//   T: uint32, little-endian | T bytes: a darts-clone double array | the normalized strings
// SentencePiece's DecodePrecompiledCharsMap only checks T < the table's size, so a T of up to
// 3 bytes more than follow makes it view memory past the table; it then hands the trie
// T / 4 units (a partial unit is dropped) and keeps the rest as `normalized_`, strings each
// ended by a NUL.
//
// The double array is an array of 32-bit units (darts.h, DoubleArrayUnit):
//   label   = unit & 0x800000FF   (a leaf unit has bit 31 set, so its label matches no byte)
//   has_leaf = bit 8
//   value   = unit & 0x7FFFFFFF   (of a leaf unit: the byte offset of a string in normalized_)
//   offset  = (unit >> 10) << (bit 9 ? 8 : 0)
// Normalizer::NormalizePrefix calls commonPrefixSearch(text, results, 32, length), which does
//   node = 0 ^ offset(array[0])
//   for each byte c of the text:
//     node ^= c; unit = array[node]; stop unless label(unit) == c
//     node ^= offset(unit)
//     if has_leaf(unit): a match, value(array[node]), whose string normalized_ + value is
//                        read up to its NUL (absl::string_view of a char*)
// with nothing bounded. And NormalizePrefix reads back as many results as matched, though its
// array holds 32 (kMaxTrieResultsSize). So, for every unit some text can reach (the root,
// unit 0, and then each unit whose label equals the byte that led to it), this file checks:
//   - all 256 units its next byte may select, (node ^ offset) ^ c, lie in the array: the
//     block (node ^ offset) | 0xFF does (that also covers the leaf read at node ^ offset);
//   - when it has a leaf: the value points inside normalized_, and from there a NUL comes
//     before the table ends, and the bytes before it are valid UTF-8;
//   - no path matches more than 32 rules. A reachable loop is refused outright (a loop
//     through a leaf would match without end; the tables SentencePiece builds are trees).
// Units no text reaches are never read, and are not checked. The walk is depth-first with an
// explicit stack (a crafted trie may be millions of units deep) and visits each unit once:
// at most 256 steps per unit.
#include "core/text/sentencepiece_charsmap.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <unicode/utf8.h>

namespace attnviz {

namespace {

constexpr uint32_t leaf_bit = uint32_t{1} << 31;

uint32_t label_of(uint32_t unit) { return unit & (leaf_bit | 0xFFu); }
bool has_leaf(uint32_t unit) { return ((unit >> 8) & 1u) != 0; }
uint32_t value_of(uint32_t unit) { return unit & (leaf_bit - 1); }
uint32_t offset_of(uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); }

/// For every byte offset of the normalized strings: whether a NUL follows before their end and
/// the bytes up to it are valid UTF-8. One pass from the end, so many leaves pointing into one
/// long string cost nothing more.
std::vector<uint8_t> terminated_utf8(std::string_view normalized) {
    const auto* s = reinterpret_cast<const uint8_t*>(normalized.data());
    const auto n = static_cast<int32_t>(normalized.size());
    std::vector<uint8_t> ok(normalized.size() + 1, 0);  // ok[n] = 0: the end, no NUL
    for (int32_t i = n - 1; i >= 0; --i) {
        if (s[i] == 0) {
            ok[static_cast<size_t>(i)] = 1;
            continue;
        }
        int32_t next = i;
        UChar32 c = 0;
        U8_NEXT(s, next, n, c);  // a NUL is no continuation byte: a character never spans one
        ok[static_cast<size_t>(i)] = c >= 0 ? ok[static_cast<size_t>(next)] : 0;
    }
    return ok;
}

uint32_t read_u32(const char* p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<uint8_t>(p[i])} << (8 * i);
    return v;
}

}  // namespace

std::string sentencepiece_charsmap_problem(std::string_view table) {
    if (table.empty()) return {};
    if (table.size() > max_sentencepiece_charsmap_bytes)
        return "is " + std::to_string(table.size()) + " bytes, more than the " +
               std::to_string(max_sentencepiece_charsmap_bytes) + " attnviz reads";
    if (table.size() < 4) return "is " + std::to_string(table.size()) + " bytes, too short for its 4-byte trie size";
    const uint64_t trie_bytes = read_u32(table.data());
    if (4 + trie_bytes > table.size())
        return "says its trie has " + std::to_string(trie_bytes) + " bytes, but only " +
               std::to_string(table.size() - 4) + " follow";
    if (trie_bytes % 4 != 0)
        return "has a trie of " + std::to_string(trie_bytes) + " bytes, not a whole number of 4-byte units";
    if (trie_bytes == 0) return "has an empty trie";
    const size_t units_n = static_cast<size_t>(trie_bytes / 4);
    std::vector<uint32_t> units(units_n);
    for (size_t i = 0; i < units_n; ++i) units[i] = read_u32(table.data() + 4 + 4 * i);
    const std::string_view normalized = table.substr(static_cast<size_t>(4 + trie_bytes));
    std::vector<uint8_t> string_ok;  // terminated_utf8(normalized), made at the first leaf

    enum : uint8_t { unseen = 0, on_path = 1, done = 2 };
    std::vector<uint8_t> state(units_n, unseen);
    std::vector<uint8_t> matches_below(units_n, 0);  // the most matches a path from the unit makes
    struct Frame {
        uint32_t node;
        uint32_t base;  // node ^ offset: the block its next byte selects from
        uint32_t next_byte;
        uint8_t most_below;  // the most matches through a child so far
    };
    std::vector<Frame> stack;

    // Enters a reached unit: checks its block and its leaf, then walks its children.
    auto enter = [&](uint32_t node) -> std::string {
        const uint32_t unit = units[node];
        const uint64_t base = uint64_t{node} ^ offset_of(unit);
        if ((base | 0xFF) >= units_n)
            return "has unit " + std::to_string(node) + " pointing to units " + std::to_string(base & ~uint64_t{0xFF}) +
                   " to " + std::to_string(base | 0xFF) + ", past the trie's " + std::to_string(units_n) + " units";
        if (node != 0 && has_leaf(unit)) {  // the root's leaf is never read: a match has at least one byte
            const uint32_t value = value_of(units[static_cast<size_t>(base)]);
            if (value >= normalized.size())
                return "has a rule (unit " + std::to_string(node) + ") pointing to byte " + std::to_string(value) +
                       " of its normalized strings, which hold " + std::to_string(normalized.size()) + " bytes";
            if (string_ok.empty()) string_ok = terminated_utf8(normalized);
            if (!string_ok[value]) {
                const bool ended = normalized.find('\0', value) != std::string_view::npos;
                return "has a rule (unit " + std::to_string(node) + ") whose normalized string at byte " +
                       std::to_string(value) + (ended ? " is not valid UTF-8" : " has no NUL before the table ends");
            }
        }
        state[node] = on_path;
        stack.push_back(Frame{node, static_cast<uint32_t>(base), 0, 0});
        return {};
    };

    if (std::string problem = enter(0); !problem.empty()) return problem;
    while (!stack.empty()) {
        Frame& f = stack.back();
        if (f.next_byte > 0xFF) {  // every child walked
            const uint32_t node = f.node;
            const size_t most = size_t{f.most_below} + (node != 0 && has_leaf(units[node]) ? 1 : 0);
            if (most > max_sentencepiece_charsmap_matches)
                return "lets one text match more than " + std::to_string(max_sentencepiece_charsmap_matches) +
                       " rules at one position (SentencePiece keeps " +
                       std::to_string(max_sentencepiece_charsmap_matches) + ")";
            matches_below[node] = static_cast<uint8_t>(most);
            state[node] = done;
            stack.pop_back();
            if (!stack.empty()) stack.back().most_below = std::max(stack.back().most_below, matches_below[node]);
            continue;
        }
        const uint32_t c = f.next_byte++;
        const uint32_t child = f.base ^ c;  // < units_n: the block was checked
        if (label_of(units[child]) != c) continue;  // no rule goes on with byte c
        if (state[child] == on_path)
            return "has a trie that loops (unit " + std::to_string(child) + " is reached again from below itself)";
        if (state[child] == done) {
            f.most_below = std::max(f.most_below, matches_below[child]);
            continue;
        }
        if (std::string problem = enter(child); !problem.empty()) return problem;  // f may be invalid now
    }
    return {};
}

}  // namespace attnviz
