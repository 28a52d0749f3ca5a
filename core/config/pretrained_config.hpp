#pragma once
// The configuration of a pretrained Hugging Face translation model, read from a
// model folder's config.json and generation_config.json (transformers'
// MarianConfig, M2M100Config -- NLLB uses the latter -- and GenerationConfig).
// Marian (opus-mt) and M2M100/NLLB are the same encoder-decoder Transformer with a
// handful of named differences; each is one field of PretrainedConfig, so the network
// (core/model/pretrained_model.hpp) reads beside transformers' modeling_marian.py and
// modeling_m2m_100.py line by line:
//
//   difference                     Marian (opus-mt)              M2M100 / NLLB
//   normalize_before               false: post-norm              true: pre-norm
//   final_layer_norms              no                            encoder.layer_norm, decoder.layer_norm
//   positions                      sin | cos halves, from 0      fairseq's table, offset past padding_idx,
//                                                                padding positions skipped
//   final_logits_bias              a [1, V] buffer               none
//   activation_function            "swish" (SiLU) for opus-mt    "relu"
//   decoder start                  <pad>                         </s>, then the target language forced
//
// BART (modeling_bart.py) and mBART (modeling_mbart.py) are the same network again: learned
// positions (PositionTable::learned, offset 2), layernorm_embedding, GELU, final_logits_bias;
// BART post-norm like Marian, mBART pre-norm with final LayerNorms like M2M100; the decoder starts
// from decoder_start_token_id (</s>), then generation forces forced_bos_token_id (BART's <s>) or the
// target language (mBART-50).
//
// Plain data, no LibTorch: the torch-free base library parses it (files are untrusted:
// every field is checked, with messages naming the file and the field).
#include <utility>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace attnviz {

/// The model families attnviz reads from Hugging Face folders (config.json's model_type).
enum class PretrainedFamily {
    marian,  ///< "marian": MarianMTModel (Helsinki-NLP's opus-mt)
    m2m100,  ///< "m2m_100": M2M100ForConditionalGeneration (M2M100, NLLB)
    bart,    ///< "bart": BartForConditionalGeneration (bart-large-cnn, distilbart): post-norm, learned positions
    mbart,   ///< "mbart": MBartForConditionalGeneration (mbart-large-50): BART's with pre-norm and final LayerNorms
    t5       ///< "t5", "mt5": T5ForConditionalGeneration (T5, Flan-T5, mT5): core/config/t5_config.hpp, core/model/t5_model.hpp
};
std::string to_string(PretrainedFamily f);  ///< config.json's model_type: "marian", "m2m_100", "bart", "mbart"
/// The model_type values attnviz reads, for messages: "marian, m2m_100".
std::string supported_model_types();

/// The feed-forward activation (config.json's activation_function, transformers' ACT2FN names).
enum class Activation {
    relu,
    gelu,   ///< exact (erf) GELU: "gelu"
    gelu_tanh,  ///< the tanh approximation: "gelu_new", "gelu_pytorch_tanh", "gelu_fast"
    silu,   ///< "swish" / "silu": x * sigmoid(x) (opus-mt)
    tanh
};
std::string to_string(Activation a);  ///< the name config.json used ("swish" stays "swish")
/// transformers' ACT2FN name of an activation attnviz computes (relu, gelu and gelu_python, gelu_new,
/// gelu_pytorch_tanh and gelu_fast, swish and silu, tanh); nullopt for another. The families' readers
/// say in their own words where the name came from.
std::optional<Activation> activation_named(const std::string& name);
/// The names activation_named reads, for messages.
extern const char* const k_activation_names;

/// Where the sinusoidal position table comes from.
enum class PositionTable {
    marian,  ///< MarianSinusoidalPositionalEmbedding: column j < d/2 is sin(p / 10000^(2j/d)), column d/2 + j
             ///< its cos; positions 0, 1, ... whatever the tokens
    fairseq,  ///< M2M100SinusoidalPositionalEmbedding: sin | cos with frequencies exp(-j log(10000) / (d/2 - 1)),
              ///< positions counted from padding_idx + 1 over the non-pad tokens, a pad at padding_idx's zero row
    learned   ///< BartLearnedPositionalEmbedding: a trained [max_position_embeddings + 2, d] table (the encoder's
              ///< and the decoder's own), position p reading row p + 2 whatever the tokens (BART, mBART)
};

struct T5Options;  // core/config/t5_config.hpp

/// A model's shape and the named differences of its family (see the table above).
struct PretrainedConfig {
    PretrainedFamily family = PretrainedFamily::marian;
    int64_t vocab_size = 0;            ///< rows of the (source) embedding
    int64_t decoder_vocab_size = 0;    ///< rows of the decoder embedding and of lm_head (Marian; else vocab_size)
    int64_t d_model = 0;               ///< width d
    int64_t encoder_layers = 0, decoder_layers = 0;
    int64_t encoder_heads = 0, decoder_heads = 0;       ///< attention heads (divide d_model)
    int64_t encoder_ffn = 0, decoder_ffn = 0;           ///< feed-forward widths
    int64_t max_positions = 0;         ///< max_position_embeddings: longest sequence the position table covers
    Activation activation = Activation::relu;
    std::string activation_name;       ///< as config.json spells it (written back on export)
    bool scale_embedding = false;      ///< token embeddings times sqrt(d_model)
    bool normalize_before = false;     ///< pre-norm blocks (M2M100) instead of post-norm (Marian)
    bool final_layer_norms = false;    ///< a LayerNorm after the last encoder and decoder block (M2M100, mBART)
    bool layernorm_embedding = false;  ///< a LayerNorm over embeddings + positions, before the first block (BART, mBART)
    PositionTable positions = PositionTable::marian;
    bool final_logits_bias = false;    ///< a [1, V] bias added to the logits (Marian's buffer)
    bool share_embeddings = true;      ///< encoder and decoder read one embedding (model.shared)
    bool tie_word_embeddings = true;   ///< lm_head is the (decoder) embedding
    int64_t pad_token_id = 0;          ///< padding (Marian: also the decoder's start token)
    int64_t eos_token_id = 0;          ///< </s>
    int64_t bos_token_id = -1;         ///< <s> (M2M100: 0; Marian: none, -1)
    int64_t decoder_start_token_id = 0;  ///< the decoder's first input
    double dropout = 0.1;              ///< residual and embedding dropout in training
    double attention_dropout = 0.0;    ///< dropout on attention weights in training
    double activation_dropout = 0.0;   ///< dropout after the feed-forward activation in training
    double layer_norm_eps = 1e-5;      ///< every LayerNorm's epsilon (nn.LayerNorm's default)
    /// config.json as read: export writes it back (with the fields above), so keys attnviz does not
    /// use survive a round trip.
    nlohmann::json raw = nlohmann::json::object();
    /// The T5 family's own fields (family t5: relative position buckets, d_kv, the gated feed-forward,
    /// task prefixes), else null.
    std::shared_ptr<const T5Options> t5;

    /// The vocabulary the decoder scores (lm_head's rows).
    int64_t target_vocab_size() const { return share_embeddings ? vocab_size : decoder_vocab_size; }
    /// A short description for titles and messages: "Marian, d 512, 6+6 layers, 8 heads, ffn 2048, vocabulary 59514".
    std::string describe() const;
    /// Reads config.json's object; FileError naming `what` (the file) and the field for anything
    /// missing, of the wrong type, out of range or inconsistent (an unknown model_type names the
    /// supported ones).
    static PretrainedConfig from_json(const nlohmann::json& j, const std::string& what);
    /// config.json's object: `raw` with every field above written over it.
    nlohmann::json to_json() const;
};

/// How beam search stops (GenerationConfig.early_stopping).
enum class EarlyStopping {
    heuristic,  ///< false: stop a sentence when no running beam can still beat its worst finished one
    on_full,    ///< true: stop as soon as num_beams hypotheses have finished
    never       ///< "never": the canonical search, only the length limit stops it
};

/// What transformers' generate() reads from generation_config.json (or, for older folders
/// without one, from config.json), for the fields that change which tokens it produces.
struct GenerationConfig {
    int64_t num_beams = 1;             ///< 1: greedy search
    int64_t max_length = 20;           ///< the longest output *with* the decoder's start token
    int64_t max_new_tokens = 0;        ///< > 0: overrides max_length (max_length = 1 + this)
    int64_t min_length = 0;            ///< <eos> is barred until the output (start token included) is this long
    double length_penalty = 1.0;       ///< beam: a finished hypothesis scores sum log p / generated^length_penalty
    EarlyStopping early_stopping = EarlyStopping::heuristic;
    int64_t num_return_sequences = 1;  ///< hypotheses returned per sentence
    int64_t no_repeat_ngram_size = 0;  ///< > 0: no n-gram of this size twice in an output
    std::vector<std::vector<int64_t>> bad_words_ids;  ///< token sequences never produced
    int64_t forced_bos_token_id = -1;  ///< the first generated token, when >= 0
    int64_t forced_eos_token_id = -1;  ///< the token forced at the last position max_length allows, when >= 0
    std::vector<int64_t> eos_token_ids;  ///< what ends an output
    int64_t pad_token_id = -1;
    int64_t decoder_start_token_id = -1;
    double repetition_penalty = 1.0;   ///< != 1: every token of the output so far (start token too) scores
                                       ///< times this when negative, divided by it otherwise (CTRL's penalty)
    std::vector<int64_t> suppress_tokens;        ///< never generated
    std::vector<int64_t> begin_suppress_tokens;  ///< not generated first (after a forced first token: second)
    int64_t min_new_tokens = 0;        ///< <eos> is barred until this many tokens were generated
    /// Fields present that attnviz does not apply (sampling, repetition penalties, ...): named in a
    /// warning so a user knows generate() would differ.
    std::vector<std::string> ignored;
    nlohmann::json raw = nlohmann::json::object();  ///< the file's object as read

    bool max_length_set = false;       ///< max_length came from the file (else generate()'s default, 20 new tokens)
    /// The most tokens generate() produces after the start token: max_new_tokens; else max_length minus
    /// the start token; else (neither given) 20, within the model's position table.
    int64_t max_generated(const PretrainedConfig& model) const;
    /// Reads generation_config.json's object (or config.json's generation fields); FileError naming
    /// `what` and the field. `model` supplies the token ids a file leaves out.
    static GenerationConfig from_json(const nlohmann::json& j, const PretrainedConfig& model, const std::string& what);
    /// generation_config.json's object: `raw` with the fields above written over it.
    nlohmann::json to_json() const;
};

/// What a network of ModelArch::pretrained is built from, beside ModelConfig's sizes: the
/// folder's configurations and how attnviz's vocabulary lies over the model's. attnviz's
/// vocabularies keep <pad>, <bos>, <eos>, <unk> at ids 0..3 (core/text/vocab.hpp); a
/// pretrained model's rows are put in that order when it is read (core/persist/hf_folder.hpp):
/// the model's pad, eos and unk rows at 0, 2 and 3, every other row after them in the model's
/// order, and <bos> -- which the model does not have: its decoder starts from
/// decoder_start_token_id -- a zero row the network never reads (the decoder's first input
/// reads the start token's row) and never outputs (its logit is -inf).
struct ModelConfig;  // core/config/config.hpp

/// The most positions a model can place a token at (a Marian, BART or mBART model's max_position_embeddings:
/// its table does not grow, as M2M100's sinusoids do); 0: no such limit.
int64_t position_limit(const ModelConfig& config);

struct PretrainedSpec {
    PretrainedConfig model;
    GenerationConfig generation;
    int64_t decoder_start_row = 0;  ///< attnviz id of the row the decoder's first input reads
};

// The T5 family's config.json (defined in core/config/t5_config.cpp, whose T5Options they fill).
/// Whether config.json's model_type is the T5 family's ("t5", "mt5").
bool is_t5_model_type(const std::string& model_type);
/// PretrainedConfig::from_json for the T5 family (the model_type already known to be t5 or mt5).
PretrainedConfig t5_config_from_json(const nlohmann::json& j, const std::string& what);
/// PretrainedConfig::to_json for the T5 family: `raw` with every field written over it.
nlohmann::json t5_config_to_json(const PretrainedConfig& c);
/// PretrainedConfig::describe for the T5 family: "T5, d 512, 6+6 layers, 8 heads of 64, ffn 2048 relu, vocabulary 32128".
std::string t5_describe(const PretrainedConfig& c);
/// The task prefixes of a model's config (T5's task_specific_params); empty for other families.
std::vector<std::pair<std::string, std::string>> task_prefixes(const PretrainedConfig& c);


}  // namespace attnviz
