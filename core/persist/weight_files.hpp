#pragma once
// The weights of a model folder, whatever file holds them: model.safetensors, a
// sharded model.safetensors.index.json, or pytorch_model.bin.
#include <map>
#include <string>

#include <torch/torch.h>

namespace attnviz {

/// A folder's weights by name, on the CPU in the file's dtype.
struct ModelWeights {
    std::map<std::string, torch::Tensor> tensors;
    std::string source;  ///< the file (or index) they came from, for messages
};

/// Reads the weights of the model folder `dir`: model.safetensors, else the shards of
/// model.safetensors.index.json, else pytorch_model.bin. FileError naming the file and the problem.
ModelWeights read_model_weights(const std::string& dir);

}  // namespace attnviz
