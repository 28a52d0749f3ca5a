// Heatmap images: the grid of cells, then the labels in the margins.
#include "core/analysis/heatmap_image.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/analysis/colormap_tables.hpp"
#include "core/analysis/pixel_font.hpp"
#include "core/io/error.hpp"

namespace attnviz {

namespace {

const std::array<uint32_t, 256>& table(const std::string& name) {
    std::string n = name;
    for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (n == "viridis") return colormaps::viridis;
    if (n == "magma") return colormaps::magma;
    if (n == "plasma") return colormaps::plasma;
    if (n == "cividis") return colormaps::cividis;
    if (n == "reds") return colormaps::reds;
    if (n == "bone") return colormaps::bone;
    throw ConfigError("unknown colour map '" + name + "': viridis, magma, plasma, cividis, Reds or bone");
}

/// matplotlib's lookup: index int(x * N), clipped; NaN and x <= 0 the first entry.
uint32_t lookup(const std::array<uint32_t, 256>& t, double x) {
    const int index = std::isfinite(x) && x > 0 ? std::min(255, static_cast<int>(x * 256.0)) : 0;
    return t[static_cast<size_t>(index)] & 0xFFFFFFu;
}

/// A label's glyphs, cut to max_chars (the last one then '~').
std::vector<Glyph> label_glyphs(const std::string& text, size_t max_chars) {
    std::vector<Glyph> g = pixel_font::glyphs(text);
    if (max_chars > 0 && g.size() > max_chars) {
        g.resize(max_chars);
        g.back() = pixel_font::glyphs("~").front();
    }
    return g;
}

}  // namespace

uint32_t heatmap_color(const std::string& colormap, double weight) {
    return lookup(table(colormap), weight);
}

RgbImage heatmap_image(const AttentionMatrix& weights, const std::vector<std::string>& row_labels,
                       const std::vector<std::string>& column_labels, const HeatmapImageOptions& options) {
    const auto& colours = table(options.colormap);
    const int rows = static_cast<int>(weights.size());
    size_t widest = 0;
    for (const auto& r : weights) widest = std::max(widest, r.size());
    const int columns = static_cast<int>(widest);
    if (rows == 0 || columns == 0) throw ConfigError("a heatmap needs at least one weight");
    const int cell = std::max(1, std::min(std::max(1, options.max_cell), std::max(1, options.max_grid) / std::max(rows, columns)));

    // The font at twice its size where the cells are tall enough, else at its own; none below it.
    const int scale = !options.labels ? 0 : cell >= 2 * pixel_font::glyph_height + 2 ? 2 : cell >= pixel_font::glyph_height + 1 ? 1 : 0;
    std::vector<std::vector<Glyph>> left, top;
    int left_width = 0, top_height = 0;
    const int gap = 4;  // between the labels and the grid
    if (scale > 0) {
        for (int r = 0; r < rows && r < static_cast<int>(row_labels.size()); ++r) {
            left.push_back(label_glyphs(row_labels[static_cast<size_t>(r)], options.max_label_chars));
            left_width = std::max(left_width, pixel_font::text_width(left.back().size(), scale));
        }
        for (int c = 0; c < columns && c < static_cast<int>(column_labels.size()); ++c) {
            top.push_back(label_glyphs(column_labels[static_cast<size_t>(c)], options.max_label_chars));
            top_height = std::max(top_height, pixel_font::text_width(top.back().size(), scale));
        }
    }
    const int margin = 4;  // white around everything
    const int x0 = margin + (left_width > 0 ? left_width + gap : 0);
    const int y0 = margin + (top_height > 0 ? top_height + gap : 0);
    RgbImage image(x0 + columns * cell + margin, y0 + rows * cell + margin, 0xFFFFFF);

    for (int r = 0; r < rows; ++r) {
        const auto& row = weights[static_cast<size_t>(r)];
        for (int c = 0; c < columns; ++c) {
            const double w = c < static_cast<int>(row.size()) ? row[static_cast<size_t>(c)] : 0.0;
            const uint32_t rgb = lookup(colours, w);
            for (int dy = 0; dy < cell; ++dy)
                for (int dx = 0; dx < cell; ++dx) image.set(x0 + c * cell + dx, y0 + r * cell + dy, rgb);
        }
    }
    const int glyph_px = pixel_font::glyph_height * scale;
    for (size_t r = 0; r < left.size(); ++r) {  // right-aligned against the grid, centred on the row
        const int x = x0 - gap - pixel_font::text_width(left[r].size(), scale);
        const int y = y0 + static_cast<int>(r) * cell + (cell - glyph_px) / 2;
        pixel_font::draw(image, x, y, left[r], scale, 0x000000);
    }
    for (size_t c = 0; c < top.size(); ++c) {  // reading upwards from just above the grid
        const int x = x0 + static_cast<int>(c) * cell + (cell - glyph_px) / 2;
        pixel_font::draw(image, x, y0 - gap - 1, top[c], scale, 0x000000, true);
    }
    return image;
}

}  // namespace attnviz
