#include "ui/heatmap/HeatmapExport.hpp"

#include <QBuffer>
#include <QFileInfo>
#include <QImage>
#include <QImageWriter>
#include <QPainter>
#include <QSvgGenerator>
#include <cmath>

#include "core/io/atomic_file.hpp"
#include "core/io/error.hpp"
#include "core/analysis/export.hpp"
#include "ui/common/Format.hpp"
#include "ui/heatmap/HeatmapWidget.hpp"

namespace attnviz::ui {

HeatmapFormat heatmapFormatFor(const QString& path) {
    const QString suffix = QFileInfo(path).suffix().toLower();
    if (suffix == QLatin1String("png")) return HeatmapFormat::Png;
    if (suffix == QLatin1String("svg")) return HeatmapFormat::Svg;
    if (suffix == QLatin1String("csv")) return HeatmapFormat::Csv;
    if (suffix == QLatin1String("json")) return HeatmapFormat::Json;
    return HeatmapFormat::Unknown;
}

QString heatmapFileFilter() {
    return QObject::tr("PNG image (*.png);;SVG vector image (*.svg);;CSV table (*.csv);;JSON (*.json)");
}

bool writeExportFile(const QString& path, const QByteArray& bytes, QString* error) {
    try {
        write_file_atomic(ss(path), std::string(bytes.constData(), static_cast<size_t>(bytes.size())));
    } catch (const std::exception& e) {
        if (error) *error = qs(e.what());
        return false;
    }
    return true;
}

bool exportPicturePng(const PaintFunction& paint, QSize size, const QString& path, double scale, QString* error) {
    scale = std::clamp(scale, 0.25, 8.0);
    QImage image(QSize(int(std::ceil(size.width() * scale)), int(std::ceil(size.height() * scale))),
                 QImage::Format_ARGB32_Premultiplied);
    image.fill(Qt::white);
    const int dotsPerMeter = int(std::lround(96.0 * scale / 0.0254));
    image.setDotsPerMeterX(dotsPerMeter);
    image.setDotsPerMeterY(dotsPerMeter);
    {
        QPainter p(&image);
        p.setRenderHint(QPainter::TextAntialiasing);
        p.scale(scale, scale);
        paint(p);
    }
    // Encoded in memory, then written atomically like every file attnviz writes: a failed
    // write leaves no half image, and a device or a FIFO at path is refused (core/io/atomic_file.hpp).
    QBuffer buffer;
    buffer.open(QIODevice::WriteOnly);
    QImageWriter writer(&buffer, "png");
    if (!writer.write(image)) {
        if (error) *error = QObject::tr("Could not write %1: %2").arg(path, writer.errorString());
        return false;
    }
    return writeExportFile(path, buffer.data(), error);
}

bool exportPictureSvg(const PaintFunction& paint, QSize size, const QString& path, QString* error) {
    QBuffer buffer;
    buffer.open(QIODevice::WriteOnly);
    QSvgGenerator generator;
    generator.setOutputDevice(&buffer);
    generator.setSize(size);
    generator.setViewBox(QRect(QPoint(0, 0), size));
    generator.setResolution(96);
    generator.setTitle(QObject::tr("Attention heatmap"));
    generator.setDescription(QObject::tr("Exported by attnviz"));
    QPainter p;
    if (!p.begin(&generator)) {
        if (error) *error = QObject::tr("Could not write %1.").arg(path);
        return false;
    }
    paint(p);
    p.end();
    return writeExportFile(path, buffer.data(), error);
}

bool exportPicture(const PaintFunction& paint, QSize size, const QString& path, double scale, QString* error) {
    switch (heatmapFormatFor(path)) {
    case HeatmapFormat::Png: return exportPicturePng(paint, size, path, scale, error);
    case HeatmapFormat::Svg: return exportPictureSvg(paint, size, path, error);
    default: break;
    }
    if (error) *error = QObject::tr("A picture exports as .png or .svg, not %1.").arg(path);
    return false;
}

bool exportHeatmapPng(const HeatmapWidget& widget, const QString& path, double scale, QString* error) {
    return exportPicturePng([&widget](QPainter& p) { widget.paintContent(p); }, widget.contentSize(), path, scale, error);
}

bool exportHeatmapSvg(const HeatmapWidget& widget, const QString& path, QString* error) {
    return exportPictureSvg([&widget](QPainter& p) { widget.paintContent(p); }, widget.contentSize(), path, error);
}

bool exportHeatmap(const HeatmapExportSource& source, const QString& path, double scale, QString* error) {
    const HeatmapFormat format = heatmapFormatFor(path);
    try {
        switch (format) {
        case HeatmapFormat::Png:
            return source.widget && exportHeatmapPng(*source.widget, path, scale, error);
        case HeatmapFormat::Svg:
            return source.widget && exportHeatmapSvg(*source.widget, path, error);
        case HeatmapFormat::Csv:
        case HeatmapFormat::Json: {
            if (!source.translation || source.translation->empty()) {
                if (error) *error = QObject::tr("There is no translation to export.");
                return false;
            }
            const std::string text =
                format == HeatmapFormat::Csv
                    ? attention_csv(*source.translation, source.hypothesis)
                    : attention_json(*source.translation, source.hypothesis, source.modelSettings, source.decodeSettings)
                              .dump(2) + "\n";
            write_file_atomic(ss(path), text);
            return true;
        }
        case HeatmapFormat::Unknown:
            break;
        }
    } catch (const std::exception& e) {
        if (error) *error = qs(e.what());
        return false;
    }
    if (error) *error = QObject::tr("Unknown export format for %1: use .png, .svg, .csv or .json.").arg(path);
    return false;
}

}  // namespace attnviz::ui
