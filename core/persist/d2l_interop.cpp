// Models to and from d2l's PyTorch code: vocabularies, configuration and the
// checks around them. The tensors travel under the names of core/persist/parameter_names.hpp.
#include "core/persist/d2l_interop.hpp"

#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/persist/checkpoint_meta.hpp"
#include "core/io/error.hpp"
#include "core/model/families.hpp"
#include "core/model/inference_precision.hpp"
#include "core/analysis/export.hpp"
#include "core/io/json_bounded.hpp"
#include "core/persist/parameter_names.hpp"
#include "core/io/safetensors.hpp"
#include "core/persist/safetensors_torch.hpp"
#include "core/io/message.hpp"

namespace attnviz {

const char* const d2l_format = "d2l-seq2seq";

namespace {

/// A token as a message shows it: quoted, cut when long, control characters escaped.
std::string shown(const std::string& token) { return quote(token, 40); }

}  // namespace

bool is_d2l_metadata(const std::map<std::string, std::string>& metadata) {
    auto format = metadata.find("format");
    if (format != metadata.end()) return format->second == d2l_format;
    return metadata.count("src_vocab") && metadata.count("tgt_vocab") && metadata.count("config");
}

D2lVocabMap map_d2l_vocab(const std::vector<std::string>& idx_to_token, const std::string& what) {
    if (idx_to_token.empty()) throw FileError(what + " is empty");
    std::unordered_map<std::string, int64_t> index;
    for (size_t i = 0; i < idx_to_token.size(); ++i)
        if (!index.emplace(idx_to_token[i], static_cast<int64_t>(i)).second)
            throw FileError(what + ": token " + shown(idx_to_token[i]) + " is listed twice (indices " +
                            std::to_string(index.at(idx_to_token[i])) + " and " + std::to_string(i) + ")");
    const auto unk = index.find(Vocab::unk_token);
    if (unk == index.end())
        throw FileError(what + " has no " + Vocab::unk_token + " (d2l's vocabularies always have it)");
    D2lVocabMap m;
    nlohmann::json tokens = nlohmann::json::array();
    const char* const specials[] = {Vocab::pad_token, Vocab::bos_token, Vocab::eos_token, Vocab::unk_token};
    for (const char* s : specials) {
        const auto it = index.find(s);
        tokens.push_back(s);
        m.rows.push_back(it != index.end() ? it->second : unk->second);
        m.added.push_back(it == index.end());
    }
    for (size_t i = 0; i < idx_to_token.size(); ++i) {
        const auto& t = idx_to_token[i];
        if (t == Vocab::pad_token || t == Vocab::bos_token || t == Vocab::eos_token || t == Vocab::unk_token) continue;
        tokens.push_back(t);
        m.rows.push_back(static_cast<int64_t>(i));
        m.added.push_back(false);
    }
    try {
        m.vocab = Vocab::from_json(nlohmann::json{{"tokens", tokens}});
    } catch (const Error& e) {
        throw FileError(what + ": " + e.what());
    }
    return m;
}

namespace {
/// The file's keys and the registry's names (core/config/registry_table.cpp), per family.
using KeyNames = std::vector<std::pair<const char*, const char*>>;
const KeyNames k_rnn_keys = {{"embed", "embed_size"},         {"hidden", "hidden_size"},   {"layers", "num_layers"},
                             {"num_steps", "source_steps"},   {"dropout", "dropout"},      {"cell", "cell"},
                             {"scoring", "scoring"},          {"bidirectional", "bidirectional"},
                             {"reverse_source", "reverse_source"}, {"attention_size", "attention_size"}};
const KeyNames k_transformer_keys = {{"arch", "arch"},   {"hidden", "hidden_size"},       {"layers", "num_layers"},
                                     {"heads", "num_heads"}, {"ffn", "ffn_size"},          {"num_steps", "source_steps"},
                                     {"dropout", "dropout"}, {"d2l_decode_positions", "d2l_decode_positions"}};
}  // namespace

ModelConfig d2l_model_config(const nlohmann::json& config) {
    if (!config.is_object()) throw FileError("config: expected a JSON object with embed, hidden and layers");
    const auto arch = config.find("arch");
    const bool transformer = arch != config.end() && *arch == "transformer";
    if (arch != config.end() && !transformer && *arch != "rnn")
        throw FileError("config: \"arch\" must be \"rnn\" or \"transformer\"");
    const KeyNames& keys = transformer ? k_transformer_keys : k_rnn_keys;
    const std::vector<const char*> required =
        transformer ? std::vector<const char*>{"hidden", "layers", "heads", "ffn"}
                    : std::vector<const char*>{"embed", "hidden", "layers"};
    for (const char* key : required)
        if (!config.contains(key))
            throw FileError(std::string("config has no \"") + key + "\" (expected " +
                            (transformer ? "hidden, layers, heads and ffn" : "embed, hidden and layers") + ")");
    nlohmann::json j{{"dropout", 0.2}};  // d2l's; the other defaults are ModelConfig's, which are d2l's
    // A d2l Transformer decodes as d2l's predict_step does, unless the file says otherwise
    // (attnviz's export says false for its own models, which use true positions).
    if (transformer) j["d2l_decode_positions"] = true;
    for (const auto& [key, name] : keys) {
        auto it = config.find(key);
        if (it != config.end() && !it->is_null()) j[name] = *it;
    }
    try {
        ModelConfig m = ModelConfig::from_json(j);
        if (m.attention_size == m.hidden_size) m.attention_size = 0;  // d2l's: the hidden size
        m.validate();
        return m;
    } catch (const ConfigError& e) {
        throw FileError(std::string("config: ") + e.what());
    }
}

nlohmann::json d2l_config_json(const ModelConfig& c, TokenLevel level) {
    nlohmann::json j = d2l_style_config(c, level);  // the keys a checkpoint's "config" has too
    if (c.source_steps > 0) j["num_steps"] = c.source_steps;
    return j;
}

std::string d2l_variant(const ModelConfig& c) {
    std::string out;
    auto add = [&](const std::string& what) { out += (out.empty() ? "" : ", ") + what; };
    if (c.is_transformer()) {
        if (c.hidden_size % 2 != 0) add("odd width " + std::to_string(c.hidden_size) + " (d2l's positional encoding needs an even one)");
        return out;
    }
    if (c.cell != CellType::gru) add(to_string(c.cell) == "lstm" ? "LSTM cell" : to_string(c.cell) + " cell");
    if (c.scoring != Scoring::additive) add(to_string(c.scoring) + " scoring");
    if (c.bidirectional) add("bidirectional encoder");
    if (c.reverse_source) add("reversed source");
    if (c.attention_size > 0 && c.attention_size != c.hidden_size)
        add("attention size " + std::to_string(c.attention_size) + " (d2l: the hidden size)");
    return out;
}

namespace {

/// Which vocabulary indexes a parameter's rows (nullptr: none).
const D2lVocabMap* rows_of(const ParameterName& p, const D2lVocabMap& src, const D2lVocabMap& tgt) {
    switch (p.rows) {
    case VocabRows::source: return &src;
    case VocabRows::target:
    case VocabRows::output: return &tgt;
    case VocabRows::none: break;
    }
    return nullptr;
}

std::vector<std::string> token_list(const nlohmann::json& j, const std::string& what) {
    if (!j.is_array()) throw FileError(what + ": expected a JSON array of tokens (d2l's idx_to_token)");
    std::vector<std::string> tokens;
    tokens.reserve(j.size());
    for (size_t i = 0; i < j.size(); ++i) {
        if (!j[i].is_string()) throw FileError(what + ": entry " + std::to_string(i) + " is not a string");
        tokens.push_back(j[i].get<std::string>());
    }
    return tokens;
}

TokenLevel level_of(const nlohmann::json& config, const std::string& what) {
    auto it = config.find("level");
    if (it == config.end() || it->is_null()) return TokenLevel::word;
    if (it->is_string() && *it == "word") return TokenLevel::word;
    if (it->is_string() && (*it == "char" || *it == "character")) return TokenLevel::character;
    throw FileError(what + ": \"level\" must be \"word\" or \"char\"");
}

}  // namespace

namespace {

TranslationModelPtr import_file(const safetensors::File& file) {
    const std::string& path = file.name;
    const std::string what = quote(path, quote_path_max);
    if (!is_d2l_metadata(file.metadata))
        throw FileError(what + " is a safetensors file but no model attnviz knows: a d2l model's __metadata__ has "
                        "src_vocab, tgt_vocab and config. attnviz reads " + readable_model_formats());
    auto meta = [&](const char* key) {
        auto it = file.metadata.find(key);
        if (it == file.metadata.end())
            throw FileError(what + ": __metadata__ has no \"" + key + "\" (a d2l model file holds src_vocab, "
                            "tgt_vocab and config)");
        return parse_json_bounded(it->second, what + " " + key);
    };
    const auto src_tokens = token_list(meta("src_vocab"), what + " src_vocab");
    const auto tgt_tokens = token_list(meta("tgt_vocab"), what + " tgt_vocab");
    const D2lVocabMap src = map_d2l_vocab(src_tokens, what + " src_vocab");
    const D2lVocabMap tgt = map_d2l_vocab(tgt_tokens, what + " tgt_vocab");
    const nlohmann::json config = meta("config");
    ModelConfig mc;
    try {
        mc = read_json_fields(what + " config", [&] { return d2l_model_config(config); });
    } catch (const FileError& e) {
        throw FileError(what + " " + e.what());
    }
    const TokenLevel level = level_of(config, what + " config");
    mc.src_vocab = static_cast<int64_t>(src.vocab.size());
    mc.tgt_vocab = static_cast<int64_t>(tgt.vocab.size());
    try {
        mc.validate_for_build();
    } catch (const ConfigError& e) {
        throw FileError(what + ": " + e.what());
    }

    // Every tensor the configuration asks for, none else (as load_state_dict(strict=True)),
    // checked before the model is built.
    const auto names = parameter_names(mc);
    std::map<std::string, const safetensors::TensorInfo*> entries;
    for (const auto& n : names) {
        const auto* entry = file.find(n.file);
        if (!entry)
            throw FileError(what + " has no tensor " + quote(n.file) + " (expected for " +
                            (mc.is_transformer()
                                 ? "a Transformer of width " + std::to_string(mc.hidden_size) + ", " +
                                       std::to_string(mc.num_layers) + " blocks, feed-forward " +
                                       std::to_string(mc.ffn_size)
                                 : "embed " + std::to_string(mc.embed_size) + ", hidden " +
                                       std::to_string(mc.hidden_size) + ", " + std::to_string(mc.num_layers) +
                                       " layers, " + to_string(mc.cell) + ", " + to_string(mc.scoring) + " attention") +
                            ")");
        auto shape = n.shape;
        if (const auto* vocab = rows_of(n, src, tgt))  // rows in d2l's order and count
            shape[0] = static_cast<int64_t>(vocab == &src ? src_tokens.size() : tgt_tokens.size());
        if (entry->shape != shape)
            throw FileError(what + ": tensor " + quote(n.file) + " has shape " + shape_to_string(entry->shape) +
                            ", expected " + shape_to_string(shape));
        if (entry->dtype != safetensors::DType::F32 && entry->dtype != safetensors::DType::F64 &&
            entry->dtype != safetensors::DType::F16 && entry->dtype != safetensors::DType::BF16)
            throw FileError(what + ": tensor " + quote(n.file) + " holds " + safetensors::to_string(entry->dtype) +
                            ", expected floating-point weights (F32)");
        entries[n.module] = entry;
    }
    if (file.tensors.size() != names.size()) {
        for (const auto& t : file.tensors) {
            bool known = false;
            for (const auto& n : names) known = known || n.file == t.name;
            if (!known)
                throw FileError(what + ": unexpected tensor " + quote(t.name, 100) + " for this configuration (" +
                                (d2l_variant(mc).empty() ? std::string("d2l's shape") : d2l_variant(mc)) + ")");
        }
    }

    Network network = build_network(mc);
    {
        torch::NoGradGuard no_grad;
        auto params = network->named_parameters();
        for (const auto& n : names) {
            const auto* entry = entries.at(n.module);
            torch::Tensor t = safetensors::to_tensor(file, *entry, entry->dtype).to(torch::kFloat);
            if (const auto* vocab = rows_of(n, src, tgt)) {
                t = t.index_select(0, torch::tensor(vocab->rows, torch::kLong));
                // A token d2l's output layer lacks is never produced (d2l cannot produce it either).
                const bool output = n.rows == VocabRows::output, bias = t.dim() == 1;
                for (size_t id = 0; output && id < vocab->added.size(); ++id)
                    if (vocab->added[id]) t[static_cast<int64_t>(id)].fill_(bias ? -1e9 : 0.0);
            }
            params[n.module].copy_(t);
        }
    }
    return std::make_shared<const TranslationModel>(network, std::make_shared<const Vocab>(src.vocab),
                                                    std::make_shared<const Vocab>(tgt.vocab), level, TrainConfig{},
                                                    TrainHistory{}, path.substr(path.find_last_of('/') + 1));
}

}  // namespace

TranslationModelPtr import_d2l(const std::string& path) { return import_file(safetensors::read_file(path)); }

TranslationModelPtr parse_d2l(std::string bytes, const std::string& name) {
    return import_file(safetensors::parse(std::move(bytes), name));
}

std::string export_d2l(const TranslationModel& model, const std::string& path) {
    check_trainable_precision(*model.network(), "export");
    const ModelConfig& c = model.config();
    safetensors::TensorWriter writer;
    auto params = model.network()->named_parameters();
    for (const auto& n : parameter_names(c)) writer.add(n.file, params[n.module].detach().to(torch::kCPU, torch::kFloat));
    auto text = [](const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); };
    const std::map<std::string, std::string> metadata{
        {"format", d2l_format},
        {"src_vocab", text(model.src_vocab().tokens())},
        {"tgt_vocab", text(model.tgt_vocab().tokens())},
        {"config", text(d2l_config_json(c, model.level()))},
        {"written_by", std::string("attnviz ") + ATTNVIZ_VERSION}};
    write_file_atomic(path, writer.serialize(metadata));
    return d2l_variant(c);
}

}  // namespace attnviz
