// torch.save files: the zip's entries checked (core/io/zip_archive.cpp), data.pkl
// unpickled by the restricted unpickler (torch_bin_pickle.cpp), then every storage
// it names bound to its entry PREFIX/data/KEY, whose size must be the storage's.
#include "core/io/torch_bin.hpp"

#include <map>

#include "core/io/error.hpp"
#include "core/io/mapped_file.hpp"
#include "core/io/message.hpp"
#include "core/io/torch_bin_internal.hpp"
#include "core/io/zip_archive.hpp"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "torch.save writes little-endian storages; this reader uses them as they are"
#endif

namespace attnviz::torch_bin {

namespace {

[[noreturn]] void refuse(const std::string& file, const std::string& what) { throw FileError("'" + file + "' " + what); }

/// The records besides data.pkl and data/KEY that torch.save writes (all small).
bool tolerated(const std::string& rest) {
    return rest == "byteorder" || rest == "version" || rest == ".format_version" || rest == ".storage_alignment" ||
           rest == ".data/serialization_id" || rest == ".data/version";
}

/// Parses bytes that something else keeps alive; the caller sets owner.
File parse_view(std::string_view bytes, const std::string& name, const Limits& limits) {
    if (bytes.size() > limits.max_file_bytes)
        refuse(name, "is " + std::to_string(bytes.size()) + " bytes, more than the " +
                         std::to_string(limits.max_file_bytes) + " this reads");
    if (!zip::looks_like_zip(bytes))
        refuse(name, bytes.size() < 4 ? "is truncated: " + std::to_string(bytes.size()) + " bytes, too short for a torch.save file"
                                      : "is not a torch.save file (a zip archive): it does not start with a zip entry");
    zip::Limits zl;
    zl.max_entries = limits.max_zip_entries;
    const std::vector<zip::Entry> entries = zip::read_stored_entries(bytes, name, zl);

    // One folder holds everything: PREFIX/data.pkl says which.
    const zip::Entry* pickle = nullptr;
    for (const auto& e : entries) {
        const size_t slash = e.name.find('/');
        if (slash != std::string::npos && e.name.compare(slash, std::string::npos, "/data.pkl") == 0) {
            if (pickle) refuse(name, "holds two pickles (" + quote(pickle->name) + " and " + quote(e.name) + "); a torch.save file has one");
            pickle = &e;
        }
    }
    if (!pickle) refuse(name, "is a zip archive without a PREFIX/data.pkl: not a file of torch.save");
    File f;
    f.name = name;
    f.prefix = pickle->name.substr(0, pickle->name.size() - 9);
    std::map<std::string, const zip::Entry*> storages;  // KEY -> entry
    for (const auto& e : entries) {
        const std::string folder = f.prefix + "/";
        if (e.name.compare(0, folder.size(), folder) != 0)
            refuse(name, "holds the zip entry " + quote(e.name) + " outside its folder " + quote(f.prefix) +
                             "; a torch.save file keeps everything in one");
        const std::string rest = e.name.substr(folder.size());
        if (rest.compare(0, 5, "data/") == 0 && rest.size() > 5 && rest.find('/', 5) == std::string::npos) {
            storages.emplace(rest.substr(5), &e);
        } else if (rest == "byteorder") {
            const std::string_view order = bytes.substr(static_cast<size_t>(e.data_offset), static_cast<size_t>(e.size));
            if (order != "little")
                refuse(name, "says its byte order is " + quote(order) + "; this reader reads little-endian files only");
        } else if (rest != "data.pkl" && !tolerated(rest)) {
            refuse(name, "holds the zip entry " + quote(e.name) +
                             ", which a torch.save state_dict does not have (is it TorchScript or another archive?)");
        }
    }
    const std::string_view pkl = bytes.substr(static_cast<size_t>(pickle->data_offset), static_cast<size_t>(pickle->size));
    // The pickle is small and read whole: its CRC catches damage (0: the writer computed none).
    if (pickle->crc32 != 0 && pkl.size() <= limits.max_pickle_bytes && zip::crc32(pkl) != pickle->crc32)
        refuse(name, "is damaged: the CRC-32 of its data.pkl does not match");
    detail::PickledStateDict pickled = detail::unpickle_state_dict(pkl, name, limits);

    for (const auto& s : pickled.storages) {
        const auto it = storages.find(s.key);
        if (it == storages.end())
            refuse(name, "names storage " + quote(s.key) + ", but it holds no zip entry " + quote(f.prefix + "/data/" + s.key));
        Storage st;
        st.key = s.key;
        st.dtype = s.dtype;
        st.numel = s.numel;
        st.offset = static_cast<size_t>(it->second->data_offset);
        uint64_t need = 0;
        if (__builtin_mul_overflow(s.numel, static_cast<uint64_t>(safetensors::element_size(s.dtype)), &need) ||
            need != it->second->size)
            refuse(name, "names storage " + quote(s.key) + " of " + std::to_string(s.numel) + " " + safetensors::to_string(s.dtype) +
                             " elements, but its zip entry holds " + std::to_string(it->second->size) + " bytes");
        f.storages.push_back(std::move(st));
        storages.erase(it);
    }
    // torch.save writes the storages it pickles and no others: an entry no tensor uses
    // is something else (another archive hidden in this one, say) and is refused.
    if (!storages.empty())
        refuse(name, "holds the zip entry " + quote(storages.begin()->second->name) +
                         ", a storage no tensor of its state_dict uses; a torch.save file has none");
    f.tensors = std::move(pickled.tensors);
    f.bytes = bytes;
    return f;
}

}  // namespace

int64_t TensorRecord::numel() const {
    int64_t n = 1;
    for (const int64_t d : shape) n *= d;  // checked against the storage when read
    return n;
}

bool TensorRecord::contiguous() const {
    int64_t expected = 1;
    for (size_t i = shape.size(); i-- > 0;) {
        if (shape[i] != 1 && strides[i] != expected) return false;
        expected *= shape[i];
    }
    return true;
}

const TensorRecord* File::find(const std::string& n) const {
    for (const auto& t : tensors)
        if (t.name == n) return &t;
    return nullptr;
}

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

}  // namespace attnviz::torch_bin
