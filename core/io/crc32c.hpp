#pragma once
// CRC-32C (Castagnoli): the checksum of TFRecord files, TensorBoard's event files
// (core/io/tensorboard_writer.hpp). Not zlib's CRC-32: another polynomial.
#include <cstddef>
#include <cstdint>

namespace attnviz {

/// Continues a CRC-32C (reflected polynomial 0x82F63B78, initial and final XOR
/// 0xFFFFFFFF, as iSCSI, RFC 3720 section B.4) over n more bytes; crc32c("123456789") is
/// 0xE3069283. Start with crc = 0.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);

/// TFRecord's masked CRC: ((crc >> 15) | (crc << 17)) + 0xA282EAD8, so that a CRC stored
/// in data that is itself checksummed does not make the outer sum degenerate.
inline uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u; }

}  // namespace attnviz
