#pragma once
// The optimiser's state as plain named tensors, so that a checkpoint can store
// it in its own container (core/persist/checkpoint.cpp) and validate it like the
// weights, instead of a LibTorch archive whose loader trusts the file.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/config/config.hpp"
#include "core/model/encoder_decoder.hpp"

namespace attnviz {

/// Per-parameter state of an optimiser, by attnviz parameter name (EncoderDecoder::named_parameters()).
struct OptimizerState {
    OptimizerKind kind = OptimizerKind::adam;  ///< which optimiser it belongs to
    struct Param {
        int64_t step = 0;  ///< Adam's step count (0 for the others)
        /// Slot name -> tensor (CPU, float32, the parameter's shape): Adam exp_avg, exp_avg_sq
        /// and max_exp_avg_sq (amsgrad only); SGD momentum_buffer; Adadelta square_avg, acc_delta.
        std::map<std::string, torch::Tensor> slots;
    };
    std::map<std::string, Param> params;  ///< parameters with state (none before the first step)
    bool empty() const { return params.empty(); }
};

/// The optimiser of a TrainConfig over the model's parameters (lr, momentum from it).
std::unique_ptr<torch::optim::Optimizer> make_optimizer(EncoderDecoder& model, const TrainConfig& config);

/// Slot names an optimiser kind keeps per parameter (all of them, optional ones included).
const std::vector<std::string>& optimizer_slots(OptimizerKind kind);

/// Copies the state of `optimizer` (built by make_optimizer over model's parameters,
/// of the given kind) to the CPU. Throws Error when a state tensor does not have its
/// parameter's shape or is not float32 (e.g. an archive read from an old file).
OptimizerState capture_optimizer_state(const torch::optim::Optimizer& optimizer, EncoderDecoder& model, OptimizerKind kind);

/// Throws FileError naming the parameter and slot (`what` starts the message) when a state
/// holds a value no optimiser step leaves: NaN or an infinity in any slot, a negative
/// running average of squares (Adam's exp_avg_sq and max_exp_avg_sq, Adadelta's
/// square_avg and acc_delta: the next step takes their square root), or a negative step.
/// Resuming from such a state would turn the weights into NaN at the first step.
void check_optimizer_state_values(const OptimizerState& state, const std::string& what);

/// Puts a captured state back into `optimizer` (made by make_optimizer over model's
/// parameters, of state.kind), on each parameter's device. Throws FileError naming the
/// parameter and slot when a parameter is unknown, a slot does not belong to the kind,
/// a tensor's shape or dtype differs from its parameter's, or a value is one no step
/// leaves (check_optimizer_state_values).
void restore_optimizer_state(const OptimizerState& state, torch::optim::Optimizer& optimizer, EncoderDecoder& model);

}  // namespace attnviz
