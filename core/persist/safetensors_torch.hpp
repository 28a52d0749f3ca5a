#pragma once
// Between safetensors entries (core/io/safetensors.hpp) and torch::Tensor: copies
// with the dtype checked, so a file's bytes are never reinterpreted as another type.
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
