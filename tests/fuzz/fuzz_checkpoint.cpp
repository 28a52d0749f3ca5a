// Fuzzes the model-file loaders on bytes: parse_checkpoint (= load_checkpoint) and
// parse_d2l (= import_d2l, a model from d2l's PyTorch code). The safetensors
// container, the depth-bounded metadata JSON, the configuration, the vocabularies,
// the history and every tensor's dtype and shape are checked before a model is
// built. An accepted file must give a model that translates.
#include "core/persist/checkpoint.hpp"
#include "core/persist/d2l_interop.hpp"
#include "core/io/error.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string bytes = attnviz_fuzz::as_text(data, size);
    try {
        const attnviz::Checkpoint c = attnviz::parse_checkpoint(bytes, "fuzz.ckpt");
        FUZZ_CHECK(c.model != nullptr);
        (void)c.model->translate({"a b c"});
    } catch (const attnviz::Error&) {
    }
    try {
        const attnviz::TranslationModelPtr m = attnviz::parse_d2l(bytes, "fuzz.safetensors");
        FUZZ_CHECK(m != nullptr);
        (void)m->translate({"a b c"});
    } catch (const attnviz::Error&) {
    }
    return 0;
}
