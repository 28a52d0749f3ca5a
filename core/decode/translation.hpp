#pragma once
// What decoding is asked and what it returns: DecodeOptions, and per input
// sentence a Translation of hypotheses that carry, with each output token, the
// attention rows and the raw scores of the step that produced it, every map by
// name (what the heatmap and the step inspector show). Plain data, no LibTorch: exports,
// alignments and the beam tree read it in the torch-free base library. The
// searches that fill it are core/decode/greedy.hpp and core/decode/beam.hpp;
// models translate through core/decode/translation_model.hpp.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/config/config.hpp"
#include "core/decode/intervention.hpp"
#include "core/model/attention_map.hpp"


namespace attnviz {

/// The longest output decoding produces (DecodeOptions::max_length's upper bound).
constexpr int64_t max_decode_length = 1000;
static_assert(max_padded_steps == max_decode_length, "a padded sequence is at most as long as an output");

/// What transformers' generate() adds to a search for a pretrained model (its generation config,
/// core/config/pretrained_config.hpp), in attnviz's token ids: the logits processors that bar or
/// force tokens, and how its beam search ranks and stops. TranslationModel::decode_defaults() fills
/// it from the model; attnviz's own models leave it off.
struct GenerationRules {
    /// Beam search as transformers' (generation/utils.py _beam_search): of the 2K best extensions
    /// only the K best may finish, a finished hypothesis keeps log P / length^length_penalty, and a
    /// sentence stops as early_stopping says. Off: attnviz's search (core/decode/beam.cpp).
    bool transformers_search = false;
    /// transformers' early_stopping: 0 the heuristic (false), 1 as soon as beam_size hypotheses have
    /// finished (true), 2 only at the length limit ("never").
    int early_stopping = 0;
    int64_t forced_first = -1;  ///< the first output token, forced (ForcedBOSTokenLogitsProcessor); -1: none
    int64_t forced_last = -1;   ///< the token forced at the last step max_length allows (forced_eos); -1: none
    int64_t min_length = 0;     ///< <eos> is barred while the output (its start token included) is shorter
    int64_t no_repeat_ngram = 0;  ///< > 0: no n-gram of this size twice in an output
    std::vector<std::vector<int64_t>> bad_words;  ///< token sequences never produced (NoBadWordsLogitsProcessor)
    std::vector<int64_t> suppress;        ///< tokens never produced (SuppressTokensLogitsProcessor)
    std::vector<int64_t> begin_suppress;  ///< tokens not produced at step begin_suppress_step
    int64_t begin_suppress_step = 0;      ///< 0, or 1 after a forced first token (SuppressTokensAtBegin's begin_index)
    /// != 1: the output's tokens so far (start token included) score times this where negative,
    /// divided by it otherwise (RepetitionPenaltyLogitsProcessor): on the logits in greedy search, on
    /// the log-probabilities in beam search, as generate() applies it.
    double repetition_penalty = 1.0;
    /// The decoder's start token (attnviz's id; -1: none): the histories the n-gram, bad-word and
    /// repetition rules read begin with it, as generate()'s input_ids do.
    int64_t start_token = -1;
    /// Whether a rule reads each row's output so far (the n-grams, bad words longer than one token,
    /// the repetition penalty): the searches gather the histories only then.
    bool reads_histories() const {
        return no_repeat_ngram > 0 || repetition_penalty != 1.0 ||
               std::any_of(bad_words.begin(), bad_words.end(), [](const auto& w) { return w.size() > 1; });
    }
    /// Whether any rule changes a step's scores.
    bool masks() const {
        return forced_first >= 0 || forced_last >= 0 || min_length > 0 || no_repeat_ngram > 0 || !bad_words.empty() ||
               !suppress.empty() || !begin_suppress.empty() || repetition_penalty != 1.0;
    }
};

/// Which attention maps a hypothesis keeps (Hypothesis::attention): a caller that shows or
/// writes none of them keeps none, and the memory they would take is not asked for.
enum class MapsKept {
    all,      ///< every map the model records (the views, --attention-out, the web page)
    cross,    ///< the cross maps only, every head of every layer (alignments, per-head scores)
    primary,  ///< the primary map only (a single heatmap, attribution beside it)
    none      ///< none (the translations' text and scores alone)
};

/// Options for decoding (CTranslate2's TranslationOptions in spirit).
struct DecodeOptions {
    int64_t max_length = 30;      ///< maximum output tokens per sentence, <eos> included (1..max_decode_length)
    int64_t beam_size = 1;        ///< 1 = greedy; > 1 = beam search
    int64_t num_hypotheses = 1;   ///< N-best: how many hypotheses to return (<= beam_size)
    double length_penalty = 1.0;  ///< beam: score = log P / length^length_penalty (0 = no normalisation)
    int64_t batch_size = 64;      ///< sentences decoded together
    /// > 0: also at most this many source tokens a batch (its widest sentence, <eos> included,
    /// times its sentences: the padded batch), as CTranslate2's max_batch_size with
    /// batch_type="tokens"; 0: batches by sentences alone. Either way the sentences of a file
    /// are decoded shortest first (less padding) and returned in their input order.
    int64_t batch_tokens = 0;
    bool normalize_input = true;  ///< apply text normalisation before tokenising (word level)
    int64_t top_k = 0;            ///< also report, per step, the K most probable next tokens
                                  ///< (Hypothesis::top_k); 0 = off, at most 100
    bool beam_tree = false;       ///< record every candidate the search looked at in Translation::beam_tree
                                  ///< (core/decode/beam_tree.hpp); runs beam search, which at beam_size 1 is greedy
    Intervention intervention;    ///< what-if: change the attention of one step or of every step
                                  ///< (core/decode/intervention.hpp); greedy decoding only; none by default
    GenerationRules generation;   ///< a pretrained model's generate() rules (off for attnviz's own models)
    std::string source_lang;      ///< a multilingual pretrained model's source language ("" : its default)
    std::string target_lang;      ///< ... and target language ("": its generation config's, if any)
    MapsKept maps = MapsKept::all;  ///< the attention maps each hypothesis keeps
    /// The memory decoding may take at once (core/model/memory_cost.hpp; 0: memory_bound()):
    /// sentences decode in chunks within it, and a sentence that cannot fit alone is refused,
    /// as is a request whose kept maps (all sentences', times 1 + kept_copies) cannot.
    int64_t memory_bound = 0;
    /// Copies of the kept maps the caller makes after decoding, counted against the bound with
    /// them (a merged or sink-free translation is one; translate's attention file, written a row
    /// at a time, none; a JSON tree of them would take about ten times their bytes).
    int64_t kept_copies = 0;
    nlohmann::json to_json() const;
    /// Throws ConfigError naming the first option out of its range.
    void validate() const;
};

/// A candidate next token and its probability.
struct TokenProb {
    int64_t id = 0;
    std::string token;
    float prob = 0.0f;            ///< softmax probability (<pad> and <bos>, never outputs, excluded)
};

/// How a given target is used by forced decoding (TranslationModel::force).
enum class ForceMode {
    reference,  ///< score the whole target (and <eos>) teacher-forced: "what did the model think of it?"
    prefix      ///< force the target's tokens, then let the model go on (greedy or beam search)
};

struct BeamTree;  // core/decode/beam_tree.hpp

/// One hypothesis, with its own attention.
struct Hypothesis {
    std::vector<std::string> tokens;   ///< output tokens, ending with "<eos>" when one was produced
    std::vector<int64_t> ids;          ///< their ids
    double log_prob = 0.0;             ///< sum of the step log-probabilities
    double score = 0.0;                ///< log_prob after length normalisation (greedy: log_prob)
    /// Every attention map the model recorded (core/model/attention_map.hpp), empty without
    /// attention. The primary map (the RNN's only one) is the cross map whose
    /// attention.weights()[t][s] is the weight of source token s when producing output token t
    /// (rows sum to 1) and attention.scores()[t][s] the score before the softmax.
    AttentionRecord attention;
    /// context_norm[t]: L2 norm of the context vector at step t.
    std::vector<float> context_norm;
    /// step_log_prob[t]: log-probability of output token t at its step; they sum to log_prob.
    std::vector<float> step_log_prob;
    /// rank[t]: 0-based rank of output token t among all tokens at its step (greedy: 0 unless forced;
    /// beam search may keep a less probable token whose hypothesis scores better overall).
    std::vector<int64_t> rank;
    /// top_k[t]: the DecodeOptions::top_k most probable tokens at step t, best first (empty when off).
    std::vector<std::vector<TokenProb>> top_k;
    /// Forced decoding: how many leading tokens were given rather than chosen (0 otherwise).
    int64_t forced_steps = 0;
    /// Forced decoding: the first step whose given token was not the model's top choice (-1: none).
    int64_t first_divergence = -1;
    /// The output text (tokens up to <eos>, joined for the token level).
    std::string text;
};

/// The result for one input sentence (CTranslate2's TranslationResult in spirit).
struct Translation {
    std::string input;                       ///< the sentence as given
    std::vector<std::string> src_tokens;     ///< source tokens as the model saw them, "<eos>" last (a model
                                             ///< with ModelConfig::source_steps N reads only the first N)
    std::vector<std::string> unknown;        ///< input tokens not in the source vocabulary (shown as <unk>)
    std::vector<Hypothesis> hypotheses;      ///< best first; empty for an empty input
    bool attention_available = true;         ///< false for Scoring::none
    /// Every candidate of the search (DecodeOptions::beam_tree); null when not recorded or for an empty input.
    std::shared_ptr<const BeamTree> beam_tree;
    /// Empty: tokens as the model saw them. Otherwise how they were merged for reading
    /// (core/analysis/subword_merge.hpp: "words (columns summed, rows averaged)"); exports carry it.
    std::string merged;
    const Hypothesis& best() const { return hypotheses.at(0); }
    bool empty() const { return hypotheses.empty(); }
};

// Translating goes through TranslationModel::translate (core/decode/translation_model.hpp).

}  // namespace attnviz
