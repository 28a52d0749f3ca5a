// Optimiser state <-> named tensors. LibTorch keys an optimiser's state by the
// parameter's TensorImpl; the model's parameter names make it portable.
#include "core/optim/optimizer_state.hpp"

#include "core/optim/adadelta.hpp"
#include "core/io/error.hpp"
#include "core/io/message.hpp"

namespace attnviz {

namespace {
void check_slot(const std::string& who, const torch::Tensor& t, const torch::Tensor& param) {
    if (!t.defined()) throw FileError(who + " is missing");
    if (t.scalar_type() != torch::kFloat)
        throw FileError(who + " has dtype " + std::string(c10::toString(t.scalar_type())) + ", expected float32");
    if (t.sizes() != param.sizes())
        throw FileError(who + " has shape " + shape_to_string(t.sizes().vec()) + ", expected " +
                        shape_to_string(param.sizes().vec()) + " (its parameter's)");
}

/// Slots that hold running averages of squares: never negative.
bool squares_slot(const std::string& slot) {
    return slot == "exp_avg_sq" || slot == "max_exp_avg_sq" || slot == "square_avg" || slot == "acc_delta";
}

torch::Tensor on_device_copy(const torch::Tensor& t, const torch::Tensor& param) {
    return t.to(param.device(), /*non_blocking=*/false, /*copy=*/true);
}
}  // namespace

std::unique_ptr<torch::optim::Optimizer> make_optimizer(EncoderDecoder& model, const TrainConfig& c) {
    auto params = model.parameters();
    switch (c.optimizer) {
    case OptimizerKind::sgd:
        return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(c.lr).momentum(c.momentum));
    case OptimizerKind::adadelta:
        return std::make_unique<Adadelta>(params, AdadeltaOptions(c.lr));
    case OptimizerKind::adam:
        break;
    }
    return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(c.lr));
}

const std::vector<std::string>& optimizer_slots(OptimizerKind kind) {
    static const std::vector<std::string> adam = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
    static const std::vector<std::string> sgd = {"momentum_buffer"};
    static const std::vector<std::string> adadelta = {"square_avg", "acc_delta"};
    switch (kind) {
    case OptimizerKind::sgd: return sgd;
    case OptimizerKind::adadelta: return adadelta;
    case OptimizerKind::adam: break;
    }
    return adam;
}

OptimizerState capture_optimizer_state(const torch::optim::Optimizer& optimizer, EncoderDecoder& model, OptimizerKind kind) {
    OptimizerState out;
    out.kind = kind;
    const auto& states = optimizer.state();
    for (const auto& item : model.named_parameters()) {
        const torch::Tensor& p = item.value();
        const auto it = states.find(p.unsafeGetTensorImpl());
        if (it == states.end() || !it->second) continue;
        const std::string who = "optimiser state of " + quote(item.key());
        OptimizerState::Param param;
        auto slot = [&](const char* name, const torch::Tensor& t, bool optional = false) {
            if (optional && !t.defined()) return;
            check_slot(who + " (" + name + ")", t, p);
            param.slots[name] = t.detach().to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true);
        };
        if (const auto* s = dynamic_cast<const torch::optim::AdamParamState*>(it->second.get());
            s && kind == OptimizerKind::adam) {
            param.step = s->step();
            slot("exp_avg", s->exp_avg());
            slot("exp_avg_sq", s->exp_avg_sq());
            slot("max_exp_avg_sq", s->max_exp_avg_sq(), /*optional=*/true);
        } else if (const auto* s = dynamic_cast<const torch::optim::SGDParamState*>(it->second.get());
                   s && kind == OptimizerKind::sgd) {
            slot("momentum_buffer", s->momentum_buffer());
        } else if (const auto* s = dynamic_cast<const AdadeltaParamState*>(it->second.get());
                   s && kind == OptimizerKind::adadelta) {
            slot("square_avg", s->square_avg());
            slot("acc_delta", s->acc_delta());
        } else {
            throw FileError(who + " is not " + to_string(kind) + "'s");
        }
        out.params.emplace(item.key(), std::move(param));
    }
    return out;
}

void check_optimizer_state_values(const OptimizerState& state, const std::string& what) {
    for (const auto& [name, param] : state.params) {
        const std::string who = what + "optimiser state of " + quote(name);
        if (param.step < 0) throw FileError(who + ": step " + std::to_string(param.step) + " is negative");
        for (const auto& [slot, t] : param.slots) {
            if (!t.defined() || t.numel() == 0) continue;
            if (!torch::isfinite(t).all().item<bool>())
                throw FileError(who + " (" + slot + ") holds NaN or infinite values: the next training step "
                                "would make the weights NaN");
            if (squares_slot(slot) && t.lt(0).any().item<bool>())
                throw FileError(who + " (" + slot + ") holds negative values, which a running average of squares "
                                "never has: the next training step would make the weights NaN");
        }
    }
}

void restore_optimizer_state(const OptimizerState& state, torch::optim::Optimizer& optimizer, EncoderDecoder& model) {
    check_optimizer_state_values(state, "");
    const auto named = model.named_parameters();
    const auto& valid = optimizer_slots(state.kind);
    for (const auto& [name, param] : state.params) {
        const torch::Tensor* p = named.find(name);
        if (!p) throw FileError("optimiser state for an unknown parameter " + quote(name));
        const std::string who = "optimiser state of " + quote(name);
        for (const auto& [slot, t] : param.slots) {
            if (std::find(valid.begin(), valid.end(), slot) == valid.end())
                throw FileError(who + ": " + quote(slot) + " is not a slot of " + to_string(state.kind));
            check_slot(who + " (" + slot + ")", t, *p);
        }
        const auto& slots = param.slots;  // a structured binding cannot be captured before C++20 (clang)
        auto get = [&](const char* slot, bool optional = false) -> torch::Tensor {
            const auto it = slots.find(slot);
            if (it == slots.end()) {
                if (optional) return {};
                throw FileError(who + " (" + slot + ") is missing");
            }
            return on_device_copy(it->second, *p);
        };
        std::unique_ptr<torch::optim::OptimizerParamState> s;
        switch (state.kind) {
        case OptimizerKind::adam: {
            if (param.step < 0) throw FileError(who + ": step " + std::to_string(param.step) + " is negative");
            auto a = std::make_unique<torch::optim::AdamParamState>();
            a->step(param.step);
            a->exp_avg(get("exp_avg"));
            a->exp_avg_sq(get("exp_avg_sq"));
            if (auto m = get("max_exp_avg_sq", /*optional=*/true); m.defined()) a->max_exp_avg_sq(m);
            s = std::move(a);
            break;
        }
        case OptimizerKind::sgd: {
            auto g = std::make_unique<torch::optim::SGDParamState>();
            g->momentum_buffer(get("momentum_buffer"));
            s = std::move(g);
            break;
        }
        case OptimizerKind::adadelta: {
            auto d = std::make_unique<AdadeltaParamState>();
            d->square_avg(get("square_avg"));
            d->acc_delta(get("acc_delta"));
            s = std::move(d);
            break;
        }
        }
        optimizer.state()[p->unsafeGetTensorImpl()] = std::move(s);
    }
}

}  // namespace attnviz
