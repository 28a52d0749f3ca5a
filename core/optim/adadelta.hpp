#pragma once
// Adadelta (Zeiler 2012), the optimiser Bahdanau et al. trained with; LibTorch's
// C++ API has none. Update per parameter x with gradient g:
//   E[g^2]  <- rho E[g^2] + (1 - rho) g^2
//   dx      =  -sqrt(E[dx^2] + eps) / sqrt(E[g^2] + eps) * g
//   E[dx^2] <- rho E[dx^2] + (1 - rho) dx^2
//   x       <- x + lr * dx
#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

namespace attnviz {

/// Adadelta's options; lr scales the step (1.0 is Zeiler's original rule).
struct AdadeltaOptions : public torch::optim::OptimizerCloneableOptions<AdadeltaOptions> {
    explicit AdadeltaOptions(double lr = 1.0) : lr_(lr) {}
    TORCH_ARG(double, lr) = 1.0;    ///< step multiplier
    TORCH_ARG(double, rho) = 0.95;  ///< decay of the running averages (Bahdanau et al.: 0.95)
    TORCH_ARG(double, eps) = 1e-6;  ///< conditioning constant (Bahdanau et al.: 1e-6)

public:  // TORCH_ARG leaves the access at private
    double get_lr() const override { return lr(); }
    void set_lr(const double lr) override { this->lr(lr); }
    void serialize(torch::serialize::OutputArchive& archive) const override;
    void serialize(torch::serialize::InputArchive& archive) override;
};

/// Running averages of one parameter.
struct AdadeltaParamState : public torch::optim::OptimizerCloneableParamState<AdadeltaParamState> {
    TORCH_ARG(torch::Tensor, square_avg);  ///< E[g^2]
    TORCH_ARG(torch::Tensor, acc_delta);   ///< E[dx^2]

public:
    void serialize(torch::serialize::OutputArchive& archive) const override;
    void serialize(torch::serialize::InputArchive& archive) override;
};

class Adadelta : public torch::optim::Optimizer {
public:
    Adadelta(const std::vector<torch::Tensor>& params, AdadeltaOptions defaults = AdadeltaOptions());
    torch::Tensor step(LossClosure closure = nullptr) override;
    void save(torch::serialize::OutputArchive& archive) const override;
    void load(torch::serialize::InputArchive& archive) override;
};

}  // namespace attnviz
