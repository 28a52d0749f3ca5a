// The pixel font's glyphs, drawn row by row ('#' on), and UTF-8 text mapped onto them.
#include "core/analysis/pixel_font.hpp"

#include <array>
#include <cstring>

namespace attnviz {

namespace {

// Printable ASCII, 0x20 to 0x7E: up to 9 rows of 5 pixels each, top row first; rows
// not given are empty.
const char* const ascii_art[95] = {
    "",                                                          // space
    "..#.. ..#.. ..#.. ..#.. ..#.. ..... ..#..",                 // !
    ".#.#. .#.#.",                                               // "
    ".#.#. ##### .#.#. .#.#. ##### .#.#.",                       // #
    "..#.. .#### #.#.. .###. ..#.# ####. ..#..",                 // $
    "##... ##..# ...#. ..#.. .#... #..## ...##",                 // %
    ".##.. #..#. #.#.. .#... #.#.# #..#. .##.#",                 // &
    "..#.. ..#..",                                               // '
    "...#. ..#.. .#... .#... .#... ..#.. ...#.",                 // (
    ".#... ..#.. ...#. ...#. ...#. ..#.. .#...",                 // )
    "..... ..#.. #.#.# .###. #.#.# ..#..",                       // *
    "..... ..#.. ..#.. ##### ..#.. ..#..",                       // +
    "..... ..... ..... ..... ..... ..##. ..##. ..#..",           // ,
    "..... ..... ..... #####",                                   // -
    "..... ..... ..... ..... ..... ..##. ..##.",                 // .
    "..... ....# ...#. ..#.. .#... #....",                       // /
    ".###. #...# #..## #.#.# ##..# #...# .###.",                 // 0
    "..#.. .##.. ..#.. ..#.. ..#.. ..#.. .###.",                 // 1
    ".###. #...# ....# ...#. ..#.. .#... #####",                 // 2
    "##### ...#. ..#.. ...#. ....# #...# .###.",                 // 3
    "...#. ..##. .#.#. #..#. ##### ...#. ...#.",                 // 4
    "##### #.... ####. ....# ....# #...# .###.",                 // 5
    "..##. .#... #.... ####. #...# #...# .###.",                 // 6
    "##### ....# ...#. ..#.. .#... .#... .#...",                 // 7
    ".###. #...# #...# .###. #...# #...# .###.",                 // 8
    ".###. #...# #...# .#### ....# ...#. .##..",                 // 9
    "..... ..##. ..##. ..... ..##. ..##.",                       // :
    "..... ..##. ..##. ..... ..##. ..##. ..#.. .#...",           // ;
    "...#. ..#.. .#... #.... .#... ..#.. ...#.",                 // <
    "..... ..... ##### ..... #####",                             // =
    ".#... ..#.. ...#. ....# ...#. ..#.. .#...",                 // >
    ".###. #...# ....# ...#. ..#.. ..... ..#..",                 // ?
    ".###. #...# ....# .##.# #.#.# #.#.# .###.",                 // @
    ".###. #...# #...# ##### #...# #...# #...#",                 // A
    "####. #...# #...# ####. #...# #...# ####.",                 // B
    ".###. #...# #.... #.... #.... #...# .###.",                 // C
    "###.. #..#. #...# #...# #...# #..#. ###..",                 // D
    "##### #.... #.... ####. #.... #.... #####",                 // E
    "##### #.... #.... ####. #.... #.... #....",                 // F
    ".###. #...# #.... #.### #...# #...# .####",                 // G
    "#...# #...# #...# ##### #...# #...# #...#",                 // H
    ".###. ..#.. ..#.. ..#.. ..#.. ..#.. .###.",                 // I
    "..### ...#. ...#. ...#. ...#. #..#. .##..",                 // J
    "#...# #..#. #.#.. ##... #.#.. #..#. #...#",                 // K
    "#.... #.... #.... #.... #.... #.... #####",                 // L
    "#...# ##.## #.#.# #.#.# #...# #...# #...#",                 // M
    "#...# #...# ##..# #.#.# #..## #...# #...#",                 // N
    ".###. #...# #...# #...# #...# #...# .###.",                 // O
    "####. #...# #...# ####. #.... #.... #....",                 // P
    ".###. #...# #...# #...# #.#.# #..#. .##.#",                 // Q
    "####. #...# #...# ####. #.#.. #..#. #...#",                 // R
    ".#### #.... #.... .###. ....# ....# ####.",                 // S
    "##### ..#.. ..#.. ..#.. ..#.. ..#.. ..#..",                 // T
    "#...# #...# #...# #...# #...# #...# .###.",                 // U
    "#...# #...# #...# #...# #...# .#.#. ..#..",                 // V
    "#...# #...# #...# #.#.# #.#.# #.#.# .#.#.",                 // W
    "#...# #...# .#.#. ..#.. .#.#. #...# #...#",                 // X
    "#...# #...# .#.#. ..#.. ..#.. ..#.. ..#..",                 // Y
    "##### ....# ...#. ..#.. .#... #.... #####",                 // Z
    ".###. .#... .#... .#... .#... .#... .###.",                 // [
    "..... #.... .#... ..#.. ...#. ....#",                       // backslash
    ".###. ...#. ...#. ...#. ...#. ...#. .###.",                 // ]
    "..#.. .#.#. #...#",                                         // ^
    "..... ..... ..... ..... ..... ..... ..... #####",           // _
    ".#... ..#..",                                               // `
    "..... ..... .###. ....# .#### #...# .####",                 // a
    "#.... #.... #.##. ##..# #...# #...# ####.",                 // b
    "..... ..... .###. #.... #.... #...# .###.",                 // c
    "....# ....# .##.# #..## #...# #...# .####",                 // d
    "..... ..... .###. #...# ##### #.... .###.",                 // e
    "..##. .#..# .#... ###.. .#... .#... .#...",                 // f
    "..... ..... .#### #...# #...# #...# .#### ....# .###.",     // g
    "#.... #.... #.##. ##..# #...# #...# #...#",                 // h
    "..#.. ..... .##.. ..#.. ..#.. ..#.. .###.",                 // i
    "...#. ..... ..##. ...#. ...#. ...#. ...#. #..#. .##..",     // j
    "#.... #.... #..#. #.#.. ##... #.#.. #..#.",                 // k
    ".##.. ..#.. ..#.. ..#.. ..#.. ..#.. .###.",                 // l
    "..... ..... ##.#. #.#.# #.#.# #...# #...#",                 // m
    "..... ..... #.##. ##..# #...# #...# #...#",                 // n
    "..... ..... .###. #...# #...# #...# .###.",                 // o
    "..... ..... ####. #...# #...# #...# ####. #.... #....",     // p
    "..... ..... .#### #...# #...# #...# .#### ....# ....#",     // q
    "..... ..... #.##. ##..# #.... #.... #....",                 // r
    "..... ..... .#### #.... .###. ....# ####.",                 // s
    ".#... .#... ###.. .#... .#... .#..# ..##.",                 // t
    "..... ..... #...# #...# #...# #..## .##.#",                 // u
    "..... ..... #...# #...# #...# .#.#. ..#..",                 // v
    "..... ..... #...# #...# #.#.# #.#.# .#.#.",                 // w
    "..... ..... #...# .#.#. ..#.. .#.#. #...#",                 // x
    "..... ..... #...# #...# #...# #...# .#### ....# .###.",     // y
    "..... ..... ##### ...#. ..#.. .#... #####",                 // z
    "...#. ..#.. ..#.. .#... ..#.. ..#.. ...#.",                 // {
    "..#.. ..#.. ..#.. ..#.. ..#.. ..#.. ..#.. ..#..",           // |
    ".#... ..#.. ..#.. ...#. ..#.. ..#.. .#...",                 // }
    "..... ..... .#... #.#.# ...#.",                             // ~
};

Glyph parse(const char* art) {
    Glyph g;
    int row = 0, col = 0;
    for (const char* p = art; *p && row < pixel_font::glyph_height; ++p) {
        if (*p == ' ') {
            ++row;
            col = 0;
            continue;
        }
        if (*p == '#') g.rows[row] |= static_cast<uint8_t>(1u << (4 - col));
        ++col;
    }
    return g;
}

const std::array<Glyph, 95>& ascii_glyphs() {
    static const std::array<Glyph, 95> table = [] {
        std::array<Glyph, 95> t;
        for (size_t i = 0; i < t.size(); ++i) t[i] = parse(ascii_art[i]);
        return t;
    }();
    return table;
}

Glyph ascii(char c) {
    const auto u = static_cast<unsigned char>(c);
    return u >= 0x20 && u < 0x7F ? ascii_glyphs()[u - 0x20] : ascii_glyphs()['?' - 0x20];
}

// Accents over a lowercase letter (rows 0 and 1, above the x-height) and the cedilla under it.
enum class Accent { none, grave, acute, circumflex, tilde, diaeresis, ring, cedilla, stroke };

Glyph accented(char base, Accent a) {
    Glyph g = ascii(base);
    if (base == 'i' || base == 'j') g.rows[0] = 0;  // the accent takes the dot's place
    const auto set = [&](int row, const char* art) { g.rows[row] = parse(art).rows[0]; };
    switch (a) {
        case Accent::grave: set(0, ".#..."), set(1, "..#.."); break;
        case Accent::acute: set(0, "...#."), set(1, "..#.."); break;
        case Accent::circumflex: set(0, "..#.."), set(1, ".#.#."); break;
        case Accent::tilde: set(0, ".##.#"), set(1, "#.##."); break;
        case Accent::diaeresis: set(0, ".#.#."); break;
        case Accent::ring: set(0, ".###."), set(1, ".#.#."); break;
        case Accent::cedilla: set(7, "..#.."), set(8, ".##.."); break;
        case Accent::stroke: g.rows[3] |= 0x02, g.rows[4] |= 0x04, g.rows[5] |= 0x08; break;  // ø
        case Accent::none: break;
    }
    return g;
}

/// Latin-1's letters U+00C0..U+00FF: the base letter and the accent (uppercase: base only).
void latin1(uint32_t cp, std::vector<Glyph>& out) {
    static const char* const base = "AAAAAAACEEEEIIIIDNOOOOOxOUUUUYPsaaaaaaaceeeeiiiidnooooo/ouuuuypy";
    static const Accent accents[32] = {Accent::grave,     Accent::acute,     Accent::circumflex, Accent::tilde,
                                       Accent::diaeresis, Accent::ring,      Accent::none,       Accent::cedilla,
                                       Accent::grave,     Accent::acute,     Accent::circumflex, Accent::diaeresis,
                                       Accent::grave,     Accent::acute,     Accent::circumflex, Accent::diaeresis,
                                       Accent::none,      Accent::tilde,     Accent::grave,      Accent::acute,
                                       Accent::circumflex, Accent::tilde,    Accent::diaeresis,  Accent::none,
                                       Accent::stroke,    Accent::grave,     Accent::acute,      Accent::circumflex,
                                       Accent::diaeresis, Accent::acute,     Accent::none,       Accent::diaeresis};
    const uint32_t i = cp - 0xC0;
    if (cp == 0xC6 || cp == 0xE6) {  // Æ æ
        out.push_back(ascii(cp == 0xC6 ? 'A' : 'a'));
        out.push_back(ascii(cp == 0xC6 ? 'E' : 'e'));
    } else if (cp == 0xDF) {  // ß
        out.push_back(ascii('s'));
        out.push_back(ascii('s'));
    } else if (cp == 0xD7 || cp == 0xF7) {  // × ÷
        out.push_back(ascii(cp == 0xD7 ? 'x' : '/'));
    } else if (cp < 0xE0) {
        out.push_back(ascii(base[i]));  // capitals fill rows 0-6: no room above them
    } else {
        out.push_back(accented(base[i], accents[i - 32]));
    }
}

/// The glyphs of one code point beyond ASCII.
void other(uint32_t cp, std::vector<Glyph>& out) {
    if (cp >= 0xC0 && cp <= 0xFF) return latin1(cp, out);
    switch (cp) {
        case 0x152: out.push_back(ascii('O')), out.push_back(ascii('E')); return;  // Œ
        case 0x153: out.push_back(ascii('o')), out.push_back(ascii('e')); return;  // œ
        case 0xA0: out.push_back(ascii(' ')); return;                              // no-break space
        case 0xAB: case 0x2039: out.push_back(ascii('<')); return;                 // « ‹
        case 0xBB: case 0x203A: out.push_back(ascii('>')); return;                 // » ›
        case 0x2018: case 0x2019: case 0x201A: out.push_back(ascii('\'')); return;  // ‘ ’ ‚
        case 0x201C: case 0x201D: case 0x201E: out.push_back(ascii('"')); return;   // “ ” „
        case 0x2010: case 0x2011: case 0x2013: case 0x2014: out.push_back(ascii('-')); return;
        case 0x2026: for (int k = 0; k < 3; ++k) out.push_back(ascii('.')); return;  // …
        case 0x2581: out.push_back(ascii('_')); return;  // SentencePiece's word start
        default: break;
    }
    // Latin Extended-A (U+0100..U+017F), mostly pairs of capital and small letter: each
    // shown as its base letter, without its accent (Ĳ as J, ı as i, ſ as s).
    static const char* const extended_a =
        "AaAaAaCcCcCcCcDdDdEeEeEeEeEeGgGgGgGgHhHhIiIiIiIiIiJjJjKkkLlLlLlLlLlNnNnNnnNnOoOoOoOoRrRrRrSsSsSsSsTtTtTtUuUuUuUuUuUuWwYyYZzZzZzs";
    if (cp >= 0x100 && cp <= 0x17F && extended_a[cp - 0x100]) {
        out.push_back(ascii(extended_a[cp - 0x100]));
        return;
    }
    out.push_back(ascii('?'));
}

}  // namespace

namespace pixel_font {

std::vector<Glyph> glyphs(const std::string& utf8) {
    std::vector<Glyph> out;
    out.reserve(utf8.size());
    size_t i = 0;
    while (i < utf8.size()) {
        const auto b = static_cast<unsigned char>(utf8[i]);
        if (b < 0x80) {
            out.push_back(ascii(static_cast<char>(b)));
            ++i;
            continue;
        }
        const int n = b >= 0xF0 && b < 0xF5 ? 4 : b >= 0xE0 ? 3 : b >= 0xC2 && b < 0xE0 ? 2 : 0;
        uint32_t cp = n == 4 ? b & 0x07u : n == 3 ? b & 0x0Fu : b & 0x1Fu;
        bool ok = n > 0 && i + static_cast<size_t>(n) <= utf8.size();
        for (int k = 1; ok && k < n; ++k) {
            const auto c = static_cast<unsigned char>(utf8[i + static_cast<size_t>(k)]);
            ok = (c & 0xC0) == 0x80;
            cp = cp << 6 | (c & 0x3Fu);
        }
        if (!ok) {
            out.push_back(ascii('?'));
            ++i;
            continue;
        }
        other(cp, out);
        i += static_cast<size_t>(n);
    }
    return out;
}

void draw(RgbImage& image, int x, int y, const std::vector<Glyph>& text, int scale, uint32_t rgb, bool vertical) {
    for (size_t k = 0; k < text.size(); ++k) {
        const int along0 = static_cast<int>(k) * advance * scale;  // where glyph k starts along the text
        for (int row = 0; row < glyph_height; ++row)
            for (int col = 0; col < glyph_width; ++col) {
                if (!(text[k].rows[row] >> (4 - col) & 1)) continue;
                for (int dy = 0; dy < scale; ++dy)
                    for (int dx = 0; dx < scale; ++dx) {
                        const int along = along0 + col * scale + dx, across = row * scale + dy;
                        if (vertical)  // upwards from (x, y); the glyph's top row on the left
                            image.set(x + across, y - along, rgb);
                        else
                            image.set(x + along, y + across, rgb);
                    }
            }
    }
}

}  // namespace pixel_font

}  // namespace attnviz
