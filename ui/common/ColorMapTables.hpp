#pragma once
// matplotlib's colour maps, entry for entry (ui/common/ColorMapTables.cpp is generated
// by resources/colormaps/generate_colormaps.py).
#include <QRgb>
#include <array>

namespace attnviz::ui::tables {
extern const std::array<QRgb, 256> viridis, magma, plasma, cividis, reds, bone, rdbu_r;
}
