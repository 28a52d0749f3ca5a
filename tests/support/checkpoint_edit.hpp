#pragma once
// A checkpoint file taken apart, to be changed and written back with a valid
// checksum: how tests craft files that lie about themselves (core and CLI tests).
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "catch_torch.hpp"
#include "core/persist/checkpoint.hpp"
#include "core/persist/safetensors_torch.hpp"
#include "test_support.hpp"

namespace attnviz::testing {

struct EditableCheckpoint {
    std::map<std::string, std::string> metadata;
    std::vector<std::pair<std::string, torch::Tensor>> tensors;

    explicit EditableCheckpoint(const std::string& path) {
        const safetensors::File f = safetensors::read_file(path);
        metadata = f.metadata;
        for (const auto& t : f.tensors) tensors.emplace_back(t.name, safetensors::to_tensor(f, t, t.dtype));
    }
    nlohmann::json attnviz() const { return nlohmann::json::parse(metadata.at("attnviz")); }
    void set_attnviz(const nlohmann::json& j) { metadata["attnviz"] = j.dump(); }
    torch::Tensor& tensor(const std::string& name) {
        for (auto& [n, t] : tensors)
            if (n == name) return t;
        FAIL("no tensor " << name);
        return tensors.front().second;
    }
    void write(const std::filesystem::path& path) const {
        safetensors::TensorWriter w;
        for (const auto& [n, t] : tensors) w.add(n, t);
        write_all(path, serialize_checkpoint(w.entries(), metadata));
    }
};

}  // namespace attnviz::testing
