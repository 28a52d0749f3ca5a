#pragma once
// The T5 family's state_dict names (core/model/t5_model.hpp), rows of `shared` and lm_head in
// attnviz's vocabulary order: parameter_names() for a T5 configuration.
#include <vector>

#include "core/config/config.hpp"
#include "core/persist/parameter_names.hpp"

namespace attnviz {

/// Every parameter of a T5 network in its construction order (ConfigError when `config` is not T5's).
std::vector<ParameterName> t5_parameter_names(const ModelConfig& config);

}  // namespace attnviz
