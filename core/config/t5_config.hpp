#pragma once
// The T5 family's config.json (transformers' T5Config and MT5Config; Flan-T5 is t5 with
// feed_forward_proj "gated-gelu" and its own lm_head): what differs from the Marian/M2M100
// layout of PretrainedConfig, read field by field with messages naming the file and the key.
//
//   T5 / mT5 / Flan-T5             what attnviz does with it
//   d_kv                           each head's width: num_heads x d_kv may differ from d_model
//   relative_attention_*           position buckets of key - query (bidirectional in the encoder,
//                                  causal in the decoder), block 0's relative_attention_bias, shared
//   feed_forward_proj              "relu" (wi, wo) or "gated-gelu" (gelu_new(wi_0 x) * wi_1 x, wo)
//   tie_word_embeddings            t5: scores d_model^-0.5 x hidden when true (scale_decoder_outputs
//                                  says so when present); mt5: never rescaled
//   task_specific_params           the task prefixes ("translate English to German: ")
//
// PretrainedConfig's own fields hold the rest (width, layers, heads, num_heads as both encoder_heads
// and decoder_heads, d_ff as both ffn widths, the special ids; pre-norm with final norms, no
// biases, one shared embedding). Torch-free.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config/pretrained_config.hpp"

namespace attnviz {

/// The T5 family's own fields (PretrainedConfig::t5).
struct T5Options {
    std::string model_type = "t5";            ///< "t5" or "mt5", written back as read
    int64_t head_dim = 64;                    ///< d_kv: one head's width
    int64_t relative_buckets = 32;            ///< relative_attention_num_buckets
    int64_t relative_max_distance = 128;      ///< relative_attention_max_distance: distances past it share a bucket
    bool gated = false;                       ///< feed_forward_proj "gated-*": wi_0, wi_1 and wo
    std::string feed_forward_proj = "relu";   ///< as config.json spells it
    bool scale_decoder_outputs = true;        ///< the last hidden state times d_model^-0.5 before lm_head
    /// task_specific_params' prefixes in the file's order: (task, prefix), e.g.
    /// ("translation_en_to_de", "translate English to German: "); tasks without a prefix left out.
    std::vector<std::pair<std::string, std::string>> task_prefixes;

    /// Inner width of an attention: heads x head_dim.
    int64_t inner(int64_t heads) const { return heads * head_dim; }
};

// is_t5_model_type, t5_config_from_json, t5_config_to_json, t5_describe and task_prefixes are
// declared in core/config/pretrained_config.hpp (which calls them) and defined in t5_config.cpp.

}  // namespace attnviz
