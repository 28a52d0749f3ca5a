// Greedy decoding, batched over sentences, recording each step's attention.
#include "core/decode/greedy.hpp"

#include <algorithm>
#include <memory>
#include <optional>

#include "core/decode/intervene.hpp"
#include "core/io/process_memory.hpp"
#include "core/model/small_linear.hpp"

namespace attnviz {

std::vector<Translation> greedy_decode(const SearchModel& translation_model,
                                       const std::vector<std::vector<std::string>>& sources,
                                       const DecodeOptions& options, const std::vector<std::vector<int64_t>>* forced) {
    const auto device = translation_model.device();
    const Vocab& tgt_vocab = translation_model.tgt_vocab();
    EncoderDecoder& model = translation_model.network();
    auto decode_chunk = [&](const std::vector<size_t>& rows, const SourceBatch& batch, std::vector<Translation>& results) {
        const int64_t B = static_cast<int64_t>(rows.size());
        // Given tokens per row (forced decoding); a reference ends with <eos>, so its row ends there.
        std::vector<const std::vector<int64_t>*> given(rows.size(), nullptr);
        int64_t max_steps = options.max_length;
        if (forced)
            for (size_t i = 0; i < rows.size(); ++i) {
                given[i] = &(*forced)[rows[i]];
                max_steps = std::max<int64_t>(max_steps, static_cast<int64_t>(given[i]->size()) + 1);
            }
        // The heap's free pages go back when the resident memory passes what the chunk was
        // planned to take, counted from before its encoding (the plan includes it): the cache's
        // blocks grow at every step (core/io/process_memory.hpp).
        ResidentLimit resident(batch.planned_bytes);
        std::optional<PreferredThreads> encoding_threads(std::in_place, B);  // what the last search's steps found faster
        const auto enc = model.encode(batch.src, batch.src_len, options.maps == MapsKept::all);  // source maps when shown
        const auto cache = model.start(*enc);
        encoding_threads.reset();
        auto tokens = torch::full({B}, Vocab::bos_id, torch::TensorOptions().dtype(torch::kLong).device(device));
        std::vector<Hypothesis> hyps(rows.size());
        std::vector<bool> done(rows.size(), false);
        const auto lens = batch.lengths();
        // What-if: the steps attend as the intervention says (core/decode/intervene.hpp).
        std::unique_ptr<StepIntervener> intervener;
        if (options.intervention.active())
            intervener = std::make_unique<StepIntervener>(model, *enc, options.intervention, lens);
        // A few rows: the search's operations on this thread, as the steps', their large products on
        // helpers when steps ran faster so; more: the threads that ran the last steps faster
        // (core/model/small_linear.hpp)
        StepThreads threads(B);
        for (int64_t step = 0; step < max_steps; ++step) {
            threads.next_step();
            if (step > 0) resident.check();
            const AttentionIntervention* changed = intervener ? intervener->before_step(step, tokens, *cache) : nullptr;
            auto out = model.step(tokens, *cache, *enc, changed);
            if (changed) intervener->check_step(out);
            std::vector<std::vector<int64_t>> histories;
            if (options.generation.reads_histories())
                for (const auto& h : hyps) histories.push_back(h.ids);
            if (options.generation.repetition_penalty != 1.0) {  // on the logits, as generate()'s greedy search
                out.logits = out.logits.contiguous();
                apply_repetition_penalty(out.logits, options.generation, histories);
            }
            auto logp = output_log_probs(std::move(out.logits));
            if (options.generation.masks())
                apply_generation_rules(logp, options.generation, step, options.max_length - 1, histories);
            auto chosen = std::get<1>(logp.max(-1));
            bool any_given = false;
            if (forced) {
                auto ids_cpu = chosen.to(torch::kCPU).contiguous();
                auto* p = ids_cpu.data_ptr<int64_t>();
                for (int64_t i = 0; i < B; ++i)
                    if (static_cast<size_t>(step) < given[i]->size()) {
                        p[i] = (*given[i])[step];
                        any_given = true;
                    }
                chosen = ids_cpu.to(device);
            }
            auto chosen_lp = logp.gather(1, chosen.unsqueeze(1));  // [B, 1]
            auto lp_t = chosen_lp.squeeze(1).to(torch::kCPU);
            // Rank of each chosen token: how many tokens the model found more probable (0 unless given).
            auto rank_t = any_given ? logp.gt(chosen_lp).sum(-1).to(torch::kCPU) : torch::zeros({B}, torch::kLong);
            auto ids_t = chosen.to(torch::kCPU);
            auto cn_t = out.context.norm(2, -1).to(torch::kCPU, torch::kFloat);  // float whatever the model computes in
            auto ids = ids_t.accessor<int64_t, 1>();
            auto lp = lp_t.accessor<float, 1>();
            auto rk = rank_t.accessor<int64_t, 1>();
            auto cn = cn_t.accessor<float, 1>();
            const HostStepMaps maps = maps_to_host(out.maps, options.maps);
            const StepTopK top = step_top_k(logp, options.top_k);
            bool all_done = true;
            for (int64_t i = 0; i < B; ++i) {
                if (done[i]) continue;
                auto& h = hyps[i];
                append_token(h, ids[i], lp[i], rk[i], given[i] && static_cast<size_t>(step) < given[i]->size());
                h.context_norm.push_back(cn[i]);
                append_attention_rows(h, maps, i, lens[i]);
                if (top.k > 0) h.top_k.push_back(top.row(i, tgt_vocab));
                if (ids[i] == Vocab::eos_id || (given[i] && !given[i]->empty() && given[i]->back() == Vocab::eos_id &&
                                                static_cast<size_t>(step + 1) == given[i]->size()))
                    done[i] = true;
                if (!given[i] || static_cast<size_t>(step + 1) >= given[i]->size())
                    if (static_cast<int64_t>(h.ids.size()) >= std::max<int64_t>(options.max_length, h.forced_steps + 1))
                        done[i] = true;
                all_done = all_done && done[i];
            }
            if (all_done) break;
            tokens = chosen;
        }
        for (size_t i = 0; i < rows.size(); ++i) {
            auto& h = hyps[i];
            h.score = h.log_prob;
            add_source_maps(h, *enc, static_cast<int64_t>(i), lens[i], options.maps);
            finish_hypothesis(h, tgt_vocab, translation_model.level());
            results[rows[i]].hypotheses.push_back(std::move(h));
        }
    };
    return decode_in_batches(translation_model, sources, options, decode_chunk, longest_decode(options, forced));
}

}  // namespace attnviz
