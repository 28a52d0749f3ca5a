#include "ui/common/ColorMap.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/analysis/colormap_tables.hpp"

namespace attnviz::ui {
namespace {

namespace tables = attnviz::colormaps;  // 0xAARRGGBB, which is what a QRgb holds
static_assert(std::is_same_v<QRgb, uint32_t>, "the core's colour tables are QRgb values");

using Table = std::array<QRgb, 256>;

// Grayscale linear in CIELAB lightness (not in sRGB value): L* = 100 i / 255.
const Table& grayscale() {
    static const Table t = [] {
        Table g{};
        for (int i = 0; i < 256; ++i) {
            const double l = 100.0 * i / 255.0;
            const double fy = (l + 16) / 116;
            const double y = fy * fy * fy > 216.0 / 24389 ? fy * fy * fy : l * 27 / 24389;  // relative luminance
            const double s = y <= 0.0031308 ? 12.92 * y : 1.055 * std::pow(y, 1 / 2.4) - 0.055;
            const int v = int(std::lround(std::clamp(s, 0.0, 1.0) * 255));
            g[i] = qRgb(v, v, v);
        }
        return g;
    }();
    return t;
}

double lightness(const QColor& c) {  // CIELAB L* of an sRGB colour
    auto lin = [](double v) { return v <= 0.04045 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4); };
    const double y = 0.2126 * lin(c.redF()) + 0.7152 * lin(c.greenF()) + 0.0722 * lin(c.blueF());
    return y > 216.0 / 24389 ? 116 * std::cbrt(y) - 16 : y * 24389 / 27;
}

// matplotlib's lookup: index = int(x * N), x == 1 -> N - 1, clipped to the table.
int tableIndex(double x) {
    if (!std::isfinite(x) || x <= 0) return 0;
    return std::min(255, int(x * 256.0));
}

}  // namespace

ColorMap::ColorMap(Kind kind, Scale scale) : m_kind(kind), m_scale(scale) {
    switch (kind) {
    case Magma: m_table = &tables::magma; break;
    case Cividis: m_table = &tables::cividis; break;
    case Grayscale: m_table = &grayscale(); break;
    case Plasma: m_table = &tables::plasma; break;
    case Reds: m_table = &tables::reds; break;
    case Bone: m_table = &tables::bone; break;
    case Difference: m_table = &tables::rdbu_r; break;
    case Viridis:
    default: m_kind = Viridis; m_table = &tables::viridis; break;
    }
    if (scale != Sqrt && scale != Log) m_scale = Linear;
}

double ColorMap::position(double value) const {
    if (!std::isfinite(value)) return 0.0;
    const double v = std::clamp(value, 0.0, 1.0);
    switch (m_scale) {
    case Sqrt: return std::sqrt(v);
    case Log: return (std::log10(std::max(v, kLogFloor)) - std::log10(kLogFloor)) / -std::log10(kLogFloor);
    case Linear:
    default: return v;
    }
}

double ColorMap::valueAt(double position) const {
    const double p = std::clamp(position, 0.0, 1.0);
    switch (m_scale) {
    case Sqrt: return p * p;
    case Log: return std::pow(10.0, std::log10(kLogFloor) * (1 - p));
    case Linear:
    default: return p;
    }
}

std::vector<double> ColorMap::ticks() const {
    if (m_scale == Log) return {0.001, 0.01, 0.1, 1.0};
    if (m_scale == Sqrt) return {0.0, 0.05, 0.25, 0.5, 1.0};
    return {0.0, 0.25, 0.5, 0.75, 1.0};
}

QColor ColorMap::entry(int index) const { return QColor::fromRgb((*m_table)[std::clamp(index, 0, 255)]); }

QColor ColorMap::color(double value) const { return entry(tableIndex(position(value))); }

QColor ColorMap::signedColor(double value, double range) const {
    const double x = range > 0 && std::isfinite(value) ? 0.5 + 0.5 * std::clamp(value / range, -1.0, 1.0) : 0.5;
    return QColor::fromRgb(tables::rdbu_r[size_t(tableIndex(x))]);
}

QColor ColorMap::textColor(double value) const { return lightness(color(value)) > 55 ? Qt::black : Qt::white; }

QString ColorMap::name(Kind kind) {
    switch (kind) {
    case Magma: return QStringLiteral("magma");
    case Cividis: return QStringLiteral("cividis");
    case Grayscale: return QStringLiteral("grayscale");
    case Plasma: return QStringLiteral("plasma");
    case Reds: return QStringLiteral("Reds");
    case Bone: return QStringLiteral("bone");
    case Difference: return QStringLiteral("RdBu_r");
    case Viridis:
    default: return QStringLiteral("viridis");
    }
}

ColorMap::Kind ColorMap::fromName(const QString& name, Kind fallback) {
    for (Kind k : {Viridis, Magma, Cividis, Grayscale, Plasma, Reds, Bone, Difference})
        if (name.compare(ColorMap::name(k), Qt::CaseInsensitive) == 0) return k;
    return fallback;
}

QStringList ColorMap::names() {
    return {name(Viridis), name(Magma), name(Plasma), name(Cividis), name(Reds), name(Bone), name(Grayscale)};
}

QString ColorMap::scaleName(Scale scale) {
    switch (scale) {
    case Sqrt: return QStringLiteral("sqrt");
    case Log: return QStringLiteral("log");
    case Linear:
    default: return QStringLiteral("linear");
    }
}

ColorMap::Scale ColorMap::scaleFromName(const QString& name, Scale fallback) {
    for (Scale s : {Linear, Sqrt, Log})
        if (name.compare(scaleName(s), Qt::CaseInsensitive) == 0) return s;
    return fallback;
}

QStringList ColorMap::scaleNames() { return {scaleName(Linear), scaleName(Sqrt), scaleName(Log)}; }

}  // namespace attnviz::ui
