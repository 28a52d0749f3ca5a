#pragma once
// The safetensors container (https://huggingface.co/docs/safetensors), read and
// written by attnviz's own code so that every size in a file is checked before
// anything is allocated or copied:
//
//   u64 little-endian N | N bytes of JSON header | data section
//   header: {"__metadata__": {"key": "string value", ...},
//            "tensor.name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
//   offsets are relative to the start of the data section; the tensors tile it
//   exactly (no gaps, no overlaps), each one numel * dtype-size bytes, row-major,
//   little-endian.
//
// This file is Qt-free and LibTorch-free (so fuzzing it builds and runs fast);
// core/persist/safetensors_torch.hpp turns entries into torch::Tensor and back.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace attnviz::safetensors {

/// Element types of the format. attnviz writes F32 (weights) and I64 (counts);
/// it reads all of them so that a foreign file gets a precise message (the 8-bit
/// float types of newer files are refused as unknown).
enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U64, U32, U16, U8, BOOL };
std::string to_string(DType d);          ///< "F32", ...
size_t element_size(DType d);            ///< bytes per element

/// One tensor of a file: where its bytes are and what they are.
struct TensorInfo {
    std::string name;             ///< the header key, e.g. "encoder.embedding.weight"
    DType dtype = DType::F32;
    std::vector<int64_t> shape;   ///< each dimension >= 0; rank 0 is a scalar
    size_t begin = 0, end = 0;    ///< byte range in the data section, end - begin == numel * element_size
    int64_t numel() const;        ///< product of shape (1 for a scalar)
};

/// Bounds applied while reading untrusted input; a file beyond them is refused
/// with a FileError naming the bound, before any memory is reserved for it.
struct Limits {
    uint64_t max_file_bytes = uint64_t(8) << 30;    ///< whole file (8 GiB)
    uint64_t max_header_bytes = uint64_t(64) << 20; ///< the JSON header (64 MiB)
    size_t max_tensors = 100000;                     ///< entries in the header
    size_t max_rank = 8;                             ///< dimensions of one tensor
    int max_json_depth = 32;                         ///< nesting of the header JSON
};

/// A parsed file. Holds its bytes (shared: copies of a File, and tensors that view
/// its entries, keep them alive); the entries point into them.
struct File {
    std::string name;                                ///< path or label, for messages
    std::map<std::string, std::string> metadata;     ///< "__metadata__" (string values only, as the format says)
    std::vector<TensorInfo> tensors;                 ///< in data-offset order
    std::string_view bytes;                          ///< the whole file, valid while `owner` lives
    /// Owns what `bytes` shows: the file's mapping (read_file: a MappedFile,
    /// core/io/mapped_file.hpp) or the bytes given to parse (a std::string).
    std::shared_ptr<const void> owner;
    bool mapped = false;                             ///< bytes is a mapping of the file (read_file; MappedFile::mapped)
    size_t data_start = 0;                           ///< offset of the data section in bytes

    /// The entry named `name`, or nullptr.
    const TensorInfo* find(const std::string& name) const;
    /// First byte of an entry's data (inside `bytes`).
    const char* data(const TensorInfo& t) const { return bytes.data() + data_start + t.begin; }
    /// The same address, writable, for tensors that view the entry (view_tensor,
    /// core/persist/safetensors_torch.hpp): `owner` is a private writable mapping or
    /// a string of this library's, so a write changes this process's copy, never the file.
    char* writable_data(const TensorInfo& t) const { return const_cast<char*>(data(t)); }
};

/// Parses bytes already in memory. Throws FileError naming `name` and what is wrong
/// (truncated header, bad JSON, unknown dtype, shape/offset mismatch, overlap, gap,
/// a limit exceeded).
File parse(std::string bytes, const std::string& name, const Limits& limits = {});

/// Maps (core/io/mapped_file.hpp) and parses a file: nothing is copied, and only
/// the pages that are used become resident. Only regular files are read (a FIFO, a
/// device or a directory is refused at once), and the file's size is checked against
/// limits.max_file_bytes before it is mapped. Throws FileError.
File read_file(const std::string& path, const Limits& limits = {});

/// Reads only the header of a file and returns its "__metadata__", for telling
/// files apart before reading them whole; the tensors are not checked. Same
/// checks and errors as read_file for everything it reads.
std::map<std::string, std::string> read_metadata(const std::string& path, const Limits& limits = {});

/// The largest header the safetensors format allows (the library's N_MAX).
constexpr uint64_t k_format_max_header = 100000000;

/// True when the first bytes look like a safetensors file (a header length the format allows
/// followed by '{'), for telling formats apart.
bool looks_like_safetensors(const std::string& head);

/// A tensor to write: its bytes are copied as given (row-major, little-endian).
struct TensorToWrite {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
    const void* data = nullptr;
    size_t bytes = 0;  ///< must equal numel * element_size (ConfigError otherwise)
};

/// Serialises tensors (written in the given order) and metadata into the format;
/// the header is padded with spaces to a multiple of 8 bytes so the data is aligned.
std::string serialize(const std::vector<TensorToWrite>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace attnviz::safetensors
