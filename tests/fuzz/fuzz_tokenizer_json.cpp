// Fuzzes tokenizer.json (core/text/tokenizer_json.cpp; no LibTorch): bytes that claim to be a
// Hugging Face folder's tokenizer.json are parsed under small bounds, and an accepted tokenizer
// encodes a few texts and decodes what it made. Refusals are attnviz::Error (a FileError for the
// file, an Error for a text a model cannot encode or a regular expression that works too long).
//
// An input may carry its own text after a NUL byte: "<json>\0<text>" (seeds:
// tests/fuzz/corpus/tokenizer_json, small tokenizers of each kind). Invariants: as many tokens as
// ids, every id has a token or lies past the vocabulary only where an added token or the
// post-processor put it, decoding gives UTF-8, encoding is deterministic.
#include <string>
#include <vector>

#include "core/io/error.hpp"
#include "core/text/tokenizer_json.hpp"
#include "core/text/unicode.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string input = attnviz_fuzz::as_text(data, size);
    const size_t nul = input.find('\0');
    const std::string file = input.substr(0, nul);
    attnviz::TokenizerJsonLimits limits;
    limits.max_bytes = 1 << 20;
    limits.max_vocab = 1 << 14;
    limits.max_merges = 1 << 14;
    limits.max_added_tokens = 256;
    limits.max_pattern_bytes = 256;
    limits.max_components = 32;
    std::shared_ptr<const attnviz::TokenizerJson> t;
    try {
        t = attnviz::TokenizerJson::parse(file, "tokenizer.json", limits);
    } catch (const attnviz::Error&) {
        return 0;
    }
    FUZZ_CHECK(t != nullptr);
    std::vector<std::string> texts = {"Hello, world! It's 3.14", "", "  a\t b  \n", "\xE2\x96\x81\xE2\x96\x81x",
                                      "\xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD e\xCC\x81",
                                      "<s> </s> <unk> <mask> [CLS]"};
    if (nul != std::string::npos) texts.push_back(input.substr(nul + 1, 512));
    for (const auto& a : t->added_tokens()) {
        if (texts.size() > 12) break;
        texts.push_back("x " + a.content + " y" + a.content);
    }
    for (const auto& text : texts) {
        for (const bool special : {true, false}) {
            attnviz::TokenizerJsonEncoding e;
            try {
                e = t->encode(text, special);
            } catch (const attnviz::Error&) {
                continue;  // not UTF-8, no unknown token, a regex past its work bound
            }
            FUZZ_CHECK(e.ids.size() == e.tokens.size());
            for (const int64_t id : e.ids) FUZZ_CHECK(id >= 0 && id < t->vocab_size());
            const auto again = t->encode(text, special);
            FUZZ_CHECK(again.ids == e.ids);
            for (const bool skip : {true, false}) {
                std::string decoded;
                try {
                    decoded = t->decode(e.ids, skip);
                } catch (const attnviz::Error&) {
                    continue;  // a decoder's regex past its work bound
                }
                FUZZ_CHECK(attnviz::is_valid_utf8(decoded));
            }
            (void)t->decode_tokens(e.tokens);
        }
    }
    // Every id's token, and ids that have none.
    const auto tokens = t->id_tokens();
    FUZZ_CHECK(static_cast<int64_t>(tokens.size()) == t->vocab_size());
    std::vector<int64_t> ids;
    for (int64_t id = -2; id < t->vocab_size() + 2 && ids.size() < 64; ++id) ids.push_back(id);
    try {
        FUZZ_CHECK(attnviz::is_valid_utf8(t->decode(ids, false)));
    } catch (const attnviz::Error&) {
    }
    return 0;
}
