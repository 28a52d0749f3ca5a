// The parameter table: every hyperparameter of ModelConfig and TrainConfig,
// declared once. core/config/registry.cpp turns it into validation, JSON and parsing.
#include <cctype>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "core/config/registry.hpp"

namespace attnviz::detail {

namespace {

using H = Hyperparameters;
using json = nlohmann::json;

/// Fluent declaration of one parameter: `add.integer(...).d2l(256).field(&H::model, &ModelConfig::x)`.
class Decl {
public:
    explicit Decl(ParamSpec& p) : m_p(p) {}
    Decl& d2l(json v) { m_p.d2l_value = std::move(v); return *this; }
    Decl& zero(std::string meaning) { m_p.zero_means = std::move(meaning); return *this; }
    Decl& advanced() { m_p.in_form = false; return *this; }
    Decl& exclusive_min() { m_p.min_exclusive = true; return *this; }
    Decl& rnn() { m_p.family = ParamFamily::rnn; return *this; }
    Decl& transformer() { m_p.family = ParamFamily::transformer; return *this; }
    Decl& folder() { m_p.folder = true; return *this; }
    /// A plain number, bool or string member of ModelConfig or TrainConfig.
    template <class S, class F>
    Decl& field(S H::*part, F S::*member) {
        if constexpr (std::is_integral_v<F> && !std::is_same_v<F, bool>) fits<F>();
        m_p.get = [part, member](const H& h) { return json((h.*part).*member); };
        m_p.put = [part, member](H& h, const json& v) { (h.*part).*member = v.get<F>(); };
        return *this;
    }
    /// An enum member: its names come from the core's to_string, its labels are the GUI's.
    template <class S, class E>
    Decl& options(S H::*part, E S::*member, const std::vector<std::pair<E, std::string>>& values) {
        for (const auto& [value, label] : values) {
            m_p.choices.push_back(to_string(value));
            m_p.choice_labels.push_back(label);
        }
        m_p.get = [part, member](const H& h) { return json(to_string((h.*part).*member)); };
        m_p.put = [part, member, values](H& h, const json& v) {
            for (const auto& entry : values)
                if (to_string(entry.first) == v.get<std::string>()) (h.*part).*member = entry.first;
        };
        return *this;
    }

private:
    /// An integer parameter's declared range must fit its member's type, so that a
    /// value the registry accepts (from a flag, a form or a file) is never narrowed.
    template <class F>
    void fits() const {
        if (m_p.type != ParamType::integer || !m_p.min || !m_p.max ||
            *m_p.min < static_cast<double>(std::numeric_limits<F>::lowest()) ||
            *m_p.max > static_cast<double>(std::numeric_limits<F>::max()))
            throw std::logic_error("parameter registry: the range of --" + m_p.flag + " does not fit its field");
    }
    ParamSpec& m_p;
};

class Declarations {
public:
    explicit Declarations(std::vector<ParamSpec>& out) : m_out(out) { m_out.reserve(64); }
    ParamGroup group = ParamGroup::model;

    Decl integer(const char* name, const char* flag, const char* label, double lo, double hi, const char* help) {
        return add(name, flag, label, ParamType::integer, help, lo, hi);
    }
    Decl real(const char* name, const char* flag, const char* label, double lo, double hi, const char* help) {
        return add(name, flag, label, ParamType::real, help, lo, hi);
    }
    Decl boolean(const char* name, const char* flag, const char* label, const char* help) {
        return add(name, flag, label, ParamType::boolean, help, {}, {});
    }
    Decl choice(const char* name, const char* flag, const char* label, const char* help) {
        return add(name, flag, label, ParamType::choice, help, {}, {});
    }
    Decl text(const char* name, const char* flag, const char* label, const char* help) {
        return add(name, flag, label, ParamType::text, help, {}, {});
    }

private:
    Decl add(const char* name, const char* flag, const char* label, ParamType type, const char* help,
             std::optional<double> lo, std::optional<double> hi) {
        ParamSpec p;
        p.name = name;
        p.flag = flag;
        p.label = label;
        p.type = type;
        p.group = group;
        p.help = help;
        p.min = lo;
        p.max = hi;
        m_out.push_back(std::move(p));
        return Decl(m_out.back());
    }
    std::vector<ParamSpec>& m_out;
};

std::string check_device(const std::string& s) {
    if (s == "auto" || s == "cpu" || s == "cuda") return {};
    if (s.rfind("cuda:", 0) == 0 && s.size() > 5 && s.size() <= 8) {
        bool digits = true;
        for (size_t i = 5; i < s.size(); ++i) digits = digits && std::isdigit(static_cast<unsigned char>(s[i]));
        if (digits) return {};
    }
    return "auto, cpu, cuda or cuda:N";
}

std::string check_heads(const std::string& s) {
    try {
        if (!s.empty()) {
            parse_head_list(s);
            return {};
        }
    } catch (const std::exception&) {
    }
    return "\"mean\" or head numbers separated by commas (\"0,3\")";
}

}  // namespace

std::vector<ParamSpec> declare_parameters() {
    std::vector<ParamSpec> ps;
    Declarations add(ps);
    using M = ModelConfig;
    using T = TrainConfig;

    add.group = ParamGroup::model;
    add.choice("arch", "arch", "Architecture",
               "model family: d2l's RNN encoder-decoder with attention, or d2l's Transformer (a pretrained "
               "Hugging Face model comes from its folder: --init-from)")
        .d2l("rnn").options(&H::model, &M::arch, {{ModelArch::rnn, "RNN with attention"},
                                                   {ModelArch::transformer, "Transformer"},
                                                   {ModelArch::pretrained, "Pretrained (Hugging Face)"}});
    add.integer("embed_size", "embed", "Embedding size", 1, 4096, "RNN: embedding width of both sides")
        .d2l(256).rnn().field(&H::model, &M::embed_size);
    add.integer("hidden_size", "hidden", "Hidden size", 1, 4096,
                "recurrent hidden width of encoder and decoder; Transformer: the model width")
        .d2l(256).field(&H::model, &M::hidden_size);
    add.integer("num_layers", "layers", "Layers", 1, 48, "recurrent layers of encoder and decoder; Transformer: blocks")
        .d2l(2).field(&H::model, &M::num_layers);
    add.integer("num_heads", "heads", "Heads", 1, 64, "Transformer: attention heads per layer (divides the width)")
        .d2l(4).transformer().field(&H::model, &M::num_heads);
    add.integer("ffn_size", "ffn", "Feed-forward size", 1, 16384,
                "Transformer: hidden width of the position-wise feed-forward network")
        .d2l(64).transformer().field(&H::model, &M::ffn_size);
    add.choice("cell", "cell", "Cell", "RNN: recurrent cell of both sides")
        .d2l("gru").rnn().options(&H::model, &M::cell, {{CellType::gru, "GRU"}, {CellType::lstm, "LSTM"}});
    add.boolean("bidirectional", "bidirectional", "Bidirectional encoder",
                "RNN: bidirectional encoder (keys have 2*hidden features)")
        .d2l(false).rnn().field(&H::model, &M::bidirectional);
    add.boolean("reverse_source", "reverse-source", "Read the source reversed (Sutskever)",
                "RNN: unidirectional encoder reads the source right to left; heatmap columns stay in reading order")
        .d2l(false).rnn().field(&H::model, &M::reverse_source);
    add.choice("scoring", "scoring", "Scoring", "RNN: how the decoder state scores each encoder state")
        .d2l("additive").rnn()
        .options(&H::model, &M::scoring,
                 {{Scoring::additive, "additive (Bahdanau)"}, {Scoring::dot, "dot (Luong)"},
                  {Scoring::scaled_dot, "scaled dot"}, {Scoring::general, "general (Luong bilinear)"},
                  {Scoring::none, "none (no attention baseline)"}});
    add.integer("attention_size", "attention-size", "Attention size", 0, 4096,
                "RNN: hidden width of additive attention; 0 = the hidden size")
        .d2l(0).zero("= hidden").rnn().field(&H::model, &M::attention_size);
    add.real("dropout", "dropout", "Dropout", 0, 0.99,
             "dropout between recurrent layers and on attention weights; Transformer: also on the positional "
             "encoding and each sublayer's output")
        .d2l(0.2).field(&H::model, &M::dropout);
    add.integer("source_steps", "source-steps", "Source steps", 0, max_padded_steps,
                "pad/truncate sources to this many steps and run the encoder over the padding like d2l's "
                "num_steps (attention masked to the sentence); 0 = natural lengths")
        .d2l(9).zero("natural lengths").advanced().field(&H::model, &M::source_steps);
    add.boolean("d2l_decode_positions", "d2l-decode-positions", "Decode at position 0 (d2l's predict_step)",
                "Transformer: decoding gives every output token position 0's encoding, as d2l 1.0.3's "
                "predict_step does (d2l imports set it); false: true positions")
        .advanced().transformer().field(&H::model, &M::d2l_decode_positions);
    add.choice("init", "init", "Init", "RNN: weight initialisation (a Transformer's is d2l's: PyTorch's defaults)")
        .d2l("xavier").rnn()
        .options(&H::model, &M::init,
                 {{InitScheme::xavier, "Xavier (d2l)"}, {InitScheme::uniform, "uniform ±0.08 (Sutskever)"},
                  {InitScheme::orthogonal, "orthogonal (Bahdanau)"}});

    add.group = ParamGroup::training;
    add.choice("optimizer", "optimizer", "Optimiser", "optimiser")
        .d2l("adam")
        .options(&H::train, &T::optimizer,
                 {{OptimizerKind::adam, "Adam"}, {OptimizerKind::sgd, "SGD"}, {OptimizerKind::adadelta, "Adadelta"}});
    add.real("lr", "lr", "Learning rate", 0, 100, "learning rate (Adam: 0.005 as d2l; SGD: 0.1; Adadelta: 1.0)")
        .exclusive_min().d2l(0.005).field(&H::train, &T::lr);
    add.real("momentum", "momentum", "Momentum", 0, 0.99, "SGD momentum (other optimisers ignore it)")
        .field(&H::train, &T::momentum);
    add.integer("batch_size", "batch", "Batch size", 1, 65536, "sentences per batch")
        .d2l(128).field(&H::train, &T::batch_size);
    add.integer("epochs", "epochs", "Epochs", 1, 100000,
                "passes over the training pairs (CLI --resume: the total to reach)")
        .d2l(30).field(&H::train, &T::epochs);
    add.real("teacher_forcing", "teacher-forcing", "Teacher forcing", 0, 1,
             "probability of feeding the true previous token to the decoder")
        .d2l(1.0).field(&H::train, &T::teacher_forcing);
    add.real("grad_clip", "clip", "Gradient clip", 0, 1e6, "clip the global gradient norm to this; 0 = off")
        .d2l(1.0).zero("off").field(&H::train, &T::grad_clip);
    add.integer("seed", "seed", "Seed", 0, 9007199254740991.0,  // 2^53 - 1: exact as a double and in any JSON reader
                "seeds weights, split, shuffling, dropout and teacher forcing");
    ps.back().get = [](const H& h) { return json(h.train.seed); };
    ps.back().put = [](H& h, const json& v) { h.train.seed = h.model.seed = v.get<uint64_t>(); };
    add.text("device", "device", "Device", "where to train: auto (CUDA if available), cpu, cuda or cuda:N")
        .field(&H::train, &T::device);
    ps.back().check_text = check_device;
    add.choice("precision", "precision", "Precision",
               "Transformer: training steps' arithmetic; bf16 = mixed precision (matrix products in bfloat16, "
               "weights, optimiser and loss in float32): fast on GPUs and on CPUs with AMX or AVX-512 BF16, "
               "slower on other CPUs")
        .transformer()
        .options(&H::train, &T::precision, {{Precision::fp32, "fp32"}, {Precision::bf16, "bf16 mixed"}});
    add.text("tensorboard", "tensorboard", "TensorBoard folder",
             "write TensorBoard event files to this folder (created when missing): training loss, learning rate "
             "and speed, validation loss, BLEU and accuracy, heatmaps of the first three validation sentences' "
             "attention and the validation translations; empty = off")
        .folder().field(&H::train, &T::tensorboard);
    add.integer("tensorboard_every", "tensorboard-every", "TensorBoard every (batches)", 1, 1000000,
                "TensorBoard: write the training loss (the mean of these batches), learning rate and speed every "
                "this many batches")
        .advanced().field(&H::train, &T::tensorboard_every);
    add.integer("patience", "patience", "Early stopping patience", 0, 10000,
                "stop after this many epochs without a lower validation loss; 0 = off")
        .zero("off").field(&H::train, &T::patience);
    add.real("min_delta", "min-delta", "Early stopping min. improvement", 0, 100,
             "early stopping: a validation loss counts as lower only when it is more than this below the "
             "best one before it (e.g. 0.001); 0 = any decrease")
        .field(&H::train, &T::min_delta);
    add.boolean("keep_best", "keep-best", "Keep the best epoch's model",
                "the model kept at the end is the one of the epoch with the lowest validation loss")
        .field(&H::train, &T::keep_best);
    add.choice("lr_schedule", "lr-schedule", "LR schedule", "how the learning rate changes between epochs")
        .options(&H::train, &T::lr_schedule,
                 {{LrSchedule::none, "constant"}, {LrSchedule::plateau, "reduce on plateau"},
                  {LrSchedule::step, "step decay"}, {LrSchedule::warmup, "warm-up, then 1/sqrt(step)"}});
    add.real("lr_factor", "lr-factor", "LR factor", 0.01, 0.99,
             "plateau and step schedules multiply the learning rate by this")
        .field(&H::train, &T::lr_factor);
    add.integer("lr_step", "lr-step", "LR step (epochs)", 1, 100000,
                "step schedule: multiply the learning rate by --lr-factor every this many epochs")
        .field(&H::train, &T::lr_step);
    add.integer("lr_patience", "lr-patience", "LR patience (epochs)", 0, 10000,
                "plateau schedule: epochs without a lower validation loss before the rate is reduced")
        .field(&H::train, &T::lr_patience);
    add.integer("warmup_steps", "warmup-steps", "Warm-up steps", 1, 1e9,
                "warmup schedule: batches over which the learning rate rises linearly to --lr; after them it "
                "falls as 1/sqrt(batch)")
        .field(&H::train, &T::warmup_steps);
    add.integer("alignment_layer", "alignment-layer", "Alignment layer", -1, 63,
                "per-epoch alignment scores: the layer whose cross-attention aligns; -1 = the last")
        .advanced().field(&H::train, &T::alignment_layer);
    add.text("alignment_heads", "alignment-heads", "Alignment heads",
             "per-epoch alignment scores: that layer's heads, \"mean\" or a list such as \"0,3\" (averaged)")
        .advanced().field(&H::train, &T::alignment_heads);
    ps.back().check_text = check_heads;
    add.integer("head_stats", "head-stats", "Head statistics", 0, 100000,
                "at every validation, every attention head's importance and confidence on the validation "
                "set's first N pairs, kept in the history; 0 = off")
        .zero("off").advanced().field(&H::train, &T::head_stats);
    add.integer("eval_sample", "eval-sample", "Evaluation sample", 0, 1000000,
                "validation pairs greedily decoded each epoch for accuracy and BLEU; 0 = none (not measured)")
        .zero("none").advanced().field(&H::train, &T::eval_sample);
    add.integer("max_batches", "max-batches", "Max batches", 0, 1e12,
                "stop after this many batches in total; 0 = no limit")
        .zero("no limit").advanced().field(&H::train, &T::max_batches);
    add.integer("snapshot_every", "snapshot-every", "Snapshot every", 0, 1000000,
                "also publish the weights every this many batches; 0 = once per epoch")
        .zero("once per epoch").advanced().field(&H::train, &T::snapshot_every);
    add.real("checkpoint_every_minutes", "checkpoint-every-minutes", "Checkpoint every (minutes)", 0, 1e6,
             "CLI: also write the --save checkpoint every this many minutes while training (atomically), "
             "so that a crash loses little; 0 = only at the end")
        .zero("only at the end").advanced().field(&H::train, &T::checkpoint_every_minutes);

    add.group = ParamGroup::data;
    add.integer("max_length", "max-length", "Max length", 0, 100000,
                "drop pairs with more tokens than this on either side; 0 = keep all")
        .zero("no limit").field(&H::train, &T::max_length);
    add.real("val_fraction", "val-fraction", "Validation share", 0, 0.9, "share of pairs held out for validation")
        .field(&H::train, &T::val_fraction);
    add.integer("min_freq", "min-freq", "Min frequency", 1, 1000000, "tokens seen fewer times map to <unk>")
        .d2l(2).field(&H::train, &T::min_freq);
    add.integer("max_vocab", "max-vocab", "Max vocabulary", 0, 100000000,
                "keep at most this many tokens per side besides the 4 special ones, the most frequent "
                "(ties alphabetically); rarer ones map to <unk>; 0 = no cap")
        .zero("no cap").field(&H::train, &T::max_vocab);
    add.integer("bucket_window", "bucket-window", "Bucket window", 0, 100000,
                "sort this many batches' worth of pairs by length before batching; 0 = off")
        .zero("off").advanced().field(&H::train, &T::bucket_window);
    add.integer("fixed_steps", "steps", "Fixed steps", 0, max_padded_steps,
                "pad/truncate every sequence to this many steps like d2l; 0 = natural lengths")
        .d2l(9).zero("natural lengths").advanced().field(&H::train, &T::fixed_steps);
    add.boolean("split_shuffle", "split-shuffle", "Shuffle before splitting",
                "shuffle before splitting off validation (false: the last pairs validate, as d2l)")
        .d2l(false).advanced().field(&H::train, &T::split_shuffle);
    add.boolean("vocab_includes_val", "vocab-includes-val", "Vocabulary includes validation",
                "build the vocabularies from train + validation pairs (as d2l)")
        .d2l(true).advanced().field(&H::train, &T::vocab_includes_val);
    // Subword level only (--level subword). 2000 pieces suit Tatoeba-sized corpora (a few
    // thousand words per side); the model cannot have fewer pieces than the text has
    // characters (Tokenizer::train_subword says how many), and 100000 is far beyond what a
    // single-GPU RNN vocabulary needs.
    add.integer("subword_vocab", "subword-vocab", "Subword vocabulary", 50, 100000,
                "subword level: pieces in the SentencePiece model, trained on the training pairs")
        .field(&H::train, &T::subword_vocab);
    add.choice("subword_model", "subword-model", "Subword model",
               "subword level: SentencePiece's algorithm (unigram language model or byte-pair encoding)")
        .options(&H::train, &T::subword_model, {{SubwordModel::unigram, "unigram"}, {SubwordModel::bpe, "BPE"}});

    const Hyperparameters defaults;
    for (auto& p : ps) p.default_value = p.get(defaults);
    return ps;
}

}  // namespace attnviz::detail
