#pragma once
// TranslationModel: "a model you can translate with" as one immutable bundle --
// the network's configuration and weights, both vocabularies, the tokenizer,
// the settings it was trained with and its training history. The CLI, the GUI,
// beam search, export and the live probe all translate through it; a
// checkpoint file is a TranslationModel plus the optimiser's state.
//
// Sharing between threads (as CTranslate2's Translator documents it): a
// TranslationModel is never modified after construction. Hold it as
// std::shared_ptr<const TranslationModel>; translate() and every other const
// member may be called from any number of threads at once (decoding runs in
// inference mode and only reads the weights). The training session publishes a
// new TranslationModel for each snapshot instead of changing an old one.
#include <memory>
#include <string>
#include <vector>

#include "core/config/config.hpp"
#include "core/decode/search.hpp"
#include "core/decode/translation.hpp"
#include "core/config/history.hpp"
#include "core/model/encoder_decoder.hpp"
#include "core/text/text.hpp"
#include "core/text/vocab.hpp"
#include "core/text/tokenizer.hpp"

namespace attnviz {

class TranslationModel : public std::enable_shared_from_this<TranslationModel> {
public:
    /// Takes the network as it is (no copy) and puts it in evaluation mode: the
    /// caller must not train or change it afterwards. Its vocabulary sizes must
    /// match the vocabularies (ConfigError otherwise).
    TranslationModel(Network network, std::shared_ptr<const Vocab> src_vocab, std::shared_ptr<const Vocab> tgt_vocab,
                     TokenizerPtr tokenizer, TrainConfig trained_with = {}, TrainHistory history = {},
                     std::string corpus_name = {});
    /// The same with the stateless tokenizer of word or character level
    /// (Tokenizer::for_level; ConfigError for subword, which needs its model).
    TranslationModel(Network network, std::shared_ptr<const Vocab> src_vocab, std::shared_ptr<const Vocab> tgt_vocab,
                     TokenLevel level, TrainConfig trained_with = {}, TrainHistory history = {},
                     std::string corpus_name = {});

    const ModelConfig& config() const { return m_network->config(); }
    const Vocab& src_vocab() const { return *m_src_vocab; }
    const Vocab& tgt_vocab() const { return *m_tgt_vocab; }
    /// The vocabularies as shared pointers (a snapshot shares them with the trainer: no copies).
    const std::shared_ptr<const Vocab>& src_vocab_ptr() const { return m_src_vocab; }
    const std::shared_ptr<const Vocab>& tgt_vocab_ptr() const { return m_tgt_vocab; }
    TokenLevel level() const { return m_tokenizer->level(); }
    /// How sentences become tokens and back (subword: with the SentencePiece model).
    const Tokenizer& tokenizer() const { return *m_tokenizer; }
    const TokenizerPtr& tokenizer_ptr() const { return m_tokenizer; }
    /// The training settings the weights came from (defaults when unknown).
    const TrainConfig& trained_with() const { return m_trained_with; }
    /// The training history up to these weights (epochs_done, global_step, best_epoch, curves).
    const TrainHistory& history() const { return m_history; }
    /// What it was trained on (a task name or a file path), for display.
    const std::string& corpus_name() const { return m_corpus_name; }
    bool has_attention() const { return config().has_attention(); }
    torch::Device device() const;
    int64_t parameter_count() const;

    /// The options a translation starts from: DecodeOptions{} for attnviz's own models; for a
    /// pretrained model what its generation config asks of generate() -- beams, length limit,
    /// length penalty, early stopping, bad words, forced tokens -- in GenerationRules.
    DecodeOptions decode_defaults() const;
    /// A multilingual pretrained model's languages (core/text/pretrained_tokenizer.hpp); empty otherwise.
    std::vector<std::string> source_languages() const;
    std::vector<std::string> target_languages() const;

    /// Translates sentences (normalised and tokenised by tokenizer()), greedy or
    /// beam search per options (beam search when beam_size > 1 or beam_tree). An empty sentence gives a Translation without
    /// hypotheses. Throws ConfigError on bad options, Error on invalid UTF-8.
    std::vector<Translation> translate(const std::vector<std::string>& sentences,
                                       const DecodeOptions& options = {}) const;
    /// The same for sentences already split into tokens (no normalisation).
    std::vector<Translation> translate_tokens(const std::vector<std::vector<std::string>>& sources,
                                              const DecodeOptions& options = {}) const;

    /// Forced decoding: each (source, target) sentence pair runs with the target's
    /// tokens given instead of chosen -- ForceMode::reference: all of them, then
    /// <eos>; ForceMode::prefix: then the model goes on, greedily or, with
    /// options.beam_size > 1 (or options.beam_tree), by beam search, which returns
    /// options.num_hypotheses continuations of the same prefix. Per step the
    /// hypothesis records the given token's log-probability and rank among all
    /// tokens, the attention row, the raw scores, options.top_k candidates, and
    /// first_divergence, the first step where the model would have chosen
    /// otherwise. Forcing the model's own greedy output gives exactly its greedy
    /// log-probability and attention. A reference is one fixed path, so
    /// ForceMode::reference ignores beam_size, num_hypotheses and beam_tree.
    std::vector<Translation> force(const std::vector<std::pair<std::string, std::string>>& pairs, ForceMode mode,
                                   const DecodeOptions& options = {}) const;
    /// The same for sources and targets already split into tokens (no normalisation);
    /// throws ConfigError when the lists differ in length.
    std::vector<Translation> force_tokens(const std::vector<std::vector<std::string>>& sources,
                                          const std::vector<std::vector<std::string>>& targets, ForceMode mode,
                                          const DecodeOptions& options = {}) const;

    /// The network, for read-only use (export, tests, inspection): never train or modify it.
    const Network& network() const { return m_network; }
    /// A deep copy of the weights on `device`, in training mode (to train further).
    Network clone_network(const torch::Device& device) const;
    /// The same model with its weights on `device` (this one when they are there already).
    std::shared_ptr<const TranslationModel> on_device(const torch::Device& device) const;

    /// The same model with heads switched off for every pass (HeadGates::mask of its head groups;
    /// ConfigError naming a head it does not have): a network sharing these weights (share_network:
    /// no copy) with gates of its own, replacing any this network has. Empty `off`: this model's
    /// weights without gates. This model is unchanged and may be used meanwhile.
    std::shared_ptr<const TranslationModel> with_heads_masked(const std::vector<AttentionMapId>& off) const;

    /// What greedy and beam search read of it (core/decode/search.hpp), borrowed: valid while it lives.
    SearchModel search_model() const { return {m_network, *m_src_vocab, *m_tgt_vocab, level()}; }

    // Files: load_model and save_model (core/persist/model_file.hpp).

private:
    /// A pretrained model's language choice applied: the source language's code before each source
    /// (M2M100, NLLB; Marian's >>xxx<< for a target language) and the target language's code as the
    /// forced first token. The options unchanged for attnviz's own models.
    DecodeOptions with_languages(std::vector<std::vector<std::string>>& sources, const DecodeOptions& options) const;
    /// Output text as the model's tokenizer joins it (a pretrained model's decode()).
    void set_texts(std::vector<Translation>& results) const;

    Network m_network;
    std::shared_ptr<const Vocab> m_src_vocab, m_tgt_vocab;
    TokenizerPtr m_tokenizer;
    TrainConfig m_trained_with;
    TrainHistory m_history;
    std::string m_corpus_name;
};

using TranslationModelPtr = std::shared_ptr<const TranslationModel>;

}  // namespace attnviz
