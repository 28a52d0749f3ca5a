#pragma once
// An attention heatmap as an RGB image, drawn without Qt: one square cell per
// weight in matplotlib's colours (core/analysis/colormap_tables.hpp), the output
// tokens beside the rows and the source tokens above the columns in a small pixel
// font (core/analysis/pixel_font.hpp), as Joey NMT's plot_heatmap lays them out.
// What the TensorBoard log shows as attention/0, /1, /2 (core/train/tensorboard_log.hpp).
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/io/png.hpp"
#include "core/model/attention_map.hpp"

namespace attnviz {

struct HeatmapImageOptions {
    /// The colour map: matplotlib's name ("viridis", "magma", "plasma", "cividis", "Reds", "bone"),
    /// case-insensitive. viridis, the app's default, by default.
    std::string colormap = "viridis";
    int max_cell = 24;              ///< pixels a side of one weight's cell, at most
    int max_grid = 768;             ///< the grid's longer side, at most (long sentences get smaller cells, down to 1 px)
    bool labels = true;             ///< token labels (drawn when a cell is at least 10 px: the font's height)
    size_t max_label_chars = 14;    ///< a longer token is cut and ends in '~'
};

/// The colour of a weight (0xRRGGBB) with matplotlib's lookup: table index int(x * 256),
/// clipped to 0..255; NaN and values below 0 take the first entry. Throws ConfigError
/// naming the maps for an unknown name.
uint32_t heatmap_color(const std::string& colormap, double weight);

/// The heatmap of weights[row][column] (rows: output tokens; columns: source tokens; ragged
/// rows read as 0 where they end). Labels are optional: fewer labels than rows or columns
/// leave the rest unlabelled. The image is white around the grid; its size is bounded by
/// the options (max_grid plus the labels' margins) unless there are more rows or columns
/// than max_grid pixels. Throws ConfigError when weights has no cell.
RgbImage heatmap_image(const AttentionMatrix& weights, const std::vector<std::string>& row_labels,
                       const std::vector<std::string>& column_labels, const HeatmapImageOptions& options = {});

}  // namespace attnviz
