// Fuzzes torch_bin::parse (core/io/torch_bin.cpp and its zip reader and restricted
// unpickler, no LibTorch): pytorch_model.bin files from the web. Whatever it accepts
// must describe tensors whose every element lies inside a storage, storages inside
// the file, and names that are unique.
#include <set>

#include "core/io/error.hpp"
#include "core/io/torch_bin.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    namespace tb = attnviz::torch_bin;
    try {
        const tb::File f = tb::parse(attnviz_fuzz::as_text(data, size), "fuzz.bin");
        for (const auto& s : f.storages) {
            FUZZ_CHECK(s.offset <= f.bytes.size());
            FUZZ_CHECK(s.bytes() <= f.bytes.size() - s.offset);
        }
        std::set<std::string> names;
        for (const auto& t : f.tensors) {
            FUZZ_CHECK(names.insert(t.name).second);
            FUZZ_CHECK(f.find(t.name) != nullptr);
            FUZZ_CHECK(t.storage < f.storages.size());
            const tb::Storage& s = f.storages[t.storage];
            FUZZ_CHECK(t.dtype == s.dtype);
            FUZZ_CHECK(t.shape.size() == t.strides.size());
            FUZZ_CHECK(t.storage_offset >= 0);
            // The farthest element, in 128 bits: no overflow can hide a reach past the storage.
            __int128 last = t.storage_offset;
            bool empty = false;
            for (size_t i = 0; i < t.shape.size(); ++i) {
                FUZZ_CHECK(t.shape[i] >= 0 && t.strides[i] >= 0);
                if (t.shape[i] == 0) empty = true;
                else last += static_cast<__int128>(t.shape[i] - 1) * t.strides[i];
            }
            if (!empty) FUZZ_CHECK(last < static_cast<__int128>(s.numel));
            else FUZZ_CHECK(static_cast<uint64_t>(t.storage_offset) <= s.numel);
            // Read the first and last elements, as a tensor made from the record would.
            if (!empty && s.numel > 0) {
                const size_t es = attnviz::safetensors::element_size(s.dtype);
                volatile char first = f.data(s)[static_cast<size_t>(t.storage_offset) * es];
                volatile char end = f.data(s)[static_cast<size_t>(last) * es + es - 1];
                (void)first;
                (void)end;
            }
        }
    } catch (const attnviz::Error&) {
    }
    return 0;
}
