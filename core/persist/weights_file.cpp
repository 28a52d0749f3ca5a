// read_weights: one reader per kind of file, and shard indexes read shard by shard,
// each shard's names checked against the index.
#include "core/persist/weights_file.hpp"

#include <sys/stat.h>

#include <set>

#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/io/weights_index.hpp"
#include "core/persist/safetensors_torch.hpp"
#include "core/persist/torch_bin_tensor.hpp"

namespace attnviz {

namespace {

bool is_directory(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

NamedTensors read_safetensors(const std::string& path, const WeightsReadOptions& o) {
    const safetensors::File f = safetensors::read_file(path, o.safetensors_limits);
    NamedTensors out;
    out.reserve(f.tensors.size());
    for (const auto& t : f.tensors) {
        if (o.to_float && safetensors::is_float(t.dtype))
            out.emplace_back(t.name, safetensors::to_float_tensor(f, t, o.view));
        else
            out.emplace_back(t.name, o.view ? safetensors::view_tensor(f, t, t.dtype) : safetensors::to_tensor(f, t, t.dtype));
    }
    return out;
}

NamedTensors read_bin(const std::string& path, const WeightsReadOptions& o) {
    const torch_bin::File f = torch_bin::read_file(path, o.bin_limits);
    NamedTensors out;
    out.reserve(f.tensors.size());
    for (const auto& t : f.tensors) {
        if (o.to_float && safetensors::is_float(t.dtype))
            out.emplace_back(t.name, torch_bin::to_float_tensor(f, t, o.view));
        else
            out.emplace_back(t.name, o.view ? torch_bin::view_tensor(f, t) : torch_bin::to_tensor(f, t));
    }
    return out;
}

NamedTensors read_one(const std::string& path, WeightsFormat format, const WeightsReadOptions& o) {
    return format == WeightsFormat::safetensors ? read_safetensors(path, o) : read_bin(path, o);
}

NamedTensors read_sharded(const std::string& path, const WeightsReadOptions& o) {
    const ShardIndex index = read_shard_index(path, o.safetensors_limits.max_header_bytes, o.safetensors_limits.max_tensors);
    NamedTensors out;
    std::set<std::string> seen;
    for (const auto& shard : index.shards) {
        const std::string file = index.folder + "/" + shard;
        const WeightsFormat format = weights_format(file);
        if (format == WeightsFormat::shard_index)
            throw FileError("shard index '" + path + "' names " + quote(shard) + ", another shard index; refused");
        NamedTensors tensors = read_one(file, format, o);
        for (auto& [name, tensor] : tensors) {
            const auto it = index.weight_map.find(name);
            if (it == index.weight_map.end() || it->second != shard)
                throw FileError("shard '" + file + "' holds tensor " + quote(name) + ", which its index '" + path +
                                "' " + (it == index.weight_map.end() ? "does not name" : "places in " + quote(it->second)));
            if (!seen.insert(name).second)
                throw FileError("shard '" + file + "' holds tensor " + quote(name) + " a second time");
            out.emplace_back(std::move(name), std::move(tensor));
        }
    }
    for (const auto& [name, shard] : index.weight_map)
        if (!seen.count(name))
            throw FileError("shard index '" + path + "' places tensor " + quote(name) + " in " + quote(shard) +
                            ", which does not hold it");
    return out;
}

}  // namespace

NamedTensors read_weights(const std::string& path, const WeightsReadOptions& options) {
    const std::string file = is_directory(path) ? find_weights_file(path) : path;
    const WeightsFormat format = weights_format(file);
    return format == WeightsFormat::shard_index ? read_sharded(file, options) : read_one(file, format, options);
}

}  // namespace attnviz
