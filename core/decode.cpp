// Greedy decoding, batched over sentences, recording each step's attention.
#include "core/decode.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/decode_util.hpp"
#include "core/error.hpp"

namespace attnviz {

nlohmann::json DecodeOptions::to_json() const {
    return {{"max_length", max_length},
            {"beam_size", beam_size},
            {"num_hypotheses", num_hypotheses},
            {"length_penalty", length_penalty},
            {"batch_size", batch_size},
            {"normalize_input", normalize_input},
            {"top_k", top_k},
            {"beam_tree", beam_tree}};
}

void validate_decode_options(const DecodeOptions& o) {
    if (o.max_length < 1 || o.max_length > max_decode_length)
        throw ConfigError("decode: max length must be in 1.." + std::to_string(max_decode_length));
    if (o.beam_size < 1 || o.beam_size > 100) throw ConfigError("decode: beam size must be in 1..100");
    if (o.num_hypotheses < 1 || o.num_hypotheses > o.beam_size)
        throw ConfigError("decode: number of hypotheses must be in 1..beam size");
    if (o.batch_size < 1) throw ConfigError("decode: batch size must be at least 1");
    if (o.length_penalty < 0) throw ConfigError("decode: length penalty must be >= 0");
    if (o.top_k < 0 || o.top_k > 100) throw ConfigError("decode: top-k must be in 0..100");
}

std::vector<std::string> prepare_source(const std::string& sentence, TokenLevel level, bool normalize_text) {
    if (level == TokenLevel::word) return tokenize_words(normalize_text ? normalize(sentence) : sentence);
    return tokenize_chars(normalize_text ? lowercase_ascii(sentence) : sentence);
}

std::string lowercase_ascii(const std::string& sentence) {
    // Character-level tasks are lower-case with single spaces; punctuation stays where it is.
    std::string out;
    for (char ch : sentence) {
        const char c = (ch >= 'A' && ch <= 'Z') ? static_cast<char>(ch - 'A' + 'a') : ch;
        if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
        out += c;
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
}

SourceBatch encode_sources(const std::vector<std::vector<std::string>>& sources, const std::vector<size_t>& rows,
                           const Vocab& src_vocab, const torch::Device& device, int64_t source_steps) {
    SourceBatch b;
    int64_t S = 1;
    for (size_t r : rows) S = std::max<int64_t>(S, static_cast<int64_t>(sources[r].size()) + 1);
    if (source_steps > 0) S = source_steps;
    auto src = torch::full({static_cast<int64_t>(rows.size()), S}, Vocab::pad_id, torch::kLong);
    auto len = torch::empty({static_cast<int64_t>(rows.size())}, torch::kLong);
    auto sa = src.accessor<int64_t, 2>();
    for (size_t i = 0; i < rows.size(); ++i) {
        const auto& toks = sources[rows[i]];
        const auto n = std::min<int64_t>(S, static_cast<int64_t>(toks.size()) + 1);  // with <eos>, cut to S
        for (int64_t j = 0; j < n; ++j)
            sa[i][j] = j < static_cast<int64_t>(toks.size()) ? src_vocab.id(toks[static_cast<size_t>(j)]) : Vocab::eos_id;
        len[i] = n;
    }
    b.src = src.to(device);
    b.src_len = len.to(device);
    return b;
}

Translation make_translation_shell(const std::vector<std::string>& source, const Vocab& src_vocab,
                                   bool attention_available, int64_t source_steps) {
    Translation t;
    t.attention_available = attention_available;
    if (source.empty()) return t;
    // A model with source_steps reads only the first N tokens, <eos> included (as encode_sources cuts).
    size_t n = source.size() + 1;
    if (source_steps > 0) n = std::min(n, static_cast<size_t>(source_steps));
    for (size_t i = 0; i < n && i < source.size(); ++i) {
        const auto& tok = source[i];
        if (src_vocab.contains(tok)) {
            t.src_tokens.push_back(tok);
        } else {
            t.src_tokens.push_back(Vocab::unk_token);
            t.unknown.push_back(tok);
        }
    }
    if (n > source.size()) t.src_tokens.push_back(Vocab::eos_token);
    return t;
}

void finish_hypothesis(Hypothesis& h, const Vocab& tgt_vocab, TokenLevel level) {
    for (auto id : h.ids) h.tokens.push_back(tgt_vocab.token(id));
    std::vector<std::string> words;
    for (size_t i = 0; i < h.ids.size() && h.ids[i] != Vocab::eos_id; ++i) words.push_back(h.tokens[i]);
    h.text = detokenize(words, level);
}

std::vector<Translation> decode_in_batches(const TranslationModel& model,
                                           const std::vector<std::vector<std::string>>& sources,
                                           const DecodeOptions& options, const ChunkDecoder& decode_chunk) {
    validate_decode_options(options);
    const bool has_attention = model.has_attention();
    const Vocab& src_vocab = model.src_vocab();
    std::vector<Translation> results;
    results.reserve(sources.size());
    const int64_t source_steps = model.config().source_steps;
    for (const auto& s : sources) results.push_back(make_translation_shell(s, src_vocab, has_attention, source_steps));
    std::vector<size_t> todo;  // empty inputs stay empty translations
    for (size_t i = 0; i < sources.size(); ++i)
        if (!sources[i].empty()) todo.push_back(i);
    if (todo.empty()) return results;

    torch::InferenceMode guard;
    const auto device = model.device();
    const auto chunk = static_cast<size_t>(options.batch_size);
    for (size_t start = 0; start < todo.size(); start += chunk) {
        std::vector<size_t> rows(todo.begin() + start, todo.begin() + std::min(todo.size(), start + chunk));
        decode_chunk(rows, encode_sources(sources, rows, src_vocab, device, source_steps), results);
    }
    return results;
}

std::vector<Translation> greedy_decode(const TranslationModel& translation_model,
                                       const std::vector<std::vector<std::string>>& sources,
                                       const DecodeOptions& options, const std::vector<std::vector<int64_t>>* forced) {
    const bool has_attention = translation_model.has_attention();
    const auto device = translation_model.device();
    const Vocab& tgt_vocab = translation_model.tgt_vocab();
    Seq2Seq model = translation_model.network();
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
        auto enc = model->encode(batch.src, batch.src_len);
        auto state = model->init_state(enc);
        auto tokens = torch::full({B}, Vocab::bos_id, torch::TensorOptions().dtype(torch::kLong).device(device));
        std::vector<Hypothesis> hyps(rows.size());
        std::vector<bool> done(rows.size(), false);
        const auto lens = batch.lengths();
        for (int64_t step = 0; step < max_steps; ++step) {
            auto out = model->step(tokens, state, enc);
            auto logp = output_log_probs(out.logits);
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
            auto cn_t = out.context.norm(2, -1).to(torch::kCPU);
            auto ids = ids_t.accessor<int64_t, 1>();
            auto lp = lp_t.accessor<float, 1>();
            auto rk = rank_t.accessor<int64_t, 1>();
            auto cn = cn_t.accessor<float, 1>();
            torch::Tensor w_cpu, s_cpu;
            if (has_attention) {
                w_cpu = out.weights.to(torch::kCPU, torch::kFloat).contiguous();
                s_cpu = out.scores.to(torch::kCPU, torch::kFloat).contiguous();
            }
            const StepTopK top = step_top_k(logp, options.top_k);
            bool all_done = true;
            for (int64_t i = 0; i < B; ++i) {
                if (done[i]) continue;
                auto& h = hyps[i];
                append_token(h, ids[i], lp[i], rk[i], given[i] && static_cast<size_t>(step) < given[i]->size());
                h.context_norm.push_back(cn[i]);
                if (has_attention) append_attention_row(h, w_cpu, s_cpu, i, lens[i]);
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
            finish_hypothesis(h, tgt_vocab, translation_model.level());
            results[rows[i]].hypotheses.push_back(std::move(h));
        }
    };
    return decode_in_batches(translation_model, sources, options, decode_chunk);
}

}  // namespace attnviz

namespace attnviz {

std::vector<int64_t> SourceBatch::lengths() const {
    auto cpu = src_len.to(torch::kCPU).contiguous();
    return {cpu.data_ptr<int64_t>(), cpu.data_ptr<int64_t>() + cpu.numel()};
}

torch::Tensor output_log_probs(const torch::Tensor& logits) {
    auto never = torch::tensor({Vocab::pad_id, Vocab::bos_id}, torch::kLong).to(logits.device());
    return torch::log_softmax(logits.to(torch::kFloat), -1).index_fill_(1, never, -std::numeric_limits<float>::infinity());
}

StepTopK step_top_k(const torch::Tensor& log_probs, int64_t k) {
    if (std::min(k, log_probs.size(-1)) <= 0) return {};
    auto top = log_probs.topk(std::min(k, log_probs.size(-1)), -1);
    return step_top_k(std::get<0>(top), std::get<1>(top), k);
}

StepTopK step_top_k(const torch::Tensor& top_log_probs, const torch::Tensor& top_ids, int64_t k) {
    StepTopK t;
    t.k = std::min(k, top_log_probs.size(-1));
    if (t.k <= 0) return t;
    t.prob = top_log_probs.narrow(-1, 0, t.k).exp().to(torch::kCPU).contiguous();
    t.ids = top_ids.narrow(-1, 0, t.k).to(torch::kCPU).contiguous();
    return t;
}

std::vector<TokenProb> StepTopK::row(int64_t r, const Vocab& vocab) const {
    std::vector<TokenProb> cands;
    if (k <= 0) return cands;
    const float* p = prob.data_ptr<float>() + r * k;
    const int64_t* id = ids.data_ptr<int64_t>() + r * k;
    cands.reserve(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) cands.push_back({id[i], vocab.token(id[i]), p[i]});
    return cands;
}

void append_token(Hypothesis& h, int64_t id, float log_prob, int64_t rank, bool given) {
    h.ids.push_back(id);
    h.log_prob += log_prob;
    h.step_log_prob.push_back(log_prob);
    h.rank.push_back(rank);
    if (!given) return;
    ++h.forced_steps;
    if (rank > 0 && h.first_divergence < 0) h.first_divergence = static_cast<int64_t>(h.ids.size()) - 1;
}

void append_attention_row(Hypothesis& h, const torch::Tensor& weights, const torch::Tensor& scores, int64_t row,
                          int64_t n) {
    const float* w = weights.data_ptr<float>() + row * weights.stride(0);
    const float* s = scores.data_ptr<float>() + row * scores.stride(0);
    h.attention.emplace_back(w, w + n);
    h.raw_scores.emplace_back(s, s + n);
}

}  // namespace attnviz
