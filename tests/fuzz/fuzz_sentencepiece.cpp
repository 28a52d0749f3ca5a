// Fuzzes the subword models of checkpoints (core/text/sentencepiece_model.cpp and
// Tokenizer::from_sentencepiece, no LibTorch): bytes that claim to be a SentencePiece
// ModelProto. What the parser accepts is rebuilt and handed to SentencePiece, which
// must load it and encode with it; the rebuilt model parses back to the same model.
#include "core/io/error.hpp"
#include "core/text/sentencepiece_model.hpp"
#include "core/text/tokenizer.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string bytes = attnviz_fuzz::as_text(data, size);
    try {
        const attnviz::SentencePieceSpec spec = attnviz::parse_sentencepiece_model(bytes);
        const std::string rebuilt = attnviz::serialize_sentencepiece_model(spec);
        FUZZ_CHECK(attnviz::parse_sentencepiece_model(rebuilt) == spec);
        const auto tokenizer = attnviz::Tokenizer::from_sentencepiece(bytes, {});
        FUZZ_CHECK(tokenizer->model_proto() == rebuilt);
        FUZZ_CHECK(tokenizer->piece_count() == static_cast<int>(spec.pieces.size()));
        for (const char* s : {"the red car sees a small dog", "", "  a\t b  ", "\xE2\x96\x81\xE2\x96\x81x", "日本語"})
            tokenizer->encode(s, /*normalize=*/false);
    } catch (const attnviz::Error&) {
    }
    return 0;
}
