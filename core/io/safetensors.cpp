// The safetensors container, read with every size checked against the file
// and the Limits (in 64-bit arithmetic that cannot overflow) before anything
// is allocated for it, and written with the header padded for alignment.
#include "core/io/safetensors.hpp"

#include <algorithm>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/io/error.hpp"
#include "core/io/file_read.hpp"
#include "core/io/json_bounded.hpp"
#include "core/io/mapped_file.hpp"
#include "core/io/message.hpp"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this reader copies it as is"
#endif

namespace attnviz::safetensors {

using json = nlohmann::json;

namespace {

const std::pair<DType, const char*> k_dtypes[] = {
    {DType::F64, "F64"}, {DType::F32, "F32"}, {DType::F16, "F16"}, {DType::BF16, "BF16"}, {DType::I64, "I64"},
    {DType::I32, "I32"}, {DType::I16, "I16"}, {DType::I8, "I8"},   {DType::U64, "U64"},   {DType::U32, "U32"},
    {DType::U16, "U16"}, {DType::U8, "U8"},   {DType::BOOL, "BOOL"}};

bool dtype_from_string(const std::string& s, DType* out) {
    for (const auto& [d, n] : k_dtypes)
        if (s == n) {
            *out = d;
            return true;
        }
    return false;
}

std::string known_dtypes() {
    std::string s;
    for (const auto& entry : k_dtypes) s += (s.empty() ? "" : ", ") + std::string(entry.second);
    return s;
}

/// A name from the file, clipped and escaped for messages.
std::string quoted(const std::string& s) { return quote(s, 100); }

[[noreturn]] void refuse(const std::string& file, const std::string& what) {
    throw FileError(quote(file, quote_path_max) + " " + what);
}

uint64_t read_u64(const char* p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
    return v;
}

/// numel * element size in bytes; false when it does not fit in 64 bits.
bool byte_size(const std::vector<int64_t>& shape, DType dtype, uint64_t* out) {
    uint64_t n = element_size(dtype);
    for (const int64_t d : shape) {
        if (d < 0) return false;
        if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return false;
    }
    *out = n;
    return true;
}

/// Reads a non-negative integer of the header; false for anything else (floats, negatives, too large).
bool non_negative(const json& v, uint64_t* out) {
    if (v.is_number_unsigned()) {
        *out = v.get<uint64_t>();
        return true;
    }
    if (v.is_number_integer() && v.get<int64_t>() >= 0) {
        *out = static_cast<uint64_t>(v.get<int64_t>());
        return true;
    }
    return false;
}

class HeaderReader {
public:
    HeaderReader(const std::string& file, const Limits& limits, uint64_t data_size)
        : m_file(file), m_limits(limits), m_data_size(data_size) {}

    [[noreturn]] void fail(const std::string& what) const { refuse(m_file, what); }

    TensorInfo tensor(const std::string& name, const json& v) const {
        const std::string who = "tensor " + quoted(name);
        if (!v.is_object())
            fail("has a bad header: " + who + " is " + describe_json(v) +
                 ", expected an object with \"dtype\", \"shape\" and \"data_offsets\"");
        TensorInfo t;
        t.name = name;
        const auto dtype = v.find("dtype");
        if (dtype == v.end() || !dtype->is_string()) fail("has a bad header: " + who + " has no \"dtype\" string");
        if (!dtype_from_string(dtype->get_ref<const std::string&>(), &t.dtype))
            fail("has a bad header: " + who + " has unknown dtype " + quoted(dtype->get_ref<const std::string&>()) +
                 " (known: " + known_dtypes() + ")");
        const auto shape = v.find("shape");
        if (shape == v.end() || !shape->is_array()) fail("has a bad header: " + who + " has no \"shape\" array");
        if (shape->size() > m_limits.max_rank)
            fail("has a bad header: " + who + " has " + std::to_string(shape->size()) + " dimensions, more than the " +
                 std::to_string(m_limits.max_rank) + " this reads");
        for (size_t i = 0; i < shape->size(); ++i) {
            uint64_t d = 0;
            if (!non_negative((*shape)[i], &d) || d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
                fail("has a bad header: " + who + " dimension " + std::to_string(i) + " is " +
                     describe_json((*shape)[i]) + ", expected an integer >= 0");
            t.shape.push_back(static_cast<int64_t>(d));
        }
        uint64_t bytes = 0;
        if (!byte_size(t.shape, t.dtype, &bytes))
            fail("has a bad header: " + who + " of shape " + shape_to_string(t.shape) + " has too many elements");
        const auto offsets = v.find("data_offsets");
        uint64_t begin = 0, end = 0;
        if (offsets == v.end() || !offsets->is_array() || offsets->size() != 2 || !non_negative((*offsets)[0], &begin) ||
            !non_negative((*offsets)[1], &end) || begin > end)
            fail("has a bad header: " + who + " needs \"data_offsets\": [begin, end] with 0 <= begin <= end");
        if (end > m_data_size)
            fail("is truncated or damaged: " + who + " ends at byte " + std::to_string(end) + " of a data section of " +
                 std::to_string(m_data_size) + " bytes");
        if (end - begin != bytes)
            fail("has a bad header: " + who + " of dtype " + to_string(t.dtype) + " and shape " +
                 shape_to_string(t.shape) + " needs " + std::to_string(bytes) + " bytes but its data_offsets span " +
                 std::to_string(end - begin));
        t.begin = static_cast<size_t>(begin);
        t.end = static_cast<size_t>(end);
        return t;
    }

    /// The tensors must cover the data section exactly once, in order.
    void check_tiling(const std::vector<TensorInfo>& sorted) const {
        uint64_t at = 0;
        for (size_t i = 0; i < sorted.size(); ++i) {
            const auto& t = sorted[i];
            if (t.begin > at)
                fail("has a bad header: bytes " + std::to_string(at) + " to " + std::to_string(t.begin) +
                     " of the data section belong to no tensor (a gap before tensor " + quoted(t.name) + ")");
            if (t.begin < at)
                fail("has a bad header: tensor " + quoted(t.name) + " overlaps tensor " + quoted(sorted[i - 1].name));
            at = t.end;
        }
        if (at != m_data_size)
            fail("has " + std::to_string(m_data_size - at) + " bytes after its last tensor that belong to no tensor");
    }

private:
    const std::string& m_file;
    const Limits& m_limits;
    uint64_t m_data_size;
};

}  // namespace

std::string to_string(DType d) {
    for (const auto& [dt, n] : k_dtypes)
        if (dt == d) return n;
    return "?";
}

size_t element_size(DType d) {
    switch (d) {
    case DType::F64:
    case DType::I64:
    case DType::U64: return 8;
    case DType::F32:
    case DType::I32:
    case DType::U32: return 4;
    case DType::F16:
    case DType::BF16:
    case DType::I16:
    case DType::U16: return 2;
    case DType::I8:
    case DType::U8:
    case DType::BOOL: return 1;
    }
    return 1;
}

int64_t TensorInfo::numel() const {
    int64_t n = 1;
    for (const int64_t d : shape) n *= d;  // checked against the file's size when parsed
    return n;
}

const TensorInfo* File::find(const std::string& n) const {
    for (const auto& t : tensors)
        if (t.name == n) return &t;
    return nullptr;
}

namespace {

/// The header length of a file of `size` bytes whose first 8 bytes are `first8`, checked.
uint64_t header_length(const char* first8, uint64_t size, const std::string& name, const Limits& limits) {
    if (size > limits.max_file_bytes)
        refuse(name, "is " + std::to_string(size) + " bytes, more than the " + std::to_string(limits.max_file_bytes) +
                         " this reads");
    if (size < 8)
        refuse(name, "is truncated: " + std::to_string(size) +
                         " bytes, shorter than the 8-byte header length that starts a safetensors file");
    const uint64_t header_size = read_u64(first8);
    if (header_size > limits.max_header_bytes)
        refuse(name, header_size <= k_format_max_header
                         ? "has a header of " + std::to_string(header_size) + " bytes, more than the " +
                               std::to_string(limits.max_header_bytes) +
                               " attnviz reads (a model's header lists its tensors in well under 1 MB)"
                         : "declares a header of " + std::to_string(header_size) + " bytes, more than the " +
                               std::to_string(k_format_max_header) + " a safetensors file may have (is it one?)");
    if (header_size > size - 8)
        refuse(name, "is truncated: its header needs " + std::to_string(header_size) + " bytes but only " +
                         std::to_string(size - 8) + " follow");
    return header_size;
}

/// The header's JSON object, its size bounded; the metadata goes to `metadata`.
json header_json(const std::string& text, const std::string& name, const Limits& limits,
                 std::map<std::string, std::string>& metadata) {
    json header = parse_json_bounded(text, quote(name, quote_path_max) + ": safetensors header", limits.max_json_depth);
    if (!header.is_object()) refuse(name, "has a bad header: it is " + describe_json(header) + ", expected a JSON object");
    const auto meta = header.find("__metadata__");
    const size_t tensors = header.size() - (meta != header.end() ? 1 : 0);
    if (tensors > limits.max_tensors)
        refuse(name, "has " + std::to_string(tensors) + " tensors, more than the " + std::to_string(limits.max_tensors) +
                         " this reads");
    if (meta != header.end()) {
        if (!meta->is_object())
            refuse(name, "has a bad header: \"__metadata__\" is " + describe_json(*meta) + ", expected an object");
        for (const auto& [k, v] : meta->items()) {
            if (!v.is_string())
                refuse(name, "has a bad header: metadata " + quoted(k) + " is " + describe_json(v) +
                                 ", expected a string (the format allows only strings)");
            metadata.emplace(k, v.get<std::string>());
        }
        header.erase(meta);
    }
    return header;
}

}  // namespace

namespace {

/// Parses bytes that something else keeps alive; the caller sets storage.
File parse_view(std::string_view bytes, const std::string& name, const Limits& limits) {
    const uint64_t size = bytes.size();
    const uint64_t header_size = header_length(bytes.data(), size, name, limits);
    File f;
    f.name = name;
    f.data_start = static_cast<size_t>(8 + header_size);
    const json header = header_json(std::string(bytes.substr(8, header_size)), name, limits, f.metadata);
    const HeaderReader reader(name, limits, size - 8 - header_size);
    f.tensors.reserve(header.size());
    for (const auto& [key, value] : header.items()) f.tensors.push_back(reader.tensor(key, value));
    std::sort(f.tensors.begin(), f.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end != b.end ? a.end < b.end : a.name < b.name;
    });
    reader.check_tiling(f.tensors);
    f.bytes = bytes;
    return f;
}

}  // namespace

File parse(std::string bytes, const std::string& name, const Limits& limits) {
    auto owned = std::make_shared<std::string>(std::move(bytes));
    File f = parse_view(*owned, name, limits);
    f.owner = std::move(owned);
    return f;
}

File read_file(const std::string& path, const Limits& limits) {
    MappedFilePtr mapping = MappedFile::open(path, limits.max_file_bytes, "file");
    File f = parse_view(mapping->view(), path, limits);
    f.mapped = mapping->mapped();
    f.owner = std::move(mapping);
    return f;
}

std::map<std::string, std::string> read_metadata(const std::string& path, const Limits& limits) {
    uint64_t size = 0;
    const std::string first8 = read_file_head(path, 8, "file", &size);
    const uint64_t header_size =
        header_length(first8.data(), first8.size() < 8 ? first8.size() : size, path, limits);
    const std::string head = read_file_head(path, static_cast<size_t>(8 + header_size), "file");
    if (head.size() != 8 + header_size) refuse(path, "changed while it was read");
    std::map<std::string, std::string> metadata;
    header_json(head.substr(8), path, limits, metadata);
    return metadata;
}

bool looks_like_safetensors(const std::string& head) {
    if (head.size() < 9) return false;
    const uint64_t n = read_u64(head.data());
    // The format's own bound (the safetensors library's N_MAX, 100,000,000 bytes), not the reader's
    // smaller one: a valid file with a header past what attnviz reads is still told it is
    // safetensors, and refused by the reader for what it is (issue 46).
    return n >= 2 && n <= k_format_max_header && head[8] == '{';
}

std::string serialize(const std::vector<TensorToWrite>& tensors, const std::map<std::string, std::string>& metadata) {
    json header = json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    uint64_t offset = 0;
    for (const auto& t : tensors) {
        if (t.name.empty() || t.name == "__metadata__")
            throw ConfigError("safetensors: a tensor cannot be named " + quoted(t.name));
        if (header.contains(t.name)) throw ConfigError("safetensors: two tensors are named " + quoted(t.name));
        uint64_t bytes = 0;
        if (!byte_size(t.shape, t.dtype, &bytes) || bytes != t.bytes || (bytes > 0 && !t.data))
            throw ConfigError("safetensors: tensor " + quoted(t.name) + " of shape " + shape_to_string(t.shape) +
                              " and dtype " + to_string(t.dtype) + " was given " + std::to_string(t.bytes) + " bytes");
        header[t.name] = {{"dtype", to_string(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
    }
    std::string text;
    try {
        text = header.dump();
    } catch (const json::type_error&) {
        throw ConfigError("safetensors: a tensor name or metadata value is not valid UTF-8");
    }
    text.append((8 - text.size() % 8) % 8, ' ');  // 8 + header: the data starts 8-aligned
    std::string out;
    out.reserve(8 + text.size() + offset);
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((static_cast<uint64_t>(text.size()) >> (8 * i)) & 0xff));
    out += text;
    for (const auto& t : tensors) out.append(static_cast<const char*>(t.data), t.bytes);
    return out;
}

}  // namespace attnviz::safetensors
