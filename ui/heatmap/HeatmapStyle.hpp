#pragma once
// Sizes, fonts and colours the heatmap's painting and its event handling share
// (internal to ui/heatmap/HeatmapWidget.cpp and ui/heatmap/HeatmapPaint.cpp).
#include <QColor>
#include <QFont>
#include <QString>

namespace attnviz::ui::heatmap_style {

constexpr int kMargin = 10;
constexpr int kBaseCell = 34;
constexpr int kStripGap = 6;
constexpr double kMinZoom = 0.25, kMaxZoom = 6.0;
constexpr double kMinFit = 0.6, kMaxFit = 2.2;  // auto-fit keeps cells readable and not huge
inline const QColor kUnkColor{0xc0, 0x39, 0x2b};
inline const QColor kEosColor{0x70, 0x70, 0x70};
inline const QColor kHighlightColor{0xb0, 0x00, 0x20};
inline const QColor kForcedColor{0x2e, 0x6d, 0xb4};

inline bool isUnk(const QString& t) { return t == QLatin1String("<unk>"); }
inline bool isSpecial(const QString& t) {
    return t.startsWith(QLatin1Char('<')) && t.endsWith(QLatin1Char('>')) && t.size() > 2;
}

inline QFont labelFont(const QFont& base, const QString& token, int pixelSize) {
    QFont f = base;
    f.setPixelSize(pixelSize);
    if (isUnk(token)) f.setBold(true);
    else if (isSpecial(token)) f.setItalic(true);
    return f;
}

inline QColor labelColor(const QString& token) {
    if (isUnk(token)) return kUnkColor;
    if (isSpecial(token)) return kEosColor;
    return Qt::black;
}

}  // namespace attnviz::ui::heatmap_style
