#include "ui/ColorMap.hpp"

#include <algorithm>
#include <cmath>

namespace attnviz::ui {
namespace {

using Table = std::array<QRgb, 256>;
using Vec3 = std::array<double, 3>;

QRgb toRgb(const Vec3& c) {
    auto ch = [](double v) { return int(std::lround(std::clamp(v, 0.0, 1.0) * 255.0)); };
    return qRgb(ch(c[0]), ch(c[1]), ch(c[2]));
}

// Viridis and magma: degree-6 polynomial fits of matplotlib's tables (max error
// well under one 8-bit step in lightness), evaluated with Horner's scheme.
Table polynomialTable(const std::array<Vec3, 7>& c) {
    Table t{};
    for (int i = 0; i < 256; ++i) {
        const double x = i / 255.0;
        Vec3 v{};
        for (int k = 0; k < 3; ++k) {
            double acc = c[6][k];
            for (int d = 5; d >= 0; --d) acc = acc * x + c[d][k];
            v[k] = acc;
        }
        t[i] = toRgb(v);
    }
    return t;
}

// sRGB <-> CIELAB (D65), to interpolate cividis and grayscale linearly in lightness.
double toLinear(double c) { return c <= 0.04045 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4); }
double fromLinear(double c) { return c <= 0.0031308 ? 12.92 * c : 1.055 * std::pow(c, 1 / 2.4) - 0.055; }
constexpr double Xn = 0.95047, Yn = 1.0, Zn = 1.08883;
double fLab(double t) { return t > 216.0 / 24389 ? std::cbrt(t) : (24389.0 / 27 * t + 16) / 116; }
double fLabInv(double t) { return t * t * t > 216.0 / 24389 ? t * t * t : (116 * t - 16) * 27 / 24389; }

Vec3 rgbToLab(const Vec3& rgb) {
    const double r = toLinear(rgb[0]), g = toLinear(rgb[1]), b = toLinear(rgb[2]);
    const double x = 0.4124 * r + 0.3576 * g + 0.1805 * b;
    const double y = 0.2126 * r + 0.7152 * g + 0.0722 * b;
    const double z = 0.0193 * r + 0.1192 * g + 0.9505 * b;
    const double fx = fLab(x / Xn), fy = fLab(y / Yn), fz = fLab(z / Zn);
    return {116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)};
}

Vec3 labToRgb(const Vec3& lab) {
    const double fy = (lab[0] + 16) / 116, fx = fy + lab[1] / 500, fz = fy - lab[2] / 200;
    const double x = Xn * fLabInv(fx), y = Yn * fLabInv(fy), z = Zn * fLabInv(fz);
    const double r = 3.2406 * x - 1.5372 * y - 0.4986 * z;
    const double g = -0.9689 * x + 1.8758 * y + 0.0415 * z;
    const double b = 0.0557 * x - 0.2040 * y + 1.0570 * z;
    return {fromLinear(r), fromLinear(g), fromLinear(b)};
}

// Piecewise-linear interpolation in CIELAB between evenly spaced anchors (sRGB hex).
Table labTable(std::initializer_list<QRgb> anchors) {
    std::vector<Vec3> labs;
    for (QRgb a : anchors) labs.push_back(rgbToLab({qRed(a) / 255.0, qGreen(a) / 255.0, qBlue(a) / 255.0}));
    Table t{};
    const int segments = int(labs.size()) - 1;
    for (int i = 0; i < 256; ++i) {
        const double x = i / 255.0 * segments;
        const int s = std::min(int(x), segments - 1);
        const double f = x - s;
        Vec3 v{};
        for (int k = 0; k < 3; ++k) v[k] = labs[s][k] * (1 - f) + labs[s + 1][k] * f;
        t[i] = toRgb(labToRgb(v));
    }
    return t;
}

const Table& viridis() {
    static const Table t = polynomialTable({{{0.2777273272234177, 0.005407344544966578, 0.3340998053353061},
                                             {0.1050930431085774, 1.404613529898575, 1.384590162594685},
                                             {-0.3308618287255563, 0.214847559468213, 0.09509516302823659},
                                             {-4.634230498983486, -5.799100973351585, -19.33244095627987},
                                             {6.228269936347081, 14.17993336680509, 56.69055260068105},
                                             {4.776384997670288, -13.74514537774601, -65.35303263337234},
                                             {-5.435455855934631, 4.645852612178535, 26.3124352495832}}});
    return t;
}

const Table& magma() {
    static const Table t = polynomialTable({{{-0.002136485053939582, -0.000749655052795221, -0.005386127855323933},
                                             {0.2516605407371642, 0.6775232436837668, 2.494026599312351},
                                             {8.353717279216625, -3.577719514958484, 0.3144679030132573},
                                             {-27.66873308576866, 14.26473078096533, -13.64921318813922},
                                             {52.17613981234068, -27.94360607168351, 12.94416944238394},
                                             {-50.76852536473588, 29.04658282127291, 4.23415299384598},
                                             {18.65570506591883, -11.48977351997711, -5.601961508734096}}});
    return t;
}

// Cividis (Nuñez et al. 2018): blue -> neutral grey -> yellow, linear in lightness,
// readable with deuteranomaly; anchors at 0, 1/4, 1/2, 3/4, 1.
const Table& cividis() {
    static const Table t = labTable({0x00224e, 0x3b496c, 0x7c7b78, 0xbcaf6f, 0xfee838});
    return t;
}

// Grayscale linear in CIELAB lightness (not in sRGB value).
const Table& grayscale() {
    static const Table t = labTable({0x000000, 0xffffff});
    return t;
}

}  // namespace

ColorMap::ColorMap(Kind kind) : m_kind(kind) {
    switch (kind) {
    case Magma: m_table = &magma(); break;
    case Cividis: m_table = &cividis(); break;
    case Grayscale: m_table = &grayscale(); break;
    case Viridis:
    default: m_kind = Viridis; m_table = &viridis(); break;
    }
}

QColor ColorMap::color(double value) const {
    if (!std::isfinite(value)) value = 0;
    const int i = int(std::lround(std::clamp(value, 0.0, 1.0) * 255.0));
    return QColor::fromRgb((*m_table)[i]);
}

QColor ColorMap::textColor(double value) const {
    const QColor c = color(value);
    const double l = rgbToLab({c.redF(), c.greenF(), c.blueF()})[0];
    return l > 55 ? QColor(Qt::black) : QColor(Qt::white);
}

QString ColorMap::name(Kind kind) {
    switch (kind) {
    case Magma: return QStringLiteral("magma");
    case Cividis: return QStringLiteral("cividis");
    case Grayscale: return QStringLiteral("grayscale");
    case Viridis:
    default: return QStringLiteral("viridis");
    }
}

ColorMap::Kind ColorMap::fromName(const QString& name, Kind fallback) {
    for (Kind k : {Viridis, Magma, Cividis, Grayscale})
        if (name.compare(ColorMap::name(k), Qt::CaseInsensitive) == 0) return k;
    return fallback;
}

QStringList ColorMap::names() {
    return {name(Viridis), name(Magma), name(Cividis), name(Grayscale)};
}

}  // namespace attnviz::ui
