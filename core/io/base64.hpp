// Base64 (RFC 4648, with padding) for binary data kept in JSON (tokenizer models in a checkpoint's metadata).
#pragma once

#include <string>

namespace attnviz {

/// Encodes bytes as base64 with '=' padding.
std::string base64_encode(const std::string& bytes);
/// Decodes base64 with '=' padding; throws FileError naming the offset of the first bad character.
std::string base64_decode(const std::string& text);

}  // namespace attnviz
