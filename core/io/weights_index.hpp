#pragma once
// Which weights file a model has and what kind it is, and the shard index of a
// sharded one (Hugging Face's model.safetensors.index.json and
// pytorch_model.bin.index.json: {"metadata": {...}, "weight_map": {"tensor name":
// "shard file name", ...}}), read with every name checked: the shards must be files
// of the index's folder (no absolute paths, no "..": an index cannot make attnviz
// read files elsewhere by naming them; symbolic links, as Hugging Face's cache uses
// them, are followed).
//
// Qt-free and LibTorch-free (part of attnviz_base); core/persist/weights_file.hpp
// reads the tensors.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace attnviz {

enum class WeightsFormat {
    safetensors,  ///< a safetensors file (model.safetensors)
    torch_zip,    ///< a torch.save zip archive (pytorch_model.bin)
    shard_index,  ///< a JSON shard index (*.index.json)
};

/// "safetensors", "a torch.save file", "a shard index".
std::string to_string(WeightsFormat format);

/// The kind of the weights file at `path`, from its first bytes (a JSON object for an
/// index). Throws FileError naming the file when it is none of them (saying what it
/// looks like), or cannot be read.
WeightsFormat weights_format(const std::string& path);

/// The weights file of a model folder: the first of model.safetensors,
/// model.safetensors.index.json, pytorch_model.bin, pytorch_model.bin.index.json that
/// exists (transformers' order). Throws FileError naming the folder and the names looked for.
std::string find_weights_file(const std::string& folder);

/// A shard index, checked.
struct ShardIndex {
    std::string path;                               ///< the index file, for messages
    std::string folder;                             ///< the folder the shard names are relative to
    std::vector<std::string> shards;                ///< the shard file names, each once, sorted
    std::map<std::string, std::string> weight_map;  ///< tensor name -> shard file name (one of shards)
};

/// Reads a shard index (at most max_bytes; max_tensors names). Throws FileError naming the
/// file and the entry for: bad JSON, no "weight_map" object, a value that is not a string,
/// a shard name that is empty, absolute, has a ".." or "." component, a backslash or a NUL.
ShardIndex read_shard_index(const std::string& path, uint64_t max_bytes = uint64_t(64) << 20,
                            size_t max_tensors = 100000);

}  // namespace attnviz
