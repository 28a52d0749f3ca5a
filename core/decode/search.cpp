// What greedy and beam search share: batches of sources, the per-sentence frame,
// and a hypothesis' bookkeeping.
#include "core/decode/search.hpp"

#include <algorithm>
#include <limits>

#include "core/io/error.hpp"
#include "core/io/process_memory.hpp"

namespace attnviz {

torch::Device SearchModel::device() const {
    auto params = m_network->parameters();
    return params.empty() ? torch::Device(torch::kCPU) : params.front().device();
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

std::vector<Translation> decode_in_batches(const SearchModel& model,
                                           const std::vector<std::vector<std::string>>& sources,
                                           const DecodeOptions& options, const ChunkDecoder& decode_chunk,
                                           int64_t max_steps) {
    options.validate();
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

    // Chunks of sentences in order, each within the memory bound beside what the sentences
    // keep once decoded (core/model/memory_cost.hpp).
    const int64_t steps = std::max(max_steps, options.max_length);
    const DecodeCost cost = decode_cost(model.network(), options, steps);
    std::vector<int64_t> width(sources.size());
    for (size_t r = 0; r < sources.size(); ++r)
        width[r] = source_steps > 0 ? source_steps : static_cast<int64_t>(sources[r].size()) + 1;
    const int64_t bound = options.memory_bound > 0 ? options.memory_bound : memory_bound();
    // Shortest first, as CTranslate2 orders a file: a batch's sentences are about as long as each
    // other, so little of it is padding; each result still lands at its sentence's index.
    std::stable_sort(todo.begin(), todo.end(), [&](size_t a, size_t b) { return width[a] < width[b]; });
    const auto chunks =
        plan_decode_chunks(todo, width, options.batch_size, cost, bound, options.kept_copies, options.batch_tokens);

    torch::InferenceMode guard;
    const auto device = model.device();
    for (size_t c = 0; c < chunks.size(); ++c) {
        SourceBatch batch = encode_sources(sources, chunks[c], src_vocab, device, source_steps);
        int64_t widest = 1;
        for (size_t r : chunks[c]) widest = std::max(widest, width[r]);
        batch.planned_bytes = cost.resident_limit(static_cast<int64_t>(chunks[c].size()), widest);
        decode_chunk(chunks[c], batch, results);
        // Between chunks the heap's free pages go back: what one chunk freed and the next does
        // not reuse at once would add to the next one's peak (as between attribution's passes).
        if (c + 1 < chunks.size()) release_free_heap();
    }
    return results;
}

namespace {

/// The ATTNVIZ_MEMORY_BOUND value that would let `need` bytes through: whole GiB ("3G"), or MiB
/// below one GiB.
std::string bound_setting(int64_t need) {
    constexpr int64_t mib = int64_t{1} << 20, gib = int64_t{1} << 30;
    if (need >= gib) return std::to_string(need / gib + (need % gib ? 1 : 0)) + "G";
    return std::to_string(need / mib + 1) + "M";
}


/// A hypothesis's kept rows of the maps `keep` names, over T steps.
ShapeCost kept_rows(const MemoryCost& c, MapsKept keep) {
    switch (keep) {
    case MapsKept::all: return c.kept_primary + c.kept_cross + c.kept_decoder;
    case MapsKept::cross: return c.kept_primary + c.kept_cross;
    case MapsKept::primary: return c.kept_primary;
    case MapsKept::none: break;
    }
    return {};
}

/// A beam tree node (BeamNode: its token, scores, links) beside its attention row.
constexpr int64_t k_node_bytes = 160;
/// A top-k candidate kept per step (TokenProb: id, probability, the token's string).
constexpr int64_t k_candidate_bytes = 64;

}  // namespace

DecodeCost decode_cost(const EncoderDecoder& network, const DecodeOptions& options, int64_t steps) {
    const MemoryCost c = network.memory_cost();
    DecodeCost d;
    d.beam = std::max<int64_t>(options.beam_size, 1);
    d.steps = std::max<int64_t>(steps, 1);
    const ShapeCost rows = kept_rows(c, options.maps);
    // Per step a hypothesis keeps its token, log-probability, rank, context norm and top-k.
    ShapeCost per_step;
    per_step.t = 64 + k_candidate_bytes * std::max<int64_t>(options.top_k, 0);
    // The encoding holds the encoder's own maps only for a caller that shows every map.
    d.per_sentence = options.maps == MapsKept::all ? c.encoding + c.encoding_maps : c.encoding;
    // Greedy appends each step's rows to its hypotheses; beam search keeps each step's maps of
    // every hypothesis on the host (StepOnHost) until the search ends: alike, per hypothesis.
    d.per_hypothesis = c.step + rows + per_step;
    // The heap's free pages: every step copies the decoder's cache one position longer (and beam
    // search reorders it), and a freed block stays resident in the heap, too small for the next
    // step's (issue 46: a beam of 100 over 1,000 steps held 1.15 GB for an estimate of 60 MB).
    // The searches hand them back once the resident memory passes the estimate less one step's
    // tensors (SourceBatch::planned_bytes, ResidentLimit): one step more is what they may hold.
    d.heap = c.step;
    // The returned hypotheses: their rows, the encoder's maps copied into each (every map kept).
    ShapeCost returned = rows + per_step;
    if (options.maps == MapsKept::all) returned = returned + c.kept_source;
    d.kept = returned * std::max<int64_t>(options.num_hypotheses, 1);
    if (options.beam_tree) {
        // The search keeps the primary map for the tree whatever the hypotheses keep; the tree
        // has a node per candidate looked at (2 per beam and step), each with a primary row.
        if (options.maps == MapsKept::none) d.per_hypothesis = d.per_hypothesis + c.kept_primary;
        ShapeCost nodes;
        nodes.st = 2 * 4;
        nodes.t = 2 * (k_node_bytes + 24);
        d.kept = d.kept + nodes * d.beam;
    }
    return d;
}

int64_t DecodeCost::bytes(int64_t sentences, int64_t S) const {
    const int64_t rows = bytes_times(sentences, beam);
    return bytes_plus(bytes_plus(per_sentence.bytes(sentences, S, steps), (per_hypothesis + heap).bytes(rows, S, steps)),
                      kept.bytes(sentences, S, steps));
}

int64_t DecodeCost::resident_limit(int64_t sentences, int64_t S) const {
    return bytes(sentences, S) - heap.bytes(bytes_times(sentences, beam), S, steps);
}

int64_t DecodeCost::kept_bytes(int64_t S) const { return kept.bytes(1, S, steps); }

std::vector<std::vector<size_t>> plan_decode_chunks(const std::vector<size_t>& rows, const std::vector<int64_t>& width,
                                                    int64_t batch_size, const DecodeCost& cost, int64_t bound,
                                                    int64_t kept_copies, int64_t batch_tokens) {
    const int64_t beam = cost.beam, copies = std::max<int64_t>(kept_copies, 0);
    auto kept = [&](size_t r) { return bytes_times(cost.kept_bytes(width[r]), copies); };  // the copies beside
    auto steps_text = [&] {
        return std::to_string(cost.steps) + " output step" + (cost.steps == 1 ? "" : "s") +
               (beam > 1 ? ", a beam of " + std::to_string(beam) : "");
    };
    auto running = [&](int64_t n, int64_t w) {  // a chunk's bytes but its kept maps (reserved below)
        return bytes_plus(cost.per_sentence.bytes(n, w, cost.steps),
                          (cost.per_hypothesis + cost.heap).bytes(bytes_times(n, beam), w, cost.steps));
    };
    // Refusals name sentences in their input order, whatever order the chunks take them in.
    std::vector<size_t> in_order = rows;
    std::sort(in_order.begin(), in_order.end());
    int64_t widest_alone = 0;
    for (size_t r : in_order) {
        const int64_t need = bytes_plus(cost.bytes(1, width[r]), kept(r));
        if (need > bound)
            throw ConfigError("sentence " + std::to_string(r + 1) + " is too long to decode (" + std::to_string(width[r]) +
                              " source steps, <eos> included; up to " + steps_text() + "): it would need about " +
                              memory_text(need) + ", more than the " + memory_text(bound) +
                              " decoding may use; split it into shorter sentences" +
                              (beam > 1 ? ", use a smaller beam" : "") + " or a smaller maximum length" +
                              " (or, with the memory to spare, set ATTNVIZ_MEMORY_BOUND=" + bound_setting(need) + ")");
        widest_alone = std::max(widest_alone, running(1, width[r]));
    }
    // What every sentence keeps once decoded stays while the later chunks run.
    int64_t reserved = 0;
    for (size_t r : in_order) {
        reserved = bytes_plus(reserved, bytes_plus(cost.kept_bytes(width[r]), kept(r)));
        if (bytes_plus(reserved, widest_alone) > bound)
            throw ConfigError("sentence " + std::to_string(r + 1) + ": the attention maps kept for the sentences up to it (" +
                              steps_text() + ") would need about " + memory_text(bytes_plus(reserved, widest_alone)) +
                              " with the decoding beside them, more than the " + memory_text(bound) +
                              " decoding may use; decode fewer sentences at once or ask for fewer maps");
    }
    const int64_t left = bound - reserved;
    std::vector<std::vector<size_t>> chunks;
    int64_t widest = 0;
    for (size_t r : rows) {
        const int64_t w = std::max(widest, width[r]);
        const int64_t n = chunks.empty() ? 0 : static_cast<int64_t>(chunks.back().size());
        if (chunks.empty() || n >= batch_size || (batch_tokens > 0 && (n + 1) * w > batch_tokens) ||
            running(n + 1, w) > left) {
            chunks.emplace_back();
            widest = width[r];
        } else {
            widest = w;
        }
        chunks.back().push_back(r);
    }
    return chunks;
}

int64_t longest_decode(const DecodeOptions& options, const std::vector<std::vector<int64_t>>* forced) {
    int64_t longest = options.max_length;
    if (forced)
        for (const auto& given : *forced) longest = std::max<int64_t>(longest, static_cast<int64_t>(given.size()) + 1);
    return longest;
}

std::vector<int64_t> SourceBatch::lengths() const {
    auto cpu = src_len.to(torch::kCPU).contiguous();
    return {cpu.data_ptr<int64_t>(), cpu.data_ptr<int64_t>() + cpu.numel()};
}

torch::Tensor output_log_probs(torch::Tensor logits) {
    auto never = torch::tensor({Vocab::pad_id, Vocab::bos_id}, torch::kLong).to(logits.device());
    torch::Tensor logp;
    // Into the logits' own memory when nothing else holds them (the same values as out of place):
    // at batch 32 and beam 4 an opus-mt-sized step's log-probabilities are 30 MB, a fresh tensor
    // whose pages were faulted in at every step.
    const bool alone = logits.use_count() == 1 && logits.storage().use_count() == 1;
    if (alone && logits.scalar_type() == torch::kFloat && logits.is_contiguous() && !logits.requires_grad())
        logp = at::_log_softmax_out(logits, logits, -1, false);
    else
        logp = torch::log_softmax(logits.to(torch::kFloat), -1);
    return logp.index_fill_(1, never, -std::numeric_limits<float>::infinity());
}

void apply_generation_rules(torch::Tensor& log_probs, const GenerationRules& rules, int64_t step, int64_t last_step,
                            const std::vector<std::vector<int64_t>>& histories) {
    if (!rules.masks()) return;
    constexpr float neg_inf = -std::numeric_limits<float>::infinity();
    const int64_t V = log_probs.size(1);
    const auto device = log_probs.device();
    auto ids = [&](const std::vector<int64_t>& v) { return torch::tensor(v, torch::kLong).to(device); };
    // Tokens barred in every row: the one-token bad words, suppress_tokens, and begin_suppress_tokens at their step.
    auto bar = [&](const std::vector<int64_t>& tokens) {
        std::vector<int64_t> barred;
        for (const int64_t t : tokens)
            if (t >= 0 && t < V) barred.push_back(t);
        if (!barred.empty()) log_probs.index_fill_(1, ids(barred), neg_inf);
    };
    std::vector<int64_t> single;
    for (const auto& w : rules.bad_words)
        if (w.size() == 1) single.push_back(w[0]);
    bar(single);
    bar(rules.suppress);
    if (step == rules.begin_suppress_step) bar(rules.begin_suppress);
    // NoRepeatNGramLogitsProcessor and the longer bad words need each row's history.
    const bool per_row = rules.no_repeat_ngram > 0 ||
                         std::any_of(rules.bad_words.begin(), rules.bad_words.end(), [](const auto& w) { return w.size() > 1; });
    if (per_row && !histories.empty()) {
        std::vector<int64_t> flat;  // row * V + token
        std::vector<int64_t> with_start;
        for (size_t r = 0; r < histories.size() && static_cast<int64_t>(r) < log_probs.size(0); ++r) {
            // generate()'s input_ids: the start token, then the output so far.
            if (rules.start_token >= 0) {
                with_start.assign(1, rules.start_token);
                with_start.insert(with_start.end(), histories[r].begin(), histories[r].end());
            }
            const auto& h = rules.start_token >= 0 ? with_start : histories[r];
            const int64_t n = rules.no_repeat_ngram;
            if (n > 0 && static_cast<int64_t>(h.size()) + 1 >= n) {
                // Every earlier n-gram whose first n-1 tokens end the history bars its last token.
                for (size_t i = 0; i + static_cast<size_t>(n) <= h.size(); ++i)
                    if (std::equal(h.begin() + static_cast<std::ptrdiff_t>(i), h.begin() + static_cast<std::ptrdiff_t>(i + n - 1),
                                   h.end() - (n - 1)))
                        flat.push_back(static_cast<int64_t>(r) * V + h[i + static_cast<size_t>(n) - 1]);
            }
            for (const auto& w : rules.bad_words)
                if (w.size() > 1 && h.size() >= w.size() - 1 && std::equal(w.begin(), w.end() - 1, h.end() - (w.size() - 1)))
                    if (w.back() >= 0 && w.back() < V) flat.push_back(static_cast<int64_t>(r) * V + w.back());
        }
        if (!flat.empty()) log_probs.view(-1).index_fill_(0, ids(flat), neg_inf);
    }
    if (rules.min_length > 0 && step + 1 < rules.min_length)  // the output with its start token is step + 1 long
        log_probs.index_fill_(1, ids({Vocab::eos_id}), neg_inf);
    auto force = [&](int64_t token) {
        if (token < 0 || token >= V) return;
        log_probs.fill_(neg_inf);
        log_probs.index_fill_(1, ids({token}), 0.0);
    };
    if (step == 0 && rules.forced_first >= 0) force(rules.forced_first);
    if (step == last_step && rules.forced_last >= 0) force(rules.forced_last);
}

void apply_repetition_penalty(torch::Tensor& scores, const GenerationRules& rules,
                              const std::vector<std::vector<int64_t>>& histories) {
    if (rules.repetition_penalty == 1.0 || histories.empty()) return;
    const int64_t R = scores.size(0), V = scores.size(1);
    std::vector<int64_t> flat;  // row * V + token, each token once a row
    std::vector<int64_t> row;
    for (int64_t r = 0; r < R && r < static_cast<int64_t>(histories.size()); ++r) {
        row.clear();
        if (rules.start_token >= 0) row.push_back(rules.start_token);
        row.insert(row.end(), histories[static_cast<size_t>(r)].begin(), histories[static_cast<size_t>(r)].end());
        std::sort(row.begin(), row.end());
        row.erase(std::unique(row.begin(), row.end()), row.end());
        for (const int64_t t : row)
            if (t >= 0 && t < V) flat.push_back(r * V + t);
    }
    if (flat.empty()) return;
    auto view = scores.view(-1);
    const auto at = torch::tensor(flat, torch::kLong).to(scores.device());
    const auto s = view.index_select(0, at);
    const double p = rules.repetition_penalty;
    view.index_copy_(0, at, torch::where(s < 0, s * p, s / p));
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

namespace {

bool keeps(MapsKept keep, size_t index, const AttentionMapId& id) {
    switch (keep) {
    case MapsKept::all: return true;
    case MapsKept::cross: return id.kind == AttentionKind::cross;
    case MapsKept::primary: return index == 0;
    case MapsKept::none: break;
    }
    return false;
}

/// t as contiguous float on the CPU: itself when it is (a CPU step's maps: 289 a BART-base-sized
/// step, each `to` a dispatched call that returned its argument).
torch::Tensor host_floats(const torch::Tensor& t) {
    if (t.device().is_cpu() && t.scalar_type() == torch::kFloat && t.is_contiguous()) return t;
    return t.to(torch::kCPU, torch::kFloat).contiguous();
}

}  // namespace

HostStepMaps maps_to_host(const std::vector<StepMap>& maps, MapsKept keep, bool primary) {
    HostStepMaps host;
    host.ids.reserve(maps.size());
    host.weights.reserve(maps.size());
    host.scores.reserve(maps.size());
    const bool none = keep == MapsKept::none;
    if (none && !primary) return host;
    host.tree_only = none;
    for (size_t i = 0; i < maps.size(); ++i) {
        const auto& m = maps[i];
        if (!keeps(none ? MapsKept::primary : keep, i, m.id)) continue;
        host.ids.push_back(m.id);
        host.weights.push_back(host_floats(m.weights));
        host.scores.push_back(m.scores.defined() ? host_floats(m.scores) : torch::Tensor());
    }
    return host;
}

std::vector<float> HostStepMaps::primary_row(int64_t row, int64_t n) const {
    if (empty()) return {};
    const float* w = weights[0].data_ptr<float>() + row * weights[0].stride(0);
    return {w, w + std::min(n, weights[0].size(1))};
}

void append_attention_rows(Hypothesis& h, const HostStepMaps& maps, int64_t row, int64_t n) {
    if (maps.tree_only) return;
    auto& record = h.attention.maps;
    size_t next = 0;  // after its first step a hypothesis holds the maps in the step's order: looked for there first
    for (size_t i = 0; i < maps.ids.size(); ++i) {
        const auto& w = maps.weights[i];
        const int64_t keys = maps.ids[i].kind == AttentionKind::cross ? std::min(n, w.size(1)) : w.size(1);
        AttentionMap& m = next < record.size() && record[next].id == maps.ids[i] ? record[next] : h.attention.at(maps.ids[i]);
        next = static_cast<size_t>(&m - record.data()) + 1;
        const float* wp = w.data_ptr<float>() + row * w.stride(0);
        m.weights.emplace_back(wp, wp + keys);
        if (maps.scores[i].defined()) {
            const float* sp = maps.scores[i].data_ptr<float>() + row * maps.scores[i].stride(0);
            m.scores.emplace_back(sp, sp + keys);
        }
    }
}

void add_source_maps(Hypothesis& h, const EncodedSource& source, int64_t row, int64_t n, MapsKept keep) {
    if (keep != MapsKept::all) return;
    for (auto& m : source.source_maps(row, n)) h.attention.maps.push_back(std::move(m));
}

}  // namespace attnviz
