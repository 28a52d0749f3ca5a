// Training history and reports as JSON (checkpoint metadata, --json output).
#include "core/config/history.hpp"

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/io/error.hpp"
#include "core/io/json_bounded.hpp"

namespace attnviz {

// --- history -----------------------------------------------------------------

namespace {
nlohmann::json finite_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }
double number_or_nan(const nlohmann::json& j, const char* key) {
    return j.contains(key) && j.at(key).is_number() ? j.at(key).get<double>() : std::nan("");
}

nlohmann::json epoch_to_json(const EpochReport& e) {
    nlohmann::json j = {{"epoch", e.epoch},
            {"train_loss", finite_or_null(e.train_loss)},  // NaN for the start report: nothing trained yet
            {"val_loss", std::isfinite(e.val_loss) ? nlohmann::json(e.val_loss) : nlohmann::json(nullptr)},
            {"val_accuracy", finite_or_null(e.val_accuracy)},
            {"val_token_accuracy", finite_or_null(e.val_token_accuracy)},
            {"val_bleu", finite_or_null(e.val_bleu)},
            {"val_align_accuracy", finite_or_null(e.val_align_accuracy)},
            {"val_aer", finite_or_null(e.val_aer)},
            {"tokens_per_second", e.tokens_per_second},
            {"elapsed", e.elapsed},
            {"lr", e.lr}};
    if (!e.heads.empty()) {
        auto& heads = j["heads"] = nlohmann::json::array();
        for (const auto& h : e.heads)
            heads.push_back({{"kind", h.kind},
                             {"layer", h.layer},
                             {"head", h.head},
                             {"importance", finite_or_null(h.importance)},
                             {"confidence", finite_or_null(h.confidence)}});
    }
    return j;
}
EpochReport epoch_from_json(const nlohmann::json& j) {
    EpochReport e;
    e.epoch = j.at("epoch").get<int>();
    e.train_loss = j.at("train_loss").is_null() ? std::nan("") : j.at("train_loss").get<double>();
    e.val_loss = j.at("val_loss").is_null() ? std::nan("") : j.at("val_loss").get<double>();
    e.val_accuracy = number_or_nan(j, "val_accuracy");
    e.val_token_accuracy = j.contains("val_token_accuracy") && j.at("val_token_accuracy").is_null() ? std::nan("")
                                                                                        : j.value("val_token_accuracy", 0.0);
    e.val_bleu = number_or_nan(j, "val_bleu");
    e.val_align_accuracy = number_or_nan(j, "val_align_accuracy");  // absent before alignments were measured
    e.val_aer = number_or_nan(j, "val_aer");
    e.tokens_per_second = j.value("tokens_per_second", 0.0);
    e.elapsed = j.value("elapsed", 0.0);
    e.lr = j.value("lr", 0.0);
    if (j.contains("heads") && j.at("heads").is_array())  // absent: not measured
        for (const auto& h : j.at("heads")) {
            HeadSnapshot s;
            s.kind = h.at("kind").get<std::string>();
            if (s.kind != "cross" && s.kind != "encoder_self" && s.kind != "decoder_self")
                throw ConfigError("training history: unknown attention kind in an epoch's heads");
            s.layer = h.at("layer").get<int>();
            s.head = h.at("head").get<int>();
            s.importance = number_or_nan(h, "importance");
            s.confidence = number_or_nan(h, "confidence");
            e.heads.push_back(s);
        }
    return e;
}
}  // namespace

nlohmann::json TrainHistory::to_json() const {
    nlohmann::json steps = nlohmann::json::array(), losses = nlohmann::json::array(),
                   epochs_j = nlohmann::json::array();
    for (const auto& [s, l] : batch_loss.points()) {
        steps.push_back(s);
        losses.push_back(l);
    }
    for (const auto& e : epochs) epochs_j.push_back(epoch_to_json(e));
    nlohmann::json j = {{"batch_step", steps}, {"batch_loss", losses},       {"epochs", epochs_j},
                        {"global_step", global_step}, {"epochs_done", epochs_done}, {"best_epoch", best_epoch},
                        {"seconds", seconds}};
    // absent: 1 (every file before the bound)
    if (batch_loss.stride() != 1) j["batch_stride"] = batch_loss.stride();
    if (batch_loss.pending_count() > 0) j["batch_pending"] = {batch_loss.pending_sum(), batch_loss.pending_count()};
    if (start) j["start"] = epoch_to_json(*start);
    return j;
}

void TrainHistory::record_batch(int64_t step, double loss) {
    if (batch_loss.add(step, loss)) batch_loss.compact();
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

// The history comes from files: every number is checked, so a crafted value
// (epochs_done = INT_MAX, a negative step count) is an error, not a run of a
// million epochs or an overflowed counter.
TrainHistory TrainHistory::from_json(const nlohmann::json& j) {
    constexpr int64_t max_epochs = 1000000;
    constexpr int64_t max_steps = int64_t(1) << 50;
    auto fail = [](const std::string& what) { throw FileError("training history: " + what); };
    if (!j.is_object()) fail("expected a JSON object, got " + describe_json(j));
    auto integer = [&](const char* key, int64_t lo, int64_t hi, int64_t fallback) {
        const auto it = j.find(key);
        if (it == j.end()) return fallback;
        if (!it->is_number_integer() || it->get<int64_t>() < lo || it->get<int64_t>() > hi ||
            (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi)))
            fail(std::string("\"") + key + "\" is " + describe_json(*it) + ", expected an integer in " +
                 std::to_string(lo) + ".." + std::to_string(hi));
        return it->get<int64_t>();
    };
    auto array = [&](const char* key) -> const nlohmann::json& {
        const auto it = j.find(key);
        if (it == j.end() || !it->is_array()) fail(std::string("\"") + key + "\" must be an array");
        return *it;
    };
    TrainHistory h;
    h.global_step = integer("global_step", 0, max_steps, 0);
    h.epochs_done = static_cast<int>(integer("epochs_done", 0, max_epochs, 0));
    h.best_epoch = static_cast<int>(integer("best_epoch", 0, max_epochs, 0));
    const auto seconds = j.find("seconds");
    if (seconds != j.end()) {
        if (!seconds->is_number() || !std::isfinite(seconds->get<double>()) || seconds->get<double>() < 0)
            fail("\"seconds\" is " + describe_json(*seconds) + ", expected a number >= 0");
        h.seconds = seconds->get<double>();
    }

    const auto& steps = array("batch_step");
    const auto& losses = array("batch_loss");
    if (steps.size() != losses.size()) fail("batch steps and losses differ in length");
    std::vector<BoundedCurve::Point> points;
    points.reserve(steps.size());
    for (size_t i = 0; i < steps.size(); ++i) {
        const auto& s = steps[i];
        const auto& l = losses[i];
        const int64_t previous = points.empty() ? 0 : points.back().first;
        if (!s.is_number_integer() || s.get<int64_t>() <= previous || s.get<int64_t>() > max_steps)
            fail("batch step " + std::to_string(i) + " is " + describe_json(s) + ", expected an integer in " +
                 std::to_string(previous + 1) + ".." + std::to_string(max_steps) + " (increasing)");
        if (!l.is_number() || !std::isfinite(l.get<double>()))
            fail("batch loss " + std::to_string(i) + " is " + describe_json(l) + ", expected a finite number");
        points.emplace_back(s.get<int64_t>(), l.get<double>());
    }

    const int64_t stride = integer("batch_stride", 1, int64_t(1) << 40, 1);
    if ((stride & (stride - 1)) != 0)
        fail("\"batch_stride\" is " + std::to_string(stride) + ", expected a power of two");
    double pending_sum = 0.0;
    int64_t pending_count = 0;
    if (const auto pending = j.find("batch_pending"); pending != j.end()) {
        if (!pending->is_array() || pending->size() != 2 || !(*pending)[0].is_number() ||
            !std::isfinite((*pending)[0].get<double>()) || !(*pending)[1].is_number_integer() ||
            (*pending)[1].get<int64_t>() < 0 || (*pending)[1].get<int64_t>() >= stride)
            fail("\"batch_pending\" is " + describe_json(*pending) + ", expected [loss sum, batches] with fewer batches than " +
                 std::to_string(stride));
        pending_sum = (*pending)[0].get<double>();
        pending_count = (*pending)[1].get<int64_t>();
    }
    h.batch_loss.restore(std::move(points), stride, pending_sum, pending_count);
    h.batch_loss.compact();  // a file written before the bound (or by hand) may hold more points
    if (h.batch_loss.stride() > (int64_t(1) << 40))  // what it read back would be refused: refuse it now
        fail("batch loss: " + std::to_string(steps.size()) + " points at a stride of \"batch_stride\" are too many");

    if (const auto st = j.find("start"); st != j.end()) {
        if (!st->is_object()) fail("\"start\" is " + describe_json(*st) + ", expected an epoch report");
        try {
            h.start = epoch_from_json(*st);
        } catch (const nlohmann::json::exception& ex) {
            fail(std::string("\"start\": ") + ex.what());
        }
        h.start->epoch = 0;
    }
    const auto& epochs = array("epochs");
    for (size_t i = 0; i < epochs.size(); ++i) {
        const auto& e = epochs[i];
        const int previous = h.epochs.empty() ? 0 : h.epochs.back().epoch;
        const auto epoch = e.is_object() ? e.find("epoch") : e.end();
        if (!e.is_object() || epoch == e.end() || !epoch->is_number_integer() || epoch->get<int64_t>() <= previous ||
            epoch->get<int64_t>() > max_epochs)
            fail("epoch report " + std::to_string(i) + " needs an \"epoch\" in " + std::to_string(previous + 1) + ".." +
                 std::to_string(max_epochs) + " (increasing)");
        try {
            h.epochs.push_back(epoch_from_json(e));
        } catch (const nlohmann::json::exception& ex) {
            fail("epoch report " + std::to_string(i) + ": " + ex.what());
        }
        const EpochReport& r = h.epochs.back();
        for (const double v : {r.tokens_per_second, r.elapsed, r.lr})
            if (!std::isfinite(v) || v < 0)
                fail("epoch report " + std::to_string(i) + " has a negative or non-finite time, rate or learning rate");
    }
    return h;
}

}  // namespace attnviz
