// ModelConfig and TrainConfig: names of the enums; validation and JSON come
// from the parameter registry (core/registry.cpp), where every field is declared.
#include "core/config.hpp"

#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/json_bounded.hpp"
#include "core/registry.hpp"

namespace attnviz {

// --- names -------------------------------------------------------------------

namespace {
template <typename E>
E from_table(const std::string& s, const std::vector<std::pair<std::string, E>>& table,
             const char* what) {
    std::string valid;
    for (const auto& [name, value] : table) {
        if (name == s) return value;
        valid += (valid.empty() ? "" : ", ") + name;
    }
    throw ConfigError("unknown " + std::string(what) + " '" + s + "' (expected one of: " + valid + ")");
}
template <typename E>
std::string to_table(E e, const std::vector<std::pair<std::string, E>>& table) {
    for (const auto& [name, value] : table)
        if (value == e) return name;
    return "?";
}
const std::vector<std::pair<std::string, Scoring>> k_scorings = {
    {"additive", Scoring::additive}, {"dot", Scoring::dot}, {"scaled-dot", Scoring::scaled_dot},
    {"general", Scoring::general},   {"none", Scoring::none}};
const std::vector<std::pair<std::string, CellType>> k_cells = {{"gru", CellType::gru},
                                                               {"lstm", CellType::lstm}};
const std::vector<std::pair<std::string, InitScheme>> k_inits = {
    {"xavier", InitScheme::xavier}, {"uniform", InitScheme::uniform}, {"orthogonal", InitScheme::orthogonal}};
const std::vector<std::pair<std::string, OptimizerKind>> k_optimizers = {
    {"adam", OptimizerKind::adam}, {"sgd", OptimizerKind::sgd}, {"adadelta", OptimizerKind::adadelta}};
const std::vector<std::pair<std::string, LrSchedule>> k_schedules = {
    {"none", LrSchedule::none}, {"plateau", LrSchedule::plateau}, {"step", LrSchedule::step}};
const std::vector<std::pair<std::string, SubwordModel>> k_subword_models = {{"unigram", SubwordModel::unigram},
                                                                            {"bpe", SubwordModel::bpe}};
}  // namespace

std::string to_string(Scoring s) { return to_table(s, k_scorings); }
std::string to_string(CellType c) { return to_table(c, k_cells); }
std::string to_string(InitScheme i) { return to_table(i, k_inits); }
Scoring scoring_from_string(const std::string& s) { return from_table(s, k_scorings, "scoring function"); }
CellType cell_from_string(const std::string& s) { return from_table(s, k_cells, "cell type"); }
InitScheme init_from_string(const std::string& s) { return from_table(s, k_inits, "initialisation"); }
std::string to_string(OptimizerKind o) { return to_table(o, k_optimizers); }
OptimizerKind optimizer_from_string(const std::string& s) { return from_table(s, k_optimizers, "optimizer"); }
std::string to_string(LrSchedule s) { return to_table(s, k_schedules); }
LrSchedule lr_schedule_from_string(const std::string& s) { return from_table(s, k_schedules, "learning-rate schedule"); }
std::string to_string(SubwordModel m) { return to_table(m, k_subword_models); }
SubwordModel subword_model_from_string(const std::string& s) { return from_table(s, k_subword_models, "subword model"); }

// --- validation and JSON: generated from the parameter registry -------------

void ModelConfig::validate() const { validate_model_parameters(*this); }

void ModelConfig::validate_for_build() const {
    validate();
    if (src_vocab < 5 || tgt_vocab < 5)
        throw ConfigError("model: vocabularies must have at least one token besides the 4 special ones");
}

nlohmann::json ModelConfig::to_json() const {
    Hyperparameters h;
    h.model = *this;
    nlohmann::json j = parameters_to_json(h, ParamGroup::model);
    // Not registry parameters: the sizes come from the data, the seed from TrainConfig's.
    j["src_vocab"] = src_vocab;
    j["tgt_vocab"] = tgt_vocab;
    j["seed"] = seed;
    return j;
}

ModelConfig ModelConfig::from_json(const nlohmann::json& j) {
    Hyperparameters h;
    parameters_from_json(h, ParamGroup::model, j);
    ModelConfig c = h.model;
    auto count = [&](const char* key, int64_t& out) {
        auto it = j.find(key);
        if (it == j.end()) return;
        if (!it->is_number_integer() || it->get<int64_t>() < 0)
            throw ConfigError(std::string("'") + key + "': expected an integer >= 0, got " + describe_json(*it));
        out = it->get<int64_t>();
    };
    count("src_vocab", c.src_vocab);
    count("tgt_vocab", c.tgt_vocab);
    if (j.contains("seed")) {
        Hyperparameters s;
        parameters_from_json(s, ParamGroup::training, nlohmann::json{{"seed", j.at("seed")}});
        c.seed = s.train.seed;
    }
    return c;
}

void TrainConfig::validate() const { validate_train_parameters(*this); }

nlohmann::json TrainConfig::to_json() const {
    Hyperparameters h;
    h.train = *this;
    nlohmann::json j = parameters_to_json(h, ParamGroup::training);
    j.update(parameters_to_json(h, ParamGroup::data));
    return j;
}

TrainConfig TrainConfig::from_json(const nlohmann::json& j) {
    Hyperparameters h;
    parameters_from_json(h, ParamGroup::training, j);
    parameters_from_json(h, ParamGroup::data, j);
    return h.train;
}

}  // namespace attnviz
