#pragma once
// torch.save files built byte by byte, for tests that need them right and tests
// that need them wrong: a stored zip laid out as PyTorch writes it (data aligned to
// 64 bytes through an extra field, ZIP64 end records), a pickle writer, and the
// pickle torch.save writes for an OrderedDict of tensors. Torch-free.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/io/zip_archive.hpp"

namespace attnviz::testing {

struct ZipEntrySpec {
    std::string name;
    std::string data;
    uint16_t method = 0;           ///< 0 stored, 8 deflate (the bytes are not compressed: only the header says so)
    uint16_t flags = 0x0800;       ///< general purpose flags (bit 0: encrypted)
    int64_t central_size = -1;     ///< the size the central directory gives (-1: the real one)
    int64_t central_offset = -1;   ///< the local header offset it gives (-1: the real one)
    bool zip64_size = false;       ///< sizes as 0xffffffff with the real ones (central_size) in a ZIP64 extra field
};

inline void put_le(std::string& s, uint64_t v, int n) {
    for (int i = 0; i < n; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

/// A zip archive of the entries (stored; `zip64_end`: with the ZIP64 end record and locator torch writes).
inline std::string make_zip(const std::vector<ZipEntrySpec>& entries, bool zip64_end = true) {
    std::string out, central;
    for (const auto& e : entries) {
        const uint64_t header = out.size();
        const uint32_t crc = zip::crc32(e.data);
        // Pad so that the data starts on a multiple of 64, as torch does ("FB" extra field).
        const size_t before = header + 30 + e.name.size() + 4;
        const size_t pad = (64 - before % 64) % 64;
        put_le(out, 0x04034b50, 4);
        put_le(out, 20, 2);
        put_le(out, e.flags, 2);
        put_le(out, e.method, 2);
        put_le(out, 0, 4);  // time, date
        put_le(out, crc, 4);
        put_le(out, e.data.size(), 4);
        put_le(out, e.data.size(), 4);
        put_le(out, e.name.size(), 2);
        put_le(out, 4 + pad, 2);
        out += e.name;
        put_le(out, 0x4246, 2);
        put_le(out, pad, 2);
        out.append(pad, 'Z');
        out += e.data;

        const uint64_t size = e.central_size >= 0 ? static_cast<uint64_t>(e.central_size) : e.data.size();
        const uint64_t offset = e.central_offset >= 0 ? static_cast<uint64_t>(e.central_offset) : header;
        put_le(central, 0x02014b50, 4);
        put_le(central, 20, 2);
        put_le(central, 20, 2);
        put_le(central, e.flags, 2);
        put_le(central, e.method, 2);
        put_le(central, 0, 4);
        put_le(central, crc, 4);
        put_le(central, e.zip64_size ? 0xffffffff : size, 4);
        put_le(central, e.zip64_size ? 0xffffffff : size, 4);
        put_le(central, e.name.size(), 2);
        put_le(central, e.zip64_size ? 20 : 0, 2);
        put_le(central, 0, 2);  // comment
        put_le(central, 0, 2);  // disk
        put_le(central, 0, 2);
        put_le(central, 0, 4);
        put_le(central, offset, 4);
        central += e.name;
        if (e.zip64_size) {
            put_le(central, 0x0001, 2);
            put_le(central, 16, 2);
            put_le(central, size, 8);
            put_le(central, size, 8);
        }
    }
    const uint64_t cd_offset = out.size();
    out += central;
    if (zip64_end) {
        const uint64_t end64 = out.size();
        put_le(out, 0x06064b50, 4);
        put_le(out, 44, 8);
        put_le(out, 45, 2);
        put_le(out, 45, 2);
        put_le(out, 0, 4);
        put_le(out, 0, 4);
        put_le(out, entries.size(), 8);
        put_le(out, entries.size(), 8);
        put_le(out, central.size(), 8);
        put_le(out, cd_offset, 8);
        put_le(out, 0x07064b50, 4);
        put_le(out, 0, 4);
        put_le(out, end64, 8);
        put_le(out, 1, 4);
    }
    put_le(out, 0x06054b50, 4);
    put_le(out, 0, 2);
    put_le(out, 0, 2);
    put_le(out, entries.size(), 2);
    put_le(out, entries.size(), 2);
    put_le(out, central.size(), 4);
    put_le(out, cd_offset, 4);
    put_le(out, 0, 2);
    return out;
}

/// Pickle opcodes written one by one (protocol 2, as torch.save writes them).
struct Pickle {
    std::string b;
    Pickle& op(char c) { b.push_back(c); return *this; }
    Pickle& proto(int v = 2) { b += '\x80'; b.push_back(static_cast<char>(v)); return *this; }
    Pickle& global(const std::string& module, const std::string& name) { b += 'c' + module + '\n' + name + '\n'; return *this; }
    Pickle& str(const std::string& s) { b += 'X'; put_le(b, s.size(), 4); b += s; return *this; }
    Pickle& int1(int v) { b += 'K'; b.push_back(static_cast<char>(v)); return *this; }
    Pickle& int4(int32_t v) { b += 'J'; put_le(b, static_cast<uint32_t>(v), 4); return *this; }
    Pickle& long1(int64_t v) { b += '\x8a'; b += '\x08'; put_le(b, static_cast<uint64_t>(v), 8); return *this; }
    Pickle& integer(int64_t v) { return v >= 0 && v < 256 ? int1(static_cast<int>(v)) : long1(v); }
    Pickle& mark() { return op('('); }
    Pickle& tuple() { return op('t'); }
    Pickle& ints(const std::vector<int64_t>& v) {
        mark();
        for (const int64_t x : v) integer(x);
        return tuple();
    }
    Pickle& ordered_dict() { global("collections", "OrderedDict"); op(')'); return op('R'); }
    Pickle& stop() { return op('.'); }
};

/// One tensor of a state_dict pickle: a view of storage `key` (numel elements of `storage_type`).
struct PickledTensor {
    std::string name;
    std::string key = "0";
    std::string storage_type = "FloatStorage";
    int64_t numel = 0;
    std::vector<int64_t> shape, strides;
    int64_t offset = 0;
};

/// Appends one `_rebuild_tensor_v2(...)` call for t, as torch.save writes it.
inline void pickle_tensor(Pickle& p, const PickledTensor& t) {
    p.global("torch._utils", "_rebuild_tensor_v2").mark();
    p.mark().str("storage").global("torch", t.storage_type).str(t.key).str("cpu").integer(t.numel).tuple().op('Q');
    p.integer(t.offset).ints(t.shape).ints(t.strides).op('\x89').ordered_dict().tuple().op('R');
}

/// The pickle torch.save writes for an OrderedDict of these tensors.
inline std::string state_dict_pickle(const std::vector<PickledTensor>& tensors) {
    Pickle p;
    p.proto().ordered_dict().mark();
    for (const auto& t : tensors) {
        p.str(t.name);
        pickle_tensor(p, t);
    }
    return p.op('u').stop().b;
}

/// A torch.save file: PREFIX/data.pkl, the storages (key, bytes) and the small records torch adds.
inline std::string torch_file(const std::string& pickle, const std::vector<std::pair<std::string, std::string>>& storages,
                              const std::string& prefix = "archive") {
    std::vector<ZipEntrySpec> entries{{prefix + "/data.pkl", pickle}, {prefix + "/byteorder", "little"}};
    for (const auto& [key, bytes] : storages) entries.push_back({prefix + "/data/" + key, bytes});
    entries.push_back({prefix + "/version", "3\n"});
    return make_zip(entries);
}

/// n float32 values 0, 1, 2, ... as little-endian bytes.
inline std::string float_bytes(int n) {
    std::string s;
    for (int i = 0; i < n; ++i) {
        const float f = static_cast<float>(i);
        s.append(reinterpret_cast<const char*>(&f), 4);
    }
    return s;
}

}  // namespace attnviz::testing
