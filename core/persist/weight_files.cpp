// A model folder's weights (core/persist/weight_files.hpp).
#include "core/persist/weight_files.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "core/io/error.hpp"
#include "core/io/file_read.hpp"
#include "core/io/json_bounded.hpp"
#include "core/io/message.hpp"
#include "core/io/safetensors.hpp"
#include "core/persist/safetensors_torch.hpp"

namespace attnviz {

namespace fs = std::filesystem;

namespace {

bool is_file(const fs::path& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

void add_safetensors(ModelWeights& w, const fs::path& file) {
    const auto f = safetensors::read_file(file.string());
    for (const auto& t : f.tensors) {
        if (w.tensors.count(t.name))
            throw FileError("weights " + quote(file.string(), 300) + ": tensor " + quote(t.name, 200) + " is in two files");
        w.tensors[t.name] = safetensors::to_tensor(f, t, t.dtype);
    }
}

}  // namespace

ModelWeights read_model_weights(const std::string& dir_in) {
    const fs::path dir(dir_in);
    ModelWeights w;
    if (is_file(dir / "model.safetensors")) {
        w.source = (dir / "model.safetensors").string();
        add_safetensors(w, dir / "model.safetensors");
        return w;
    }
    if (is_file(dir / "model.safetensors.index.json")) {
        const std::string what = "weights index " + quote((dir / "model.safetensors.index.json").string(), 300);
        w.source = (dir / "model.safetensors.index.json").string();
        const auto j = parse_json_bounded(read_regular_file(w.source, uint64_t(64) << 20, "weights index"), what);
        if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
            throw FileError(what + ": expected {\"weight_map\": {tensor: shard file}}");
        std::map<std::string, std::set<std::string>> shards;
        for (const auto& [name, file] : j["weight_map"].items()) {
            if (!file.is_string()) throw FileError(what + ": the shard of " + quote(name, 200) + " is " + describe_json(file));
            const std::string s = file.get<std::string>();
            if (s.empty() || s.find('/') != std::string::npos || s == "." || s == "..")
                throw FileError(what + ": shard " + quote(s, 200) + " is not a file name in the folder");
            shards[s].insert(name);
        }
        for (const auto& [shard, names] : shards) {
            add_safetensors(w, dir / shard);
            for (const auto& n : names)
                if (!w.tensors.count(n))
                    throw FileError(what + ": " + quote(n, 200) + " is not in its shard " + quote(shard, 200));
        }
        return w;
    }
    if (is_file(dir / "pytorch_model.bin"))
        throw FileError("weights " + quote((dir / "pytorch_model.bin").string(), 300) +
                        ": pytorch_model.bin is not read yet; convert it to model.safetensors");
    throw FileError("model folder " + quote(dir_in, 300) +
                    " has no weights (model.safetensors, model.safetensors.index.json or pytorch_model.bin)");
}

}  // namespace attnviz
