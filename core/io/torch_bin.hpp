#pragma once
// PyTorch's torch.save files (what transformers' pytorch_model.bin is), read
// without Python and without running anything the file names.
//
// Such a file is a zip archive (core/io/zip_archive.hpp) of stored entries under one
// folder PREFIX: PREFIX/data.pkl, a pickle of the state_dict; PREFIX/data/KEY, the raw
// little-endian bytes of each storage; and small records this reader tolerates
// (byteorder, version, .format_version, .storage_alignment, .data/serialization_id,
// .data/version). Unpickling can run any code a file names, so data.pkl is read by
// a restricted unpickler of attnviz's own that knows only what torch.save writes for
// a state_dict:
//   opcodes  PROTO FRAME STOP MARK POP NONE NEWTRUE NEWFALSE BININT BININT1 BININT2 LONG1
//            BINUNICODE SHORT_BINUNICODE EMPTY_TUPLE TUPLE TUPLE1 TUPLE2 TUPLE3 EMPTY_LIST
//            APPEND APPENDS EMPTY_DICT SETITEM SETITEMS BINPUT LONG_BINPUT MEMOIZE BINGET
//            LONG_BINGET GLOBAL STACK_GLOBAL BINPERSID REDUCE BUILD
//   globals  collections.OrderedDict, torch._utils._rebuild_tensor_v2,
//            torch._utils._rebuild_parameter, and the storage types torch.FloatStorage,
//            HalfStorage, BFloat16Storage, DoubleStorage, LongStorage, IntStorage,
//            ShortStorage, CharStorage, ByteStorage, BoolStorage (as persistent ids only)
// It never calls anything: REDUCE of those globals builds records (an empty dict, a
// tensor record). Everything else -- another global (os.system, builtins.eval, ...),
// another opcode, a persistent id that is not a storage, a storage that is not in the
// zip or whose record has another size, a tensor whose sizes, strides and offset reach
// past its storage, negative or overflowing numbers, a limit exceeded, anything but a
// dict of name -> tensor at the top -- is refused with one FileError line naming the
// file and what was found.
//
// Qt-free and LibTorch-free (part of attnviz_base); core/persist/torch_bin_tensor.hpp
// turns records into torch::Tensor.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/io/safetensors.hpp"

namespace attnviz::torch_bin {

/// Element types: those of the storage types above (F32, F16, BF16, F64, I64, I32, I16,
/// I8, U8, BOOL), named as safetensors names them.
using DType = safetensors::DType;

/// One storage: an entry PREFIX/data/KEY of the zip, numel elements of dtype.
struct Storage {
    std::string key;
    DType dtype = DType::F32;
    uint64_t numel = 0;
    size_t offset = 0;  ///< its first byte in File::bytes (torch aligns it to 64 bytes)
    size_t bytes() const { return static_cast<size_t>(numel) * safetensors::element_size(dtype); }
};

/// One entry of the state_dict: a strided view of a storage (several may view one
/// storage, as tied weights do).
struct TensorRecord {
    std::string name;              ///< the state_dict key
    DType dtype = DType::F32;      ///< its storage's
    std::vector<int64_t> shape;    ///< each >= 0; rank 0 is a scalar
    std::vector<int64_t> strides;  ///< in elements, each >= 0, one per dimension
    int64_t storage_offset = 0;    ///< in elements
    size_t storage = 0;            ///< index into File::storages
    bool requires_grad = false;    ///< as saved (a Parameter, or a tensor that required grad)
    int64_t numel() const;         ///< product of shape (1 for a scalar)
    bool contiguous() const;       ///< row-major with no gaps (strides as torch gives a contiguous tensor)
};

/// Bounds applied while reading; beyond them a file is refused, naming the bound.
struct Limits {
    uint64_t max_file_bytes = uint64_t(8) << 30;    ///< whole file (8 GiB)
    uint64_t max_pickle_bytes = uint64_t(64) << 20; ///< data.pkl (64 MiB)
    size_t max_zip_entries = 200000;                 ///< entries of the zip
    size_t max_tensors = 100000;                     ///< entries of the state_dict
    size_t max_rank = 8;                             ///< dimensions of one tensor
    size_t max_memo = 1000000;                       ///< the unpickler's memo
    size_t max_values = 4000000;                     ///< objects the unpickler builds in all
    int max_nesting = 32;                            ///< containers in containers, and open MARKs
};

/// A read file: its tensors, their storages and the bytes they are in.
struct File {
    std::string name;                  ///< path or label, for messages
    std::string prefix;                ///< the zip folder holding data.pkl
    std::vector<TensorRecord> tensors; ///< in the state_dict's order
    std::vector<Storage> storages;     ///< in the order the pickle first names them
    std::string_view bytes;            ///< the whole file, valid while `owner` lives
    /// Owns what `bytes` shows: the file's mapping (read_file, core/io/mapped_file.hpp)
    /// or the bytes given to parse (a std::string).
    std::shared_ptr<const void> owner;
    bool mapped = false;               ///< bytes is a mapping of the file (read_file; MappedFile::mapped)

    /// The record named `name`, or nullptr.
    const TensorRecord* find(const std::string& name) const;
    /// First byte of a storage (inside `bytes`).
    const char* data(const Storage& s) const { return bytes.data() + s.offset; }
    /// The same, writable, for tensors that view it: `owner` is a private writable mapping
    /// or a string of this library's, so a write changes this process's copy, never the file.
    char* writable_data(const Storage& s) const { return const_cast<char*>(data(s)); }
};

/// Parses a file's bytes already in memory (tests, the fuzzer). Throws FileError naming
/// `name` and what is wrong.
File parse(std::string bytes, const std::string& name, const Limits& limits = {});

/// Maps and parses a file (only regular files; the size is checked against
/// limits.max_file_bytes before it is mapped). Throws FileError.
File read_file(const std::string& path, const Limits& limits = {});

}  // namespace attnviz::torch_bin
