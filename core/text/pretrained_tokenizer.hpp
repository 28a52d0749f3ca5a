#pragma once
// The tokenizers of pretrained Hugging Face translation models, as transformers'
// MarianTokenizer and M2M100Tokenizer split and join text (tokenization_marian.py,
// tokenization_m2m_100.py; the shared part is tokenization_python.py's tokenize()):
//
//  - the text is split at the special tokens ("</s>", "<unk>", "<pad>", language codes of
//    M2M100, ...: the added tokens of tokenizer_config.json), leftmost and longest first;
//  - Marian: a segment starting with a language code like ">>fra<<" keeps it as one token;
//    the rest is cut into pieces by the source SentencePiece model (target.spm for targets),
//    and a piece maps to its id through vocab.json (<unk> when it is not there);
//  - M2M100 / NLLB: pieces of sentencepiece.bpe.model, ids through vocab.json (M2M100) or
//    SentencePiece's own ids + 1 (NLLB, fairseq's offset); language codes (__fr__,
//    fra_Latn) follow the vocabulary; the source starts with its language's code;
//  - every source ends with </s> (attnviz appends <eos>: core/decode/search.hpp);
//  - decode() is decode(ids, skip_special_tokens=True): special tokens dropped, the rest joined
//    by SentencePiece and "▁" made a space, trimmed.
//
// A folder with tokenizer.json (what transformers 5 saves, often alone) is read from it instead,
// as transformers 5 prefers it too (core/text/tokenizer_json.hpp runs the `tokenizers` library's
// pipeline): the tokens are those of encode(text, add_special_tokens=False) -- its post-processor's
// template (NLLB's "[src_lang] A </s>", T5's "A </s>") is what attnviz adds itself: the language
// code by with_languages, </s> by the model side -- the language codes and added tokens come from
// its added_tokens, and decode() is the library's decode(ids, skip_special_tokens=True), untrimmed.
//
// Tokens are the model's own strings ("▁Hello", ">>fra<<"); token_id() is the model's id.
// attnviz's vocabulary names a few differently (core/persist/hf_folder.hpp lays the model's
// rows out in attnviz's order). Immutable and thread-safe; torch-free (attnviz_base).
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace attnviz {

class TokenizerJson;  // core/text/tokenizer_json.hpp

/// Which transformers tokenizer a model folder has.
enum class PretrainedTokenizerKind {
    marian,  ///< MarianTokenizer: source.spm, target.spm, vocab.json (target_vocab.json with separate vocabularies)
    m2m100,  ///< M2M100Tokenizer: sentencepiece.bpe.model, vocab.json, language codes __xx__ after the vocabulary
    nllb,    ///< NllbTokenizer: sentencepiece.bpe.model with fairseq's ids, language codes like fra_Latn
    bart,    ///< BartTokenizer (transformers 5: RobertaTokenizer): byte-level BPE, tokenizer.json or vocab.json +
             ///< merges.txt; the source starts with <s> (its post-processor's), no languages
    mbart50, ///< MBart50Tokenizer: SentencePiece with fairseq's ids, the 52 language codes en_XX ... after the
             ///< pieces, then <mask>; tokenizer.json (what transformers 5 saves) or sentencepiece.bpe.model
    t5       ///< T5Tokenizer: Unigram (spiece.model's pieces, pad 0, </s> 1, <unk> 2) with <extra_id_N> sentinels
             ///< last; read from tokenizer.json (what transformers 5 saves); no languages (a task prefix is text)
};
std::string to_string(PretrainedTokenizerKind k);  ///< "marian", "m2m100", "nllb", "bart", "mbart50"

/// The files a tokenizer is read from, already in memory (core/persist/hf_folder.hpp reads them).
struct PretrainedTokenizerFiles {
    PretrainedTokenizerKind kind = PretrainedTokenizerKind::marian;
    std::string source_spm;          ///< source.spm / sentencepiece.bpe.model (serialized ModelProto)
    std::string target_spm;          ///< target.spm (Marian; empty: the source model)
    std::string vocab_json;          ///< vocab.json's text (empty for NLLB)
    std::string merges_txt;          ///< merges.txt's text (BART without tokenizer.json; else empty)
    std::string target_vocab_json;   ///< target_vocab.json's text (Marian with separate vocabularies)
    std::string tokenizer_config;    ///< tokenizer_config.json's text (may be empty)
    std::string special_tokens_map;  ///< special_tokens_map.json's text (may be empty)
    std::string tokenizer_json;      ///< tokenizer.json's text (may be empty); when present, the tokenizer is read from it
                                     ///< and the SentencePiece and vocabulary files above are optional (kept for export)
    int64_t model_vocab_size = 0;    ///< config.json's vocab_size (rows of the embedding)
    std::string what;                ///< the folder, for messages
};

/// attnviz's vocabulary over a pretrained model's rows (core/config/pretrained_config.hpp's
/// PretrainedSpec): <pad>, <bos>, <eos>, <unk>, then every other row in the model's order. A
/// row's name is its token, but where attnviz could not hold the token as it is (empty, or
/// refused by is_vocab_token: a control character, a line separator, "|||"; or one of attnviz's
/// special names): there it is the token as printable() writes it (\xNN, \u{NNNN}; always a
/// token is_vocab_token accepts), or "<hf:ID>" for a row without a token.
struct PretrainedVocabLayout {
    std::vector<std::string> names;  ///< attnviz id -> name
    std::vector<int64_t> rows;       ///< attnviz id -> the model's row (<bos>: -1, a zero row)
    std::unordered_map<std::string, std::string> to_name;    ///< the model's token -> name, where they differ
    std::unordered_map<std::string, std::string> from_name;  ///< name -> the model's token, where they differ
};

class PretrainedTokenizer {
public:
    /// Reads and checks the files; FileError naming the file for a vocabulary that is not a JSON
    /// object of unique ids, ids past the model's rows, a SentencePiece model it cannot load, a
    /// special token missing from the vocabulary.
    /// With tokenizer.json: FileError naming it and the key for what it cannot read
    /// (core/text/tokenizer_json.hpp), or for a token whose id lies past the model's rows.
    static std::shared_ptr<const PretrainedTokenizer> load(const PretrainedTokenizerFiles& files);

    ~PretrainedTokenizer();
    PretrainedTokenizer(const PretrainedTokenizer&) = delete;
    PretrainedTokenizer& operator=(const PretrainedTokenizer&) = delete;

    PretrainedTokenizerKind kind() const { return m_files.kind; }
    /// The tokenizer.json backend, or nullptr when the tokenizer is read from SentencePiece files.
    const TokenizerJson* tokenizer_json() const { return m_json.get(); }
    /// The tokens of a source text (target: a reference, cut by the target model), without the
    /// </s> the model adds; M2M100/NLLB without the language code (language_prefix() says it).
    /// BART: with the <s> its post-processor puts first (source and target: transformers' labels start
    /// with it too, and generate() forces it first).
    /// Error on text that is not UTF-8.
    std::vector<std::string> encode(const std::string& text, bool target = false) const;
    /// Text of output tokens as decode(skip_special_tokens=True) gives it, but on one line:
    /// control characters and line separators a model's pieces may hold written as
    /// escape_controls() writes them (core/io/message.hpp), as attnviz's own vocabularies
    /// cannot hold them (is_vocab_token).
    std::string decode(const std::vector<std::string>& tokens) const;

    /// The model's id of a token: vocab.json's (target: target_vocab.json's), a language code's,
    /// else -1 (an unknown piece: the model reads <unk>).
    int64_t token_id(const std::string& token, bool target = false) const;
    /// Every id's token, id by id, for the source (target) side: the vocabulary, then language
    /// codes and made-up words; "" for an id that has no token.
    const std::vector<std::string>& id_tokens(bool target = false) const;
    /// Whether the target side has ids and tokens of its own (Marian's target_vocab.json); otherwise
    /// both sides read the same ones.
    bool has_separate_target() const { return m_separate_target; }
    /// The special tokens decode() drops (eos, unk, pad, language codes of M2M100/NLLB, ...).
    bool is_special(const std::string& token) const { return m_special.count(token) > 0; }
    const std::string& eos_token() const { return m_eos; }
    const std::string& unk_token() const { return m_unk; }
    const std::string& pad_token() const { return m_pad; }

    /// The language codes a user may choose, as they name them ("fr", "fra_Latn", "fra"):
    /// M2M100/NLLB: both sides; Marian: the targets of a multilingual model (its >>xxx<< tokens),
    /// no source choice.
    std::vector<std::string> source_languages() const;
    std::vector<std::string> target_languages() const;
    /// The token a language code stands for ("fr" -> "__fr__", "fra" -> ">>fra<<"); ConfigError
    /// naming the languages there are when the model has no such language.
    std::string language_token(const std::string& language, bool target) const;
    /// The source language tokenizer_config.json names (M2M100 default "en"), or "".
    const std::string& default_source_language() const { return m_default_src_lang; }
    /// The target language tokenizer_config.json names, or "".
    const std::string& default_target_language() const { return m_default_tgt_lang; }

    /// The same tokenizer with other default languages (fine-tuning for a language pair: train
    /// --source-lang / --target-lang): tokenizer_config.json's src_lang and tgt_lang set (kept in
    /// files(), so a checkpoint and an export carry them); "" leaves one as it is. ConfigError naming
    /// the languages there are for one the model lacks (or that it has none to choose from).
    std::shared_ptr<const PretrainedTokenizer> with_default_languages(const std::string& source,
                                                                      const std::string& target) const;

    /// attnviz's vocabulary of one side over `rows` model rows, with the model's pad, eos and unk ids.
    /// A byte-level BPE piece ("Ġthe", "Ã©") is named by the text it stands for, a space written
    /// "▁" as SentencePiece's pieces show it ("▁the", "é"); a piece holding part of a character by
    /// its bytes ("\xC3"); added tokens keep their own names.
    PretrainedVocabLayout vocab_layout(bool target, int64_t rows, int64_t pad_id, int64_t eos_id, int64_t unk_id) const;
    /// vocab_layout(...).rows alone, without naming a token (the names of a 256k vocabulary took 0.5 s):
    /// attnviz's four specials (pad, <bos> as -1, eos, unk), then every other row of `rows` in order.
    static std::vector<int64_t> layout_rows(int64_t rows, int64_t pad_id, int64_t eos_id, int64_t unk_id);

    /// The files, for checkpoints and export (byte for byte as read).
    const PretrainedTokenizerFiles& files() const { return m_files; }
    nlohmann::json to_json() const;  ///< {"type": "pretrained", "kind", base64 of each file}
    static std::shared_ptr<const PretrainedTokenizer> from_json(const nlohmann::json& j, int64_t model_vocab_size);

private:
    PretrainedTokenizer() = default;
    /// load() from tokenizer.json (files().tokenizer_json), after the special tokens' names.
    static void load_tokenizer_json(PretrainedTokenizer& t, const nlohmann::json& config, const nlohmann::json& special_map,
                                    const std::string& text);
    /// Splits text at the added tokens, leftmost-longest (tokenization_python.py's Trie).
    std::vector<std::pair<std::string, bool>> split_added(const std::string& text) const;
    PretrainedTokenizerFiles m_files;
    std::unique_ptr<sentencepiece::SentencePieceProcessor> m_src_spm, m_tgt_spm;
    std::shared_ptr<const TokenizerJson> m_json;  ///< the tokenizer.json backend, when the folder has one
    // Ids and tokens of each side; the target's only where it has its own (Marian's target_vocab.json,
    // m_separate_target): otherwise the source's serve both (one copy, not two: 36 MB for NLLB's 256k).
    std::unordered_map<std::string, int64_t> m_src_ids, m_tgt_ids;
    std::vector<std::string> m_src_tokens, m_tgt_tokens;
    bool m_separate_target = false;
    std::map<std::string, std::string> m_added;  ///< added token -> itself (split points), with strip flags below
    std::map<std::string, std::pair<bool, bool>> m_strip;  ///< added token -> (lstrip, rstrip)
    std::map<std::string, int> m_special;
    std::vector<std::string> m_languages;                  ///< language codes as users name them
    std::map<std::string, std::string> m_language_tokens;  ///< code -> token
    std::string m_eos = "</s>", m_unk = "<unk>", m_pad = "<pad>";
    std::string m_default_src_lang, m_default_tgt_lang;
    bool m_clean_up_spaces = false;
    int64_t m_spm_offset = 0;  ///< NLLB: model id = SentencePiece id + 1
    std::vector<std::string> m_prefix;  ///< tokens every encoded text starts with (BART's <s>)
    bool m_byte_level = false;          ///< pieces are GPT-2's byte-level symbols (BART): named by their text
};

}  // namespace attnviz
