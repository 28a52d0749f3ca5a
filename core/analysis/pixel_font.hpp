#pragma once
// A 5 x 9 pixel font for the token labels of heatmap images drawn without Qt
// (core/analysis/heatmap_image.hpp): printable ASCII, the accented lowercase
// letters of Latin-1 and Latin Extended-A drawn with their accents, uppercase
// ones as their base letter, a few typographic marks as their ASCII look-alikes
// (’ as ', « as <, – as -, SentencePiece's ▁ as _), anything else as '?'.
// The glyphs are drawn here, row by row (pixel_font.cpp).
#include <cstdint>
#include <string>
#include <vector>

#include "core/io/png.hpp"

namespace attnviz {

/// One glyph: 9 rows of 5 pixels, bit 4 the leftmost; rows 0-6 hold capitals and digits
/// (row 6 the baseline), rows 2-6 lowercase letters, rows 7-8 descenders.
struct Glyph {
    uint8_t rows[9] = {};
};

namespace pixel_font {
constexpr int glyph_width = 5, glyph_height = 9, advance = 6;  ///< advance: pixels from one glyph to the next

/// The glyphs of UTF-8 text, one per character (invalid UTF-8: '?' per bad byte).
std::vector<Glyph> glyphs(const std::string& utf8);

/// Width in pixels of n glyphs at a scale (no trailing space).
inline int text_width(size_t n, int scale) { return n == 0 ? 0 : static_cast<int>(n) * advance * scale - scale; }

/// Draws glyphs with their top-left corner at (x, y), each pixel a scale x scale square.
/// vertical: rotated a quarter turn anticlockwise, reading upwards from (x, y), which is
/// then the bottom-left corner of the first glyph (matplotlib's rotation=90). Pixels
/// outside the image are skipped.
void draw(RgbImage& image, int x, int y, const std::vector<Glyph>& text, int scale, uint32_t rgb,
          bool vertical = false);
}  // namespace pixel_font

}  // namespace attnviz
