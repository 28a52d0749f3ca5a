#pragma once
// Writing a heatmap to disk: PNG and SVG are painted by HeatmapWidget itself
// (so they look like the screen: colour map, labels, numbers, selection),
// CSV and JSON are the core's formats for the same translation and hypothesis.
#include <QByteArray>
#include <QSize>
#include <QString>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/decode/translation.hpp"

QT_BEGIN_NAMESPACE
class QPainter;
QT_END_NAMESPACE

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

/// Paints a picture with its top-left corner at (0, 0).
using PaintFunction = std::function<void(QPainter&)>;
/// A picture of `size` as PNG at `scale` times that size (DPI = 96 x scale) or as SVG, by the
/// suffix of path (the heatmap's and the model view's exports). False and *error on failure.
bool exportPicture(const PaintFunction& paint, QSize size, const QString& path, double scale, QString* error);
bool exportPicturePng(const PaintFunction& paint, QSize size, const QString& path, double scale, QString* error);
bool exportPictureSvg(const PaintFunction& paint, QSize size, const QString& path, QString* error);

/// PNG at `scale` times the on-screen size (DPI = 96 x scale). Returns false and sets *error on failure.
bool exportHeatmapPng(const HeatmapWidget& widget, const QString& path, double scale, QString* error);
/// SVG, vector: cells are rectangles, labels are text.
bool exportHeatmapSvg(const HeatmapWidget& widget, const QString& path, QString* error);
/// Dispatches on the suffix; PNG uses `scale`.
bool exportHeatmap(const HeatmapExportSource& source, const QString& path, double scale, QString* error);

}  // namespace attnviz::ui
