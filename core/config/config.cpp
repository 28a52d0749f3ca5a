// The names of the configuration's enums. ModelConfig's and TrainConfig's
// validation and JSON are generated from the parameter registry, where every
// field is declared: they are defined in core/config/registry.cpp.
#include "core/config/config.hpp"

#include <algorithm>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/io/error.hpp"
#include "core/io/json_bounded.hpp"
#include "core/io/message.hpp"

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
    throw ConfigError("unknown " + std::string(what) + " " + quote(s) + " (expected one of: " + valid + ")");
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
const std::vector<std::pair<std::string, ModelArch>> k_archs = {
    {"rnn", ModelArch::rnn}, {"transformer", ModelArch::transformer}, {"pretrained", ModelArch::pretrained}};
const std::vector<std::pair<std::string, CellType>> k_cells = {{"gru", CellType::gru},
                                                               {"lstm", CellType::lstm}};
const std::vector<std::pair<std::string, InitScheme>> k_inits = {
    {"xavier", InitScheme::xavier}, {"uniform", InitScheme::uniform}, {"orthogonal", InitScheme::orthogonal}};
const std::vector<std::pair<std::string, OptimizerKind>> k_optimizers = {
    {"adam", OptimizerKind::adam}, {"sgd", OptimizerKind::sgd}, {"adadelta", OptimizerKind::adadelta}};
const std::vector<std::pair<std::string, LrSchedule>> k_schedules = {
    {"none", LrSchedule::none}, {"plateau", LrSchedule::plateau}, {"step", LrSchedule::step},
    {"warmup", LrSchedule::warmup}};
const std::vector<std::pair<std::string, Precision>> k_precisions = {{"fp32", Precision::fp32},
                                                                     {"bf16", Precision::bf16}};
const std::vector<std::pair<std::string, SubwordModel>> k_subword_models = {{"unigram", SubwordModel::unigram},
                                                                            {"bpe", SubwordModel::bpe}};
}  // namespace

std::string to_string(ModelArch a) { return to_table(a, k_archs); }
ModelArch arch_from_string(const std::string& s) { return from_table(s, k_archs, "model architecture"); }
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
std::string to_string(Precision p) { return to_table(p, k_precisions); }
Precision precision_from_string(const std::string& s) { return from_table(s, k_precisions, "precision"); }
std::string to_string(SubwordModel m) { return to_table(m, k_subword_models); }
SubwordModel subword_model_from_string(const std::string& s) { return from_table(s, k_subword_models, "subword model"); }

std::vector<int> parse_head_list(const std::string& text) {
    std::vector<int> heads;
    if (text.empty() || text == "mean") return heads;
    const auto refuse = [&] {
        return ConfigError("heads " + quote(text, 40) +
                           ": expected \"mean\" (every head, averaged) or head numbers from 0 separated by commas "
                           "(\"2\", \"0,3\")");
    };
    size_t i = 0;
    while (i <= text.size()) {
        const size_t comma = std::min(text.find(',', i), text.size());
        const std::string item = text.substr(i, comma - i);
        if (item.empty() || item.size() > 4 || item.find_first_not_of("0123456789") != std::string::npos) throw refuse();
        const int head = std::stoi(item);
        for (int h : heads)
            if (h == head) throw refuse();
        heads.push_back(head);
        if (heads.size() > 1024) throw refuse();
        i = comma + 1;
    }
    return heads;
}

}  // namespace attnviz
