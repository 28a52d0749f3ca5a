#pragma once
// The hyperparameters: the model's shape (ModelConfig) and how it is trained
// (TrainConfig). Every field is declared once more, with its flag, range,
// default and help, in the parameter registry (core/config/registry.hpp), which
// generates validation, JSON, the CLI flags and the GUI form from it: the
// validate(), to_json() and from_json() members below are defined there
// (core/config/registry.cpp), the enums' names in core/config/config.cpp.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace attnviz {

struct PretrainedSpec;  // core/config/pretrained_config.hpp

/// Attention scoring function a(q, k).
enum class Scoring {
    additive,     ///< Bahdanau: w_v^T tanh(W_q q + W_k k)
    dot,          ///< Luong dot: q^T k (needs key size == hidden size)
    scaled_dot,   ///< q^T k / sqrt(d)
    general,      ///< Luong bilinear: q^T W k
    none          ///< no attention: the context is the encoder's final state (seed 002 Q27 baseline)
};

enum class CellType { gru, lstm };

/// The model family (core/model/families.hpp builds one).
enum class ModelArch {
    rnn,          ///< d2l's RNN encoder-decoder with attention (core/model/rnn_model.hpp)
    transformer,  ///< d2l's Transformer (core/model/transformer_model.hpp): multi-head attention in every layer
    pretrained    ///< a Hugging Face translation model (Marian, M2M100/NLLB: core/model/pretrained_model.hpp),
                  ///< read from its folder (ModelConfig::pretrained), never built from settings alone
};

/// Weight initialisation schemes.
enum class InitScheme {
    xavier,      ///< d2l: Xavier-uniform recurrent weights; other layers keep PyTorch's defaults
    uniform,     ///< Sutskever et al.: every parameter uniform in [-0.08, 0.08]
    orthogonal   ///< Bahdanau et al.: orthogonal recurrent matrices, Xavier elsewhere, zero biases
};

std::string to_string(ModelArch a);    ///< "rnn", "transformer"
std::string to_string(Scoring s);      ///< "additive", "dot", "scaled-dot", "general", "none"
std::string to_string(CellType c);     ///< "gru", "lstm"
std::string to_string(InitScheme i);   ///< "xavier", "uniform", "orthogonal"
ModelArch arch_from_string(const std::string& s);        ///< throws ConfigError listing valid names
Scoring scoring_from_string(const std::string& s);       ///< throws ConfigError listing valid names
CellType cell_from_string(const std::string& s);         ///< throws ConfigError
InitScheme init_from_string(const std::string& s);       ///< throws ConfigError

/// The most steps a sequence is padded or cut to (ModelConfig::source_steps,
/// TrainConfig::fixed_steps: d2l's num_steps, 9 or 10 in the book): the longest output
/// decoding produces (max_decode_length). A larger value from a small file made every
/// sentence that wide, and translating, evaluating or resuming use many GB.
constexpr int64_t max_padded_steps = 1000;

/// Shape of the model. Defaults are d2l's Bahdanau configuration, made smaller. Fields
/// marked RNN apply to the RNN family only (a Transformer's must keep their defaults),
/// fields marked Transformer to the Transformer only (the parameter registry checks it).
struct ModelConfig {
    ModelArch arch = ModelArch::rnn;  ///< the model family
    int64_t src_vocab = 0;         ///< source vocabulary size (set from the data)
    int64_t tgt_vocab = 0;         ///< target vocabulary size (set from the data)
    int64_t embed_size = 64;       ///< RNN: embedding width of both sides (d2l: 256; a Transformer's
                                   ///< embeddings are hidden_size wide)
    int64_t hidden_size = 128;     ///< RNN hidden width; Transformer: the model width d (d2l: 256 both)
    int64_t num_layers = 1;        ///< RNN layers, or Transformer blocks, in encoder and decoder (d2l: 2)
    int64_t num_heads = 4;         ///< Transformer: attention heads per layer; divides hidden_size (d2l: 4)
    int64_t ffn_size = 64;         ///< Transformer: hidden width of the position-wise feed-forward
                                   ///< network (d2l: 64)
    bool d2l_decode_positions = false;  ///< Transformer: decoding gives every output token position 0's
                                        ///< encoding, as d2l 1.0.3's predict_step does (a d2l model
                                        ///< imported from a file sets it so that it translates as in
                                        ///< d2l); false: each token its true position
    int64_t attention_size = 0;    ///< additive attention's hidden width; 0 = hidden_size (d2l)
    CellType cell = CellType::gru; ///< RNN: recurrent cell of both sides
    bool bidirectional = false;    ///< RNN: bidirectional encoder (keys have 2*hidden_size features)
    bool reverse_source = false;   ///< RNN: (unidirectional) encoder reads the source right to left, as
                                   ///< Sutskever et al. reversed their inputs; attention positions
                                   ///< still refer to the source in its original order
    Scoring scoring = Scoring::additive;  ///< RNN: attention scoring function
    double dropout = 0.0;          ///< dropout between RNN layers and on attention weights; Transformer:
                                   ///< also on the positional encoding and every sublayer's output (d2l: 0.2)
    int64_t source_steps = 0;      ///< > 0: every source is pad_or_trim(ids + <eos>, N) and the encoder runs
                                   ///< over the padding, its final state taken after the pads, while
                                   ///< attention stays masked to the valid length (d2l's num_steps; a
                                   ///< d2l model imported with num_steps needs it). 0 = natural lengths
    InitScheme init = InitScheme::xavier; ///< RNN: weight initialisation (a Transformer's is d2l's:
                                          ///< PyTorch's defaults)
    uint64_t seed = 0;             ///< seed for the initial weights
    /// ModelArch::pretrained: the folder's configurations and vocabulary layout (null otherwise).
    /// hidden_size, num_layers, num_heads, ffn_size and dropout then echo its encoder's for display.
    std::shared_ptr<const PretrainedSpec> pretrained;

    bool is_transformer() const { return arch == ModelArch::transformer; }
    bool is_pretrained() const { return arch == ModelArch::pretrained; }
    /// Whether the model attends (every family but the RNN with Scoring::none).
    bool has_attention() const { return arch != ModelArch::rnn || scoring != Scoring::none; }

    /// Throws attnviz::ConfigError when a hyperparameter is out of range or
    /// combinations clash (the registry's rules; the vocabulary sizes are not checked).
    void validate() const;
    /// validate() plus the vocabulary sizes a model is built with (Seq2Seq's constructor).
    void validate_for_build() const;
    nlohmann::json to_json() const;
    static ModelConfig from_json(const nlohmann::json& j);
};

enum class OptimizerKind { adam, sgd, adadelta };
std::string to_string(OptimizerKind o);                  ///< "adam", "sgd", "adadelta"
OptimizerKind optimizer_from_string(const std::string& s);  ///< throws ConfigError

/// Learning-rate schedule.
enum class LrSchedule {
    none,     ///< constant learning rate
    plateau,  ///< reduce on plateau: times lr_factor after lr_patience epochs without a lower validation loss
    step,     ///< step decay: times lr_factor every lr_step epochs
    warmup    ///< per batch: linear warm-up to lr over warmup_steps batches, then lr * sqrt(warmup_steps / step)
              ///< (the inverse square root of "Attention is all you need", peaking at lr)
};
std::string to_string(LrSchedule s);                     ///< "none", "plateau", "step", "warmup"
LrSchedule lr_schedule_from_string(const std::string& s);  ///< throws ConfigError

/// SentencePiece algorithm of a subword model (core/text/tokenizer.hpp).
enum class SubwordModel {
    unigram,  ///< unigram language model (Kudo 2018), SentencePiece's default
    bpe       ///< byte-pair encoding (Sennrich et al. 2016): merges of frequent pairs
};
std::string to_string(SubwordModel m);                       ///< "unigram", "bpe"
SubwordModel subword_model_from_string(const std::string& s);  ///< throws ConfigError

/// The arithmetic of a training step's forward pass (core/train/precision.hpp).
enum class Precision {
    fp32,  ///< float32 throughout
    bf16   ///< mixed precision: matrix products in bfloat16 (autocast); weights, gradients, optimiser,
           ///< the residual stream (so LayerNorm and the attention softmax) and the loss stay float32.
           ///< Fast on GPUs and on CPUs with AMX or AVX-512 BF16, slower than fp32 on other CPUs.
           ///< Transformer only.
};
std::string to_string(Precision p);                        ///< "fp32", "bf16"
Precision precision_from_string(const std::string& s);     ///< throws ConfigError

/// Training settings. Defaults train the built-in tasks well on a CPU.
struct TrainConfig {
    int epochs = 20;                  ///< passes over the training pairs
    int64_t batch_size = 64;          ///< sentences per batch (d2l: 128)
    OptimizerKind optimizer = OptimizerKind::adam;  ///< optimiser
    double lr = 0.005;                ///< learning rate (d2l: 0.005 with Adam; Adadelta: 1.0)
    double momentum = 0.0;            ///< SGD momentum
    double grad_clip = 1.0;           ///< clip the global gradient norm to this; 0 = no clipping
    double teacher_forcing = 1.0;     ///< probability of feeding the true previous token
    uint64_t seed = 0;                ///< seeds weights, shuffling, dropout and teacher forcing
    std::string device = "auto";      ///< "auto", "cpu", "cuda", "cuda:N"
    Precision precision = Precision::fp32;  ///< training steps' arithmetic (validation, decoding and
                                            ///< checkpoints stay float32)
    int bucket_window = 20;           ///< length bucketing window in batches (0 = off)
    int64_t fixed_steps = 0;          ///< > 0: pad/truncate to this many steps like d2l (0 = natural lengths)
    int64_t max_length = 0;           ///< drop pairs longer than this (tokens, per side); 0 = keep all
    double val_fraction = 0.1;        ///< share of pairs held out for validation
    int64_t max_batches = 0;          ///< stop after this many batches in total; 0 = no limit (tests)
    int snapshot_every = 0;           ///< also publish weights every N batches (0 = once per epoch)
    double checkpoint_every_minutes = 0;  ///< attnviz-cli train/bench: also write the --save checkpoint
                                          ///< every this many minutes while training, between two batches
                                          ///< (0 = only at the end; the GUI leaves it off)
    int min_freq = 1;                 ///< vocabulary: tokens seen fewer times map to <unk>
    int64_t max_vocab = 0;            ///< vocabulary: keep at most this many tokens per side besides the
                                      ///< 4 special ones, the most frequent (0 = no cap)
    bool split_shuffle = true;        ///< false: first pairs train, last pairs validate (d2l's split)
    bool vocab_includes_val = false;  ///< true: build vocabularies from train + validation (as d2l does)
    int subword_vocab = 2000;         ///< subword level: pieces in the SentencePiece model (<unk> included)
    SubwordModel subword_model = SubwordModel::unigram;  ///< subword level: SentencePiece's algorithm
    size_t eval_sample = 200;         ///< validation pairs greedily decoded each epoch for accuracy/BLEU
                                      ///< (0 = none: accuracy and BLEU are then NaN, i.e. not measured)
    int patience = 0;                 ///< early stopping: stop after this many epochs without a lower
                                      ///< validation loss (0 = off)
    double min_delta = 0.0;           ///< early stopping: the validation loss must fall by more than this
                                      ///< below the last improvement's to count as one (Keras' and
                                      ///< Lightning's min_delta; 0 = any decrease counts)
    bool keep_best = false;           ///< the model kept at the end is the one of the epoch with the
                                      ///< lowest validation loss (TrainHistory::best_epoch says which)
    LrSchedule lr_schedule = LrSchedule::none;  ///< how the learning rate changes between epochs
    double lr_factor = 0.5;           ///< plateau and step schedules multiply the learning rate by this
    int lr_step = 10;                 ///< step schedule: multiply by lr_factor every this many epochs
    int lr_patience = 2;              ///< plateau schedule: epochs without a lower validation loss
                                      ///< before the learning rate is multiplied by lr_factor
    int64_t warmup_steps = 4000;      ///< warmup schedule: batches of linear warm-up
    /// At every validation, every head's importance and confidence (core/analysis/heads.hpp) on the
    /// validation set's first this many pairs, kept in the history (EpochReport::heads); 0 = off.
    /// Costs a forward and backward pass and a forced pass over them per validation.
    size_t head_stats = 0;
    int alignment_layer = -1;         ///< per-epoch alignment scores: the layer whose cross-attention
                                      ///< aligns (-1: the last; the RNN has one)
    std::string alignment_heads = "mean";  ///< ... and its heads: "mean" (all of them averaged) or a
                                           ///< comma-separated list of heads, averaged ("0" or "1,3")
    std::string tensorboard;          ///< a folder (created when missing) that receives TensorBoard event
                                      ///< files: training scalars, validation scores, attention heatmaps and
                                      ///< translations (core/train/tensorboard_log.hpp); "" = off
    int tensorboard_every = 10;       ///< TensorBoard: training loss, learning rate and speed every this
                                      ///< many batches (the loss their mean)

    void validate() const;            ///< throws ConfigError
    nlohmann::json to_json() const;
    static TrainConfig from_json(const nlohmann::json& j);
};

/// A list of attention heads as a user writes it (TrainConfig::alignment_heads, the CLI's
/// --alignment-heads): "mean" or "" -> empty (every head, averaged); "0,3" -> {0, 3}.
/// Throws ConfigError naming the forms for anything else (negative, repeated or too many heads).
std::vector<int> parse_head_list(const std::string& text);

}  // namespace attnviz
