// LossChart: the curves as CSV and PNG.
#include "core/io/error.hpp"
#include "core/analysis/export.hpp"
#include <QBuffer>
#include <QPixmap>
#include <QTextStream>
#include <QtCharts/QChartView>

#include <cmath>

#include "ui/heatmap/HeatmapExport.hpp"
#include "ui/training/LossChart.hpp"
#include "ui/training/LossChartRun.hpp"

namespace attnviz::ui {

QString LossChart::toCsv() const {
    QString out;
    QTextStream ts(&out);
    ts << "run,series,step,epoch,value\n";
    auto quoted = [](QString s) {
        if (s.contains(QLatin1Char(',')) || s.contains(QLatin1Char('"')))
            s = QLatin1Char('"') + s.replace(QLatin1String("\""), QLatin1String("\"\"")) + QLatin1Char('"');
        return s;
    };
    for (const Run* r : m_runs) {
        const QString run = quoted(r->label);
        const auto& raw = r->raw.points();
        for (size_t i = 0; i < raw.size(); ++i) {
            ts << run << ",batch_loss," << qint64(raw[i].first) << ",," << QString::number(raw[i].second, 'g', 8) << "\n";
            ts << run << ",smoothed_loss," << qint64(r->smoothed[i].x()) << ",," << QString::number(r->smoothed[i].y(), 'g', 8)
               << "\n";
        }
        for (const auto& e : r->epochs) {
            const QString prefix = run + QStringLiteral(",%1,") + QString::number(e.step) + QLatin1Char(',') +
                                   QString::number(e.report.epoch) + QLatin1Char(',');
            ts << prefix.arg(QStringLiteral("train_loss")) << QString::number(e.report.train_loss, 'g', 8) << "\n";
            ts << prefix.arg(QStringLiteral("val_loss")) << QString::number(e.report.val_loss, 'g', 8) << "\n";
            ts << prefix.arg(QStringLiteral("val_bleu")) << QString::number(e.report.val_bleu, 'g', 8) << "\n";
            ts << prefix.arg(QStringLiteral("val_accuracy")) << QString::number(e.report.val_accuracy, 'g', 8) << "\n";
            if (std::isfinite(e.report.val_align_accuracy))
                ts << prefix.arg(QStringLiteral("val_align_accuracy")) << QString::number(e.report.val_align_accuracy, 'g', 8) << "\n";
            if (std::isfinite(e.report.val_aer))
                ts << prefix.arg(QStringLiteral("val_aer")) << QString::number(e.report.val_aer, 'g', 8) << "\n";
        }
    }
    return out;
}

bool LossChart::exportCsv(const QString& path, QString* error) const {
    // Atomic, like the heatmap exports: a failed write never leaves half a file.
    try {
        attnviz::write_file_atomic(path.toStdString(), toCsv().toStdString());
    } catch (const attnviz::Error& e) {
        if (error) *error = tr("Could not write %1: %2").arg(path, QString::fromStdString(e.what()));
        return false;
    }
    return true;
}

bool LossChart::exportPng(const QString& path, QString* error) const {
    if (m_seriesStale) const_cast<LossChart*>(this)->refreshNow();  // the image shows every batch so far
    const QPixmap pixmap = m_view->grab();
    QBuffer buffer;
    buffer.open(QIODevice::WriteOnly);
    if (pixmap.isNull() || !pixmap.save(&buffer, "PNG")) {
        if (error) *error = tr("Could not write %1.").arg(path);
        return false;
    }
    return writeExportFile(path, buffer.data(), error);  // atomically, as the CSV
}

}  // namespace attnviz::ui
