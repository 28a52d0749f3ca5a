#pragma once
// Messages for people: what an error says, made from text the program did not
// write itself (a library's exception, a tensor's shape, a file's contents).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace attnviz {

/// A LibTorch exception's message without the C++ stack trace it appends
/// ("\nException raised from ..."): the part a user can act on.
std::string without_stack_trace(std::string message);

/// A count with its noun for a message: "1 layer", "2 layers", "0 layers".
std::string count_of(int64_t n, std::string_view one, std::string_view many);

/// A shape as "[3, 4]" ("[]" for a scalar).
std::string shape_to_string(const std::vector<int64_t>& shape);

/// How much of a text quote() shows by default, in bytes.
constexpr size_t quote_default_max = 80;

/// Text that came from outside (a file's token, tensor name or column, a line of input)
/// as a message quotes it: in single quotes, one short line that a terminal shows as it
/// is. At most `max` bytes of it (cut at a character boundary, then "..."); control
/// characters (C0, DEL, C1), bytes that are not UTF-8 and the invisible characters that
/// reorder text (bidirectional controls) are written as \xNN or \u{NNNN}. Every
/// message that quotes untrusted text goes through it.
std::string quote(std::string_view text, size_t max = quote_default_max);

/// quote() without the quotes: for a message from a library that may hold such text
/// (a parser's "last read: ..."), put inside attnviz's own.
std::string printable(std::string_view text, size_t max = quote_default_max);

}  // namespace attnviz
