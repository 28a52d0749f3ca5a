// Beam search, batched over sentences. Every hypothesis keeps its own
// attention rows, raw scores and context norms, so the GUI can show the
// heatmap of any beam, not only the best.
//
// Scoring: a finished hypothesis of n tokens (its <eos> included) with summed
// log-probability log P is ranked by log P / n^alpha, alpha =
// DecodeOptions::length_penalty (0: plain log P; 1: mean log-probability per
// token). At each step the 2K best extensions of the K live beams are walked
// in order: an <eos> extension is set aside as finished, the others fill the K
// new beams. A sentence is done once K hypotheses have finished; at the length
// limit its live beams are finished as they are (without <eos>).
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/decode.hpp"
#include "core/decode_util.hpp"

namespace attnviz {

namespace {
constexpr float k_neg_inf = -std::numeric_limits<float>::infinity();

double normalized(double log_prob, size_t length, double alpha) {
    if (alpha == 0.0 || length == 0) return log_prob;
    return log_prob / std::pow(static_cast<double>(length), alpha);
}

EncoderState expand(const EncoderState& enc, const torch::Tensor& idx) {
    EncoderState e;
    e.outputs = enc.outputs.index_select(0, idx);
    e.src_len = enc.src_len.index_select(0, idx);
    e.mask = enc.mask.index_select(0, idx);
    e.proj_keys = enc.proj_keys.index_select(0, idx);
    e.final_ctx = enc.final_ctx.index_select(0, idx);
    e.h0 = enc.h0.index_select(1, idx);
    if (enc.c0.defined()) e.c0 = enc.c0.index_select(1, idx);
    return e;
}
}  // namespace

std::vector<Translation> beam_decode(const TranslationModel& translation_model,
                                     const std::vector<std::vector<std::string>>& sources,
                                     const DecodeOptions& options) {
    const bool has_attention = translation_model.has_attention();
    const auto device = translation_model.device();
    Seq2Seq model = translation_model.network();
    const Vocab& tgt_vocab = translation_model.tgt_vocab();
    const TokenLevel level = translation_model.level();
    const int64_t K = options.beam_size;
    const int64_t V = model->config().tgt_vocab;
    const double alpha = options.length_penalty;
    const auto long_opts = torch::TensorOptions().dtype(torch::kLong);

    auto decode_chunk = [&](const std::vector<size_t>& rows, const SourceBatch& batch, std::vector<Translation>& results) {
        const int64_t B = static_cast<int64_t>(rows.size());
        const auto lens = batch.lengths();
        auto enc = expand(model->encode(batch.src, batch.src_len),
                          torch::arange(B, long_opts).repeat_interleave(K).to(device));
        auto state = model->init_state(enc);
        auto tokens = torch::full({B * K}, Vocab::bos_id, long_opts).to(device);
        // Only the first beam of each sentence is live at the start.
        std::vector<float> beam_logp(static_cast<size_t>(B * K), k_neg_inf);
        for (int64_t b = 0; b < B; ++b) beam_logp[static_cast<size_t>(b * K)] = 0.f;
        std::vector<Hypothesis> live(static_cast<size_t>(B * K));
        std::vector<std::vector<Hypothesis>> finished(static_cast<size_t>(B));
        std::vector<bool> done(static_cast<size_t>(B), false);

        for (int64_t step = 0; step < options.max_length; ++step) {
            auto out = model->step(tokens, state, enc);
            auto logp = torch::log_softmax(out.logits.to(torch::kFloat), -1);
            logp.index_fill_(1, torch::tensor({Vocab::pad_id, Vocab::bos_id}, long_opts).to(device), k_neg_inf);
            auto prev = torch::from_blob(beam_logp.data(), {B * K, 1}, torch::kFloat).to(device);
            auto total = (logp + prev).view({B, K * V});
            auto top = total.topk(std::min<int64_t>(2 * K, K * V), 1);
            auto values_t = std::get<0>(top).to(torch::kCPU).contiguous();
            auto index_t = std::get<1>(top).to(torch::kCPU).contiguous();
            auto logp_cpu = logp.to(torch::kCPU);
            auto values = values_t.accessor<float, 2>();
            auto index = index_t.accessor<int64_t, 2>();
            auto step_lp = logp_cpu.accessor<float, 2>();
            auto cn_t = out.context.norm(2, -1).to(torch::kCPU, torch::kFloat).contiguous();
            auto cn = cn_t.accessor<float, 1>();
            torch::Tensor w_cpu, s_cpu;
            if (has_attention) {
                w_cpu = out.weights.to(torch::kCPU, torch::kFloat).contiguous();
                s_cpu = out.scores.to(torch::kCPU, torch::kFloat).contiguous();
            }

            std::vector<float> next_logp(static_cast<size_t>(B * K), k_neg_inf);
            std::vector<int64_t> parent(static_cast<size_t>(B * K), 0), next_tok(static_cast<size_t>(B * K), Vocab::eos_id);
            std::vector<Hypothesis> next_live(static_cast<size_t>(B * K));
            for (int64_t b = 0; b < B; ++b) {
                for (int64_t k = 0; k < K; ++k) parent[static_cast<size_t>(b * K + k)] = b * K;
                if (done[static_cast<size_t>(b)]) continue;
                int64_t filled = 0;
                for (int64_t j = 0; j < values_t.size(1) && filled < K; ++j) {
                    if (values[b][j] == k_neg_inf) break;
                    const int64_t slot = b * K + index[b][j] / V, tok = index[b][j] % V;
                    Hypothesis h = live[static_cast<size_t>(slot)];
                    h.ids.push_back(tok);
                    h.log_prob += step_lp[slot][tok];
                    h.context_norm.push_back(cn[slot]);
                    if (has_attention) append_attention_row(h, w_cpu, s_cpu, slot, lens[static_cast<size_t>(b)]);
                    if (tok == Vocab::eos_id) {
                        h.score = normalized(h.log_prob, h.ids.size(), alpha);
                        finished[static_cast<size_t>(b)].push_back(std::move(h));
                        continue;
                    }
                    const auto dst = static_cast<size_t>(b * K + filled);
                    next_logp[dst] = values[b][j];
                    parent[dst] = slot;
                    next_tok[dst] = tok;
                    next_live[dst] = std::move(h);
                    ++filled;
                }
                if (static_cast<int64_t>(finished[static_cast<size_t>(b)].size()) >= K || filled == 0)
                    done[static_cast<size_t>(b)] = true;
            }
            live = std::move(next_live);
            beam_logp = std::move(next_logp);
            if (std::all_of(done.begin(), done.end(), [](bool d) { return d; })) break;
            auto parent_t = torch::tensor(parent, long_opts).to(device);
            state.h = state.h.index_select(1, parent_t);
            if (state.c.defined()) state.c = state.c.index_select(1, parent_t);
            tokens = torch::tensor(next_tok, long_opts).to(device);
        }

        for (int64_t b = 0; b < B; ++b) {
            auto& fin = finished[static_cast<size_t>(b)];
            if (!done[static_cast<size_t>(b)])
                for (int64_t k = 0; k < K; ++k) {
                    auto& h = live[static_cast<size_t>(b * K + k)];
                    if (beam_logp[static_cast<size_t>(b * K + k)] == k_neg_inf || h.ids.empty()) continue;
                    h.score = normalized(h.log_prob, h.ids.size(), alpha);
                    fin.push_back(std::move(h));
                }
            std::stable_sort(fin.begin(), fin.end(),
                             [](const Hypothesis& x, const Hypothesis& y) { return x.score > y.score; });
            auto& t = results[rows[static_cast<size_t>(b)]];
            for (size_t i = 0; i < fin.size() && static_cast<int64_t>(i) < options.num_hypotheses; ++i) {
                finish_hypothesis(fin[i], tgt_vocab, level);
                t.hypotheses.push_back(std::move(fin[i]));
            }
        }
    };
    return decode_in_batches(translation_model, sources, options, decode_chunk);
}

}  // namespace attnviz
