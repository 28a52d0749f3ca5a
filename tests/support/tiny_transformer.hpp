#pragma once
// The tiny Transformer the core tests build (16 wide, 2 blocks).
#include <cstdint>

#include <memory>

#include "core/config/config.hpp"
#include "core/decode/translation_model.hpp"
#include "core/model/families.hpp"

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

/// The tiny Transformer over a..e -> v..z with its W_ weights scaled up 3x (sharper maps than an
/// initialisation's: heads that differ, decisions that erasure and masking can change).
inline TranslationModelPtr sharp_tiny_transformer(torch::Dtype dtype = torch::kFloat) {
    const auto src = std::make_shared<const Vocab>(Vocab::build({{"a", "b", "c", "d", "e"}}));
    const auto tgt = std::make_shared<const Vocab>(Vocab::build({{"v", "w", "x", "y", "z"}}));
    Network t = build_network(
        tiny_transformer_config(static_cast<int64_t>(src->size()), static_cast<int64_t>(tgt->size()), 4, 24, 3));
    {
        torch::NoGradGuard ng;
        for (auto& p : t->named_parameters())
            if (p.key().find("W_") != std::string::npos) p.value().mul_(3.0);
    }
    t->to(dtype);
    return std::make_shared<const TranslationModel>(t, src, tgt, TokenLevel::word);
}

}  // namespace attnviz::testing
