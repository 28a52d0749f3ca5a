#pragma once
// A PNG encoder for 8-bit RGB images (zlib's deflate), torch-free and Qt-free: the
// attention heatmaps the TensorBoard log writes (core/train/tensorboard_log.hpp).
#include <cstdint>
#include <string>
#include <vector>

namespace attnviz {

/// An 8-bit RGB image, rows top to bottom, 3 bytes a pixel.
struct RgbImage {
    int width = 0;
    int height = 0;
    std::vector<uint8_t> pixels;  ///< width * height * 3 bytes
    RgbImage() = default;
    /// Filled with one colour (0xRRGGBB).
    RgbImage(int w, int h, uint32_t rgb = 0xFFFFFF);
    void set(int x, int y, uint32_t rgb);  ///< ignores points outside the image
    uint32_t at(int x, int y) const;       ///< 0xRRGGBB
};

/// The image as a PNG file (colour type 2, 8 bits, no interlace; each row filtered with
/// "Up" or none, whichever is smaller, then deflated). Throws ConfigError for an empty
/// image, one whose pixels do not match its size, or a side above 1 << 20.
std::string encode_png(const RgbImage& image);

}  // namespace attnviz
