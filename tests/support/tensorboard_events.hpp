#pragma once
// Reads back TensorBoard event files for tests: the record framing with both CRCs
// checked, and the Event fields attnviz writes, decoded from the protobuf wire format
// independently of core/io/tensorboard_writer.cpp (the CLI test reads the same files
// with TensorBoard's own EventAccumulator).
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/io/crc32c.hpp"

namespace attnviz::testing {

struct TbValue {
    std::string tag;
    bool has_simple = false;
    float simple = 0;
    bool has_image = false;
    int64_t width = 0, height = 0, colorspace = 0;
    std::string png;
    bool has_tensor = false;
    int64_t dtype = 0;
    std::vector<int64_t> shape;
    std::vector<std::string> strings;
    std::string plugin;  ///< metadata's plugin_name
};

struct TbEvent {
    double wall_time = 0;
    int64_t step = 0;
    std::string file_version;
    std::vector<TbValue> values;
};

namespace tb_detail {

struct Reader {
    const std::string& s;
    size_t i = 0, end = 0;
    Reader(const std::string& text, size_t from, size_t to) : s(text), i(from), end(to) {}
    bool done() const { return i >= end; }
    uint64_t varint() {
        uint64_t v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (i >= end) throw std::runtime_error("truncated varint");
            const auto b = static_cast<unsigned char>(s[i++]);
            v |= uint64_t{b & 0x7Fu} << shift;
            if (!(b & 0x80)) return v;
        }
        throw std::runtime_error("varint too long");
    }
    uint64_t fixed(int n) {
        if (i + static_cast<size_t>(n) > end) throw std::runtime_error("truncated fixed field");
        uint64_t v = 0;
        for (int k = 0; k < n; ++k) v |= uint64_t{static_cast<unsigned char>(s[i + static_cast<size_t>(k)])} << (8 * k);
        i += static_cast<size_t>(n);
        return v;
    }
    /// The next field: its number and wire type; for wire type 2, [from, to) of its payload.
    void field(uint32_t& number, uint32_t& type, size_t& from, size_t& to, uint64_t& scalar) {
        const uint64_t key = varint();
        number = static_cast<uint32_t>(key >> 3);
        type = static_cast<uint32_t>(key & 7);
        from = to = 0;
        scalar = 0;
        switch (type) {
            case 0: scalar = varint(); break;
            case 1: scalar = fixed(8); break;
            case 5: scalar = fixed(4); break;
            case 2: {
                const uint64_t n = varint();
                if (n > end - i) throw std::runtime_error("truncated length-delimited field");
                from = i;
                to = i + n;
                i = to;
                break;
            }
            default: throw std::runtime_error("unexpected wire type " + std::to_string(type));
        }
    }
};

inline TbValue parse_value(const std::string& s, size_t from, size_t to) {
    TbValue v;
    Reader r(s, from, to);
    while (!r.done()) {
        uint32_t n, t;
        size_t a, b;
        uint64_t x;
        r.field(n, t, a, b, x);
        if (n == 1 && t == 2) v.tag = s.substr(a, b - a);
        if (n == 2 && t == 5) {
            const auto bits = static_cast<uint32_t>(x);
            std::memcpy(&v.simple, &bits, 4);
            v.has_simple = true;
        }
        if (n == 4 && t == 2) {
            v.has_image = true;
            Reader im(s, a, b);
            while (!im.done()) {
                uint32_t n2, t2;
                size_t a2, b2;
                uint64_t x2;
                im.field(n2, t2, a2, b2, x2);
                if (n2 == 1) v.height = static_cast<int64_t>(x2);
                if (n2 == 2) v.width = static_cast<int64_t>(x2);
                if (n2 == 3) v.colorspace = static_cast<int64_t>(x2);
                if (n2 == 4) v.png = s.substr(a2, b2 - a2);
            }
        }
        if (n == 8 && t == 2) {
            v.has_tensor = true;
            Reader te(s, a, b);
            while (!te.done()) {
                uint32_t n2, t2;
                size_t a2, b2;
                uint64_t x2;
                te.field(n2, t2, a2, b2, x2);
                if (n2 == 1) v.dtype = static_cast<int64_t>(x2);
                if (n2 == 8) v.strings.push_back(s.substr(a2, b2 - a2));
                if (n2 == 2) {
                    Reader sh(s, a2, b2);
                    while (!sh.done()) {
                        uint32_t n3, t3;
                        size_t a3, b3;
                        uint64_t x3;
                        sh.field(n3, t3, a3, b3, x3);
                        if (n3 != 2) continue;
                        Reader dim(s, a3, b3);
                        while (!dim.done()) {
                            uint32_t n4, t4;
                            size_t a4, b4;
                            uint64_t x4;
                            dim.field(n4, t4, a4, b4, x4);
                            if (n4 == 1) v.shape.push_back(static_cast<int64_t>(x4));
                        }
                    }
                }
            }
        }
        if (n == 9 && t == 2) {  // metadata -> plugin_data -> plugin_name
            Reader md(s, a, b);
            while (!md.done()) {
                uint32_t n2, t2;
                size_t a2, b2;
                uint64_t x2;
                md.field(n2, t2, a2, b2, x2);
                if (n2 != 1 || t2 != 2) continue;
                Reader pd(s, a2, b2);
                while (!pd.done()) {
                    uint32_t n3, t3;
                    size_t a3, b3;
                    uint64_t x3;
                    pd.field(n3, t3, a3, b3, x3);
                    if (n3 == 1 && t3 == 2) v.plugin = s.substr(a3, b3 - a3);
                }
            }
        }
    }
    return v;
}

}  // namespace tb_detail

/// One Event message.
inline TbEvent parse_tb_event(const std::string& s) {
    TbEvent e;
    tb_detail::Reader r(s, 0, s.size());
    while (!r.done()) {
        uint32_t n, t;
        size_t a, b;
        uint64_t x;
        r.field(n, t, a, b, x);
        if (n == 1 && t == 1) std::memcpy(&e.wall_time, &x, 8);
        if (n == 2 && t == 0) e.step = static_cast<int64_t>(x);
        if (n == 3 && t == 2) e.file_version = s.substr(a, b - a);
        if (n == 5 && t == 2) {
            tb_detail::Reader sum(s, a, b);
            while (!sum.done()) {
                uint32_t n2, t2;
                size_t a2, b2;
                uint64_t x2;
                sum.field(n2, t2, a2, b2, x2);
                if (n2 == 1 && t2 == 2) e.values.push_back(tb_detail::parse_value(s, a2, b2));
            }
        }
    }
    return e;
}

/// The records of a TFRecord byte string; throws std::runtime_error on a bad length, a bad
/// CRC or a truncated record.
inline std::vector<std::string> tf_records(const std::string& bytes) {
    std::vector<std::string> out;
    size_t i = 0;
    const auto u32 = [&](size_t at) {
        uint32_t v = 0;
        for (int k = 0; k < 4; ++k) v |= uint32_t{static_cast<unsigned char>(bytes[at + static_cast<size_t>(k)])} << (8 * k);
        return v;
    };
    while (i < bytes.size()) {
        if (bytes.size() - i < 12) throw std::runtime_error("truncated record header");
        uint64_t n = 0;
        for (int k = 0; k < 8; ++k) n |= uint64_t{static_cast<unsigned char>(bytes[i + static_cast<size_t>(k)])} << (8 * k);
        if (u32(i + 8) != mask_crc32c(crc32c(bytes.data() + i, 8))) throw std::runtime_error("bad length CRC");
        if (n > bytes.size() - i - 12 || bytes.size() - i - 12 - n < 4) throw std::runtime_error("truncated record");
        const std::string data = bytes.substr(i + 12, n);
        if (u32(i + 12 + n) != mask_crc32c(crc32c(data.data(), data.size()))) throw std::runtime_error("bad data CRC");
        out.push_back(data);
        i += 12 + n + 4;
    }
    return out;
}

inline std::vector<TbEvent> read_tb_events(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    std::vector<TbEvent> events;
    for (const auto& r : tf_records(ss.str())) events.push_back(parse_tb_event(r));
    return events;
}

}  // namespace attnviz::testing
