// Training history and reports as JSON (checkpoint metadata, --json output).
#include "core/history.hpp"

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace attnviz {

// --- history -----------------------------------------------------------------

namespace {
nlohmann::json finite_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }
double number_or_nan(const nlohmann::json& j, const char* key) {
    return j.contains(key) && j.at(key).is_number() ? j.at(key).get<double>() : std::nan("");
}

nlohmann::json epoch_to_json(const EpochReport& e) {
    return {{"epoch", e.epoch},
            {"train_loss", e.train_loss},
            {"val_loss", std::isfinite(e.val_loss) ? nlohmann::json(e.val_loss) : nlohmann::json(nullptr)},
            {"val_accuracy", finite_or_null(e.val_accuracy)},
            {"val_token_accuracy", e.val_token_accuracy},
            {"val_bleu", finite_or_null(e.val_bleu)},
            {"val_align_accuracy", finite_or_null(e.val_align_accuracy)},
            {"val_aer", finite_or_null(e.val_aer)},
            {"tokens_per_second", e.tokens_per_second},
            {"elapsed", e.elapsed},
            {"lr", e.lr}};
}
EpochReport epoch_from_json(const nlohmann::json& j) {
    EpochReport e;
    e.epoch = j.at("epoch").get<int>();
    e.train_loss = j.at("train_loss").get<double>();
    e.val_loss = j.at("val_loss").is_null() ? std::nan("") : j.at("val_loss").get<double>();
    e.val_accuracy = number_or_nan(j, "val_accuracy");
    e.val_token_accuracy = j.value("val_token_accuracy", 0.0);
    e.val_bleu = number_or_nan(j, "val_bleu");
    e.val_align_accuracy = number_or_nan(j, "val_align_accuracy");  // absent before alignments were measured
    e.val_aer = number_or_nan(j, "val_aer");
    e.tokens_per_second = j.value("tokens_per_second", 0.0);
    e.elapsed = j.value("elapsed", 0.0);
    e.lr = j.value("lr", 0.0);
    return e;
}
}  // namespace

nlohmann::json TrainHistory::to_json() const {
    nlohmann::json steps = nlohmann::json::array(), losses = nlohmann::json::array(),
                   epochs_j = nlohmann::json::array();
    for (const auto& [s, l] : batch_loss) {
        steps.push_back(s);
        losses.push_back(l);
    }
    for (const auto& e : epochs) epochs_j.push_back(epoch_to_json(e));
    return {{"batch_step", steps}, {"batch_loss", losses},       {"epochs", epochs_j},
            {"global_step", global_step}, {"epochs_done", epochs_done}, {"best_epoch", best_epoch},
            {"seconds", seconds}};
}

double TrainHistory::best_val_loss() const {
    for (const auto& e : epochs)
        if (e.epoch == best_epoch) return e.val_loss;
    return std::nan("");
}

std::string to_string(StopReason r) {
    switch (r) {
    case StopReason::finished: return "finished";
    case StopReason::stopped: return "stopped";
    case StopReason::early_stop: return "early_stop";
    case StopReason::diverged: return "diverged";
    case StopReason::error: return "error";
    }
    return "?";
}

TrainHistory TrainHistory::from_json(const nlohmann::json& j) {
    TrainHistory h;
    const auto& steps = j.at("batch_step");
    const auto& losses = j.at("batch_loss");
    if (steps.size() != losses.size()) throw Error("training history: batch steps and losses differ in length");
    for (size_t i = 0; i < steps.size(); ++i) h.batch_loss.emplace_back(steps[i].get<int64_t>(), losses[i].get<double>());
    for (const auto& e : j.at("epochs")) h.epochs.push_back(epoch_from_json(e));
    h.global_step = j.value("global_step", int64_t{0});
    h.epochs_done = j.value("epochs_done", 0);
    h.best_epoch = j.value("best_epoch", 0);
    h.seconds = j.value("seconds", 0.0);
    return h;
}

}  // namespace attnviz
