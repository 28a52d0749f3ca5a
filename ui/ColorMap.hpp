#pragma once
// Perceptually uniform colour maps for the heatmap: equal steps in weight look
// like equal steps in colour, and lightness rises monotonically, so the map
// still reads in grayscale print and for colour-blind viewers.
#include <QColor>
#include <QString>
#include <QStringList>
#include <array>

namespace attnviz::ui {

class ColorMap {
public:
    enum Kind { Viridis, Magma, Cividis, Grayscale };

    explicit ColorMap(Kind kind = Viridis);

    Kind kind() const { return m_kind; }
    /// Colour of a value in [0, 1] (clamped).
    QColor color(double value) const;
    /// Black or white, whichever reads better on color(value).
    QColor textColor(double value) const;

    /// "viridis", "magma", "cividis", "grayscale".
    static QString name(Kind kind);
    static Kind fromName(const QString& name, Kind fallback = Viridis);
    static QStringList names();

private:
    Kind m_kind;
    const std::array<QRgb, 256>* m_table;
};

}  // namespace attnviz::ui
