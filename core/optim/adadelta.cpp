#include "core/optim/adadelta.hpp"

#include <torch/optim/serialize.h>

namespace attnviz {

void AdadeltaOptions::serialize(torch::serialize::OutputArchive& archive) const {
    archive.write("lr", c10::IValue(lr()));
    archive.write("rho", c10::IValue(rho()));
    archive.write("eps", c10::IValue(eps()));
}

void AdadeltaOptions::serialize(torch::serialize::InputArchive& archive) {
    c10::IValue v;
    archive.read("lr", v);
    lr(v.toDouble());
    archive.read("rho", v);
    rho(v.toDouble());
    archive.read("eps", v);
    eps(v.toDouble());
}

void AdadeltaParamState::serialize(torch::serialize::OutputArchive& archive) const {
    archive.write("square_avg", square_avg(), /*is_buffer=*/true);
    archive.write("acc_delta", acc_delta(), /*is_buffer=*/true);
}

void AdadeltaParamState::serialize(torch::serialize::InputArchive& archive) {
    torch::Tensor t;
    archive.read("square_avg", t, /*is_buffer=*/true);
    square_avg(t);
    archive.read("acc_delta", t, /*is_buffer=*/true);
    acc_delta(t);
}

Adadelta::Adadelta(const std::vector<torch::Tensor>& params, AdadeltaOptions defaults)
    : Optimizer({torch::optim::OptimizerParamGroup(params)},
                std::make_unique<AdadeltaOptions>(defaults)) {}

torch::Tensor Adadelta::step(LossClosure closure) {
    torch::NoGradGuard no_grad;
    torch::Tensor loss;
    if (closure) {
        at::AutoGradMode enable_grad(true);
        loss = closure();
    }
    for (auto& group : param_groups_) {
        const auto& o = static_cast<const AdadeltaOptions&>(group.options());
        for (auto& p : group.params()) {
            if (!p.grad().defined()) continue;
            const auto& g = p.grad();
            auto it = state_.find(p.unsafeGetTensorImpl());
            if (it == state_.end()) {
                auto s = std::make_unique<AdadeltaParamState>();
                s->square_avg(torch::zeros_like(p));
                s->acc_delta(torch::zeros_like(p));
                it = state_.emplace(p.unsafeGetTensorImpl(), std::move(s)).first;
            }
            auto& s = static_cast<AdadeltaParamState&>(*it->second);
            s.square_avg().mul_(o.rho()).addcmul_(g, g, 1 - o.rho());
            auto delta = s.acc_delta().add(o.eps()).sqrt_().div_(s.square_avg().add(o.eps()).sqrt_()).mul_(g);
            s.acc_delta().mul_(o.rho()).addcmul_(delta, delta, 1 - o.rho());
            p.add_(delta, -o.lr());
        }
    }
    return loss;
}

void Adadelta::save(torch::serialize::OutputArchive& archive) const {
    torch::optim::serialize<AdadeltaParamState, AdadeltaOptions>(archive, *this);
}

void Adadelta::load(torch::serialize::InputArchive& archive) {
    torch::optim::serialize<AdadeltaParamState, AdadeltaOptions>(archive, *this);
}

}  // namespace attnviz
