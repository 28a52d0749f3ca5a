// CRC-32C, a byte at a time from a 256-entry table (the records are small: a few
// hundred bytes of scalars, a few kilobytes of PNG per validation).
#include "core/io/crc32c.hpp"

#include <array>

namespace attnviz {

namespace {
constexpr uint32_t castagnoli_reflected = 0x82F63B78u;

std::array<uint32_t, 256> make_table() {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ castagnoli_reflected : c >> 1;
        t[i] = c;
    }
    return t;
}
}  // namespace

uint32_t crc32c(const void* data, size_t n, uint32_t crc) {
    static const std::array<uint32_t, 256> table = make_table();
    const auto* p = static_cast<const unsigned char*>(data);
    crc = ~crc;
    for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xFFu] ^ (crc >> 8);
    return ~crc;
}

}  // namespace attnviz
