#pragma once
// A model described as it is, in one line, for headers and titles (the web page's, the
// app's): the family and the sizes that say what its attention is.
#include <string>

#include "core/config/config.hpp"

namespace attnviz {

/// "RNN encoder-decoder: GRU, additive attention, embedding 64, hidden 128, 1 layer",
/// "Transformer: d 256, 2+2 layers, 4 heads, ffn 64", or a pretrained model's own
/// description ("Marian, d 512, 6+6 layers, 8 heads, ffn 2048, vocabulary 59514").
std::string describe_model(const ModelConfig& c);

}  // namespace attnviz
