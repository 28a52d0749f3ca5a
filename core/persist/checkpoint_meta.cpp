// Checkpoint metadata <-> JSON. Nothing from the file is trusted: each
// exception of the JSON library or of a from_json becomes a FileError that
// says which file and which part, and no message dumps the file's values.
#include "core/persist/checkpoint_meta.hpp"

#include <nlohmann/json.hpp>

#include "core/config/pretrained_config.hpp"
#include "core/io/error.hpp"
#include "core/io/json_bounded.hpp"
#include "core/decode/translation_model.hpp"
#include "core/text/pretrained_tokenizer.hpp"

namespace attnviz {

using json = nlohmann::json;

std::string level_name(TokenLevel l) { return to_string(l); }

json meta_to_json(const TranslationModel& m) {
    json j{{"written_by", std::string("attnviz ") + ATTNVIZ_VERSION},
           {"model", m.config().to_json()},
           {"train", m.trained_with().to_json()},
           {"level", level_name(m.level())},
           {"tokenizer", m.tokenizer().to_json()},
           {"history", m.history().to_json()},
           {"corpus", m.corpus_name()}};
    if (const auto& spec = m.config().pretrained)
        j["pretrained"] = {{"config", spec->model.to_json()},
                           {"generation", spec->generation.to_json()},
                           {"decoder_start_row", spec->decoder_start_row}};
    return j;
}

json d2l_style_config(const ModelConfig& c, TokenLevel level) {
    if (c.is_pretrained() && c.pretrained)
        return {{"arch", to_string(c.arch)},
                {"model_type", to_string(c.pretrained->model.family)},
                {"d_model", c.pretrained->model.d_model},
                {"encoder_layers", c.pretrained->model.encoder_layers},
                {"decoder_layers", c.pretrained->model.decoder_layers},
                {"heads", c.pretrained->model.encoder_heads},
                {"level", level_name(level)}};
    if (c.is_transformer())
        return {{"arch", to_string(c.arch)},
                {"hidden", c.hidden_size},
                {"layers", c.num_layers},
                {"heads", c.num_heads},
                {"ffn", c.ffn_size},
                {"dropout", c.dropout},
                {"d2l_decode_positions", c.d2l_decode_positions},
                {"level", level_name(level)}};
    // The RNN's keys have no "arch" (files from before the Transformer have none either).
    return {{"embed", c.embed_size},
            {"hidden", c.hidden_size},
            {"layers", c.num_layers},
            {"cell", to_string(c.cell)},
            {"scoring", to_string(c.scoring)},
            {"bidirectional", c.bidirectional},
            {"attention_size", c.attention_size > 0 ? c.attention_size : c.hidden_size},
            {"reverse_source", c.reverse_source},
            {"dropout", c.dropout},
            {"level", level_name(level)}};
}

namespace {
std::shared_ptr<const Vocab> vocab_from(const json& j, const std::string& what, const char* side) {
    try {
        return std::make_shared<const Vocab>(Vocab::from_json(j.is_array() ? json{{"tokens", j}} : j));
    } catch (const Error& e) {
        throw FileError(what + ": " + side + " vocabulary: " + e.what());
    }
}

const json& member(const json& j, const char* key, const std::string& what) {
    const auto it = j.find(key);
    if (it == j.end()) throw FileError(what + ": the metadata has no \"" + key + "\"");
    return *it;
}
}  // namespace

CheckpointMeta meta_from_json(const json& attnviz, const json& src, const json& tgt, const std::string& what) {
    if (!attnviz.is_object())
        throw FileError(what + ": the metadata is " + describe_json(attnviz) + ", expected a JSON object");
    CheckpointMeta m;
    const json& model = member(attnviz, "model", what);
    const json& train = member(attnviz, "train", what);
    const json& history = member(attnviz, "history", what);
    const char* part = "model configuration";
    try {
        m.model = ModelConfig::from_json(model);
        m.model.validate();
        if (m.model.is_pretrained()) {
            part = "pretrained model's configuration";
            const json& p = member(attnviz, "pretrained", what);
            if (!p.is_object() || !p.contains("config") || !p.contains("generation") || !p.contains("decoder_start_row") ||
                !p["decoder_start_row"].is_number_integer())
                throw FileError("expected {\"config\", \"generation\", \"decoder_start_row\"}");
            auto spec = std::make_shared<PretrainedSpec>();
            spec->model = PretrainedConfig::from_json(p["config"], "\"pretrained\" \"config\"");
            spec->generation = GenerationConfig::from_json(p["generation"], spec->model, "\"pretrained\" \"generation\"");
            spec->decoder_start_row = p["decoder_start_row"].get<int64_t>();
            if (spec->decoder_start_row < 0 || spec->decoder_start_row >= m.model.tgt_vocab ||
                spec->decoder_start_row == Vocab::bos_id)
                throw FileError("\"decoder_start_row\" is not a row of the target vocabulary");
            m.model.pretrained = spec;
        }
        part = "training settings";
        m.train = TrainConfig::from_json(train);
        part = "training history";
        m.history = TrainHistory::from_json(history);
    } catch (const std::exception& e) {  // ConfigError, FileError, or the JSON library's (no values in its messages)
        throw FileError(what + ": its " + part + " is invalid: " + e.what());
    }
    const json& level = member(attnviz, "level", what);
    if (level != "word" && level != "char" && level != "subword")
        throw FileError(what + ": \"level\" is " + describe_json(level) + ", expected \"word\", \"char\" or \"subword\"");
    m.level = token_level_from_string(level.get<std::string>());
    // "tokenizer" since attnviz has subwords (a subword model cannot do without it).
    if (const auto tok = attnviz.find("tokenizer"); tok != attnviz.end()) {
        try {
            m.tokenizer = Tokenizer::from_json(*tok);
        } catch (const Error& e) {
            throw FileError(what + ": its tokenizer is invalid: " + e.what());
        }
        if (m.tokenizer->level() != m.level)
            throw FileError(what + " is inconsistent: \"level\" is " + level_name(m.level) + " but its tokenizer's is " +
                            level_name(m.tokenizer->level()));
    } else if (m.level == TokenLevel::subword) {
        throw FileError(what + ": a subword model without its \"tokenizer\" (the SentencePiece model) cannot be used");
    } else {
        m.tokenizer = Tokenizer::for_level(m.level);
    }
    if (const auto corpus = attnviz.find("corpus"); corpus != attnviz.end() && corpus->is_string())
        m.corpus = corpus->get<std::string>();
    m.src_vocab = vocab_from(src, what, "source");
    m.tgt_vocab = vocab_from(tgt, what, "target");
    if (m.model.is_pretrained() != (m.tokenizer->pretrained() != nullptr))
        throw FileError(what + " is inconsistent: a pretrained model needs its pretrained tokenizer, and only it has one");
    if (m.tokenizer->pretrained()) {
        // The vocabularies are the tokenizer's layout over the model's rows, nothing else.
        if (m.tokenizer->pretrained_layout(false).names != m.src_vocab->tokens() ||
            m.tokenizer->pretrained_layout(true).names != m.tgt_vocab->tokens())
            throw FileError(what + " is inconsistent: its vocabularies are not its pretrained tokenizer's");
    }
    if (m.model.src_vocab != static_cast<int64_t>(m.src_vocab->size()) ||
        m.model.tgt_vocab != static_cast<int64_t>(m.tgt_vocab->size()))
        throw FileError(what + " is inconsistent: its configuration says " + std::to_string(m.model.src_vocab) +
                        " source and " + std::to_string(m.model.tgt_vocab) + " target tokens, its vocabularies have " +
                        std::to_string(m.src_vocab->size()) + " and " + std::to_string(m.tgt_vocab->size()));
    try {
        m.model.validate_for_build();
    } catch (const ConfigError& e) {
        throw FileError(what + ": its model configuration is invalid: " + e.what());
    }
    return m;
}

}  // namespace attnviz
