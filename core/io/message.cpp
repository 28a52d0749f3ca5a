// Messages for people.
#include "core/io/message.hpp"

namespace attnviz {

std::string without_stack_trace(std::string message) {
    if (const auto pos = message.find("\nException raised from"); pos != std::string::npos) message.resize(pos);
    return message;
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

}  // namespace attnviz
