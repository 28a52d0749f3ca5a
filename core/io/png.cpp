// PNG: the signature, IHDR, one IDAT (zlib stream of the filtered rows) and IEND,
// each chunk closed by zlib's CRC-32 of its type and data (PNG spec, sections 5 and 11).
#include "core/io/png.hpp"

#include <zlib.h>

#include <cstdlib>

#include "core/io/error.hpp"

namespace attnviz {

RgbImage::RgbImage(int w, int h, uint32_t rgb) : width(w), height(h) {
    if (w < 0 || h < 0) throw ConfigError("an image cannot have a negative size");
    pixels.resize(static_cast<size_t>(w) * static_cast<size_t>(h) * 3);
    for (size_t i = 0; i < pixels.size(); i += 3) {
        pixels[i] = static_cast<uint8_t>(rgb >> 16);
        pixels[i + 1] = static_cast<uint8_t>(rgb >> 8);
        pixels[i + 2] = static_cast<uint8_t>(rgb);
    }
}

void RgbImage::set(int x, int y, uint32_t rgb) {
    if (x < 0 || y < 0 || x >= width || y >= height) return;
    const size_t i = (static_cast<size_t>(y) * static_cast<size_t>(width) + static_cast<size_t>(x)) * 3;
    pixels[i] = static_cast<uint8_t>(rgb >> 16);
    pixels[i + 1] = static_cast<uint8_t>(rgb >> 8);
    pixels[i + 2] = static_cast<uint8_t>(rgb);
}

uint32_t RgbImage::at(int x, int y) const {
    const size_t i = (static_cast<size_t>(y) * static_cast<size_t>(width) + static_cast<size_t>(x)) * 3;
    return uint32_t{pixels.at(i)} << 16 | uint32_t{pixels.at(i + 1)} << 8 | pixels.at(i + 2);
}

namespace {

void put_u32(std::string& out, uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((v >> shift) & 0xFF);
}

void put_chunk(std::string& out, const char type[4], const std::string& data) {
    put_u32(out, static_cast<uint32_t>(data.size()));
    const size_t start = out.size();
    out.append(type, 4);
    out += data;
    const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(out.data() + start), static_cast<uInt>(out.size() - start));
    put_u32(out, static_cast<uint32_t>(crc));
}

}  // namespace

std::string encode_png(const RgbImage& image) {
    constexpr int max_side = 1 << 20;
    const size_t row = static_cast<size_t>(image.width) * 3;
    if (image.width <= 0 || image.height <= 0 || image.width > max_side || image.height > max_side)
        throw ConfigError("a PNG needs a width and height in 1.." + std::to_string(max_side) + ", got " +
                          std::to_string(image.width) + " x " + std::to_string(image.height));
    if (image.pixels.size() != row * static_cast<size_t>(image.height))
        throw ConfigError("the image's pixels do not match its size");
    // Filter each row: "Up" (the byte above subtracted) turns the heatmap's repeated cell
    // rows into zeros; a row where it does not pay stays unfiltered (sum of absolute values,
    // the PNG spec's heuristic).
    std::string filtered;
    filtered.reserve((row + 1) * static_cast<size_t>(image.height));
    std::string up(row, '\0');
    for (int y = 0; y < image.height; ++y) {
        const uint8_t* cur = image.pixels.data() + row * static_cast<size_t>(y);
        long none_cost = 0, up_cost = 0;
        for (size_t i = 0; i < row; ++i) {
            const uint8_t above = y > 0 ? (cur - row)[i] : 0;
            const auto d = static_cast<uint8_t>(cur[i] - above);
            up[i] = static_cast<char>(d);
            none_cost += std::abs(static_cast<int>(static_cast<int8_t>(cur[i])));
            up_cost += std::abs(static_cast<int>(static_cast<int8_t>(d)));
        }
        if (y > 0 && up_cost < none_cost) {
            filtered += '\2';
            filtered += up;
        } else {
            filtered += '\0';
            filtered.append(reinterpret_cast<const char*>(cur), row);
        }
    }
    uLongf packed_size = compressBound(static_cast<uLong>(filtered.size()));
    std::string packed(packed_size, '\0');
    if (compress2(reinterpret_cast<Bytef*>(&packed[0]), &packed_size, reinterpret_cast<const Bytef*>(filtered.data()),
                  static_cast<uLong>(filtered.size()), 9) != Z_OK)
        throw Error("zlib could not compress the image");
    packed.resize(packed_size);

    std::string ihdr;
    put_u32(ihdr, static_cast<uint32_t>(image.width));
    put_u32(ihdr, static_cast<uint32_t>(image.height));
    ihdr += '\x08';  // bits per sample
    ihdr += '\x02';  // colour type: RGB
    ihdr += std::string(3, '\0');  // deflate, adaptive filtering, no interlace
    std::string png("\x89PNG\r\n\x1a\n", 8);
    put_chunk(png, "IHDR", ihdr);
    put_chunk(png, "IDAT", packed);
    put_chunk(png, "IEND", {});
    return png;
}

}  // namespace attnviz
