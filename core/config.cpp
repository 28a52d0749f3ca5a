// ModelConfig and TrainConfig: names of the enums, validation and JSON.
#include "core/config.hpp"

#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"

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

// --- config ------------------------------------------------------------------

void ModelConfig::validate() const {
    auto need = [](bool ok, const std::string& msg) {
        if (!ok) throw ConfigError(msg);
    };
    need(embed_size >= 1 && embed_size <= 4096, "model: embedding size must be in 1..4096");
    need(hidden_size >= 1 && hidden_size <= 4096, "model: hidden size must be in 1..4096");
    need(num_layers >= 1 && num_layers <= 8, "model: layers must be in 1..8");
    need(attention_size >= 0 && attention_size <= 4096, "model: attention size must be in 0..4096 (0 = hidden size)");
    need(dropout >= 0.0 && dropout < 1.0, "model: dropout must be in [0, 1)");
    need(!(reverse_source && bidirectional), "model: a bidirectional encoder already reads the source both ways; "
                                             "reversing the source only applies to a unidirectional one");
    need(!((scoring == Scoring::dot || scoring == Scoring::scaled_dot) && bidirectional),
         "model: dot-product scoring needs keys as wide as the decoder state; with a bidirectional "
         "encoder use 'general' or 'additive' scoring");
}

void ModelConfig::validate_for_build() const {
    validate();
    if (src_vocab < 5 || tgt_vocab < 5)
        throw ConfigError("model: vocabularies must have at least one token besides the 4 special ones");
}

nlohmann::json ModelConfig::to_json() const {
    return {{"src_vocab", src_vocab},     {"tgt_vocab", tgt_vocab},   {"embed_size", embed_size},
            {"hidden_size", hidden_size}, {"num_layers", num_layers}, {"attention_size", attention_size},
            {"cell", to_string(cell)},    {"bidirectional", bidirectional}, {"reverse_source", reverse_source},
            {"scoring", to_string(scoring)}, {"dropout", dropout},  {"init", to_string(init)},
            {"seed", seed}};
}

ModelConfig ModelConfig::from_json(const nlohmann::json& j) {
    ModelConfig c;
    c.src_vocab = j.at("src_vocab").get<int64_t>();
    c.tgt_vocab = j.at("tgt_vocab").get<int64_t>();
    c.embed_size = j.at("embed_size").get<int64_t>();
    c.hidden_size = j.at("hidden_size").get<int64_t>();
    c.num_layers = j.at("num_layers").get<int64_t>();
    c.attention_size = j.value("attention_size", int64_t{0});
    c.cell = cell_from_string(j.at("cell").get<std::string>());
    c.bidirectional = j.at("bidirectional").get<bool>();
    c.reverse_source = j.value("reverse_source", false);
    c.scoring = scoring_from_string(j.at("scoring").get<std::string>());
    c.dropout = j.at("dropout").get<double>();
    c.init = init_from_string(j.value("init", std::string("xavier")));
    c.seed = j.value("seed", uint64_t{0});
    return c;
}

// --- config ------------------------------------------------------------------

void TrainConfig::validate() const {
    auto need = [](bool ok, const std::string& msg) {
        if (!ok) throw ConfigError(msg);
    };
    need(epochs >= 1 && epochs <= 100000, "training: epochs must be in 1..100000");
    need(batch_size >= 1 && batch_size <= 65536, "training: batch size must be in 1..65536");
    need(lr > 0 && lr <= 100, "training: learning rate must be in (0, 100]");
    need(momentum >= 0 && momentum < 1, "training: momentum must be in [0, 1)");
    need(grad_clip >= 0, "training: gradient clip must be >= 0 (0 = off)");
    need(teacher_forcing >= 0 && teacher_forcing <= 1, "training: teacher forcing ratio must be in [0, 1]");
    need(bucket_window >= 0, "training: bucket window must be >= 0");
    need(fixed_steps >= 0, "training: steps must be >= 0 (0 = natural lengths)");
    need(max_length >= 0, "training: max length must be >= 0 (0 = no limit)");
    need(val_fraction >= 0 && val_fraction < 1, "training: validation fraction must be in [0, 1)");
    need(max_batches >= 0, "training: max batches must be >= 0");
    need(snapshot_every >= 0, "training: snapshot interval must be >= 0");
    need(min_freq >= 1, "training: min frequency must be >= 1");
    need(patience >= 0, "training: patience must be >= 0 (0 = no early stopping)");
    need(lr_factor > 0 && lr_factor < 1, "training: learning-rate factor must be in (0, 1)");
    need(lr_step >= 1, "training: learning-rate step must be >= 1 epoch");
    need(lr_patience >= 0, "training: learning-rate patience must be >= 0");
}

nlohmann::json TrainConfig::to_json() const {
    return {{"epochs", epochs},
            {"batch_size", batch_size},
            {"optimizer", to_string(optimizer)},
            {"lr", lr},
            {"momentum", momentum},
            {"grad_clip", grad_clip},
            {"teacher_forcing", teacher_forcing},
            {"seed", seed},
            {"device", device},
            {"bucket_window", bucket_window},
            {"fixed_steps", fixed_steps},
            {"max_length", max_length},
            {"val_fraction", val_fraction},
            {"max_batches", max_batches},
            {"snapshot_every", snapshot_every},
            {"min_freq", min_freq},
            {"split_shuffle", split_shuffle},
            {"vocab_includes_val", vocab_includes_val},
            {"eval_sample", eval_sample},
            {"patience", patience},
            {"keep_best", keep_best},
            {"lr_schedule", to_string(lr_schedule)},
            {"lr_factor", lr_factor},
            {"lr_step", lr_step},
            {"lr_patience", lr_patience}};
}

TrainConfig TrainConfig::from_json(const nlohmann::json& j) {
    TrainConfig c;
    c.epochs = j.value("epochs", c.epochs);
    c.batch_size = j.value("batch_size", c.batch_size);
    c.optimizer = optimizer_from_string(j.value("optimizer", std::string("adam")));
    c.lr = j.value("lr", c.lr);
    c.momentum = j.value("momentum", c.momentum);
    c.grad_clip = j.value("grad_clip", c.grad_clip);
    c.teacher_forcing = j.value("teacher_forcing", c.teacher_forcing);
    c.seed = j.value("seed", c.seed);
    c.device = j.value("device", c.device);
    c.bucket_window = j.value("bucket_window", c.bucket_window);
    c.fixed_steps = j.value("fixed_steps", c.fixed_steps);
    c.max_length = j.value("max_length", c.max_length);
    c.val_fraction = j.value("val_fraction", c.val_fraction);
    c.max_batches = j.value("max_batches", c.max_batches);
    c.snapshot_every = j.value("snapshot_every", c.snapshot_every);
    c.min_freq = j.value("min_freq", c.min_freq);
    c.split_shuffle = j.value("split_shuffle", c.split_shuffle);
    c.vocab_includes_val = j.value("vocab_includes_val", c.vocab_includes_val);
    c.eval_sample = j.value("eval_sample", c.eval_sample);
    c.patience = j.value("patience", c.patience);
    c.keep_best = j.value("keep_best", c.keep_best);
    c.lr_schedule = lr_schedule_from_string(j.value("lr_schedule", std::string("none")));
    c.lr_factor = j.value("lr_factor", c.lr_factor);
    c.lr_step = j.value("lr_step", c.lr_step);
    c.lr_patience = j.value("lr_patience", c.lr_patience);
    return c;
}

}  // namespace attnviz
