// TensorBoard event files without TensorFlow (core/io/tensorboard_writer.hpp): CRC-32C
// against RFC 3720's vectors, the record framing, the Event protos read back by an
// independent decoder (tests/support/tensorboard_events.hpp), the file and its failures;
// PNG images decoded back with zlib; heatmap images (colours, size, labels) and their font.
// TensorBoard's own reader opens what a training run writes in the CLI test
// (tests/cli/tensorboard_check.py).
#include "catch_torch.hpp"

#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/analysis/colormap_tables.hpp"
#include "core/analysis/heatmap_image.hpp"
#include "core/analysis/pixel_font.hpp"
#include "core/io/crc32c.hpp"
#include "core/io/error.hpp"
#include "core/io/png.hpp"
#include "core/io/tensorboard_writer.hpp"
#include "file_limits.hpp"
#include "tensorboard_events.hpp"
#include "test_support.hpp"

using namespace attnviz;
namespace tb = attnviz::tensorboard;

namespace {

struct Dir {
    std::string path;
    Dir() {
        std::string tmpl = std::filesystem::temp_directory_path().string() + "/attnviz-tensorboard-XXXXXX";
        REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
        path = tmpl;
    }
    ~Dir() { attnviz::testing::remove_tree(path); }
};

uint32_t u32_be(const std::string& s, size_t at) {
    uint32_t v = 0;
    for (size_t k = 0; k < 4; ++k) v = v << 8 | static_cast<unsigned char>(s.at(at + k));
    return v;
}

/// A PNG of colour type 2, 8 bits, decoded with zlib: every chunk's CRC checked, the rows
/// unfiltered (None, Sub, Up, Average and Paeth, whichever the file uses).
RgbImage decode_png(const std::string& png) {
    REQUIRE(png.substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
    RgbImage img;
    std::string idat;
    size_t i = 8;
    bool ended = false;
    while (i < png.size()) {
        const uint32_t n = u32_be(png, i);
        const std::string type = png.substr(i + 4, 4);
        const std::string data = png.substr(i + 8, n);
        const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(png.data() + i + 4), n + 4);
        REQUIRE(u32_be(png, i + 8 + n) == static_cast<uint32_t>(crc));
        if (type == "IHDR") {
            img.width = static_cast<int>(u32_be(data, 0));
            img.height = static_cast<int>(u32_be(data, 4));
            REQUIRE(data.substr(8, 5) == std::string("\x08\x02\x00\x00\x00", 5));
        } else if (type == "IDAT") {
            idat += data;
        } else if (type == "IEND") {
            ended = true;
        }
        i += 12 + n;
    }
    REQUIRE(ended);
    const size_t row = static_cast<size_t>(img.width) * 3;
    std::string raw((row + 1) * static_cast<size_t>(img.height), '\0');
    uLongf raw_size = raw.size();
    REQUIRE(uncompress(reinterpret_cast<Bytef*>(&raw[0]), &raw_size, reinterpret_cast<const Bytef*>(idat.data()),
                       idat.size()) == Z_OK);
    REQUIRE(raw_size == raw.size());
    img.pixels.assign(row * static_cast<size_t>(img.height), 0);
    for (size_t y = 0; y < static_cast<size_t>(img.height); ++y) {
        const auto filter = static_cast<unsigned char>(raw[y * (row + 1)]);
        for (size_t x = 0; x < row; ++x) {
            const int v = static_cast<unsigned char>(raw[y * (row + 1) + 1 + x]);
            const int a = x >= 3 ? img.pixels[y * row + x - 3] : 0;
            const int b = y > 0 ? img.pixels[(y - 1) * row + x] : 0;
            const int c = x >= 3 && y > 0 ? img.pixels[(y - 1) * row + x - 3] : 0;
            int predictor = 0;
            switch (filter) {
                case 0: predictor = 0; break;
                case 1: predictor = a; break;
                case 2: predictor = b; break;
                case 3: predictor = (a + b) / 2; break;
                case 4: {
                    const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
                    predictor = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
                    break;
                }
                default: FAIL("unknown PNG filter " << filter);
            }
            img.pixels[y * row + x] = static_cast<uint8_t>(v + predictor);
        }
    }
    return img;
}

}  // namespace

TEST_CASE("tensorboard: CRC-32C matches RFC 3720's test vectors and the check value", "[tensorboard]") {
    // RFC 3720, B.4: the CRC bytes are listed as sent (little-endian).
    const std::string zeros(32, '\0'), ones(32, '\xff');
    std::string up, down;
    for (int i = 0; i < 32; ++i) {
        up += static_cast<char>(i);
        down += static_cast<char>(31 - i);
    }
    CHECK(crc32c(zeros.data(), zeros.size()) == 0x8A9136AAu);
    CHECK(crc32c(ones.data(), ones.size()) == 0x62A8AB43u);
    CHECK(crc32c(up.data(), up.size()) == 0x46DD794Eu);
    CHECK(crc32c(down.data(), down.size()) == 0x113FDB5Cu);
    CHECK(crc32c("123456789", 9) == 0xE3069283u);  // the catalogue's check value of CRC-32C
    CHECK(crc32c(nullptr, 0) == 0u);
    // Continuing over a second part is the CRC of the whole.
    CHECK(crc32c(up.data() + 10, 22, crc32c(up.data(), 10)) == 0x46DD794Eu);
    // The mask TFRecord stores: a rotation by 15 bits plus a constant.
    CHECK(mask_crc32c(0) == 0xA282EAD8u);
    CHECK(mask_crc32c(0x8A9136AAu) == (((0x8A9136AAu >> 15) | (0x8A9136AAu << 17)) + 0xA282EAD8u));
}

TEST_CASE("tensorboard: a record frames its data with the masked CRCs of length and data", "[tensorboard]") {
    const std::string data = "attention";
    const std::string r = tb::frame_record(data);
    REQUIRE(r.size() == 8 + 4 + data.size() + 4);
    CHECK(r.substr(0, 8) == std::string("\x09\0\0\0\0\0\0\0", 8));
    const auto records = testing::tf_records(r + tb::frame_record(""));
    REQUIRE(records.size() == 2);
    CHECK(records[0] == data);
    CHECK(records[1].empty());
    std::string damaged = r;
    damaged[14] ^= 1;  // one bit of the data
    CHECK_THROWS(testing::tf_records(damaged));
    damaged = r;
    damaged[0] = 10;  // the length
    CHECK_THROWS(testing::tf_records(damaged));
}

TEST_CASE("tensorboard: events decode to what was written", "[tensorboard]") {
    auto e = testing::parse_tb_event(tb::file_version_event(1700000000.25));
    CHECK(e.file_version == "brain.Event:2");
    CHECK(e.wall_time == 1700000000.25);
    CHECK(e.values.empty());

    e = testing::parse_tb_event(tb::scalar_event(1.5, 1234567890123, "train/loss", 0.25));
    CHECK(e.step == 1234567890123);
    CHECK(e.wall_time == 1.5);
    REQUIRE(e.values.size() == 1);
    CHECK(e.values[0].tag == "train/loss");
    CHECK(e.values[0].has_simple);
    CHECK(e.values[0].simple == 0.25f);

    e = testing::parse_tb_event(tb::image_event(2, 7, "attention/1", "PNGDATA", 30, 20));
    REQUIRE(e.values.size() == 1);
    CHECK(e.values[0].has_image);
    CHECK(e.values[0].width == 30);
    CHECK(e.values[0].height == 20);
    CHECK(e.values[0].colorspace == 3);
    CHECK(e.values[0].png == "PNGDATA");

    e = testing::parse_tb_event(tb::text_event(3, 9, "valid/translations", {{"a", "b", "c"}, {"d"}}));
    REQUIRE(e.values.size() == 1);
    const auto& v = e.values[0];
    CHECK(v.has_tensor);
    CHECK(v.plugin == "text");
    CHECK(v.dtype == 7);  // DT_STRING
    CHECK(v.shape == std::vector<int64_t>{2, 3});
    CHECK(v.strings == std::vector<std::string>{"a", "b", "c", "d", "", ""});  // the short row padded
    // One cell: a scalar string (shape []), which the Text tab shows as one text.
    e = testing::parse_tb_event(tb::text_event(3, 9, "note", {{"*hello*"}}));
    CHECK(e.values.at(0).shape.empty());
    CHECK(e.values.at(0).strings == std::vector<std::string>{"*hello*"});
    CHECK_THROWS_AS(tb::text_event(3, 9, "empty", {}), ConfigError);
    CHECK_THROWS_AS(tb::text_event(3, 9, "empty", {{}}), ConfigError);
}

TEST_CASE("tensorboard: Markdown special characters are escaped, line breaks become spaces", "[tensorboard]") {
    CHECK(tb::markdown_literal("la voiture") == "la voiture");
    CHECK(tb::markdown_literal("a|b *c* _d_ <eos>") == "a\\|b \\*c\\* \\_d\\_ &lt;eos&gt;");
    CHECK(tb::markdown_literal("&lt; & ~") == "&amp;lt; &amp; ~");
    CHECK(tb::markdown_literal("l'été.\nfin") == "l'été\\. fin");
    CHECK(tb::markdown_literal("# [x](y)") == "\\# \\[x\\]\\(y\\)");
}

TEST_CASE("tensorboard: the writer makes a new event file named as TensorFlow names them", "[tensorboard]") {
    CHECK(tb::event_file_name(1700000000.9, "host", 42, 0) == "events.out.tfevents.1700000000.host.42.0");
    CHECK(tb::event_file_name(5, "h", 1, 3) == "events.out.tfevents.0000000005.h.1.3");
    Dir dir;
    const std::string sub = dir.path + "/runs/a";  // made with its parents
    std::string first, second;
    {
        tb::EventWriter w(sub);
        first = w.path();
        w.scalar("train/loss", 1, 2.5);
        w.scalar("train/loss", 2, 1.5);
        CHECK(w.queued() > 0);
        w.flush();
        CHECK(w.queued() == 0);
        w.text("valid/translations", 2, {{"x"}});
        tb::EventWriter other(sub);  // the same second: a file of its own
        second = other.path();
    }  // the destructor writes what is queued
    CHECK(first != second);
    const std::string name = std::filesystem::path(first).filename().string();
    CHECK(name.rfind("events.out.tfevents.", 0) == 0);
    CHECK(name.find("." + std::to_string(::getpid()) + ".") != std::string::npos);
    const auto events = testing::read_tb_events(first);
    REQUIRE(events.size() == 4);
    CHECK(events[0].file_version == "brain.Event:2");
    CHECK(events[1].values.at(0).tag == "train/loss");
    CHECK(events[2].step == 2);
    CHECK(events[2].values.at(0).simple == 1.5f);
    CHECK(events[3].values.at(0).tag == "valid/translations");
    CHECK(testing::read_tb_events(second).size() == 1);  // only its file_version
}

TEST_CASE("tensorboard: a folder that cannot be made and a write that fails are FileErrors", "[tensorboard]") {
    Dir dir;
    const std::string file = dir.path + "/plain-file";
    std::ofstream(file) << "x";
    CHECK_THROWS_AS(tb::EventWriter(file + "/runs"), FileError);
    CHECK_THROWS_AS(tb::EventWriter(""), FileError);
    tb::EventWriter w(dir.path);
    w.flush();
    {
        testing::FileSizeLimit limit(200);  // as a full disk: write() fails
        REQUIRE(limit.ok());
        w.image("attention/0", 1, std::string(4000, 'x'), 10, 10);
        CHECK_THROWS_AS(w.flush(), FileError);
    }
    // After a failure nothing more is written: a record after a partial one would be unreadable.
    w.scalar("train/loss", 2, 1.0);
    CHECK(w.queued() == 0);
    CHECK_NOTHROW(w.flush());
}

TEST_CASE("tensorboard: PNG images decode back to their pixels", "[tensorboard][png]") {
    RgbImage img(7, 5, 0x102030);
    for (int y = 0; y < 5; ++y)
        for (int x = 0; x < 7; ++x) img.set(x, y, static_cast<uint32_t>((x * 37 + y * 91) & 0xFF) << 16 | 0x00FF00 * (y % 2));
    img.set(100, 100, 0);  // outside: ignored
    const RgbImage back = decode_png(encode_png(img));
    CHECK(back.width == 7);
    CHECK(back.height == 5);
    CHECK(back.pixels == img.pixels);
    // Rows that repeat (a heatmap's cells) use the Up filter and compress to little.
    RgbImage flat(200, 200, 0x440154);
    const std::string png = encode_png(flat);
    CHECK(png.size() < 2000);
    CHECK(decode_png(png).pixels == flat.pixels);
    CHECK_THROWS_AS(encode_png(RgbImage()), ConfigError);
    RgbImage bad(2, 2);
    bad.pixels.pop_back();
    CHECK_THROWS_AS(encode_png(bad), ConfigError);
}

TEST_CASE("heatmap image: cells in matplotlib's colours, labels in the margins", "[tensorboard][heatmap]") {
    CHECK(heatmap_color("viridis", 0.0) == 0x440154u);
    CHECK(heatmap_color("viridis", 1.0) == 0xFDE725u);
    CHECK(heatmap_color("Viridis", 0.5) == (colormaps::viridis[128] & 0xFFFFFFu));  // int(0.5 * 256)
    CHECK(heatmap_color("viridis", std::nan("")) == 0x440154u);
    CHECK(heatmap_color("reds", 2.0) == (colormaps::reds[255] & 0xFFFFFFu));
    CHECK_THROWS_AS(heatmap_color("jet", 0.5), ConfigError);

    const AttentionMatrix w = {{1.0f, 0.0f, 0.0f}, {0.0f, 0.5f, 0.5f}};
    HeatmapImageOptions plain;
    plain.labels = false;
    plain.max_cell = 10;
    const RgbImage bare = heatmap_image(w, {}, {}, plain);
    CHECK(bare.width == 4 + 3 * 10 + 4);
    CHECK(bare.height == 4 + 2 * 10 + 4);
    const auto centre = [](const RgbImage& im, int x0, int y0, int cell, int r, int c) {
        return im.at(x0 + c * cell + cell / 2, y0 + r * cell + cell / 2);
    };
    CHECK(centre(bare, 4, 4, 10, 0, 0) == 0xFDE725u);
    CHECK(centre(bare, 4, 4, 10, 0, 1) == 0x440154u);
    CHECK(centre(bare, 4, 4, 10, 1, 2) == heatmap_color("viridis", 0.5));
    CHECK(bare.at(1, 1) == 0xFFFFFFu);  // the white margin

    // With labels: a left margin for the output tokens and a top margin for the source
    // tokens, both wide enough for the longest label at the font's scale (2 at 24-px cells).
    const RgbImage labelled = heatmap_image(w, {"la", "voiture"}, {"the", "car", "<eos>"});
    const int scale = 2, label_w = pixel_font::text_width(7, scale), label_h = pixel_font::text_width(5, scale);
    CHECK(labelled.width == 4 + label_w + 4 + 3 * 24 + 4);
    CHECK(labelled.height == 4 + label_h + 4 + 2 * 24 + 4);
    const int x0 = 4 + label_w + 4, y0 = 4 + label_h + 4;
    CHECK(centre(labelled, x0, y0, 24, 0, 0) == 0xFDE725u);
    int dark_left = 0, dark_top = 0;
    for (int y = 0; y < labelled.height; ++y)
        for (int x = 0; x < labelled.width; ++x) {
            if (labelled.at(x, y) != 0) continue;
            if (x < x0 && y >= y0) ++dark_left;
            if (y < y0 && x >= x0) ++dark_top;
            CHECK((x < x0 || y < y0));  // no text on the grid
        }
    CHECK(dark_left > 50);
    CHECK(dark_top > 50);

    // A long sentence: smaller cells, no labels below the font's height, the grid within max_grid.
    const AttentionMatrix big(100, std::vector<float>(100, 0.01f));
    const RgbImage small = heatmap_image(big, std::vector<std::string>(100, "w"), std::vector<std::string>(100, "w"));
    CHECK(small.width == 4 + 100 * 7 + 4);  // 768 / 100 = 7-px cells
    // Ragged (causal) rows read as 0 where they end; no cell at all is an error.
    const RgbImage ragged = heatmap_image({{1.0f}, {0.5f, 0.5f}}, {}, {}, plain);
    CHECK(centre(ragged, 4, 4, 10, 0, 1) == 0x440154u);
    CHECK_THROWS_AS(heatmap_image({}, {}, {}), ConfigError);
    CHECK_THROWS_AS(heatmap_image({{}}, {}, {}), ConfigError);
}

TEST_CASE("pixel font: ASCII, accented letters with their accents, other text as stand-ins", "[tensorboard][font]") {
    const auto one = [](const std::string& s) {
        const auto g = pixel_font::glyphs(s);
        REQUIRE(g.size() == 1);
        return g[0];
    };
    const auto same = [](const Glyph& a, const Glyph& b, int from = 0, int to = 9) {
        for (int r = from; r < to; ++r)
            if (a.rows[r] != b.rows[r]) return false;
        return true;
    };
    CHECK(pixel_font::glyphs("voiture").size() == 7);
    for (char c = 0x21; c < 0x7F; ++c) {  // every printable character draws something, and differs from '?'
        INFO(c);
        const Glyph g = one(std::string(1, c));
        bool any = false;
        for (int r = 0; r < 9; ++r) any = any || g.rows[r];
        CHECK(any);
        if (c != '?') CHECK_FALSE(same(g, one("?")));
    }
    // é: e's body (rows 2-8) with an accent above it; è differs from é; ç has a cedilla below.
    CHECK(same(one("é"), one("e"), 2, 9));
    CHECK_FALSE(same(one("é"), one("e")));
    CHECK_FALSE(same(one("é"), one("è")));
    CHECK(same(one("ç"), one("c"), 0, 7));
    CHECK_FALSE(same(one("ç"), one("c")));
    CHECK(same(one("É"), one("E")));  // capitals: no room above, the base letter
    CHECK(same(one("ı"), one("i")));
    CHECK(pixel_font::glyphs("œuf").size() == 4);  // œ as o + e
    CHECK(same(one("▁"), one("_")));               // SentencePiece's word start
    CHECK(same(one("’"), one("'")));
    CHECK(same(one("猫"), one("?")));
    CHECK(pixel_font::glyphs("\xff\xfe").size() == 2);  // invalid UTF-8: '?' per byte
    CHECK(pixel_font::glyphs("\xc3").size() == 1);      // truncated sequence
    CHECK(pixel_font::text_width(0, 2) == 0);
    CHECK(pixel_font::text_width(3, 1) == 17);
    // Drawn vertically, a glyph's rows become columns, reading upwards.
    RgbImage h(20, 20, 0xFFFFFF), v(20, 20, 0xFFFFFF);
    pixel_font::draw(h, 0, 0, pixel_font::glyphs("L"), 1, 0);
    pixel_font::draw(v, 0, 19, pixel_font::glyphs("L"), 1, 0);
    for (int row = 0; row < 9; ++row)
        for (int col = 0; col < 5; ++col) CHECK(h.at(col, row) == v.at(row, 19 - col));
}
