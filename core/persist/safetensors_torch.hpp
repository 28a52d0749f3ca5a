#pragma once
// Between safetensors entries (core/io/safetensors.hpp) and torch::Tensor: copies
// or views with the dtype checked, so a file's bytes are never reinterpreted as
// another type.
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/io/safetensors.hpp"

namespace attnviz::safetensors {

/// The LibTorch type of a file type (kFloat for F32, ...).
torch::ScalarType scalar_type(DType d);
/// The file type of a LibTorch type; ConfigError for types the format has no name for.
DType dtype_of(torch::ScalarType t);

/// A copy of an entry as a CPU tensor. Throws FileError naming the file and the
/// tensor when its dtype is not `expected`.
torch::Tensor to_tensor(const File& file, const TensorInfo& entry, DType expected);

/// An entry as a CPU tensor that views the file's bytes without copying them, where the
/// data is aligned for its type (the data section starts 8-aligned in files written by
/// attnviz or the safetensors library; an entry after one of an odd number of 2-byte
/// elements may not be): otherwise a copy. The tensor keeps the file's bytes alive
/// (File::owner, a mapping for read_file), so it may outlive the File. Writing into it
/// changes this process's copy of the pages (never the file), and every view of the
/// same file sees the write. Throws FileError naming the file and the tensor when its
/// dtype is not `expected`.
torch::Tensor view_tensor(const File& file, const TensorInfo& entry, DType expected);

/// An entry of a floating type (F16, BF16, F32, F64) as a float32 CPU tensor, converted
/// as torch's .to(torch::kFloat) converts; FileError naming the tensor and its dtype for
/// integer and bool entries. `view`: an F32 entry is viewed as view_tensor views it
/// instead of copied (the other types are always converted copies).
torch::Tensor to_float_tensor(const File& file, const TensorInfo& entry, bool view = false);

/// Whether `dtype` is one to_float_tensor converts (F16, BF16, F32, F64).
bool is_float(DType dtype);

/// Copies an entry into an existing tensor (any device) of the same shape and a
/// matching dtype; FileError naming the tensor when shape or dtype differ.
void copy_into(const File& file, const TensorInfo& entry, torch::Tensor& dst);

/// Tensors being written: keeps contiguous CPU copies alive until serialize() has read them.
class TensorWriter {
public:
    /// Adds a tensor under `name` (copied to a contiguous CPU tensor as needed).
    void add(const std::string& name, const torch::Tensor& tensor);
    const std::vector<TensorToWrite>& entries() const { return m_entries; }
    std::string serialize(const std::map<std::string, std::string>& metadata) const {
        return safetensors::serialize(m_entries, metadata);
    }

private:
    std::vector<torch::Tensor> m_keep;
    std::vector<TensorToWrite> m_entries;
};

}  // namespace attnviz::safetensors
