#pragma once
// A training step's forward and backward passes with a batch's rows split into
// parts that run at once, one CPU thread each (data parallelism on one machine).
//
// Why: with d2l's sizes (batch 128, hidden 256) every matrix product of a step
// is small, and a step runs thousands of operations; with two intra-op threads
// each operation is cut in two and the threads meet at its end, so much of
// their time goes to waiting. Two halves of the batch, each on one core with
// single-threaded operations, keep both cores busy between the meetings: one
// per step instead of one per operation.
//
// The maths is the whole batch's. Part i's loss is the mean over its n_i real
// target tokens; back-propagated with weight n_i / N (N = the batch's real
// tokens) and accumulated into the parameters' gradients by autograd, the
// gradients add up to those of the batch's mean loss. Each parameter gets one
// gradient per part, and a sum of two numbers does not depend on their order,
// so the result does not depend on which part finishes first. Dropout masks are
// hashed from a seed per step (drawn from ATen's default generator) and each
// token's row and step in the whole batch (DropoutStream, core/model/dropout_stream.hpp),
// split or not: a seed gives the same masks whatever the number of threads and
// parts, and the same run up to floating-point rounding.
#include <cstdint>

#include <torch/torch.h>

#include "core/config/config.hpp"
#include "core/data/data.hpp"
#include "core/model/encoder_decoder.hpp"
#include "core/model/memory_bound.hpp"

namespace attnviz {

/// The fewest rows a part gets: below this, single-threaded products of a part
/// gain less than two threads inside each product of the whole batch.
constexpr int64_t split_step_min_rows = 32;

/// Into how many parts a training step of `rows` rows is split: 1 (no split)
/// unless the device is the CPU, more than one intra-op thread is allowed
/// (threads), and the model can train in parts
/// (EncoderDecoder::trains_in_parts); then one part per thread, each with at least
/// split_step_min_rows rows.
int split_step_parts(const EncoderDecoder& model, const torch::Device& device, int64_t rows, double teacher_forcing,
                     int threads);

/// Computes the batch's training loss (EncoderDecoder::loss: the mean over its
/// real target tokens) and, when it is finite, accumulates its gradient into
/// every parameter's .grad. Where the model trains in parts on the CPU, its
/// dropout masks come from a DropoutStream (LossOptions::dropout) seeded from
/// ATen's default generator (on a GPU, from the GPU's generator as before). parts <= 1: model.loss(...) and backward() on the calling
/// thread. parts > 1: the rows (every parts-th row to each
/// part, so that lengths stay balanced) run as `parts` losses and backward
/// passes at once (at::parallel_for, single-threaded operations inside); the
/// model must train in parts then, the batch be on the CPU and
/// have at least `parts` rows (std::logic_error otherwise). Returns the
/// loss; when it is not finite no gradient is guaranteed (the caller must not
/// step). The batch must be on the model's device. The gradient accumulated is `weight`
/// times the loss's (a chunk of a larger batch: its share of the batch's target tokens).
/// `precision`: the forward passes' arithmetic (core/train/precision.hpp; bf16 on the
/// Transformer only, which the Trainer checks). Every thread of the step computes with
/// subnormal numbers flushed to zero (ScopedFlushDenormal, core/train/precision.hpp), as
/// does split_validation_sums.
double split_loss_backward(EncoderDecoder& model, const Batch& batch, double teacher_forcing, int parts,
                           double weight = 1.0, Precision precision = Precision::fp32);

/// What validation adds up over a batch's real target tokens (teacher forced).
struct ValidationSums {
    double loss = 0;     ///< sum of the tokens' cross-entropies (nats)
    double tokens = 0;   ///< real (non-pad) target tokens
    double correct = 0;  ///< tokens whose most likely prediction is the target
};

/// Validation's sums over one batch, without gradients, with the model in
/// whatever mode it is in (Trainer::evaluate puts it in eval mode). parts <= 1:
/// one teacher-forced forward pass (EncoderDecoder::real_token_logits: the Transformer
/// skips padding there as in training) on the calling thread. parts > 1: every
/// parts-th row to each part, the parts' forward passes at once (one CPU thread
/// each, as in split_loss_backward, whose conditions apply: split_step_parts
/// with teacher forcing 1 says when), their sums added in part order, so the
/// result does not depend on the threads' timing; it equals the whole batch's
/// up to floating-point rounding.
ValidationSums split_validation_sums(EncoderDecoder& model, const Batch& batch, int parts);

/// Teacher-forced validation sums over pairs, in file order, batch_size pairs at a time
/// (padded like training: fixed_steps), each batch cut into chunks within the memory
/// `bound` by evaluation_cost (core/model/memory_bound.hpp), on the model's device, without gradients; on
/// several CPU threads in parts as split_validation_sums. check_pairs_fit refuses a pair
/// too long for the bound beforehand.
ValidationSums validation_sums(EncoderDecoder& model, const std::vector<SentencePair>& pairs, const Vocab& src_vocab,
                               const Vocab& tgt_vocab, int64_t batch_size, int64_t fixed_steps,
                               const torch::Device& device, int64_t bound = memory_bound());

}  // namespace attnviz
