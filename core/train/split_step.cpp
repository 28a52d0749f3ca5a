// Data-parallel training steps across CPU threads (core/train/split_step.hpp).
#include "core/train/split_step.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <stdexcept>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include "core/model/encoder_decoder.hpp"
#include "core/text/text.hpp"
#include "core/text/vocab.hpp"
#include "core/train/precision.hpp"

namespace attnviz {

namespace {

// One part of a split batch: every parts-th row.
struct Part {
    torch::Tensor src, src_len, tgt_in, tgt_out;
    double tokens = 0;      ///< real target tokens
    DropoutStream stream;   ///< rows: the part's rows in the whole batch; seed set by the caller
    double loss = 0;
};

std::vector<Part> split_rows(const Batch& batch, int parts) {
    const int64_t rows = batch.src.size(0);
    if (parts > rows) throw std::logic_error("split: fewer rows than parts");
    if (!batch.src.device().is_cpu()) throw std::logic_error("split: splits run on the CPU only");
    std::vector<Part> part(static_cast<size_t>(parts));
    for (int p = 0; p < parts; ++p) {
        auto& pt = part[static_cast<size_t>(p)];
        const auto idx = torch::arange(p, rows, parts, torch::TensorOptions().dtype(torch::kLong));
        pt.src = batch.src.index_select(0, idx);
        pt.src_len = batch.src_len.index_select(0, idx);
        pt.tgt_in = batch.tgt_in.index_select(0, idx);
        pt.tgt_out = batch.tgt_out.index_select(0, idx);
        pt.tokens = pt.tgt_out.ne(Vocab::pad_id).sum().item<double>();
        pt.stream.rows.assign(idx.data_ptr<int64_t>(), idx.data_ptr<int64_t>() + idx.numel());
    }
    return part;
}

/// The model's loss with the forward pass in `precision` (autocast is per thread: each part
/// of a split step holds its own guard). The backward pass needs none.
torch::Tensor loss_in(Precision precision, EncoderDecoder& model, const torch::Tensor& src,
                      const torch::Tensor& src_len, const torch::Tensor& tgt_in, const torch::Tensor& tgt_out,
                      const LossOptions& options) {
    const ScopedPrecision arithmetic(precision, src.device());
    return model.loss(src, src_len, tgt_in, tgt_out, options);
}

ValidationSums forward_sums(EncoderDecoder& model, const torch::Tensor& src, const torch::Tensor& src_len,
                            const torch::Tensor& tgt_in, const torch::Tensor& tgt_out) {
    ValidationSums v;
    const TokenLogits t = model.real_token_logits(src, src_len, tgt_in, tgt_out);
    v.tokens = static_cast<double>(t.targets.numel());
    if (v.tokens == 0) return v;
    namespace F = torch::nn::functional;
    v.loss = F::cross_entropy(t.logits, t.targets, F::CrossEntropyFuncOptions().reduction(torch::kSum)).item<double>();
    v.correct = t.logits.argmax(-1).eq(t.targets).sum().item<double>();
    return v;
}

}  // namespace

int split_step_parts(const EncoderDecoder& model, const torch::Device& device, int64_t rows, double teacher_forcing,
                     int threads) {
    if (!device.is_cpu() || threads < 2 || rows < 2 * split_step_min_rows) return 1;
    if (!model.trains_in_parts(teacher_forcing)) return 1;
    return static_cast<int>(std::min<int64_t>(threads, rows / split_step_min_rows));
}

double split_loss_backward(EncoderDecoder& model, const Batch& batch, double teacher_forcing, int parts,
                           double weight, Precision precision) {
    const ScopedFlushDenormal flush;  // this thread's part (or the whole batch), backward included
    const bool fused = model.trains_in_parts(teacher_forcing);
    if (parts > 1 && !fused)
        throw std::logic_error("split_loss_backward: the model does not train through its fused nodes only");
    const int64_t rows = batch.src.size(0);
    if (parts > rows) throw std::logic_error("split_loss_backward: fewer rows than parts");
    parts = std::max(parts, 1);
    // The step's seed from ATen's default generator (under its lock): the masks
    // depend on it and on each token's batch row and step, not on the parts. Hashed
    // on the CPU, so only there: a GPU draws its masks with its own generator.
    const bool hashed = fused && batch.src.device().is_cpu();
    uint64_t seed = 0;
    if (hashed) {
        auto global = at::detail::getDefaultCPUGenerator();
        std::lock_guard<std::mutex> lock(global.mutex());
        seed = global.get<at::CPUGeneratorImpl>()->random64();
    }
    if (parts == 1) {
        const DropoutStream stream{seed, {}};
        auto loss = loss_in(precision, model, batch.src, batch.src_len, batch.tgt_in, batch.tgt_out,
                            LossOptions{teacher_forcing, hashed ? &stream : nullptr});
        const double value = loss.item<double>();
        if (std::isfinite(value)) loss.backward(torch::full({}, weight, loss.options()));
        return value;
    }

    std::vector<Part> part = split_rows(batch, parts);
    double total_tokens = 0;
    for (auto& pt : part) {
        pt.stream.seed = seed;
        total_tokens += pt.tokens;
    }
    // One part per thread; ATen runs operations inside a parallel region on the
    // calling thread only, and autograd's CPU backward runs on the thread that asks.
    at::parallel_for(0, parts, 1, [&](int64_t begin, int64_t end) {
        const ScopedFlushDenormal flush_here;  // the mode is per thread
        for (int64_t p = begin; p < end; ++p) {
            auto& pt = part[static_cast<size_t>(p)];
            auto loss = loss_in(precision, model, pt.src, pt.src_len, pt.tgt_in, pt.tgt_out,
                                LossOptions{teacher_forcing, &pt.stream});
            pt.loss = loss.item<double>();
            if (std::isfinite(pt.loss) && pt.tokens > 0)
                loss.backward(torch::full({}, weight * pt.tokens / total_tokens, loss.options()));
        }
    });
    double value = 0;
    for (const auto& pt : part)
        if (pt.tokens > 0) value += pt.loss * (pt.tokens / total_tokens);
    return total_tokens > 0 ? value : std::nan("");
}

ValidationSums split_validation_sums(EncoderDecoder& model, const Batch& batch, int parts) {
    torch::NoGradGuard no_grad;
    const ScopedFlushDenormal flush;  // as training computes
    if (parts <= 1) return forward_sums(model, batch.src, batch.src_len, batch.tgt_in, batch.tgt_out);
    if (!model.trains_in_parts(1.0))
        throw std::logic_error("split_validation_sums: the model does not run through its fused nodes only");
    std::vector<Part> part = split_rows(batch, parts);
    std::vector<ValidationSums> sums(part.size());
    at::parallel_for(0, parts, 1, [&](int64_t begin, int64_t end) {
        torch::NoGradGuard no_grad_here;  // grad mode and the float mode are per thread
        const ScopedFlushDenormal flush_here;
        for (int64_t p = begin; p < end; ++p) {
            const auto& pt = part[static_cast<size_t>(p)];
            sums[static_cast<size_t>(p)] = forward_sums(model, pt.src, pt.src_len, pt.tgt_in, pt.tgt_out);
        }
    });
    ValidationSums total;
    for (const auto& s : sums) {
        total.loss += s.loss;
        total.tokens += s.tokens;
        total.correct += s.correct;
    }
    return total;
}

ValidationSums validation_sums(EncoderDecoder& model, const std::vector<SentencePair>& pairs, const Vocab& src_vocab,
                               const Vocab& tgt_vocab, int64_t batch_size, int64_t fixed_steps,
                               const torch::Device& device, int64_t bound) {
    torch::NoGradGuard no_grad;
    const ShapeCost cost = evaluation_cost(model);
    check_pairs_fit(pairs, cost, fixed_steps, model.config().source_steps, "evaluation", "pair", bound);
    ValidationSums total;
    std::vector<size_t> rows;
    for (size_t start = 0; start < pairs.size(); start += static_cast<size_t>(batch_size)) {
        rows.clear();
        for (size_t i = start; i < std::min(pairs.size(), start + static_cast<size_t>(batch_size)); ++i) rows.push_back(i);
        const Batch whole = make_batch(pairs, rows, src_vocab, tgt_vocab, fixed_steps);
        for (const Batch& cpu : split_batch(whole, cost, model.config().source_steps, bound)) {
            const Batch b = cpu.to(device);
            const int parts = split_step_parts(model, device, b.src.size(0), 1.0, at::get_num_threads());
            const ValidationSums sums = split_validation_sums(model, b, parts);
            total.loss += sums.loss;
            total.tokens += sums.tokens;
            total.correct += sums.correct;
        }
    }
    return total;
}

}  // namespace attnviz
