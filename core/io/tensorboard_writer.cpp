// TensorBoard event files: records, hand-encoded Event protos, the file itself.
#include "core/io/tensorboard_writer.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/io/crc32c.hpp"
#include "core/io/error.hpp"

namespace attnviz::tensorboard {

namespace {

// --- the protobuf wire format: the four encodings these messages use ---------------
void varint(std::string& out, uint64_t v) {
    while (v >= 0x80) {
        out += static_cast<char>((v & 0x7F) | 0x80);
        v >>= 7;
    }
    out += static_cast<char>(v);
}
void tag(std::string& out, uint32_t field, uint32_t wire_type) { varint(out, uint64_t{field} << 3 | wire_type); }
/// Wire type 0: int32, int64 (two's complement as 64 bits) and enums.
void number(std::string& out, uint32_t field, int64_t v) {
    tag(out, field, 0);
    varint(out, static_cast<uint64_t>(v));
}
/// Wire type 2: strings, bytes and embedded messages.
void bytes(std::string& out, uint32_t field, const std::string& payload) {
    tag(out, field, 2);
    varint(out, payload.size());
    out += payload;
}
void little_endian(std::string& out, uint64_t bits, int n) {
    for (int i = 0; i < n; ++i) out += static_cast<char>((bits >> (8 * i)) & 0xFF);
}
/// Wire type 1: double.
void fixed64(std::string& out, uint32_t field, double v) {
    uint64_t bits = 0;
    std::memcpy(&bits, &v, 8);
    tag(out, field, 1);
    little_endian(out, bits, 8);
}
/// Wire type 5: float.
void fixed32(std::string& out, uint32_t field, float v) {
    uint32_t bits = 0;
    std::memcpy(&bits, &v, 4);
    tag(out, field, 5);
    little_endian(out, bits, 4);
}

// Field numbers (tensorflow/core/util/event.proto, framework/summary.proto, tensor.proto,
// tensor_shape.proto, types.proto).
enum EventField : uint32_t { event_wall_time = 1, event_step = 2, event_file_version = 3, event_summary = 5 };
enum SummaryField : uint32_t { summary_value = 1 };
enum ValueField : uint32_t { value_tag = 1, value_simple = 2, value_image = 4, value_tensor = 8, value_metadata = 9 };
enum ImageField : uint32_t { image_height = 1, image_width = 2, image_colorspace = 3, image_encoded = 4 };
enum MetadataField : uint32_t { metadata_plugin_data = 1 };
enum PluginDataField : uint32_t { plugin_name = 1 };
enum TensorField : uint32_t { tensor_dtype = 1, tensor_shape = 2, tensor_string_val = 8 };
enum ShapeField : uint32_t { shape_dim = 2 };
enum DimField : uint32_t { dim_size = 1 };
constexpr int64_t dt_string = 7;  // DataType DT_STRING
constexpr int64_t rgb = 3;        // Summary.Image colorspace

/// An Event holding a Summary of one Value (its fields already encoded).
std::string summary_event(double wall_time, int64_t step, const std::string& tag_name, const std::string& fields) {
    std::string value;
    bytes(value, value_tag, tag_name);
    value += fields;
    std::string summary;
    bytes(summary, summary_value, value);
    std::string event;
    fixed64(event, event_wall_time, wall_time);
    number(event, event_step, step);
    bytes(event, event_summary, summary);
    return event;
}

[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
    throw FileError("TensorBoard: cannot " + what + " '" + path + "': " + std::strerror(err));
}

}  // namespace

std::string frame_record(const std::string& data) {
    std::string out;
    out.reserve(data.size() + 16);
    little_endian(out, data.size(), 8);
    const uint32_t length_crc = mask_crc32c(crc32c(out.data(), 8));
    little_endian(out, length_crc, 4);
    out += data;
    little_endian(out, mask_crc32c(crc32c(data.data(), data.size())), 4);
    return out;
}

std::string file_version_event(double wall_time) {
    std::string event;
    fixed64(event, event_wall_time, wall_time);
    bytes(event, event_file_version, "brain.Event:2");
    return event;
}

std::string scalar_event(double wall_time, int64_t step, const std::string& tag_name, double value) {
    std::string fields;
    fixed32(fields, value_simple, static_cast<float>(value));
    return summary_event(wall_time, step, tag_name, fields);
}

std::string image_event(double wall_time, int64_t step, const std::string& tag_name, const std::string& png, int width,
                        int height) {
    std::string image;
    number(image, image_height, height);
    number(image, image_width, width);
    number(image, image_colorspace, rgb);
    bytes(image, image_encoded, png);
    std::string fields;
    bytes(fields, value_image, image);
    return summary_event(wall_time, step, tag_name, fields);
}

std::string text_event(double wall_time, int64_t step, const std::string& tag_name,
                       const std::vector<std::vector<std::string>>& table) {
    size_t columns = 0;
    for (const auto& row : table) columns = std::max(columns, row.size());
    if (table.empty() || columns == 0) throw ConfigError("TensorBoard: a text summary needs at least one cell");
    std::string tensor;
    number(tensor, tensor_dtype, dt_string);
    const bool scalar = table.size() == 1 && columns == 1;
    std::string shape;
    if (!scalar) {
        for (const size_t n : {table.size(), columns}) {
            std::string dim;
            number(dim, dim_size, static_cast<int64_t>(n));
            bytes(shape, shape_dim, dim);
        }
    }
    bytes(tensor, tensor_shape, shape);  // empty: a scalar
    for (const auto& row : table)
        for (size_t c = 0; c < columns; ++c) bytes(tensor, tensor_string_val, c < row.size() ? row[c] : std::string());
    std::string plugin;
    bytes(plugin, plugin_name, "text");  // content: TextPluginData version 0, which encodes as nothing
    std::string metadata;
    bytes(metadata, metadata_plugin_data, plugin);
    std::string fields;
    bytes(fields, value_metadata, metadata);
    bytes(fields, value_tensor, tensor);
    return summary_event(wall_time, step, tag_name, fields);
}

std::string markdown_literal(const std::string& text) {
    std::string out;
    out.reserve(text.size());
    for (const char c : text) {
        if (c == '\n' || c == '\r') {
            out += ' ';
            continue;
        }
        if (c == '<' || c == '>' || c == '&') {  // HTML, which the sanitiser would drop: entities
            out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : "&amp;";
            continue;
        }
        if (c != '\0' && std::strchr("\\`*_{}[]()#+-.!|", c)) out += '\\';
        out += c;
    }
    return out;
}

std::string event_file_name(double wall_time, const std::string& host, long pid, int n) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%010lld", static_cast<long long>(std::floor(wall_time)));
    return "events.out.tfevents." + std::string(seconds) + "." + host + "." + std::to_string(pid) + "." +
           std::to_string(n);
}

double wall_time_now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

EventWriter::EventWriter(const std::string& dir) {
    if (dir.empty()) throw FileError("TensorBoard: no directory given");
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw FileError("TensorBoard: cannot create the directory '" + dir + "': " + ec.message());
    char host[256] = {0};
    if (gethostname(host, sizeof host - 1) != 0 || !host[0]) std::strcpy(host, "localhost");
    for (char* h = host; *h; ++h)
        if (*h == '/') *h = '_';
    const double now = wall_time_now();
    // A second writer of this process in the same second (a continued run) takes the next number.
    for (int n = 0;; ++n) {
        m_path = (std::filesystem::path(dir) / event_file_name(now, host, static_cast<long>(getpid()), n)).string();
        m_fd = ::open(m_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_APPEND, 0644);
        if (m_fd >= 0) break;
        if (errno != EEXIST || n >= 1000) fail("create", m_path, errno);
    }
    add(file_version_event(now));
}

EventWriter::~EventWriter() {
    try {
        flush();
    } catch (const std::exception&) {
    }
    if (m_fd >= 0) ::close(m_fd);
}

void EventWriter::add(const std::string& event) {
    if (m_failed) return;
    m_queue += frame_record(event);
    if (m_queue.size() >= (1u << 20)) flush();
}

void EventWriter::scalar(const std::string& tag_name, int64_t step, double value) {
    add(scalar_event(wall_time_now(), step, tag_name, value));
}

void EventWriter::image(const std::string& tag_name, int64_t step, const std::string& png, int width, int height) {
    add(image_event(wall_time_now(), step, tag_name, png, width, height));
}

void EventWriter::text(const std::string& tag_name, int64_t step, const std::vector<std::vector<std::string>>& table) {
    add(text_event(wall_time_now(), step, tag_name, table));
}

void EventWriter::flush() {
    if (m_failed || m_queue.empty()) return;
    size_t done = 0;
    while (done < m_queue.size()) {
        const ssize_t n = ::write(m_fd, m_queue.data() + done, m_queue.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            m_failed = true;
            m_queue.clear();
            fail("write", m_path, n < 0 ? errno : ENOSPC);
        }
        done += static_cast<size_t>(n);
    }
    m_queue.clear();
}

}  // namespace attnviz::tensorboard
