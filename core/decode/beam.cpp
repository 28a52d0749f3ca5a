// Beam search, batched over sentences. Every hypothesis keeps its own
// attention rows, raw scores, context norms, per-step log-probabilities, ranks
// and top-k candidates, so the GUI can show the heatmap of any beam, not only
// the best; on request the whole search is kept as a BeamTree. During the
// search a hypothesis is a chain of links into per-step host tensors; only
// the returned ones are built, so nothing is copied per candidate.
//
// Scoring: a finished hypothesis of n tokens (its <eos> included) with summed
// log-probability log P is ranked by log P / n^alpha, alpha =
// DecodeOptions::length_penalty (0: plain log P; 1: mean log-probability per
// token). At each step the 2K best extensions of the K live beams are walked
// in order: an <eos> extension is set aside as finished, the others fill the K
// new beams (the rest are pruned). A sentence is done once K hypotheses have
// finished; at the length limit its live beams are finished as they are
// (without <eos>). Prefix decoding gives the prefix's tokens to the first beam,
// one per step, before the search proper starts.
//
// A pretrained model searches as transformers' generate() does (GenerationRules::
// transformers_search): of the 2K best extensions only the first K may finish (an <eos>
// further down is passed over), the best K finished hypotheses are kept by log P /
// length^alpha, and a sentence stops when early_stopping says -- by default once K have
// finished and no live beam, at its present length, could beat the worst of them. At the
// length limit the first K extensions finish as they are.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "core/decode/beam.hpp"

#include "core/decode/beam_candidates.hpp"
#include "core/decode/beam_tree.hpp"
#include "core/io/process_memory.hpp"
#include "core/model/small_linear.hpp"

namespace attnviz {

namespace {
constexpr float k_neg_inf = -std::numeric_limits<float>::infinity();

double normalized(double log_prob, size_t length, double alpha) {
    if (alpha == 0.0 || length == 0) return log_prob;
    return log_prob / std::pow(static_cast<double>(length), alpha);
}

/// One token the search took (kept or finished), linked to the token before it: a
/// hypothesis is a chain of links, built into a Hypothesis only when it is returned.
struct Link {
    int64_t prev = -1;     ///< the link before it (-1: the first token)
    int64_t step = 0, slot = 0, token = 0, rank = 0;
    float log_prob = 0.f;  ///< of the token at its step
    double total = 0.0;    ///< the hypothesis' log P, summed in the order append_token sums it
    bool given = false;
    int64_t node = -1;     ///< its tree node (-1: no tree)
};

/// A finished hypothesis: its last link and its score.
struct Finished {
    int64_t link = -1;
    double score = 0.0;
};

/// One step's candidates on the host: per sentence C = min(2K, K*V) extensions,
/// best first, as flat indices slot_in_sentence * V + token into [K, V].
struct StepOnHost {
    torch::Tensor total, index, step_lp, rank;  ///< [B, C]: cumulative log P, index, token log P, token rank
    torch::Tensor context_norm;                 ///< [B*K]
    HostStepMaps maps;                          ///< each [B*K, keys] (with attention only)
    StepTopK top_k;                             ///< [B*K, top_k]
};

/// The beam search of one chunk of sentences.
class BeamChunk {
public:
    BeamChunk(const SearchModel& tm, const DecodeOptions& o, const SourceBatch& batch,
              std::vector<const std::vector<int64_t>*> given)
        : m_tm(tm), m_o(o), m_model(tm.network()), m_device(tm.device()), m_K(o.beam_size),
          m_V(m_model.config().tgt_vocab), m_B(batch.src.size(0)), m_lens(batch.lengths()), m_given(std::move(given)),
          m_live(static_cast<size_t>(m_B * m_K), -1), m_finished(static_cast<size_t>(m_B)),
          m_done(static_cast<size_t>(m_B), false), m_hf(o.generation.transformers_search),
          m_resident(batch.planned_bytes) {
        const int64_t K = m_K, B = m_B;
        {
            // On the threads the last search's steps found faster (core/model/small_linear.hpp).
            const PreferredThreads threads(B * K);
            // Each sentence's encoding K times, one per beam.
            m_enc = m_model.encode(batch.src, batch.src_len, o.maps == MapsKept::all)
                        ->select(torch::arange(B, torch::kLong).repeat_interleave(K).to(m_device));
            m_cache = m_model.start(*m_enc);
        }
        m_tokens = torch::full({B * K}, Vocab::bos_id, torch::kLong).to(m_device);
        // Only the first beam of each sentence is live at the start.
        m_beam_logp.assign(static_cast<size_t>(B * K), k_neg_inf);
        for (int64_t b = 0; b < B; ++b) m_beam_logp[static_cast<size_t>(b * K)] = 0.f;
        if (o.beam_tree) m_trees.resize(static_cast<size_t>(B));
    }

    /// Searches until every sentence is done or has reached its length limit.
    void run() {
        int64_t max_steps = 0;
        for (int64_t b = 0; b < m_B; ++b) max_steps = std::max(max_steps, limit(b));
        // A few rows (batch 1, 4 beams): the search's own operations on this thread too, as the
        // steps' (core/model/small_linear.hpp): its log-softmax, sums and selections over
        // [rows, vocabulary] otherwise each ran an OpenMP region.
        // More rows (batch 32 at beam 4): the threads that ran the last steps faster.
        StepThreads threads(m_B * m_K);
        for (int64_t step = 0; step < max_steps; ++step) {
            threads.next_step();
            if (!advance(step)) break;
            m_resident.check();
        }
    }

    /// Moves the results of sentence b into t (and its tree, when recorded).
    void deliver(int64_t b, Translation& t) {
        auto& fin = m_finished[static_cast<size_t>(b)];
        std::stable_sort(fin.begin(), fin.end(), [](const Finished& x, const Finished& y) { return x.score > y.score; });
        for (size_t i = 0; i < fin.size() && static_cast<int64_t>(i) < m_o.num_hypotheses; ++i) {
            Hypothesis h = hypothesis(fin[i].link, b);
            h.score = fin[i].score;
            add_source_maps(h, *m_enc, b * m_K, m_lens[static_cast<size_t>(b)], m_o.maps);
            finish_hypothesis(h, m_tm.tgt_vocab(), m_tm.level());
            t.hypotheses.push_back(std::move(h));
        }
        if (m_trees.empty()) return;
        BeamTree& tree = m_trees[static_cast<size_t>(b)];
        tree.source = t.src_tokens;
        tree.level = m_tm.level();
        tree.beam_size = m_K;
        tree.num_hypotheses = m_o.num_hypotheses;
        tree.length_penalty = m_o.length_penalty;
        tree.attention_available = t.attention_available;
        if (!m_steps.empty() && !m_steps.front().maps.empty()) tree.attention_map = m_steps.front().maps.ids.front();
        for (const auto& f : fin) tree.finished.push_back(m_links[static_cast<size_t>(f.link)].node);
        t.beam_tree = std::make_shared<const BeamTree>(std::move(tree));
    }

private:
    const std::vector<int64_t>* given(int64_t b) const { return m_given.empty() ? nullptr : m_given[static_cast<size_t>(b)]; }
    bool forced_at(int64_t b, int64_t step) const {
        return given(b) && step < static_cast<int64_t>(given(b)->size());
    }
    /// Output tokens sentence b may have: max_length, stretched to hold a prefix and one more token.
    int64_t limit(int64_t b) const {
        return given(b) ? std::max<int64_t>(m_o.max_length, static_cast<int64_t>(given(b)->size()) + 1) : m_o.max_length;
    }

    /// The hypothesis ending with `link`, as Translation returns it (its score is the caller's).
    Hypothesis hypothesis(int64_t link, int64_t b) const {
        std::vector<const Link*> chain;
        for (int64_t at = link; at >= 0; at = m_links[static_cast<size_t>(at)].prev) chain.push_back(&m_links[static_cast<size_t>(at)]);
        Hypothesis h;
        for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
            const Link& l = **it;
            const StepOnHost& s = m_steps[static_cast<size_t>(l.step)];
            append_token(h, l.token, l.log_prob, l.rank, l.given);
            h.context_norm.push_back(s.context_norm.data_ptr<float>()[l.slot]);
            append_attention_rows(h, s.maps, l.slot, m_lens[static_cast<size_t>(b)]);
            if (s.top_k.k > 0) h.top_k.push_back(s.top_k.row(l.slot, m_tm.tgt_vocab()));
        }
        return h;
    }

    /// The cumulative log P of the hypothesis ending with `link` (0 before the first token).
    double total_of(int64_t link) const { return link < 0 ? 0.0 : m_links[static_cast<size_t>(link)].total; }

    /// One step for every sentence; false once all are done.
    bool advance(int64_t step) {
        const int64_t B = m_B, K = m_K;
        m_steps.push_back(step_on_host(step));
        compact(m_steps.back());
        const StepOnHost& s = m_steps.back();
        std::vector<float> next_logp(static_cast<size_t>(B * K), k_neg_inf);
        std::vector<int64_t> parent(static_cast<size_t>(B * K), 0), next_tok(static_cast<size_t>(B * K), Vocab::eos_id);
        std::vector<int64_t> next_live(static_cast<size_t>(B * K), -1);
        auto total = s.total.accessor<float, 2>();
        auto index = s.index.accessor<int64_t, 2>();
        auto step_lp = s.step_lp.accessor<float, 2>();
        auto rank = s.rank.accessor<int64_t, 2>();
        for (int64_t b = 0; b < B; ++b) {
            for (int64_t k = 0; k < K; ++k) parent[static_cast<size_t>(b * K + k)] = b * K;
            if (m_done[static_cast<size_t>(b)]) continue;
            const bool given_now = forced_at(b, step);
            if (m_hf && !given_now) {
                advance_transformers(b, step, s, next_logp, parent, next_tok, next_live);
                continue;
            }
            const int64_t candidates = given_now ? 1 : s.total.size(1);
            int64_t filled = 0;
            for (int64_t j = 0; j < candidates; ++j) {
                if (total[b][j] == k_neg_inf) break;
                const int64_t slot = b * K + index[b][j] / m_V, tok = index[b][j] % m_V;
                const bool eos = tok == Vocab::eos_id;
                if (filled == K) {  // the beams are full: what is left was looked at, not taken
                    if (m_trees.empty()) break;
                    record(b, slot, j, tok, step_lp[b][j], rank[b][j], BeamNode::Status::pruned, false, s, step);
                    continue;
                }
                Link l;
                l.prev = m_live[static_cast<size_t>(slot)];
                l.step = step, l.slot = slot, l.token = tok, l.rank = rank[b][j], l.log_prob = step_lp[b][j];
                l.total = total_of(l.prev) + l.log_prob;
                l.given = given_now;
                l.node = record(b, slot, j, tok, step_lp[b][j], rank[b][j],
                                eos ? BeamNode::Status::finished : BeamNode::Status::kept, given_now, s, step);
                m_links.push_back(l);
                const auto id = static_cast<int64_t>(m_links.size()) - 1;
                if (eos) {
                    m_finished[static_cast<size_t>(b)].push_back({id, normalized(l.total, static_cast<size_t>(step + 1), m_o.length_penalty)});
                    continue;
                }
                const auto dst = static_cast<size_t>(b * K + filled);
                next_logp[dst] = total[b][j];
                parent[dst] = slot;
                next_tok[dst] = tok;
                next_live[dst] = id;
                ++filled;
            }
            if (static_cast<int64_t>(m_finished[static_cast<size_t>(b)].size()) >= K || filled == 0) {
                m_done[static_cast<size_t>(b)] = true;
            } else if (step + 1 >= limit(b)) {  // the length limit: the live beams finish as they are
                for (int64_t k = 0; k < filled; ++k) {
                    const int64_t id = next_live[static_cast<size_t>(b * K + k)];
                    const Link& l = m_links[static_cast<size_t>(id)];
                    if (l.node >= 0)
                        m_trees[static_cast<size_t>(b)].nodes[static_cast<size_t>(l.node)].status = BeamNode::Status::finished;
                    m_finished[static_cast<size_t>(b)].push_back({id, normalized(l.total, static_cast<size_t>(step + 1), m_o.length_penalty)});
                }
                m_done[static_cast<size_t>(b)] = true;
            }
        }
        m_live = std::move(next_live);
        m_beam_logp = std::move(next_logp);
        if (std::all_of(m_done.begin(), m_done.end(), [](bool d) { return d; })) return false;
        m_cache->select(torch::tensor(parent, torch::kLong).to(m_device));
        m_tokens = torch::tensor(next_tok, torch::kLong).to(m_device);
        return true;
    }

    /// One step of sentence b as transformers' _beam_search takes it (the file's comment).
    void advance_transformers(int64_t b, int64_t step, const StepOnHost& s, std::vector<float>& next_logp,
                              std::vector<int64_t>& parent, std::vector<int64_t>& next_tok, std::vector<int64_t>& next_live) {
        const int64_t K = m_K;
        auto total = s.total.accessor<float, 2>();
        auto index = s.index.accessor<int64_t, 2>();
        auto step_lp = s.step_lp.accessor<float, 2>();
        auto rank = s.rank.accessor<int64_t, 2>();
        auto& fin = m_finished[static_cast<size_t>(b)];
        const bool last = step + 1 >= limit(b);  // every extension hits the length limit
        const int stopping = m_o.generation.early_stopping;
        // New finished hypotheses are taken while the sentence may still improve (and, with
        // early_stopping true, while it has fewer than K).
        const bool may_finish = !(stopping == 1 && static_cast<int64_t>(fin.size()) >= K);
        std::vector<Finished> fresh;
        int64_t filled = 0;
        for (int64_t j = 0; j < s.total.size(1); ++j) {
            if (total[b][j] == k_neg_inf) break;
            const int64_t slot = b * K + index[b][j] / m_V, tok = index[b][j] % m_V;
            const bool hits = tok == Vocab::eos_id || last;
            const bool taken = hits ? j < K && may_finish : filled < K;
            if (!taken) {
                if (!m_trees.empty()) record(b, slot, j, tok, step_lp[b][j], rank[b][j], BeamNode::Status::pruned, false, s, step);
                continue;
            }
            Link l;
            l.prev = m_live[static_cast<size_t>(slot)];
            l.step = step, l.slot = slot, l.token = tok, l.rank = rank[b][j], l.log_prob = step_lp[b][j];
            l.total = total_of(l.prev) + l.log_prob;
            l.node = record(b, slot, j, tok, step_lp[b][j], rank[b][j],
                            hits ? BeamNode::Status::finished : BeamNode::Status::kept, false, s, step);
            m_links.push_back(l);
            const auto id = static_cast<int64_t>(m_links.size()) - 1;
            if (hits) {
                // transformers scores the search's own running sum (the float totals).
                fresh.push_back({id, hf_normalized(total[b][j], step + 1)});
                continue;
            }
            const auto dst = static_cast<size_t>(b * K + filled);
            next_logp[dst] = total[b][j];
            parent[dst] = slot;
            next_tok[dst] = tok;
            next_live[dst] = id;
            ++filled;
        }
        // The K best of those finished before and the new ones (earlier ones first on a tie).
        fin.insert(fin.end(), fresh.begin(), fresh.end());
        std::stable_sort(fin.begin(), fin.end(), [](const Finished& x, const Finished& y) { return x.score > y.score; });
        if (static_cast<int64_t>(fin.size()) > K) {
            for (size_t i = static_cast<size_t>(K); i < fin.size(); ++i) prune_finished(b, fin[i].link);
            fin.resize(static_cast<size_t>(K));
        }
        // _check_early_stop_heuristic: with K finished, can the best live beam still beat the worst?
        bool improvable = true;
        if (static_cast<int64_t>(fin.size()) >= K) {
            const double best_running = filled > 0 ? next_logp[static_cast<size_t>(b * K)] : -1.0e9;
            const double length = stopping == 2 && m_o.length_penalty > 0 ? static_cast<double>(limit(b))
                                                                          : static_cast<double>(step + 1);
            improvable = static_cast<float>(best_running) / static_cast<float>(std::pow(length, m_o.length_penalty)) >
                         static_cast<float>(fin.back().score);
        }
        if (last || filled == 0 || (stopping == 1 && static_cast<int64_t>(fin.size()) >= K) || (stopping != 2 && !improvable))
            m_done[static_cast<size_t>(b)] = true;
    }

    /// transformers' score of a finished hypothesis: its float sum over length^alpha, in float.
    double hf_normalized(float total, int64_t length) const {
        return static_cast<float>(total / static_cast<float>(std::pow(static_cast<double>(length), m_o.length_penalty)));
    }

    /// A finished hypothesis that dropped out of the K best: its tree node says so.
    void prune_finished(int64_t b, int64_t link) {
        const int64_t node = m_links[static_cast<size_t>(link)].node;
        if (node >= 0) m_trees[static_cast<size_t>(b)].nodes[static_cast<size_t>(node)].status = BeamNode::Status::pruned;
    }

    /// The output ids of the hypothesis ending with `link`, in order (for the n-gram rules).
    std::vector<int64_t> history(int64_t link) const {
        std::vector<int64_t> ids;
        for (int64_t at = link; at >= 0; at = m_links[static_cast<size_t>(at)].prev) ids.push_back(m_links[static_cast<size_t>(at)].token);
        std::reverse(ids.begin(), ids.end());
        return ids;
    }

    /// Runs the decoder one step and brings the candidates (and what the hypotheses record) to the host.
    StepOnHost step_on_host(int64_t step) {
        const int64_t B = m_B, K = m_K, V = m_V;
        auto out = m_model.step(m_tokens, *m_cache, *m_enc);
        auto logp = output_log_probs(std::move(out.logits));  // [B*K, V], over the step's logits
        if (m_o.generation.masks()) {
            std::vector<std::vector<int64_t>> histories;
            if (m_o.generation.reads_histories())
                for (int64_t r = 0; r < B * K; ++r) histories.push_back(history(m_live[static_cast<size_t>(r)]));
            apply_repetition_penalty(logp, m_o.generation, histories);  // on the log-probabilities, as generate()'s beams
            apply_generation_rules(logp, m_o.generation, step, m_o.max_length - 1, histories);
        }
        // Prefix decoding: a given token is the only candidate of its sentence (the first beam's).
        bool any_given = false;
        for (int64_t b = 0; b < B && !any_given; ++b) any_given = forced_at(b, step) && !m_done[static_cast<size_t>(b)];
        StepOnHost s;
        // The candidates read straight from logp on the CPU (core/decode/beam_candidates.hpp);
        // torch's topk over the totals where ties leave the order to it, on a GPU, with a prefix.
        std::optional<BestExtensions> best;
        if (!any_given) best = best_extensions(logp, m_beam_logp, K);
        if (best) {
            s.total = std::move(best->total);
            s.index = std::move(best->index);
            s.step_lp = std::move(best->step_lp);
        } else {
            auto prev = torch::from_blob(m_beam_logp.data(), {B * K, 1}, torch::kFloat).to(m_device);
            auto flat_logp = logp.view({B, K * V});
            auto total = (logp + prev).view({B, K * V});
            auto index = std::get<1>(total.topk(std::min<int64_t>(2 * K, K * V), 1));
            if (any_given) {
                auto idx = index.to(torch::kCPU).contiguous();
                auto ia = idx.accessor<int64_t, 2>();
                for (int64_t b = 0; b < B; ++b)
                    if (forced_at(b, step)) ia[b][0] = (*given(b))[static_cast<size_t>(step)];
                index = idx.to(m_device);
            }
            s.total = total.gather(1, index).to(torch::kCPU).contiguous();
            s.index = index.to(torch::kCPU).contiguous();
            s.step_lp = flat_logp.gather(1, index).to(torch::kCPU).contiguous();  // [B, C]
        }
        s.rank = ranks(s, logp, step);
        s.context_norm = out.context.norm(2, -1).to(torch::kCPU, torch::kFloat).contiguous();
        s.maps = maps_to_host(out.maps, m_o.maps, m_o.beam_tree);
        s.top_k = step_top_k(logp, m_o.top_k);
        return s;
    }

    /// What the search keeps of a step until it ends (its candidates, the maps), copied once the
    /// step's transient tensors are freed. Kept as the step made them, each sat above the step's
    /// large transient blocks in the heap, and every step left a hole there that the next step's
    /// blocks did not fit: the resident memory grew by about the transient size per step (an RNN
    /// beam of 8 over 400 positions: 800 MB where 35 MB were in use). Copied now, they take the
    /// bottom of the freed space and the blocks they came from rejoin it.
    static void compact(StepOnHost& s) {
        auto copy = [](torch::Tensor& t) {
            if (t.defined()) t = t.clone();
        };
        for (torch::Tensor* t : {&s.total, &s.index, &s.step_lp, &s.rank, &s.context_norm, &s.top_k.prob, &s.top_k.ids})
            copy(*t);
        for (auto& w : s.maps.weights) copy(w);
        for (auto& c : s.maps.scores) copy(c);
    }

    /// Each candidate's rank among all tokens of its beam: how many are more probable. A more
    /// probable token u of the same beam has a total at least as high, so it is a candidate
    /// too unless its total ties the last candidate's: count among the candidates, and count
    /// over the beam's whole row only for given tokens and for totals equal to the last one.
    torch::Tensor ranks(const StepOnHost& s, const torch::Tensor& logp, int64_t step) const {
        const int64_t C = s.total.size(1);
        auto rank_t = torch::zeros({m_B, C}, torch::kLong);
        auto rank = rank_t.accessor<int64_t, 2>();
        auto total = s.total.accessor<float, 2>();
        auto index = s.index.accessor<int64_t, 2>();
        auto lp = s.step_lp.accessor<float, 2>();
        std::vector<int64_t> rows, at;  // counted on the whole row: the beam, and b * C + j
        std::vector<float> row_lp;
        for (int64_t b = 0; b < m_B; ++b) {
            if (m_done[static_cast<size_t>(b)]) continue;
            const bool given_now = forced_at(b, step);
            for (int64_t j = 0; j < (given_now ? 1 : C); ++j) {
                if (total[b][j] == k_neg_inf && !given_now) break;
                const int64_t beam = index[b][j] / m_V;
                if (given_now || total[b][j] == total[b][C - 1]) {
                    rows.push_back(b * m_K + beam), at.push_back(b * C + j), row_lp.push_back(lp[b][j]);
                    continue;
                }
                for (int64_t i = 0; i < C; ++i) rank[b][j] += index[b][i] / m_V == beam && lp[b][i] > lp[b][j];
            }
        }
        if (rows.empty()) return rank_t;
        if (logp.device().is_cpu() && logp.scalar_type() == torch::kFloat && logp.is_contiguous()) {
            const float* lp_rows = logp.data_ptr<float>();
            for (size_t i = 0; i < at.size(); ++i)
                rank_t.data_ptr<int64_t>()[at[i]] = count_greater(lp_rows + rows[i] * m_V, m_V, row_lp[i]);
            return rank_t;
        }
        auto rows_t = torch::tensor(rows, torch::kLong).to(m_device);
        auto lp_t = torch::tensor(row_lp, torch::kFloat).to(m_device).unsqueeze(1);
        auto counted = logp.index_select(0, rows_t).gt(lp_t).sum(1).to(torch::kCPU).contiguous();
        for (size_t i = 0; i < at.size(); ++i) rank_t.data_ptr<int64_t>()[at[i]] = counted.data_ptr<int64_t>()[i];
        return rank_t;
    }

    /// Adds candidate j of sentence b to its tree; returns the node id (-1 when no tree is recorded).
    int64_t record(int64_t b, int64_t slot, int64_t j, int64_t tok, float lp, int64_t token_rank,
                   BeamNode::Status status, bool forced, const StepOnHost& s, int64_t step) {
        if (m_trees.empty()) return -1;
        auto& nodes = m_trees[static_cast<size_t>(b)].nodes;
        const int64_t prev = m_live[static_cast<size_t>(slot)];
        BeamNode n;
        n.id = static_cast<int64_t>(nodes.size());
        n.parent = prev < 0 ? -1 : m_links[static_cast<size_t>(prev)].node;
        n.step = step;
        n.token_id = tok;
        n.token = m_tm.tgt_vocab().token(tok);
        n.token_log_prob = lp;
        n.log_prob = total_of(prev) + lp;  // as append_token sums it
        n.score = normalized(n.log_prob, static_cast<size_t>(step + 1), m_o.length_penalty);
        n.status = status;
        n.rank = j;
        n.token_rank = token_rank;
        n.forced = forced;
        n.attention = s.maps.primary_row(slot, m_lens[static_cast<size_t>(b)]);
        nodes.push_back(std::move(n));
        return nodes.back().id;
    }

    const SearchModel& m_tm;
    const DecodeOptions& m_o;
    EncoderDecoder& m_model;
    torch::Device m_device;
    const int64_t m_K, m_V, m_B;
    std::vector<int64_t> m_lens;
    std::vector<const std::vector<int64_t>*> m_given;  ///< per sentence; empty without prefixes
    std::shared_ptr<const EncodedSource> m_enc;  ///< [B*K]: each sentence's encoding once per beam
    std::unique_ptr<DecoderCache> m_cache;
    torch::Tensor m_tokens;
    std::vector<float> m_beam_logp;       ///< [B*K] cumulative log P of the live beams (-inf: none)
    std::vector<int64_t> m_live;          ///< [B*K] the last link of each live beam (-1: none, or <bos>)
    std::vector<Link> m_links;            ///< every token taken so far
    std::vector<StepOnHost> m_steps;      ///< per step: what the links' hypotheses record
    std::vector<std::vector<Finished>> m_finished;
    std::vector<bool> m_done;
    const bool m_hf;                      ///< transformers' search (GenerationRules::transformers_search)
    std::vector<BeamTree> m_trees;        ///< per sentence; empty unless recording
    /// Step by step the cache grows and is reordered: the heap's free pages go back when the
    /// resident memory passes what the chunk was planned to take (SourceBatch::planned_bytes),
    /// counted from before the encoding the constructor runs, which the plan includes
    /// (core/io/process_memory.hpp).
    ResidentLimit m_resident;
};

}  // namespace

std::vector<Translation> beam_decode(const SearchModel& model, const std::vector<std::vector<std::string>>& sources,
                                     const DecodeOptions& options, const std::vector<std::vector<int64_t>>* forced) {
    auto decode_chunk = [&](const std::vector<size_t>& rows, const SourceBatch& batch, std::vector<Translation>& results) {
        std::vector<const std::vector<int64_t>*> given;
        if (forced)
            for (size_t r : rows) given.push_back(&(*forced)[r]);
        BeamChunk search(model, options, batch, std::move(given));
        search.run();
        for (size_t i = 0; i < rows.size(); ++i) search.deliver(static_cast<int64_t>(i), results[rows[i]]);
    };
    return decode_in_batches(model, sources, options, decode_chunk, longest_decode(options, forced));
}

}  // namespace attnviz
