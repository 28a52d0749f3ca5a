#pragma once
// The heatmap's colour maps: matplotlib's own tables (core/analysis/colormap_tables.cpp,
// entry for entry), looked up the way matplotlib does, so a heatmap here and a
// matplotlib figure of the same weights have the same colours. viridis, magma,
// plasma and cividis are perceptually uniform (equal steps in weight look like
// equal steps in colour; they read in grayscale and for colour-blind viewers);
// Reds is d2l's show_heatmaps default and bone the PyTorch tutorial's
// showAttention. An optional power or log scale spreads out the small weights
// of peaked attention (matplotlib's PowerNorm(0.5) and LogNorm).
#include <QColor>
#include <QString>
#include <QStringList>
#include <array>
#include <vector>

namespace attnviz::ui {

class ColorMap {
public:
    /// Difference is diverging (blue, white at the middle, red): for signed values, see signedColor().
    enum Kind { Viridis, Magma, Cividis, Grayscale, Plasma, Reds, Bone, Difference };
    /// How a weight in [0, 1] becomes a position on the map.
    enum Scale {
        Linear,  ///< the weight itself (matplotlib's Normalize(0, 1))
        Sqrt,    ///< its square root: small weights spread out (PowerNorm(gamma=0.5, 0, 1))
        Log      ///< log10, from 0.001 (and below) to 1 (LogNorm(0.001, 1))
    };
    static constexpr double kLogFloor = 1e-3;

    explicit ColorMap(Kind kind = Viridis, Scale scale = Linear);

    Kind kind() const { return m_kind; }
    Scale scale() const { return m_scale; }
    /// Colour of a weight in [0, 1] (clamped; NaN paints as 0) under the scale.
    QColor color(double value) const;
    /// The diverging colour of a signed value in [-range, range] (Difference's table; white at 0).
    QColor signedColor(double value, double range) const;
    /// Black or white, whichever reads better on color(value).
    QColor textColor(double value) const;
    /// Where a weight lands on the map, in [0, 1] (the scale applied).
    double position(double value) const;
    /// The weight at a position on the map (the inverse of position()).
    double valueAt(double position) const;
    /// Weights worth a tick on the colour bar under the scale, ascending.
    std::vector<double> ticks() const;
    /// The map's colour at table index 0..255 (matplotlib's lookup table).
    QColor entry(int index) const;

    /// "viridis", "magma", "cividis", "grayscale", "plasma", "Reds", "bone", "RdBu_r" (matplotlib's names).
    static QString name(Kind kind);
    /// Case-insensitive; unknown names give fallback.
    static Kind fromName(const QString& name, Kind fallback = Viridis);
    /// The maps offered for weights, in menu order (Difference is not one of them).
    static QStringList names();
    /// "linear", "sqrt", "log".
    static QString scaleName(Scale scale);
    static Scale scaleFromName(const QString& name, Scale fallback = Linear);
    static QStringList scaleNames();

private:
    Kind m_kind;
    Scale m_scale;
    const std::array<QRgb, 256>* m_table;
};

}  // namespace attnviz::ui
