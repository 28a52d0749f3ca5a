// Fuzzes safetensors::parse (core/io/safetensors.cpp, no LibTorch): the container of
// checkpoints and of models from PyTorch. Whatever it accepts must describe
// tensors that lie inside the file, in order, with sizes that match their shapes.
#include "core/io/error.hpp"
#include "core/io/safetensors.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    namespace st = attnviz::safetensors;
    try {
        const st::File f = st::parse(attnviz_fuzz::as_text(data, size), "fuzz.safetensors");
        size_t previous_end = 0;
        for (const auto& t : f.tensors) {
            FUZZ_CHECK(t.begin <= t.end);
            FUZZ_CHECK(t.begin >= previous_end);
            FUZZ_CHECK(f.data_start + t.end <= f.bytes.size());
            FUZZ_CHECK(t.end - t.begin == static_cast<size_t>(t.numel()) * st::element_size(t.dtype));
            FUZZ_CHECK(f.find(t.name) != nullptr);
            previous_end = t.end;
        }
    } catch (const attnviz::Error&) {
    }
    return 0;
}
