// Decoding flags, model loading, sentences and evaluation pairs for attnviz-cli's commands.
#include "app/cli_decode.hpp"

#include <iostream>

#include "app/cli_common.hpp"
#include "core/io/error.hpp"
#include "core/io/line_reader.hpp"
#include "core/io/message.hpp"
#include "core/model/memory_bound.hpp"
#include "core/model/device.hpp"
#include "core/model/inference_precision.hpp"
#include "core/persist/model_file.hpp"
#include "core/text/pretrained_tokenizer.hpp"
#include "core/text/text.hpp"
#include "core/text/unicode.hpp"

namespace attnviz::cli {

void DecodeFlags::add_to(CLI::App& app, bool with_nbest) {
    DecodeOptions d;
    beam_opt = app.add_option("--beam", beam, "beam width; 1 = greedy (a pretrained model: its generation config's)")
                   ->type_name("INT")->default_str("1")->check(positive_int())->group("decoding");
    if (with_nbest)
        app.add_option("--nbest", nbest, "hypotheses per sentence (raises --beam to at least this)")
            ->type_name("INT")->default_str("1")->check(positive_int())->group("decoding");
    max_length_opt = app.add_option("--max-length", max_length, "maximum output tokens per sentence, <eos> included")
                         ->type_name("INT")->default_str(std::to_string(d.max_length))->check(positive_int())
                         ->group("decoding");
    length_penalty_opt = app.add_option("--length-penalty", length_penalty, "beam: score = log P / length^this (0 = none)")
                             ->type_name("FLOAT")->default_str("1")->check(non_negative_number())->group("decoding");
    app.add_option("--source-lang", source_lang, "a multilingual pretrained model's source language (e.g. en, eng_Latn)")
        ->type_name("LANG")->group("decoding");
    app.add_option("--target-lang", target_lang, "a multilingual pretrained model's target language (e.g. fr, fra_Latn)")
        ->type_name("LANG")->group("decoding");
    app.add_option("--decode-batch", batch, "sentences decoded together")
        ->type_name("INT")->default_str(std::to_string(d.batch_size))->check(positive_int())
        ->group("decoding");
    app.add_option("--batch-tokens", batch_tokens,
                   "also at most this many source tokens a batch, padding included (0: by sentences only)")
        ->type_name("INT")->default_str("0")->check(non_negative_int())->group("decoding");
    app.add_option("--device", device, "auto | cpu | cuda | cuda:N")
        ->type_name("NAME")->default_str(device)->group("decoding");
}

DecodeOptions DecodeFlags::options(const TranslationModel& model) const {
    DecodeOptions d = model.decode_defaults();
    if (max_length_opt->count() > 0 || !model.config().is_pretrained()) d.max_length = max_length;
    d.num_hypotheses = nbest;
    if (beam_opt->count() > 0 || !model.config().is_pretrained()) d.beam_size = beam;
    if (nbest > d.beam_size) {
        if (beam_opt->count() > 0)
            throw UsageError("--nbest " + std::to_string(nbest) + " needs --beam of at least " +
                             std::to_string(nbest));
        d.beam_size = nbest;
    }
    if (length_penalty_opt->count() > 0 || !model.config().is_pretrained()) d.length_penalty = length_penalty;
    d.batch_size = batch;
    d.batch_tokens = batch_tokens;
    d.source_lang = source_lang;
    d.target_lang = target_lang;
    return d;
}

void InterventionFlags::add_to(CLI::App& app, const std::string& forms) {
    app.add_option("--intervene", kind, "change the attention at every step: " + forms)
        ->type_name("KIND")->group("what if");
    app.add_option("--intervene-seed", seed, "the seed of --intervene permute's permutations")
        ->type_name("INT")->default_str("0")->group("what if");
}

Intervention InterventionFlags::at_every_step() const {
    if (kind.empty()) return {};
    try {
        Intervention iv = parse_intervention(kind);
        iv.seed = seed;
        return iv;
    } catch (const ConfigError& e) {
        throw UsageError(std::string("--intervene: ") + e.what());
    }
}

void MaskHeadsFlag::add_to(CLI::App& app) {
    app.add_option("--mask-heads", text,
                   "switch these heads off for the whole run: KIND:LAYER:HEAD[,...], KIND cross | encoder_self | "
                   "decoder_self (e.g. cross:0:1,encoder_self:1:3)")
        ->type_name("LIST")->group("what if");
}

std::vector<AttentionMapId> MaskHeadsFlag::heads() const {
    if (text.empty()) return {};
    try {
        return parse_head_ids(text);
    } catch (const ConfigError& e) {
        throw UsageError(std::string("--mask-heads: ") + e.what());
    }
}

void MaskHeadsFlag::apply(const TranslationModel& model) const {
    if (text.empty()) return;
    const auto off = heads();
    EncoderDecoder& network = *model.network();
    try {
        network.set_head_gates(HeadGates::mask(network.head_groups(), off));
    } catch (const ConfigError& e) {
        throw UsageError(std::string("--mask-heads: ") + e.what());
    }
}

void PrecisionFlag::add_to(CLI::App& app) {
    app.add_option("--precision", name,
                   "the weights inference runs with: fp32 (default), bf16 (bfloat16 weights and products), int8 "
                   "(weights per output channel, activations per product; softmax, norms and maps in float). "
                   "Not for the RNN; CPU only")
        ->type_name("fp32|bf16|int8")
        ->check(CLI::IsMember({"fp32", "bf16", "int8"}))
        ->default_str("fp32");
    app.add_option("--int8-kernels", kernels,
                   "the int8 products' kernels: auto (default: below 32 rows (batch x beam) rowwise, attnviz's own "
                   "on the int8 rows as they are, nothing packed at opening; from 32 rows oneDNN's on a CPU with "
                   "AMX-INT8 or AVX-512 VNNI, fbgemm's otherwise), fbgemm, onednn or rowwise")
        ->type_name("auto|fbgemm|onednn|rowwise")
        ->check(CLI::IsMember({"auto", "fbgemm", "onednn", "rowwise"}))
        ->default_str("auto");
}

void PrecisionFlag::apply(const TranslationModel& model) const {
    try {
        set_inference_precision(*model.network(), parse_inference_precision(name));
    } catch (const ConfigError& e) {
        throw UsageError(std::string("--precision: ") + e.what());
    }
}

namespace {

/// A pretrained model's generation settings generate() would apply and attnviz does not (sampling,
/// diverse beams, ...): one warning naming them, so that a difference from transformers is not silent.
void warn_unapplied_generation(const TranslationModel& model) {
    const auto& spec = model.config().pretrained;
    if (!spec || spec->generation.ignored.empty()) return;
    std::string names;
    for (const auto& n : spec->generation.ignored) names += (names.empty() ? "" : ", ") + n;
    warn("the model's generation settings name " + names + ", which attnviz does not apply: transformers' generate() "
         "may choose other tokens (attnviz searches greedily or by beams, with the other settings as generate())");
}

}  // namespace

TranslationModelPtr PrecisionFlag::load(const std::string& path, const std::string& device) const {
    const torch::Device on = resolve_device(device);
    const InferencePrecision p = parse_inference_precision(name);
    set_int8_kernels(kernels == "onednn"    ? Int8Kernels::onednn
                     : kernels == "fbgemm"  ? Int8Kernels::fbgemm
                     : kernels == "rowwise" ? Int8Kernels::rowwise
                                           : preferred_int8_kernels(rows));
    TranslationModelPtr model = (on.is_cpu() ? load_model(path, p) : load_model(path))->on_device(on);
    apply(*model);  // checkpoints and d2l files are converted here; the RNN and a GPU refused here
    warn_unapplied_generation(*model);
    keep_until_exit(model);
    return model;
}

void check_languages(const TranslationModel& model, const std::string& source, const std::string& target) {
    const auto& pt = model.tokenizer().pretrained();
    if (!pt) {
        if (!source.empty() || !target.empty())
            throw ConfigError("this model translates one language pair: it has no languages to choose from");
        return;
    }
    // The lines translate gives: BART and T5 have no languages, a Marian model no source languages.
    if (!source.empty()) pt->language_token(source, false);
    if (!target.empty()) pt->language_token(target, true);
    const PretrainedTokenizerKind kind = pt->kind();
    if (kind != PretrainedTokenizerKind::m2m100 && kind != PretrainedTokenizerKind::nllb &&
        kind != PretrainedTokenizerKind::mbart50)
        return;
    if (target.empty() && pt->default_target_language().empty()) {
        const auto langs = pt->target_languages();
        throw ConfigError("this model translates into " + std::to_string(langs.size()) +
                          " languages and its tokenizer_config.json names none (\"tgt_lang\"): choose one with "
                          "--target-lang (e.g. " + (langs.empty() ? std::string("fr") : langs.front()) + ")");
    }
}

std::string precision_of(const TranslationModel& model) {
    return precision_name(inference_precision(*model.network()));
}

std::string int8_kernels_text(const TranslationModel& model) {
    if (inference_precision(*model.network()) != InferencePrecision::int8) return "";
    return int8_kernels_name(int8_kernels_of(*model.network()));
}

TranslationModelPtr load_model_on(const std::string& path, const std::string& device) {
    TranslationModelPtr model = load_model(path)->on_device(resolve_device(device));
    warn_unapplied_generation(*model);
    keep_until_exit(model);
    return model;
}

std::vector<std::string> read_sentences(const std::vector<std::string>& given) {
    // Lines from stdin as the corpus reader bounds a file's: one too long is refused before
    // memory grows for it, and so is more input than a piece of work may take.
    std::vector<std::string> sentences =
        given.empty() ? read_stream_lines(std::cin, "<stdin>", hard_line_limit, static_cast<uint64_t>(memory_bound()))
                      : given;
    for (size_t i = 0; i < sentences.size(); ++i)
        if (!is_valid_utf8(sentences[i]))
            throw FileError((given.empty() ? "<stdin>:" + std::to_string(i + 1) : "sentence " + std::to_string(i + 1)) +
                            ": invalid UTF-8");
    return sentences;
}

Corpus load_corpus_for(const CorpusFlags& flags, const TranslationModel& model, bool verbose) {
    const bool pretrained = model.tokenizer().pretrained() != nullptr;
    return flags.load(verbose, pretrained ? model.tokenizer_ptr() : nullptr);
}

std::vector<SentencePair> evaluation_pairs(const TranslationModel& model, const Corpus& corpus,
                                           const std::string& split) {
    // A pretrained model cuts any corpus with its own tokenizer, as fine-tuning does (prepare_data).
    const bool pretrained = model.tokenizer().pretrained() != nullptr;
    if (!pretrained && corpus.level != model.level())
        throw UsageError("the model works on " + level_noun(model.level()) +
                         " but the corpus is tokenised differently (see --level)");
    std::vector<SentencePair> pairs;
    if (split == "all") {
        pairs = corpus.pairs;
        if (pretrained && !corpus.model_pieces) {
            for (auto& p : pairs) {
                p.src = model.tokenizer().encode(detokenize(p.src, corpus.level), false);
                p.tgt = model.tokenizer().encode_target(detokenize(p.tgt, corpus.level), false);
                p.alignment.reset();  // word alignments do not hold for pieces
            }
        } else if (model.level() == TokenLevel::subword && !pretrained) {
            for (auto& p : pairs) {
                p.src = model.tokenizer().split_words(p.src);
                p.tgt = model.tokenizer().split_words(p.tgt);
                p.alignment.reset();  // word alignments do not hold for pieces
            }
        }
    } else {
        TrainingData data = prepare_data(corpus, model.trained_with(), model.tokenizer_ptr());
        pairs = data.val;
    }
    if (pairs.empty()) throw ConfigError(corpus.name + ": no pairs to evaluate (split " + quote(split) + ")");
    return pairs;
}

}  // namespace attnviz::cli
