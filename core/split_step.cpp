// Data-parallel training steps across CPU threads (core/split_step.hpp).
#include "core/split_step.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include "core/fused_gru.hpp"
#include "core/text.hpp"

namespace attnviz {

int split_step_parts(const Seq2Seq& model, const torch::Device& device, int64_t rows, double teacher_forcing,
                     int threads) {
    if (!device.is_cpu() || threads < 2 || rows < 2 * split_step_min_rows) return 1;
    if (!model->trains_fused(teacher_forcing)) return 1;
    return static_cast<int>(std::min<int64_t>(threads, rows / split_step_min_rows));
}

double split_loss_backward(Seq2Seq& model, const Batch& batch, double teacher_forcing, int parts) {
    if (parts <= 1) {
        auto loss = model->loss(batch.src, batch.src_len, batch.tgt_in, batch.tgt_out, teacher_forcing);
        const double value = loss.item<double>();
        if (std::isfinite(value)) loss.backward();
        return value;
    }
    if (!model->trains_fused(teacher_forcing))
        throw std::logic_error("split_loss_backward: the model does not train through its fused nodes only");
    const int64_t rows = batch.src.size(0);
    if (rows < parts) throw std::logic_error("split_loss_backward: fewer rows than parts");

    struct Part {
        torch::Tensor src, src_len, tgt_in, tgt_out;
        double tokens = 0;
        at::Generator generator;
        double loss = 0;
    };
    std::vector<Part> part(static_cast<size_t>(parts));
    double total_tokens = 0;
    {
        // Seeds in part order from the default generator (under its lock), so the
        // masks depend on the seed and the step only.
        auto global = at::detail::getDefaultCPUGenerator();
        std::vector<uint64_t> seeds(part.size());
        {
            std::lock_guard<std::mutex> lock(global.mutex());
            for (auto& s : seeds) s = global.get<at::CPUGeneratorImpl>()->random64();
        }
        for (int p = 0; p < parts; ++p) {
            auto& pt = part[static_cast<size_t>(p)];
            const auto idx = torch::arange(p, rows, parts, torch::TensorOptions().dtype(torch::kLong)).to(batch.src.device());
            pt.src = batch.src.index_select(0, idx);
            pt.src_len = batch.src_len.index_select(0, idx);
            pt.tgt_in = batch.tgt_in.index_select(0, idx);
            pt.tgt_out = batch.tgt_out.index_select(0, idx);
            pt.tokens = pt.tgt_out.ne(Vocab::pad_id).sum().item<double>();
            pt.generator = at::make_generator<at::CPUGeneratorImpl>(seeds[static_cast<size_t>(p)]);
            total_tokens += pt.tokens;
        }
    }
    // One part per thread; ATen runs operations inside a parallel region on the
    // calling thread only, and autograd's CPU backward runs on the thread that asks.
    at::parallel_for(0, parts, 1, [&](int64_t begin, int64_t end) {
        for (int64_t p = begin; p < end; ++p) {
            auto& pt = part[static_cast<size_t>(p)];
            DropoutGeneratorScope scope(pt.generator);
            auto loss = model->loss(pt.src, pt.src_len, pt.tgt_in, pt.tgt_out, teacher_forcing);
            pt.loss = loss.item<double>();
            if (std::isfinite(pt.loss) && pt.tokens > 0)
                loss.backward(torch::full({}, pt.tokens / total_tokens, loss.options()));
        }
    });
    double value = 0;
    for (const auto& pt : part)
        if (pt.tokens > 0) value += pt.loss * (pt.tokens / total_tokens);
    return total_tokens > 0 ? value : std::nan("");
}

}  // namespace attnviz
