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
/// How much of a path quote() shows: all of it (Linux's PATH_MAX), since the end names the file.
constexpr size_t quote_path_max = 4096;

/// Text that came from outside (a file's token, tensor name or column, a line of input)
/// as a message quotes it: in single quotes, one short line that a terminal shows as it
/// is. At most `max` bytes of it (cut at a character boundary, then "..."); control
/// characters (C0, DEL, C1), the line and paragraph separators U+2028 and U+2029, bytes
/// that are not UTF-8 and the invisible characters that reorder text (bidirectional
/// controls) are written as \xNN or \u{NNNN}. Every message that quotes untrusted text
/// (a flag's value, a path, a file's contents) goes through it.
std::string quote(std::string_view text, size_t max = quote_default_max);

/// quote() without the quotes: for a message from a library that may hold such text
/// (a parser's "last read: ..."), put inside attnviz's own.
std::string printable(std::string_view text, size_t max = quote_default_max);

/// Whether text holds what a terminal or a line-based output (one translation per line,
/// " ||| " fields) reads as more than text: a control character (C0 with tab, line feed
/// and escape, DEL, C1 with NEL U+0085), a line or paragraph separator (U+2028, U+2029)
/// or bytes that are not UTF-8. printable() escapes every one of them.
bool has_control_characters(std::string_view text);

/// Text as one line of output: what has_control_characters() finds written as printable()
/// writes it, everything else as it is (bidirectional marks included: a translation into
/// Arabic or Hebrew may hold them), whatever its length. For output made from a file's
/// contents (a pretrained model's detokenised text) and the CLI's last line of defence.
std::string escape_controls(std::string_view text);

}  // namespace attnviz
