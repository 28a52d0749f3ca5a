#pragma once
// Writing a heatmap to disk: PNG and SVG are painted by HeatmapWidget itself
// (so they look like the screen: colour map, labels, numbers, selection),
// CSV and JSON are the core's formats for the same translation and hypothesis.
#include <QByteArray>
#include <QString>
#include <nlohmann/json.hpp>

#include "core/decode/translation.hpp"

namespace attnviz::ui {

class HeatmapWidget;

/// What to export besides the widget's picture.
struct HeatmapExportSource {
    const HeatmapWidget* widget = nullptr;
    const Translation* translation = nullptr;  ///< for CSV/JSON (may be null for PNG/SVG)
    size_t hypothesis = 0;
    nlohmann::json modelSettings;               ///< JSON: "model"
    nlohmann::json decodeSettings;              ///< JSON: "decode"
};

enum class HeatmapFormat { Png, Svg, Csv, Json, Unknown };
/// From the file suffix (case-insensitive).
HeatmapFormat heatmapFormatFor(const QString& path);
/// File dialog filter listing the four formats.
QString heatmapFileFilter();

/// Writes an export's bytes to path atomically (core/io/atomic_file.hpp: never half a file,
/// never over a device or a FIFO). Returns false and sets *error on failure.
bool writeExportFile(const QString& path, const QByteArray& bytes, QString* error);

/// PNG at `scale` times the on-screen size (DPI = 96 x scale). Returns false and sets *error on failure.
bool exportHeatmapPng(const HeatmapWidget& widget, const QString& path, double scale, QString* error);
/// SVG, vector: cells are rectangles, labels are text.
bool exportHeatmapSvg(const HeatmapWidget& widget, const QString& path, QString* error);
/// Dispatches on the suffix; PNG uses `scale`.
bool exportHeatmap(const HeatmapExportSource& source, const QString& path, double scale, QString* error);

}  // namespace attnviz::ui
