#pragma once
// What greedy and beam search share (core/decode/greedy.hpp, core/decode/beam.hpp):
// the model as a search reads it, sources as a padded batch, the frame that
// decodes sentences in batches, and the bookkeeping of a hypothesis step by step.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/decode/translation.hpp"
#include "core/model/memory_bound.hpp"
#include "core/model/encoder_decoder.hpp"
#include "core/text/text.hpp"
#include "core/text/vocab.hpp"

namespace attnviz {

/// What a search reads of a model: the network and both vocabularies, borrowed
/// (TranslationModel::search_model()) for the length of one call.
class SearchModel {
public:
    SearchModel(Network network, const Vocab& src_vocab, const Vocab& tgt_vocab, TokenLevel level)
        : m_network(std::move(network)), m_src(src_vocab), m_tgt(tgt_vocab), m_level(level) {}
    EncoderDecoder& network() const { return *m_network; }
    const ModelConfig& config() const { return m_network->config(); }
    const Vocab& src_vocab() const { return m_src; }
    const Vocab& tgt_vocab() const { return m_tgt; }
    TokenLevel level() const { return m_level; }
    bool has_attention() const { return config().has_attention(); }
    /// Where the network's weights are (the CPU for a network without parameters).
    torch::Device device() const;

private:
    Network m_network;
    const Vocab& m_src;
    const Vocab& m_tgt;
    TokenLevel m_level;
};

/// Source sentences as padded ids + <eos>, on the model's device; with the
/// model's source_steps N > 0, d2l's pad_or_trim(ids + <eos>, N): N wide, a
/// longer sentence cut to its first N tokens (losing <eos>).
struct SourceBatch {
    torch::Tensor src;      ///< [B, S]
    torch::Tensor src_len;  ///< [B]
    /// What this chunk's search may grow the resident memory by before it hands the heap's free
    /// pages back (DecodeCost::resident_limit: its estimate less one step's tensors, so that the
    /// step after a check stays within the estimate; ResidentLimit, core/io/process_memory.hpp).
    /// 0: not planned (no limit).
    int64_t planned_bytes = 0;
    std::vector<int64_t> lengths() const;  ///< src_len on the host
};

SourceBatch encode_sources(const std::vector<std::vector<std::string>>& sources, const std::vector<size_t>& rows,
                           const Vocab& src_vocab, const torch::Device& device, int64_t source_steps = 0);
/// A Translation with source tokens (unknown words as <unk>, listed) and no hypotheses yet;
/// with source_steps N > 0 the source tokens are the N the model reads (see encode_sources).
Translation make_translation_shell(const std::vector<std::string>& source, const Vocab& src_vocab,
                                   bool attention_available, int64_t source_steps = 0);
/// Fills tokens and text from ids.
void finish_hypothesis(Hypothesis& h, const Vocab& tgt_vocab, TokenLevel level);
/// A step's attention maps (StepOutput::maps) on the host: float, contiguous [R, K].
struct HostStepMaps {
    std::vector<AttentionMapId> ids;
    std::vector<torch::Tensor> weights, scores;  ///< per map; a score tensor is undefined when not kept
    bool tree_only = false;  ///< the hypotheses keep none of them (the beam tree reads the primary map)
    bool empty() const { return ids.empty(); }
    /// Row `row` of the primary (first) map's weights, its first n keys.
    std::vector<float> primary_row(int64_t row, int64_t n) const;
};
/// The maps a hypothesis keeps (DecodeOptions::maps) on the host; `primary` keeps the primary
/// (first) map whatever `keep` says (the beam tree's rows are of it).
HostStepMaps maps_to_host(const std::vector<StepMap>& maps, MapsKept keep = MapsKept::all, bool primary = false);
/// Appends row `row` of every map to h's attention record: of a cross map the first
/// n keys (the source's real positions), of the others every key. Nothing when the maps
/// are the tree's only.
void append_attention_rows(Hypothesis& h, const HostStepMaps& maps, int64_t row, int64_t n);
/// Adds the source-side maps of row `row` of an encoding (EncodedSource::source_maps,
/// its first n positions) to h's record when `keep` keeps every map; nothing for a family
/// without them.
void add_source_maps(Hypothesis& h, const EncodedSource& source, int64_t row, int64_t n, MapsKept keep = MapsKept::all);

/// A step's log-probabilities [R, V] from its logits, in float, with <pad> and
/// <bos> (never outputs) at -inf: what greedy and beam search both choose from. Written over
/// the logits when they are float, contiguous, without a gradient and held by nothing else
/// (a step's, moved in); otherwise a new tensor, the logits untouched.
torch::Tensor output_log_probs(torch::Tensor logits);

/// transformers' logits processors of a pretrained model's generation config (DecodeOptions::generation)
/// on a step's log-probabilities [R, V], in place: bad words, the minimum length and n-gram repeats
/// to -inf; at a forced step every token -inf but the forced one, which scores 0 (as transformers
/// scores it). `step` is the step's index (0: the first output token), `last_step` the index of the
/// last step the length limit allows; histories[r] (when the rules need them) row r's output ids so far.
void apply_generation_rules(torch::Tensor& log_probs, const GenerationRules& rules, int64_t step, int64_t last_step,
                            const std::vector<std::vector<int64_t>>& histories = {});

/// rules.repetition_penalty on a step's scores [R, V] (logits or log-probabilities, contiguous): each
/// row's tokens of rules.start_token + histories[r], once each, times the penalty where negative,
/// divided by it otherwise. Nothing when the penalty is 1. apply_generation_rules does not apply it:
/// greedy search calls this on the logits, beam search on the log-probabilities (as generate()).
void apply_repetition_penalty(torch::Tensor& scores, const GenerationRules& rules,
                              const std::vector<std::vector<int64_t>>& histories);

/// The k most probable tokens of each row of a step's log-probabilities, on the host.
struct StepTopK {
    torch::Tensor prob, ids;  ///< [R, k] float and long, contiguous CPU tensors (undefined when k == 0)
    int64_t k = 0;
    /// Row r's candidates, best first (empty when k == 0).
    std::vector<TokenProb> row(int64_t r, const Vocab& vocab) const;
};
StepTopK step_top_k(const torch::Tensor& log_probs, int64_t k);
/// The same from a row-wise topk already taken (sorted, at least k columns where the row has them).
StepTopK step_top_k(const torch::Tensor& top_log_probs, const torch::Tensor& top_ids, int64_t k);

/// Appends one output token to h: its id, log-probability (added to log_prob)
/// and rank; a given (forced) token is counted in forced_steps and, when the
/// model ranked another token first, may set first_divergence.
void append_token(Hypothesis& h, int64_t id, float log_prob, int64_t rank, bool given);

/// Decodes one chunk: rows index the sources (all non-empty), batch holds them encoded;
/// it appends hypotheses to results[rows[i]].
using ChunkDecoder = std::function<void(const std::vector<size_t>& rows, const SourceBatch& batch,
                                        std::vector<Translation>& results)>;

/// What decoding costs in memory (core/model/memory_cost.hpp), by the shape of a chunk: its
/// sentences, each S source positions wide, decoding up to `steps` steps with `beam`
/// hypotheses each.
struct DecodeCost {
    ShapeCost per_sentence;    ///< rows: sentences. The encoding; beam search's returned hypotheses and tree
    ShapeCost per_hypothesis;  ///< rows: sentences x beam. A step's tensors, the maps kept over the steps
    ShapeCost kept;            ///< rows: sentences. What a sentence keeps once decoded (its hypotheses' maps)
    /// rows: sentences x beam. The free pages the heap may hold beside the tensors: one step's
    /// tensors more (the searches hand the rest back, ResidentLimit, core/io/process_memory.hpp).
    ShapeCost heap;
    int64_t beam = 1;
    int64_t steps = 1;         ///< T: the most steps a row decodes
    /// Bytes decoding `sentences` sentences S wide together takes while it runs (their kept maps
    /// included).
    int64_t bytes(int64_t sentences, int64_t S) const;
    /// Bytes one sentence S wide keeps once decoded.
    int64_t kept_bytes(int64_t S) const;
    /// bytes() less the heap's share: the resident memory a chunk's search may grow by before it
    /// hands the heap's free pages back (SourceBatch::planned_bytes).
    int64_t resident_limit(int64_t sentences, int64_t S) const;
};
/// The cost of decoding with `options` (beam, N-best, top-k, the beam tree, the maps kept) for
/// up to `steps` steps, from the network's memory_cost().
DecodeCost decode_cost(const EncoderDecoder& network, const DecodeOptions& options, int64_t steps);

/// The frame shared by greedy and beam search: validates the options, makes a
/// Translation per source (empty ones stay empty), enters inference mode, and
/// hands the non-empty sources to decode_chunk in batches, shortest sentences first (each
/// result stays at its source's index): at most options.batch_size (and options.batch_tokens)
/// sentences, and no more than fit the memory bound (DecodeOptions::memory_bound) with
/// options.beam_size hypotheses each, running up to max_steps steps (0: options.max_length).
/// A sentence too long to decode within the bound on its own, or a request whose kept maps
/// (every sentence's, times 1 + DecodeOptions::kept_copies) cannot fit it, is refused with
/// ConfigError naming it, before any is decoded.
std::vector<Translation> decode_in_batches(const SearchModel& model,
                                           const std::vector<std::vector<std::string>>& sources,
                                           const DecodeOptions& options, const ChunkDecoder& decode_chunk,
                                           int64_t max_steps = 0);

/// decode_in_batches's chunks of `rows` (indices into width: each sentence's source width,
/// <eos> included), in order: at most batch_size sentences, at most batch_tokens padded source
/// tokens (widest × sentences; 0: no such limit; a sentence wider alone still gets a chunk of
/// its own), and no more than fit `bound`
/// beside what every sentence keeps once decoded (cost.kept, times 1 + kept_copies: the
/// results stay while the later chunks decode). Throws ConfigError naming the first sentence
/// ("sentence N", 1-based) that cannot fit alone, with what it would need, or the sentence
/// where the kept maps of the sentences so far pass the bound.
std::vector<std::vector<size_t>> plan_decode_chunks(const std::vector<size_t>& rows, const std::vector<int64_t>& width,
                                                    int64_t batch_size, const DecodeCost& cost,
                                                    int64_t bound = memory_bound(), int64_t kept_copies = 0,
                                                    int64_t batch_tokens = 0);

/// The most steps a row decodes: options.max_length, stretched to hold each given target
/// (forced decoding) and one more token.
int64_t longest_decode(const DecodeOptions& options, const std::vector<std::vector<int64_t>>* forced);

}  // namespace attnviz
