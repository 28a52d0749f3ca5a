#pragma once
// Messages for people: what an error says, made from text the program did not
// write itself (a library's exception, a tensor's shape).
#include <cstdint>
#include <string>
#include <vector>

namespace attnviz {

/// A LibTorch exception's message without the C++ stack trace it appends
/// ("\nException raised from ..."): the part a user can act on.
std::string without_stack_trace(std::string message);

/// A shape as "[3, 4]" ("[]" for a scalar).
std::string shape_to_string(const std::vector<int64_t>& shape);

}  // namespace attnviz
