// Checkpoint format version 2: a safetensors file (see checkpoint.hpp). Loading
// goes metadata -> configuration -> expected tensors -> file's tensors, and only
// builds the model once the file is known to hold exactly its weights.
#include "core/persist/checkpoint.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "core/persist/checkpoint_meta.hpp"
#include "core/io/checksum.hpp"
#include "core/io/error.hpp"
#include "core/model/families.hpp"
#include "core/model/inference_precision.hpp"
#include "core/analysis/export.hpp"
#include "core/io/file_read.hpp"
#include "core/io/json_bounded.hpp"
#include "core/io/message.hpp"
#include "core/persist/parameter_names.hpp"
#include "core/persist/safetensors_torch.hpp"

namespace attnviz {

using json = nlohmann::json;
namespace st = safetensors;

namespace {

constexpr const char* k_format = "attnviz-checkpoint";
constexpr const char* k_optimizer_prefix = "optimizer.";
/// Adam's step count is at most this (a million steps a second for 30 years).
constexpr int64_t k_max_step = int64_t(1) << 50;

/// One tensor's part of the checksum.
struct Span {
    const std::string* name;
    const char* data;
    size_t bytes;
};

/// Covers every tensor (name and data, in name order, so that rewriting the file
/// with other tools that reorder tensors keeps it valid) and every metadata value
/// but the checksum itself.
uint64_t checksum_of(const std::map<std::string, std::string>& metadata, std::vector<Span> tensors) {
    std::sort(tensors.begin(), tensors.end(), [](const Span& a, const Span& b) { return *a.name < *b.name; });
    uint64_t h = fnv1a_init;
    for (const auto& t : tensors) {
        h = fnv1a(t.name->c_str(), t.name->size() + 1, h);  // with the NUL: "ab"+"c" != "a"+"bc"
        h = fnv1a(t.data, t.bytes, h);
    }
    for (const auto& [key, value] : metadata) {
        if (key == "checksum") continue;
        h = fnv1a(key.c_str(), key.size() + 1, h);
        h = fnv1a(value.c_str(), value.size() + 1, h);
    }
    return h;
}

std::string hex(uint64_t v) {
    char buf[17];
    std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
    return buf;
}

std::string human_bytes(uint64_t n) {
    char buf[32];
    if (n >= (uint64_t(1) << 30))
        std::snprintf(buf, sizeof(buf), "%.1f GB", static_cast<double>(n) / (1u << 30));
    else if (n >= (uint64_t(1) << 20))
        std::snprintf(buf, sizeof(buf), "%.1f MB", static_cast<double>(n) / (1u << 20));
    else
        std::snprintf(buf, sizeof(buf), "%.1f KB", static_cast<double>(n) / 1024);
    return buf;
}

std::string describe_config(const ModelConfig& c) {
    if (c.is_transformer())
        return "Transformer, width " + std::to_string(c.hidden_size) + ", " + count_of(c.num_layers, "block", "blocks") +
               ", " + count_of(c.num_heads, "head", "heads") + ", feed-forward " + std::to_string(c.ffn_size) +
               ", vocabularies " + std::to_string(c.src_vocab) + "/" + std::to_string(c.tgt_vocab);
    return "embed " + std::to_string(c.embed_size) + ", hidden " + std::to_string(c.hidden_size) + ", " +
           count_of(c.num_layers, "layer", "layers") + ", " + to_string(c.cell) + (c.bidirectional ? ", bidirectional" : "") +
           ", " + to_string(c.scoring) + " scoring, vocabularies " + std::to_string(c.src_vocab) + "/" +
           std::to_string(c.tgt_vocab);
}

json optimizer_to_json(const OptimizerState& s, const std::vector<ParameterName>& names) {
    if (s.empty()) return nullptr;
    json steps = json::object();
    for (const auto& p : names)
        if (const auto it = s.params.find(p.module); it != s.params.end() && s.kind == OptimizerKind::adam)
            steps[p.file] = it->second.step;
    return {{"kind", to_string(s.kind)}, {"steps", steps}};
}

/// A metadata string parsed as bounded JSON.
json meta_json(const st::File& f, const char* key, const std::string& what) {
    const auto it = f.metadata.find(key);
    if (it == f.metadata.end()) throw FileError(what + ": its metadata has no \"" + key + "\"");
    return parse_json_bounded(it->second, what + ": metadata \"" + key + "\"");
}

/// The file's weights must be exactly the configuration's: names, F32, shapes.
void check_weights(const st::File& f, const std::vector<ParameterName>& expected, const ModelConfig& config,
                   const std::string& what) {
    std::set<std::string> names;
    for (const auto& p : expected) names.insert(p.file);
    uint64_t have = 0;
    for (const auto& t : f.tensors) {
        if (t.name.rfind(k_optimizer_prefix, 0) == 0) continue;
        if (!names.count(t.name))
            throw FileError(what + ": unexpected tensor " + quote(t.name, 100) +
                            " (not a weight of its configuration, " + describe_config(config) + ")");
        have += t.end - t.begin;  // no overflow: each range lies inside the file
    }
    const uint64_t need = parameter_bytes(expected);
    const std::string sizes = need == have ? std::string()
                                           : " (its configuration, " + describe_config(config) + ", needs " +
                                                 human_bytes(need) + " of weights; the file holds " +
                                                 human_bytes(have) + ")";
    for (const auto& p : expected) {
        const st::TensorInfo* t = f.find(p.file);
        if (!t) throw FileError(what + ": tensor " + quote(p.file) + " is missing" + sizes);
        if (t->dtype != st::DType::F32)
            throw FileError(what + ": tensor " + quote(p.file) + " has dtype " + st::to_string(t->dtype) +
                            ", expected F32");
        if (t->shape != p.shape)
            throw FileError(what + ": tensor " + quote(p.file) + " has shape " + shape_to_string(t->shape) + ", expected " +
                            shape_to_string(p.shape) + sizes);
    }
    if (need != have) throw FileError(what + ": the weights do not match the configuration" + sizes);
}

/// Optimiser tensors "optimizer.<weight>.<slot>", checked against the weights and the kind.
OptimizerState read_optimizer(const st::File& f, const json& meta, const std::vector<ParameterName>& expected,
                              const std::string& what) {
    OptimizerState s;
    const auto it = meta.find("optimizer");
    const bool has_meta = it != meta.end() && !it->is_null();
    std::map<std::string, const ParameterName*> by_file;
    for (const auto& p : expected) by_file[p.file] = &p;
    json steps = json::object();
    if (has_meta) {
        if (!it->is_object() || !it->contains("kind") || !(*it)["kind"].is_string())
            throw FileError(what + ": \"optimizer\" is " + describe_json(*it) + ", expected {\"kind\": ..., \"steps\": {...}}");
        try {
            s.kind = optimizer_from_string((*it)["kind"].get<std::string>());
        } catch (const ConfigError& e) {
            throw FileError(what + ": " + e.what());
        }
        if (it->contains("steps")) steps = (*it)["steps"];
        if (!steps.is_object()) throw FileError(what + ": optimizer \"steps\" is " + describe_json(steps) + ", expected an object");
    }
    const auto& slots = optimizer_slots(s.kind);
    for (const auto& t : f.tensors) {
        if (t.name.rfind(k_optimizer_prefix, 0) != 0) continue;  // a weight: check_weights saw it
        if (!has_meta) throw FileError(what + ": tensor " + quote(t.name, 100) + " but no optimizer in the metadata");
        const std::string rest = t.name.substr(std::strlen(k_optimizer_prefix));
        const size_t dot = rest.rfind('.');
        const std::string weight = dot == std::string::npos ? std::string() : rest.substr(0, dot);
        const std::string slot = dot == std::string::npos ? rest : rest.substr(dot + 1);
        const auto p = by_file.find(weight);
        if (p == by_file.end() || std::find(slots.begin(), slots.end(), slot) == slots.end())
            throw FileError(what + ": unexpected tensor " + quote(t.name, 100) + " (expected optimizer.<weight>." +
                            "<slot>, a slot of " + to_string(s.kind) + ")");
        if (t.dtype != st::DType::F32)
            throw FileError(what + ": tensor " + quote(t.name) + " has dtype " + st::to_string(t.dtype) + ", expected F32");
        if (t.shape != p->second->shape)
            throw FileError(what + ": tensor " + quote(t.name) + " has shape " + shape_to_string(t.shape) + ", expected " +
                            shape_to_string(p->second->shape));
        s.params[p->second->module].slots[slot] = st::to_tensor(f, t, st::DType::F32);
    }
    for (const auto& [key, value] : steps.items()) {
        const auto p = by_file.find(key);
        if (p == by_file.end() || !s.params.count(p->second->module))
            throw FileError(what + ": optimizer step count for " + quote(key, 100) + ", which has no state");
        if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > k_max_step)
            throw FileError(what + ": optimizer step count of " + quote(key, 100) + " is " + describe_json(value) +
                            ", expected an integer in 0.." + std::to_string(k_max_step));
        s.params[p->second->module].step = value.get<int64_t>();
    }
    check_optimizer_state_values(s, what + ": ");
    return s;
}

Checkpoint checkpoint_from_file(const st::File& f) {
    const std::string what = "checkpoint " + quote(f.name, quote_path_max);
    const auto format = f.metadata.find("format");
    if (format == f.metadata.end() || format->second != k_format)
        throw FileError(quote(f.name, quote_path_max) + " is a safetensors file but not an attnviz checkpoint (its metadata has no "
                        "\"format\": \"attnviz-checkpoint\"). attnviz reads " + readable_model_formats());
    const auto version = f.metadata.find("version");
    if (version == f.metadata.end() || version->second != std::to_string(checkpoint_version)) {
        const std::string v = version == f.metadata.end() ? "none" : quote(version->second, 20);
        throw FileError(what + " has format version " + v + "; this attnviz reads version " +
                        std::to_string(checkpoint_version) + " (was it written by a newer attnviz?)");
    }
    const auto sum = f.metadata.find("checksum");
    if (sum == f.metadata.end()) throw FileError(what + " has no checksum in its metadata");
    std::vector<Span> spans;
    for (const auto& t : f.tensors) spans.push_back({&t.name, f.data(t), t.end - t.begin});
    if (sum->second != hex(checksum_of(f.metadata, std::move(spans))))
        throw FileError(what + " is corrupt (checksum mismatch); it was damaged after it was written");

    const json attnviz = meta_json(f, "attnviz", what);
    const CheckpointMeta meta = read_json_fields(what + ": metadata", [&] {
        return meta_from_json(attnviz, meta_json(f, "src_vocab", what), meta_json(f, "tgt_vocab", what), what);
    });
    const json config = meta_json(f, "config", what);
    const json expected_config = d2l_style_config(meta.model, meta.level);
    for (const auto& [key, value] : expected_config.items())
        if (!config.is_object() || !config.contains(key) || config[key] != value)
            throw FileError(what + " is inconsistent: \"config\" differs from the model configuration at \"" + key + "\"");

    const auto expected = parameter_names(meta.model);
    check_weights(f, expected, meta.model, what);
    OptimizerState optimizer = read_optimizer(f, attnviz, expected, what);

    // Everything matches: now the model may be built and filled.
    Network network = build_network(meta.model, NetworkFill::unfilled);
    auto named = network->named_parameters();
    for (const auto& p : expected) copy_into(f, *f.find(p.file), named[p.module]);
    Checkpoint c;
    c.model = std::make_shared<const TranslationModel>(network, meta.src_vocab, meta.tgt_vocab, meta.tokenizer, meta.train,
                                                       meta.history, meta.corpus);
    c.optimizer_state = std::move(optimizer);
    return c;
}

std::string looks_like(const std::string& head) {
    if (head.empty()) return "it is empty";
    if (head.rfind("PK\x03\x04", 0) == 0)
        return "it is a zip archive, e.g. a PyTorch .pt file from torch.save (a Joey NMT checkpoint is one)";
    if (static_cast<unsigned char>(head[0]) == 0x80 && head.size() > 1 && head[1] >= 2 && head[1] <= 5)
        return "it is a Python pickle, e.g. an old-style PyTorch .pt file";
    if (head.rfind("ATTNVIZ", 0) == 0) return "it is an attnviz checkpoint of an unknown version";
    for (const char c : head)
        if (static_cast<unsigned char>(c) < 0x09 || (static_cast<unsigned char>(c) > 0x0d && static_cast<unsigned char>(c) < 0x20))
            return "its first bytes match no format attnviz knows";
    return "it looks like text";
}

}  // namespace

std::string readable_model_formats() {
    return "an attnviz checkpoint (.ckpt, safetensors-based), a d2l model as .safetensors, or an old attnviz "
           "checkpoint via upgrade-checkpoint";
}

void save_checkpoint(const Checkpoint& c, const std::string& path) {
    if (!c.model) throw ConfigError("there is no model to save");
    const TranslationModel& m = *c.model;
    check_trainable_precision(*m.network(), "saving a checkpoint");  // never int8 placeholders in a file
    const auto names = parameter_names(m.config());
    json attnviz = meta_to_json(m);
    attnviz["optimizer"] = optimizer_to_json(c.optimizer_state, names);

    st::TensorWriter writer;
    auto params = m.network()->named_parameters();
    // A diverged run's weights or optimiser state would replace a good file with one that
    // translates nothing and resumes into NaN: refused, and the file stays as it was.
    const std::string refused = "cannot save " + quote(path, 400) + " (it is left as it was): ";
    for (const auto& p : names)
        if (!torch::isfinite(params[p.module]).all().item<bool>())
            throw FileError(refused + "weight " + quote(p.file) + " holds NaN or infinite values (training diverged)");
    check_optimizer_state_values(c.optimizer_state, refused);
    for (const auto& p : names) writer.add(p.file, params[p.module].to(torch::kFloat));
    for (const auto& p : names) {
        const auto it = c.optimizer_state.params.find(p.module);
        if (it == c.optimizer_state.params.end()) continue;
        for (const auto& [slot, t] : it->second.slots) writer.add(k_optimizer_prefix + p.file + "." + slot, t);
    }
    std::map<std::string, std::string> metadata;
    try {
        metadata = {{"format", k_format},
                    {"version", std::to_string(checkpoint_version)},
                    {"attnviz", attnviz.dump()},
                    {"src_vocab", json(m.src_vocab().tokens()).dump()},
                    {"tgt_vocab", json(m.tgt_vocab().tokens()).dump()},
                    {"config", d2l_style_config(m.config(), m.level()).dump()}};
    } catch (const json::type_error&) {
        throw FileError("cannot save " + quote(path, quote_path_max) + ": a vocabulary token or the corpus name is not valid UTF-8");
    }
    write_file_atomic(path, serialize_checkpoint(writer.entries(), std::move(metadata)));
}

std::string serialize_checkpoint(const std::vector<st::TensorToWrite>& tensors,
                                 std::map<std::string, std::string> metadata) {
    std::vector<Span> spans;
    for (const auto& t : tensors) spans.push_back({&t.name, static_cast<const char*>(t.data), t.bytes});
    metadata.erase("checksum");
    metadata["checksum"] = hex(checksum_of(metadata, std::move(spans)));
    return st::serialize(tensors, metadata);
}

bool is_legacy_checkpoint(const std::string& head) {
    const size_t n = sizeof(legacy_checkpoint_magic);
    return head.size() >= n && std::memcmp(head.data(), legacy_checkpoint_magic, n) == 0;
}

std::string legacy_checkpoint_message(const std::string& path) {
    return quote(path, quote_path_max) + " is a checkpoint in attnviz's old format (version 1). Its weights are a LibTorch archive, "
           "whose loader trusts sizes stored in the file, so a damaged or crafted file could crash attnviz or read "
           "memory it should not: it is not opened automatically. If you trust where it came from, convert it once "
           "with: attnviz-cli upgrade-checkpoint " + quote(path, quote_path_max) + " NEW.ckpt --trust";
}

ModelFileKind detect_model_file(const std::string& path) {
    const std::string head = read_file_head(path, 16, "checkpoint");
    if (is_legacy_checkpoint(head)) return ModelFileKind::legacy_checkpoint;
    if (!st::looks_like_safetensors(head)) return ModelFileKind::unknown;
    try {
        const auto metadata = st::read_metadata(path);
        const auto format = metadata.find("format");
        return format != metadata.end() && format->second == k_format ? ModelFileKind::checkpoint
                                                                      : ModelFileKind::safetensors;
    } catch (const FileError&) {
        return ModelFileKind::safetensors;  // a damaged one: loading it says what is wrong
    }
}

namespace {

/// The checks on a file's first bytes shared by load_checkpoint and parse_checkpoint.
void check_checkpoint_head(const std::string& head, const std::string& name) {
    if (is_legacy_checkpoint(head)) throw FileError(legacy_checkpoint_message(name));
    if (!st::looks_like_safetensors(head))
        throw FileError(quote(name, quote_path_max) + " is not an attnviz checkpoint: " + looks_like(head) + ". attnviz reads " +
                        readable_model_formats());
}

}  // namespace

Checkpoint load_checkpoint(const std::string& path) {
    check_checkpoint_head(read_file_head(path, 16, "checkpoint"), path);
    return checkpoint_from_file(st::read_file(path));
}

Checkpoint parse_checkpoint(std::string bytes, const std::string& name) {
    check_checkpoint_head(bytes.substr(0, 16), name);
    return checkpoint_from_file(st::parse(std::move(bytes), name));
}

}  // namespace attnviz
