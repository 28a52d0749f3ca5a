// Interventions as the decoder step takes them, and the copy of a step that reads its own weights.
#include "core/decode/intervene.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include "core/io/error.hpp"

namespace attnviz {

namespace {
std::string row_name(size_t row) { return "sentence " + std::to_string(row + 1) + " of the batch"; }
}  // namespace

torch::Tensor intervention_weights(const Intervention& iv, const torch::Tensor& own, const torch::Tensor& mask,
                                   const std::vector<int64_t>& lengths, torch::Generator& generator) {
    const auto real = mask.to(torch::kFloat);  // [B, S] 1 on real positions
    const int64_t B = mask.size(0), S = mask.size(1);
    switch (iv.kind) {
    case InterventionKind::uniform:
        return real / real.sum(1, true).clamp_min(1.0);
    case InterventionKind::replace: {
        auto w = torch::zeros({B, S}, torch::kFloat);
        const auto given = torch::tensor(iv.weights, torch::kFloat);
        for (int64_t r = 0; r < B; ++r) {
            const int64_t n = lengths[static_cast<size_t>(r)];
            if (static_cast<int64_t>(iv.weights.size()) != n)
                throw ConfigError("intervention: " + std::to_string(iv.weights.size()) + " weights given but " +
                                  row_name(static_cast<size_t>(r)) + " has " + std::to_string(n) +
                                  " source tokens (<eos> included)");
            w[r].narrow(0, 0, n).copy_(given / given.sum());
        }
        return w.to(mask.device());
    }
    case InterventionKind::permute: {
        auto w = own.to(torch::kCPU, torch::kFloat).contiguous();
        auto index = torch::arange(S, torch::kLong).repeat({B, 1});  // padding stays where it is
        for (int64_t r = 0; r < B; ++r) {
            const int64_t n = std::min(lengths[static_cast<size_t>(r)], S);
            index[r].narrow(0, 0, n).copy_(torch::randperm(n, generator, torch::kLong));
        }
        return w.gather(1, index).to(mask.device());
    }
    case InterventionKind::zero_token: {
        auto w = own.to(torch::kCPU, torch::kFloat).clone();
        for (int64_t r = 0; r < B; ++r) {
            const int64_t n = std::min(lengths[static_cast<size_t>(r)], S);
            if (iv.source_token >= n)
                throw ConfigError("intervention: source token " + std::to_string(iv.source_token) + " does not exist: " +
                                  row_name(static_cast<size_t>(r)) + " has " + std::to_string(n) +
                                  " source tokens (<eos> included)");
            auto row = w[r].narrow(0, 0, n);
            row[iv.source_token] = 0.0f;
            const float rest = row.sum().item<float>();
            if (rest > 0) {
                row.div_(rest);
            } else if (n > 1) {  // the token had all the weight: the others share it
                row.fill_(1.0f / static_cast<float>(n - 1));
                row[iv.source_token] = 0.0f;
            }
        }
        return w.to(mask.device());
    }
    case InterventionKind::none:
    case InterventionKind::head_off:
        break;
    }
    return {};
}

StepIntervener::StepIntervener(EncoderDecoder& model, const EncodedSource& source, Intervention intervention,
                               std::vector<int64_t> lengths)
    : m_model(model),
      m_source(source),
      m_iv(std::move(intervention)),
      m_lengths(std::move(lengths)),
      m_generator(at::detail::createCPUGenerator(m_iv.seed)) {
    if (!model.has_attention()) throw ConfigError("intervention: the model has no attention (scoring none) to change");
}

const AttentionIntervention* StepIntervener::before_step(int64_t step, const torch::Tensor& tokens,
                                                         const DecoderCache& cache) {
    m_applied.reset();
    if (!m_iv.applies_at(step)) return nullptr;
    m_applied = std::make_unique<AttentionIntervention>();
    if (m_iv.kind == InterventionKind::head_off) {
        m_applied->heads_off.push_back(m_iv.head);
    } else {
        torch::Tensor own;  // the weights the step would have used: the step run on a copy
        if (m_iv.needs_own_weights()) {
            const auto copy = cache.clone();
            own = m_model.step(tokens, *copy, m_source).maps.at(0).weights;
        }
        m_applied->cross_weights = intervention_weights(m_iv, own, m_source.mask, m_lengths, m_generator);
    }
    return m_applied.get();
}

void StepIntervener::check_step(const StepOutput& out) const {
    if (m_iv.kind != InterventionKind::head_off) return;
    std::string known;
    for (const auto& m : out.maps) {
        if (m.id == m_iv.head) return;
        known += (known.empty() ? "" : "; ") + describe(m.id);
    }
    throw ConfigError("intervention: the model has no " + describe(m_iv.head) + " (its steps record: " +
                      (known.empty() ? "no maps" : known) + ")");
}

}  // namespace attnviz
