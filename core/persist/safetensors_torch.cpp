// safetensors <-> LibTorch. The bytes are little-endian on both sides (the
// reader refuses to build elsewhere), so a copy is a memcpy.
#include "core/persist/safetensors_torch.hpp"

#include <cstdint>
#include <cstring>
#include <memory>

#include "core/io/error.hpp"
#include "core/io/message.hpp"

namespace attnviz::safetensors {

namespace {
const std::pair<DType, torch::ScalarType> k_types[] = {
    {DType::F64, torch::kDouble}, {DType::F32, torch::kFloat},  {DType::F16, torch::kHalf},
    {DType::BF16, torch::kBFloat16}, {DType::I64, torch::kLong}, {DType::I32, torch::kInt},
    {DType::I16, torch::kShort},  {DType::I8, torch::kChar},    {DType::U64, torch::kUInt64},
    {DType::U32, torch::kUInt32}, {DType::U16, torch::kUInt16}, {DType::U8, torch::kByte},
    {DType::BOOL, torch::kBool}};

void check_dtype(const File& file, const TensorInfo& entry, DType expected) {
    if (entry.dtype != expected)
        throw FileError("'" + file.name + "': tensor " + quote(entry.name) + " has dtype " + to_string(entry.dtype) +
                        ", expected " + to_string(expected));
}
}  // namespace

torch::ScalarType scalar_type(DType d) {
    for (const auto& [dt, st] : k_types)
        if (dt == d) return st;
    return torch::kFloat;
}

DType dtype_of(torch::ScalarType t) {
    for (const auto& [dt, st] : k_types)
        if (st == t) return dt;
    throw ConfigError(std::string("safetensors has no name for the tensor type ") + c10::toString(t));
}

torch::Tensor to_tensor(const File& file, const TensorInfo& entry, DType expected) {
    check_dtype(file, entry, expected);
    auto t = torch::empty(entry.shape, torch::TensorOptions().dtype(scalar_type(entry.dtype)));
    if (entry.end > entry.begin) std::memcpy(t.data_ptr(), file.data(entry), entry.end - entry.begin);
    return t;
}

torch::Tensor view_tensor(const File& file, const TensorInfo& entry, DType expected) {
    check_dtype(file, entry, expected);
    const size_t align = element_size(entry.dtype);
    if (!file.owner || reinterpret_cast<uintptr_t>(file.data(entry)) % align != 0)
        return to_tensor(file, entry, expected);
    // The deleter holds the bytes' owner: the tensor keeps the mapping (or string) alive.
    std::shared_ptr<const void> keep = file.owner;
    return torch::from_blob(
        file.writable_data(entry), entry.shape, [keep](void*) mutable { keep.reset(); },
        torch::TensorOptions().dtype(scalar_type(entry.dtype)));
}

bool is_float(DType dtype) {
    return dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16 || dtype == DType::F64;
}

torch::Tensor to_float_tensor(const File& file, const TensorInfo& entry, bool view) {
    if (!is_float(entry.dtype))
        throw FileError("'" + file.name + "': tensor " + quote(entry.name) + " has dtype " + to_string(entry.dtype) +
                        ", expected a floating type (F32, F16, BF16 or F64)");
    if (entry.dtype == DType::F32) return view ? view_tensor(file, entry, DType::F32) : to_tensor(file, entry, DType::F32);
    // Converted from a temporary view where aligned (one copy), else from a copy.
    const size_t align = element_size(entry.dtype);
    if (reinterpret_cast<uintptr_t>(file.data(entry)) % align == 0)
        return torch::from_blob(file.writable_data(entry), entry.shape, torch::TensorOptions().dtype(scalar_type(entry.dtype)))
            .to(torch::kFloat);
    return to_tensor(file, entry, entry.dtype).to(torch::kFloat);
}

void copy_into(const File& file, const TensorInfo& entry, torch::Tensor& dst) {
    check_dtype(file, entry, dtype_of(dst.scalar_type()));
    if (dst.sizes().vec() != entry.shape)
        throw FileError("'" + file.name + "': tensor " + quote(entry.name) + " has shape " + shape_to_string(entry.shape) +
                        ", expected " + shape_to_string(dst.sizes().vec()));
    torch::NoGradGuard no_grad;
    if (dst.device().is_cpu() && dst.is_contiguous()) {
        if (entry.end > entry.begin) std::memcpy(dst.data_ptr(), file.data(entry), entry.end - entry.begin);
    } else {
        dst.copy_(to_tensor(file, entry, entry.dtype));
    }
}

void TensorWriter::add(const std::string& name, const torch::Tensor& tensor) {
    auto t = tensor.detach().to(torch::kCPU).contiguous();
    TensorToWrite w;
    w.name = name;
    w.dtype = dtype_of(t.scalar_type());
    w.shape = t.sizes().vec();
    w.data = t.data_ptr();
    w.bytes = static_cast<size_t>(t.numel()) * t.element_size();
    m_keep.push_back(std::move(t));
    m_entries.push_back(std::move(w));
}

}  // namespace attnviz::safetensors
