// Weights files: their kind from their first bytes, a folder's file by
// transformers' names, and shard indexes with their shard names checked lexically
// (the names must stay inside the index's folder).
#include "core/io/weights_index.hpp"

#include <sys/stat.h>

#include <set>

#include <nlohmann/json.hpp>

#include "core/io/error.hpp"
#include "core/io/file_read.hpp"
#include "core/io/json_bounded.hpp"
#include "core/io/message.hpp"
#include "core/io/safetensors.hpp"
#include "core/io/zip_archive.hpp"

namespace attnviz {

namespace {

/// Why a shard name is refused, or "" when it names a file inside the folder.
std::string bad_shard_name(const std::string& name) {
    if (name.empty()) return "is empty";
    if (name.size() > 4096) return "is longer than 4096 bytes";
    if (name.find('\0') != std::string::npos) return "holds a NUL";
    if (name.find('\\') != std::string::npos) return "holds a backslash";
    if (name[0] == '/') return "is an absolute path; shards must be in the index's folder";
    size_t start = 0;
    for (;;) {
        const size_t slash = name.find('/', start);
        const std::string part = name.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
        if (part == "..") return "goes up a folder (\"..\"); shards must be in the index's folder";
        if (part.empty() || part == ".") return "has an empty or \".\" path component";
        if (slash == std::string::npos) return "";
        start = slash + 1;
    }
}

bool is_file(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

std::string to_string(WeightsFormat format) {
    switch (format) {
    case WeightsFormat::safetensors: return "safetensors";
    case WeightsFormat::torch_zip: return "a torch.save file";
    case WeightsFormat::shard_index: return "a shard index";
    }
    return "?";
}

WeightsFormat weights_format(const std::string& path) {
    uint64_t size = 0;
    const std::string head = read_file_head(path, 64, "weights file", &size);
    if (safetensors::looks_like_safetensors(head)) return WeightsFormat::safetensors;
    if (zip::looks_like_zip(head)) return WeightsFormat::torch_zip;
    size_t i = head.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
    while (i < head.size() && (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t')) ++i;
    if (i < head.size() && head[i] == '{') return WeightsFormat::shard_index;
    std::string looks = "its first bytes match none of them";
    if (head.empty()) looks = "it is empty";
    else if (static_cast<unsigned char>(head[0]) == 0x80)
        looks = "it is a bare Python pickle (torch.save before PyTorch 1.6, or with _use_new_zipfile_serialization=False), "
                "which this reader does not read: save it again with a newer torch, or as safetensors";
    throw FileError("weights file '" + path + "' is not safetensors, a torch.save zip or a JSON shard index: " + looks);
}

std::string find_weights_file(const std::string& folder) {
    static const char* const names[] = {"model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                                        "pytorch_model.bin.index.json"};
    std::string tried;
    for (const char* n : names) {
        const std::string p = folder + (folder.empty() || folder.back() == '/' ? "" : "/") + n;
        if (is_file(p)) return p;
        tried += (tried.empty() ? "" : ", ") + std::string(n);
    }
    throw FileError("model folder '" + folder + "' has no weights file (looked for " + tried + ")");
}

ShardIndex read_shard_index(const std::string& path, uint64_t max_bytes, size_t max_tensors) {
    const std::string what = "shard index '" + path + "'";
    const nlohmann::json j = parse_json_bounded(read_regular_file(path, max_bytes, "shard index"), what, 32);
    if (!j.is_object()) throw FileError(what + " is " + describe_json(j) + ", expected a JSON object");
    const auto map = j.find("weight_map");
    if (map == j.end() || !map->is_object())
        throw FileError(what + " has no \"weight_map\" object (tensor name -> shard file)");
    if (map->size() > max_tensors)
        throw FileError(what + " names " + std::to_string(map->size()) + " tensors, more than the " +
                        std::to_string(max_tensors) + " this reads");
    ShardIndex index;
    index.path = path;
    const size_t slash = path.rfind('/');
    index.folder = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    std::set<std::string> shards;
    for (const auto& [name, shard] : map->items()) {
        if (!shard.is_string())
            throw FileError(what + ": tensor " + quote(name) + " has the shard " + describe_json(shard) + ", expected a file name");
        const std::string& file = shard.get_ref<const std::string&>();
        const std::string why = bad_shard_name(file);
        if (!why.empty()) throw FileError(what + ": the shard " + quote(file) + " of tensor " + quote(name) + " " + why);
        shards.insert(file);
        index.weight_map.emplace(name, file);
    }
    index.shards.assign(shards.begin(), shards.end());
    return index;
}

}  // namespace attnviz
