// Fuzzes the checkpoint loader (parse_checkpoint = load_checkpoint on bytes): the
// safetensors container, the depth-bounded metadata JSON, the configuration, the
// vocabularies, the history and every tensor's dtype and shape are checked before
// a model is built. An accepted file must give a model that translates.
#include "core/checkpoint.hpp"
#include "core/error.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        const attnviz::Checkpoint c = attnviz::parse_checkpoint(attnviz_fuzz::as_text(data, size), "fuzz.ckpt");
        FUZZ_CHECK(c.model != nullptr);
        (void)c.model->translate({"a b c"});
    } catch (const attnviz::Error&) {
    }
    return 0;
}
