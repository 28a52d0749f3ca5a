#include "core/config/model_description.hpp"

#include <cctype>

#include "core/config/pretrained_config.hpp"
#include "core/io/message.hpp"

namespace attnviz {

std::string describe_model(const ModelConfig& c) {
    if (c.is_pretrained() && c.pretrained) return c.pretrained->model.describe();
    if (c.is_transformer())
        return "Transformer: d " + std::to_string(c.hidden_size) + ", " + std::to_string(c.num_layers) + "+" +
               std::to_string(c.num_layers) + " layers, " + count_of(c.num_heads, "head", "heads") + ", ffn " +
               std::to_string(c.ffn_size);
    std::string cell = to_string(c.cell);
    for (char& ch : cell) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    return "RNN encoder-decoder: " + cell + (c.bidirectional ? " (bidirectional encoder)" : "") + ", " +
           (c.scoring == Scoring::none ? std::string("no attention") : to_string(c.scoring) + " attention") +
           ", embedding " + std::to_string(c.embed_size) + ", hidden " + std::to_string(c.hidden_size) + ", " +
           count_of(c.num_layers, "layer", "layers");
}

}  // namespace attnviz
