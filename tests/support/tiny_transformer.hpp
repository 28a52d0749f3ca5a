#pragma once
// The tiny Transformer the core tests build (16 wide, 2 blocks).
#include <cstdint>

#include "core/config/config.hpp"

namespace attnviz::testing {

/// A tiny Transformer config over the given vocabulary sizes.
inline ModelConfig tiny_transformer_config(int64_t src_vocab, int64_t tgt_vocab, int64_t heads = 4, int64_t ffn = 24,
                                           uint64_t seed = 5) {
    ModelConfig c;
    c.arch = ModelArch::transformer;
    c.src_vocab = src_vocab;
    c.tgt_vocab = tgt_vocab;
    c.hidden_size = 16;
    c.num_layers = 2;
    c.num_heads = heads;
    c.ffn_size = ffn;
    c.seed = seed;
    return c;
}

}  // namespace attnviz::testing
