// torch.save records -> torch::Tensor. The record was checked against its storage
// when the file was read (torch_bin.cpp): offset + sum((size - 1) * stride) lies
// inside the storage, so as_strided on the storage's elements stays in bounds.
#include "core/persist/torch_bin_tensor.hpp"

#include <cstdint>
#include <cstring>
#include <memory>

#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/persist/safetensors_torch.hpp"

namespace attnviz::torch_bin {

namespace {

torch::TensorOptions options_of(DType dtype) { return torch::TensorOptions().dtype(safetensors::scalar_type(dtype)); }

bool aligned(const File& file, const Storage& s) {
    return reinterpret_cast<uintptr_t>(file.data(s)) % safetensors::element_size(s.dtype) == 0;
}

/// The elements of the storage the record uses, from its offset on, as a 1-d tensor
/// (a view without a deleter where aligned: the caller copies from it at once).
torch::Tensor used_elements(const File& file, const TensorRecord& r) {
    const Storage& s = file.storages[r.storage];
    const int64_t count = static_cast<int64_t>(s.numel) - r.storage_offset;
    const size_t es = safetensors::element_size(s.dtype);
    char* first = file.writable_data(s) + static_cast<size_t>(r.storage_offset) * es;
    if (aligned(file, s)) return torch::from_blob(first, {count}, options_of(s.dtype));
    auto copy = torch::empty({count}, options_of(s.dtype));
    if (count > 0) std::memcpy(copy.data_ptr(), first, static_cast<size_t>(count) * es);
    return copy;
}

}  // namespace

torch::Tensor to_tensor(const File& file, const TensorRecord& record) {
    if (record.numel() == 0) return torch::empty(record.shape, options_of(record.dtype));
    return used_elements(file, record).as_strided(record.shape, record.strides, 0).clone(at::MemoryFormat::Contiguous);
}

torch::Tensor view_tensor(const File& file, const TensorRecord& record) {
    const Storage& s = file.storages[record.storage];
    if (!file.owner || !aligned(file, s)) return to_tensor(file, record);
    std::shared_ptr<const void> keep = file.owner;
    auto storage = torch::from_blob(
        file.writable_data(s), {static_cast<int64_t>(s.numel)}, [keep](void*) mutable { keep.reset(); },
        options_of(s.dtype));
    return storage.as_strided(record.shape, record.strides, record.storage_offset);
}

torch::Tensor to_float_tensor(const File& file, const TensorRecord& record, bool view) {
    if (!safetensors::is_float(record.dtype))
        throw FileError("'" + file.name + "': tensor " + quote(record.name) + " has dtype " +
                        safetensors::to_string(record.dtype) + ", expected a floating type (F32, F16, BF16 or F64)");
    if (record.dtype == DType::F32) return view ? view_tensor(file, record) : to_tensor(file, record);
    if (record.numel() == 0) return torch::empty(record.shape, torch::kFloat);
    return used_elements(file, record).as_strided(record.shape, record.strides, 0).to(torch::kFloat).contiguous();
}

}  // namespace attnviz::torch_bin
