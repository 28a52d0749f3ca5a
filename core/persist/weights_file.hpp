#pragma once
// A model's weights in one call, whatever file holds them: model.safetensors,
// pytorch_model.bin (a torch.save zip, read by attnviz's restricted reader,
// core/io/torch_bin.hpp), or a sharded model (model.safetensors.index.json,
// pytorch_model.bin.index.json: core/io/weights_index.hpp), or a folder holding one.
//
//   NamedTensors w = read_weights("opus-mt-en-fr/");                  // copies
//   NamedTensors v = read_weights("m/model.safetensors", {true, true}); // views, float32
//
// Every file is mapped, not read: with `view` the tensors are the file's pages (a
// 300 MB model adds about 300 MB of resident memory once every weight is used, and
// nothing before), shared with the page cache until written (then copied page by page
// for this process; the file never changes).
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "core/io/safetensors.hpp"
#include "core/io/torch_bin.hpp"

namespace attnviz {

/// Tensors by name, in the file's order (shards one after the other, sorted by file name).
using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

struct WeightsReadOptions {
    /// Tensors view the mapped file where they can instead of being copies: an entry of
    /// its stored type whose bytes are aligned for it (safetensors: view_tensor; .bin:
    /// strided views of the storage, so tied weights share memory as after torch.load).
    /// Other entries, and every converted one, are contiguous copies.
    bool view = false;
    /// Floating tensors (F16, BF16, F64) become float32 (F32 ones stay, viewed or copied);
    /// integer and bool tensors stay as stored.
    bool to_float = false;
    safetensors::Limits safetensors_limits;  ///< bounds for safetensors files and shards
    torch_bin::Limits bin_limits;            ///< bounds for .bin files and shards
};

/// Reads every tensor of the weights at `path`: a safetensors file, a torch.save zip, a
/// shard index (every shard it names is read; a shard must hold exactly the tensors the
/// index maps to it, and no name may come twice), or a folder (find_weights_file picks
/// the file). Tensors are on the CPU, never requiring grad. Throws FileError naming the
/// file and the problem.
NamedTensors read_weights(const std::string& path, const WeightsReadOptions& options = {});

}  // namespace attnviz
