// Parameters against the configuration's table (core/persist/parameter_names.hpp).
#include "core/persist/network_check.hpp"

#include "core/io/error.hpp"
#include "core/persist/parameter_names.hpp"

namespace attnviz {

void check_network_parameters(EncoderDecoder& network, const std::string& what) {
    const auto expected = parameter_names(network.config());
    const auto named = network.named_parameters();
    if (named.size() != expected.size())
        throw FileError(what + ": the network has " + std::to_string(named.size()) + " parameters, its configuration " +
                        std::to_string(expected.size()));
    for (const auto& e : expected) {
        const torch::Tensor* t = named.find(e.module);
        if (!t) throw FileError(what + ": tensor '" + e.file + "' is missing");
        if (t->scalar_type() != torch::kFloat)
            throw FileError(what + ": tensor '" + e.file + "' has dtype " + std::string(c10::toString(t->scalar_type())) +
                            ", expected float32");
        if (t->sizes().vec() != e.shape)
            throw FileError(what + ": tensor '" + e.file + "' has shape " + shape_to_string(t->sizes().vec()) +
                            ", expected " + shape_to_string(e.shape) + " for its configuration");
    }
}

}  // namespace attnviz
