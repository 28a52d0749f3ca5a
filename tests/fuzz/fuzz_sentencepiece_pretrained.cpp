// Fuzzes pretrained SentencePiece models (check_pretrained_sentencepiece_model in
// core/text/sentencepiece_model.cpp, the rule tables in core/text/sentencepiece_charsmap.cpp;
// no LibTorch): bytes that claim to be a Hugging Face folder's source.spm. Seeds: models with
// rule tables built by SentencePiece's own builder (tools/make_sentencepiece_seeds.py).
//
// What the check accepts must be safe for SentencePiece, but libsentencepiece is Debian's,
// not built with the sanitizers: a read out of bounds there goes unseen unless it crashes.
// So the harness also walks each accepted rule table itself, as darts-clone's
// commonPrefixSearch walks it (every unit a text can reach, the 256 units each next byte may
// select, each rule's string up to its NUL, at most 32 matches on a path), with every read
// checked here; and it hands SentencePiece texts that follow the trie's paths, so that
// SentencePiece walks deep into it too. The rebuilt model checks to itself, and loads.
//
// An input starting with 'T' (no ModelProto does: that would be field 10 with wire type 4) is
// a rule table alone, put into a small fixed model, so that mutations land in the table.
#include <sentencepiece_processor.h>

#include <cstdio>
#include <cstring>
#include <string_view>
#include <vector>

#include "core/io/error.hpp"
#include "core/text/sentencepiece_charsmap.hpp"
#include "core/text/sentencepiece_model.hpp"
#include "fuzz_support.hpp"

// Declared by SentencePiece's common.h, which it does not install; exported by libsentencepiece.
namespace sentencepiece::logging {
void SetMinLogLevel(int v);
}

namespace {

/// The length-delimited fields `number` of a message written by the check (well formed), and
/// the last value of varint field `number` in `last_number`.
std::vector<std::string_view> fields(std::string_view m, uint32_t number, uint64_t* last_number = nullptr) {
    std::vector<std::string_view> out;
    size_t i = 0;
    auto varint = [&] {
        uint64_t v = 0;
        for (int shift = 0; i < m.size(); shift += 7) {
            const auto b = static_cast<uint8_t>(m[i++]);
            v |= uint64_t{b & 0x7Fu} << shift;
            if (!(b & 0x80)) break;
        }
        return v;
    };
    while (i < m.size()) {
        const uint64_t key = varint();
        switch (key & 7) {
        case 0: {
            const uint64_t v = varint();
            if ((key >> 3) == number && last_number) *last_number = v;
            break;
        }
        case 5: i += 4; break;
        case 2: {
            const auto n = static_cast<size_t>(varint());
            FUZZ_CHECK(n <= m.size() - i);
            if ((key >> 3) == number) out.push_back(m.substr(i, n));
            i += n;
            break;
        }
        default: FUZZ_CHECK(false && "the rebuilt model holds only varint, fixed32 and length-delimited fields");
        }
    }
    return out;
}

std::string varint(uint64_t v) {
    std::string out;
    for (; v >= 0x80; v >>= 7) out += static_cast<char>((v & 0x7F) | 0x80);
    return out + static_cast<char>(v);
}
std::string bytes_field(uint32_t n, std::string_view payload) {
    return varint(uint64_t{n} << 3 | 2) + varint(payload.size()) + std::string(payload);
}

/// A model of a few pieces whose normalizer has the given rule table.
std::string model_with_table(std::string_view table) {
    std::string m = bytes_field(1, bytes_field(1, "<unk>") + varint(3 << 3) + varint(2));  // type UNKNOWN
    for (const char* p : {"\xE2\x96\x81", "a", "b", "x", "A", "\xE3\x82\xAB", "\xE2\x96\x81" "b"})
        m += bytes_field(1, bytes_field(1, p));
    return m + bytes_field(3, bytes_field(1, "nmt_nfkc") + bytes_field(2, table));
}

uint32_t u32_at(std::string_view s, size_t at) {
    FUZZ_CHECK(at + 4 <= s.size());
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<uint8_t>(s[at + i])} << (8 * i);
    return v;
}

/// Walks an accepted rule table as SentencePiece would and collects texts along its paths.
void walk_table(std::string_view table, std::vector<std::string>& texts) {
    if (table.empty()) return;
    const uint32_t trie_bytes = u32_at(table, 0);
    FUZZ_CHECK(4 + uint64_t{trie_bytes} <= table.size());  // DecodePrecompiledCharsMap's views stay inside
    const size_t units = trie_bytes / 4;
    const std::string_view strings = table.substr(4 + size_t{trie_bytes});
    auto unit = [&](uint64_t i) {
        FUZZ_CHECK(i < units);  // the read darts-clone would make out of bounds
        return u32_at(table, 4 + 4 * static_cast<size_t>(i));
    };
    auto offset = [](uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); };
    struct State {
        uint64_t node;
        std::string path;
        size_t matches;
    };
    std::vector<State> stack{{0, "", 0}};
    size_t visits = 0;
    while (!stack.empty() && visits++ < 4096) {
        const State s = stack.back();
        stack.pop_back();
        const uint32_t u = unit(s.node);
        const uint64_t base = s.node ^ offset(u);
        size_t matches = s.matches;
        if (s.node != 0 && ((u >> 8) & 1)) {
            ++matches;
            FUZZ_CHECK(matches <= attnviz::max_sentencepiece_charsmap_matches);  // NormalizePrefix's array
            const uint32_t value = unit(base) & 0x7FFFFFFFu;
            FUZZ_CHECK(value < strings.size());
            FUZZ_CHECK(std::memchr(strings.data() + value, 0, strings.size() - value) != nullptr);
            if (texts.size() < 64) texts.push_back(s.path);
        }
        for (uint32_t c = 0; c < 256; ++c) {
            const uint32_t child = unit(base ^ c);
            if ((child & 0x800000FFu) == c && s.path.size() < 40)
                stack.push_back({base ^ c, s.path + static_cast<char>(c), matches});
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const bool quiet = [] {
        sentencepiece::logging::SetMinLogLevel(3);
        return true;
    }();
    (void)quiet;
    std::string bytes = attnviz_fuzz::as_text(data, size);
    if (!bytes.empty() && bytes[0] == 'T') bytes = model_with_table(std::string_view(bytes).substr(1));
    std::string checked;
    try {
        checked = attnviz::check_pretrained_sentencepiece_model(bytes, "source.spm");
    } catch (const attnviz::Error&) {
        return 0;
    }
    FUZZ_CHECK(attnviz::check_pretrained_sentencepiece_model(checked, "source.spm") == checked);

    std::vector<std::string> texts = {"the red car sees a small dog", "", "  a\t b  ", "\xEF\xBC\xA1\xEF\xBD\x82 \xE2\x91\xA0",
                                      "\xE2\x96\x81\xE2\x96\x81x", std::string("a\0b\xFF\xC3", 5), ">>fra<< <s>"};
    for (const uint32_t spec : {3u, 5u})  // normalizer, denormalizer
        for (const std::string_view s : fields(checked, spec))
            for (const std::string_view table : fields(s, 2)) walk_table(table, texts);
    // Rules one after another, and after other text: SentencePiece restarts its walk at each.
    const size_t paths = texts.size();
    for (size_t i = 7; i + 1 < paths && texts.size() < 96; ++i) texts.push_back("x" + texts[i] + texts[i + 1] + " ");

    // A word or char model looks each word or character up among all pieces, control pieces
    // too, and then fails its own consistency check (a status, "all normalized characters are
    // not consumed") when the text holds one: SentencePiece's behaviour with the original model.
    uint64_t model_type = 1;
    for (const std::string_view trainer : fields(checked, 2)) fields(trainer, 3, &model_type);
    const bool encode_may_fail = model_type == 3 || model_type == 4;

    sentencepiece::SentencePieceProcessor sp;
    const auto status = sp.LoadFromSerializedProto(checked);
    if (!status.ok()) std::fprintf(stderr, "SentencePiece refused an accepted model: %s\n", status.ToString().c_str());
    FUZZ_CHECK(status.ok());
    for (const auto& text : texts) {
        std::vector<int> ids;
        const auto encoded = sp.Encode(text, &ids);
        if (!encoded.ok() && encode_may_fail) continue;
        if (!encoded.ok()) std::fprintf(stderr, "SentencePiece could not encode: %s\n", encoded.ToString().c_str());
        FUZZ_CHECK(encoded.ok());
        std::string decoded;
        const auto decoded_status = sp.Decode(ids, &decoded);  // through the denormalizer, if any
        if (!decoded_status.ok())
            std::fprintf(stderr, "SentencePiece could not decode: %s\n", decoded_status.ToString().c_str());
        FUZZ_CHECK(decoded_status.ok());
    }
    return 0;
}
