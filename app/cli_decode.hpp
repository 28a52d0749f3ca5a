#pragma once
// What attnviz-cli's commands that apply a checkpoint share (translate, eval,
// attribute, agreement): the decoding flags, loading the model onto a device,
// the sentences to work on (arguments or stdin) and a corpus's pairs to evaluate.
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "app/cli_corpus.hpp"
#include "core/data/data.hpp"
#include "core/decode/translation.hpp"
#include "core/decode/translation_model.hpp"

namespace attnviz::cli {

/// Decoding flags shared by translate and eval.
struct DecodeFlags {
    int64_t beam = 1, nbest = 1, max_length = 30, batch = 64, batch_tokens = 0;
    double length_penalty = 1.0;
    std::string device = "cpu";
    std::string source_lang, target_lang;
    CLI::Option* beam_opt = nullptr;
    CLI::Option* max_length_opt = nullptr;
    CLI::Option* length_penalty_opt = nullptr;

    void add_to(CLI::App& app, bool with_nbest);
    /// The options the flags ask for, over the model's own (TranslationModel::decode_defaults: a
    /// pretrained model's generation config decides what a flag left out does, as generate() does);
    /// UsageError when --nbest exceeds an explicit --beam.
    DecodeOptions options(const TranslationModel& model) const;
};

/// --intervene KIND [--intervene-seed N] (translate adds --intervene-at).
struct InterventionFlags {
    std::string kind;   ///< "" = none
    uint64_t seed = 0;  ///< permute's seed

    /// `forms` lists the kinds offered in --help.
    void add_to(CLI::App& app, const std::string& forms);
    /// The intervention, at every step (UsageError for a bad form).
    Intervention at_every_step() const;
};

/// --mask-heads KIND:LAYER:HEAD[,...]: heads switched off for the whole run (their gates 0,
/// core/model/head_gates.hpp): translate, eval, attribute, agreement, bench-decode, heads.
struct MaskHeadsFlag {
    std::string text;  ///< "" = none

    void add_to(CLI::App& app);
    bool given() const { return !text.empty(); }
    /// The heads named; UsageError naming the flag and the bad item.
    std::vector<AttentionMapId> heads() const;
    /// The loaded model's network with those heads' gates at 0, for the rest of the run (the CLI
    /// owns the model: nothing else uses it). UsageError naming the flag, the item and the model's
    /// sizes when a head is not in it.
    void apply(const TranslationModel& model) const;
};

/// --precision fp32 | bf16 | int8: the weights inference runs with (core/model/inference_precision.hpp):
/// translate, eval, heads, attribute, bench-decode.
struct PrecisionFlag {
    std::string name = "fp32";
    /// --int8-kernels auto | fbgemm | onednn: the kernels int8 weights are packed for
    /// (core/model/inference_precision.hpp's Int8Kernels); auto: preferred_int8_kernels(rows).
    std::string kernels = "auto";
    /// The rows a product will have (sentences decoded together x beam), set by the command before
    /// load(): what auto picks the kernels for.
    int64_t rows = 1;

    void add_to(CLI::App& app);
    /// The loaded model's network converted, for the rest of the run (the CLI owns the model: nothing
    /// else uses it); UsageError naming the flag when the model cannot be converted (the RNN, a GPU).
    void apply(const TranslationModel& model) const;
    /// The model at `path` on `device` in this precision: a model folder opened for int8 / bf16 on the
    /// CPU is converted as its weights are read (its float32 weights never all resident, issue 49),
    /// anything else loaded and then converted (apply).
    TranslationModelPtr load(const std::string& path, const std::string& device) const;
};

/// The precision a loaded model's weights are in: "fp32", "bf16", "int8" (the JSON outputs' "precision").
std::string precision_of(const TranslationModel& model);
/// The kernels an int8 model's products run on: "fbgemm", "onednn"; "" for another precision (the
/// JSON outputs' "int8_kernels").
std::string int8_kernels_text(const TranslationModel& model);

/// --source-lang / --target-lang checked against `model` before any work, for the commands that score a
/// corpus's pairs with their language codes (heads, eval; core/data/training_data.hpp's add_language_codes):
/// a language given to a model without languages, or one it lacks, is refused with the line translate gives;
/// a multilingual model (M2M100, NLLB, mBART-50) whose tokenizer_config.json names no target language needs
/// --target-lang (ConfigError in one line naming the flag and one of its languages).
void check_languages(const TranslationModel& model, const std::string& source, const std::string& target);

/// Loads a checkpoint's model onto the requested device.
TranslationModelPtr load_model_on(const std::string& path, const std::string& device);

/// The sentences given, or stdin's lines when none (a trailing CR dropped); FileError naming
/// the sentence or line that is not UTF-8.
std::vector<std::string> read_sentences(const std::vector<std::string>& given);

/// The corpus of --task / --data for `model`: a pretrained model reads the sentences as they are,
/// with its own tokenizer (word level would lowercase them and split their punctuation first, which
/// the model never sees: an NLLB pair's loss 6.50 instead of transformers' 5.02); others at --level.
Corpus load_corpus_for(const CorpusFlags& flags, const TranslationModel& model, bool verbose = true);

/// The pairs eval scores: --split val re-splits the corpus as training did (the checkpoint's
/// seed and settings); all: every pair (subword: cut by the model's own SentencePiece model).
/// UsageError when the corpus' level is not the model's; ConfigError when there are none.
std::vector<SentencePair> evaluation_pairs(const TranslationModel& model, const Corpus& corpus,
                                           const std::string& split);

}  // namespace attnviz::cli
