#pragma once
// Records of a torch.save file (core/io/torch_bin.hpp) as torch::Tensor: copies in
// the record's shape (a strided record becomes a contiguous tensor), or views of the
// mapped storage with the record's strides, as torch.load gives them.
#include <torch/torch.h>

#include "core/io/torch_bin.hpp"

namespace attnviz::torch_bin {

/// A contiguous CPU copy of a record, of its stored type (float32 for F32, ...).
torch::Tensor to_tensor(const File& file, const TensorRecord& record);

/// A CPU tensor that views the record's storage in the file without copying it: the
/// record's shape, strides and storage offset, so records that share a storage (tied
/// weights) share memory as they do after torch.load. It keeps the file's bytes alive
/// (File::owner); writing into it changes this process's copy of the pages (never the
/// file). Where the storage is not aligned for its type (torch aligns storages to 64
/// bytes; a crafted file may not) it is a copy, as to_tensor makes.
torch::Tensor view_tensor(const File& file, const TensorRecord& record);

/// A record of a floating type (F16, BF16, F32, F64) as a float32 CPU tensor, converted
/// as torch's .to(torch::kFloat) converts; FileError naming the file, the tensor and its
/// type for integer and bool records. `view`: an F32 record is viewed as view_tensor
/// views it instead of copied (the other types are always converted copies).
torch::Tensor to_float_tensor(const File& file, const TensorRecord& record, bool view = false);

}  // namespace attnviz::torch_bin
