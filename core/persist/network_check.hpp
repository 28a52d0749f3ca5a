#pragma once
// A network's parameters checked against what its configuration gives, before
// weights from a file are copied into it.
#include <string>

#include "core/model/encoder_decoder.hpp"

namespace attnviz {

/// Throws FileError naming the parameter when a network's parameters differ from what its
/// configuration gives (core/persist/parameter_names.hpp): a missing or extra name, a dtype other
/// than float32, another shape. `what` starts the message (e.g. "checkpoint 'x.ckpt'").
void check_network_parameters(EncoderDecoder& network, const std::string& what);

}  // namespace attnviz
