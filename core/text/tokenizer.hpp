#pragma once
// Tokenizer: how a model turns a sentence into tokens and tokens back into text,
// as one object the model and its training data hold. Words and characters have
// no state (they are tokenize()/detokenize() of core/text/text.hpp); subwords carry a
// SentencePiece model (libsentencepiece) trained on the corpus, which travels in
// the checkpoint.
//
// Subword text: a sentence is normalised as at word level (normalize(): NFC, d2l's
// lower-casing and spacing), then cut into SentencePiece pieces; a piece that
// starts a word begins with "▁" (U+2581), so "привет , мир !" may become
// "▁при" "вет" "▁," "▁мир" "▁!". Pieces join back to text by detokenize().
//
// A Tokenizer is immutable and thread-safe (SentencePiece encodes through a const
// processor); hold it as TokenizerPtr.
#include <array>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/config/config.hpp"
#include "core/text/text.hpp"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace attnviz {

class PretrainedTokenizer;  // core/text/pretrained_tokenizer.hpp
struct PretrainedVocabLayout;

/// How a subword model is trained (TrainConfig::subword_vocab / subword_model in the registry).
struct SubwordOptions {
    int vocab_size = 2000;                        ///< pieces in the model, "<unk>" included (SentencePiece's vocab_size)
    SubwordModel algorithm = SubwordModel::unigram;  ///< SentencePiece's model_type
    /// TrainConfig's subword_vocab and subword_model.
    static SubwordOptions from(const TrainConfig& config) { return {config.subword_vocab, config.subword_model}; }
};

class Tokenizer {
public:
    /// The stateless tokenizer of word or character level; ConfigError for subword
    /// (which needs a model: train_subword or from_json).
    static std::shared_ptr<const Tokenizer> for_level(TokenLevel level);

    /// Trains a SentencePiece model in memory on sentences already normalised (each
    /// sentence is one SentencePiece input line; no file is written). Every character
    /// of the text gets a piece (character coverage 1); SentencePiece's own
    /// normalisation is off (identity), as attnviz's normalize() did it already.
    /// Deterministic: the same sentences and options give the same model. Throws
    /// ConfigError when the vocabulary size is below what the text needs (one piece per
    /// distinct character plus <unk>) or SentencePiece fails (its message included).
    static std::shared_ptr<const Tokenizer> train_subword(const std::vector<std::string>& normalized_sentences,
                                                          const SubwordOptions& options);

    /// A subword tokenizer from a serialized SentencePiece model (ModelProto bytes, a
    /// `.model` file's contents); FileError when the bytes are not one.
    static std::shared_ptr<const Tokenizer> from_sentencepiece(const std::string& model_proto,
                                                               const SubwordOptions& options);

    /// A pretrained model's tokenizer (core/text/pretrained_tokenizer.hpp), its tokens named as
    /// the model's vocabulary layout names them (its eos "</s>" is attnviz's "<eos>", ...): level
    /// subword, text neither normalised nor lower-cased (the model's SentencePiece model normalises).
    /// `special`: the model's pad, eos and unk ids; `rows`: its source and target embedding rows.
    struct PretrainedRows {
        int64_t source_rows = 0, target_rows = 0;
        int64_t pad_id = 0, eos_id = 0, unk_id = 0;
    };
    /// `layouts` (optional): the two sides' vocabulary layouts it was made from, moved out for a caller
    /// that reads their rows and names too (load_model_folder), so that they are made once: [0] the
    /// source's, [1] the target's, empty where pretrained_sides_equal() (the source's serves both).
    static std::shared_ptr<const Tokenizer> for_pretrained(std::shared_ptr<const PretrainedTokenizer> tokenizer,
                                                           const PretrainedRows& rows,
                                                           std::array<PretrainedVocabLayout, 2>* layouts = nullptr);
    /// This pretrained tokenizer with other default languages (PretrainedTokenizer::with_default_languages),
    /// the same rows and names; ConfigError for attnviz's own tokenizers.
    std::shared_ptr<const Tokenizer> with_default_languages(const std::string& source, const std::string& target) const;
    /// The vocabulary layout of one side (core/text/pretrained_tokenizer.hpp); ConfigError for
    /// attnviz's own tokenizers.
    PretrainedVocabLayout pretrained_layout(bool target) const;
    /// pretrained_layout(target).rows alone (attnviz id -> the model's row), without naming the tokens.
    std::vector<int64_t> pretrained_rows(bool target) const;
    /// Whether pretrained_layout(true) equals pretrained_layout(false): one vocabulary, the same rows.
    bool pretrained_sides_equal() const;
    /// A pretrained model's token as attnviz's vocabulary names it (the token itself but for a few).
    std::string pretrained_name(const std::string& model_token, bool target) const;

    ~Tokenizer();

    TokenLevel level() const { return m_level; }
    /// The pretrained model's tokenizer, or null for attnviz's own.
    const std::shared_ptr<const PretrainedTokenizer>& pretrained() const { return m_pretrained; }

    /// A sentence as the model reads it. word: normalize() (when `normalize`) and split
    /// on spaces; character: grapheme clusters (prepare_source of core/text/text.hpp: with
    /// `normalize`, ASCII lower-cased and spaces squeezed); subword: normalize() (when
    /// `normalize`) and SentencePiece pieces. Throws Error on invalid UTF-8.
    std::vector<std::string> encode(const std::string& sentence, bool normalize = true) const;
    /// A target sentence (a reference to score or train on): encode(), but for a pretrained model
    /// with its own target tokenizer (Marian's target.spm) that one.
    std::vector<std::string> encode_target(const std::string& sentence, bool normalize = true) const;

    /// Re-tokenises a sentence that tokenize(text, TokenLevel::subword) split into
    /// normalised words (as corpora of level subword are read): subword: the pieces of
    /// the words joined by spaces; word and character: the tokens unchanged.
    std::vector<std::string> split_words(const std::vector<std::string>& words) const;

    /// Text of tokens: detokenize(tokens, level()); a pretrained model's decode(skip_special_tokens=True).
    std::string decode(const std::vector<std::string>& tokens) const;

    /// The serialized SentencePiece model (empty for word and character level).
    const std::string& model_proto() const { return m_model_proto; }
    /// How the subword model was trained (defaults for word and character level).
    const SubwordOptions& subword_options() const { return m_options; }
    /// Number of pieces in the SentencePiece model (0 for word and character level).
    int piece_count() const;

    /// {"level": "word"} or {"level": "char"}; subword: {"level": "subword", "type":
    /// "sentencepiece", "algorithm": "unigram", "vocab_size": N, "pieces": M, "model":
    /// base64 of the serialized model}. The checkpoint's metadata keeps this as "tokenizer".
    nlohmann::json to_json() const;
    /// Reads to_json()'s object; FileError naming what is wrong.
    static std::shared_ptr<const Tokenizer> from_json(const nlohmann::json& j);

    Tokenizer(const Tokenizer&) = delete;
    Tokenizer& operator=(const Tokenizer&) = delete;

private:
    explicit Tokenizer(TokenLevel level);
    TokenLevel m_level;
    std::string m_model_proto;
    SubwordOptions m_options;
    std::unique_ptr<sentencepiece::SentencePieceProcessor> m_processor;  ///< subword only
    std::shared_ptr<const PretrainedTokenizer> m_pretrained;               ///< a pretrained model's
    PretrainedRows m_rows;
    /// The model's token -> attnviz's name (source, target) and back, where they differ.
    std::unordered_map<std::string, std::string> m_src_names, m_tgt_names, m_from_names;
    std::vector<std::string> pretrained_names(std::vector<std::string> tokens, bool target) const;
};

using TokenizerPtr = std::shared_ptr<const Tokenizer>;

}  // namespace attnviz
