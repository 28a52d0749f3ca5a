// Tokenizer: words, characters, or SentencePiece subwords trained in memory.
#include "core/text/tokenizer.hpp"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <unicode/utf8.h>

#include "core/io/base64.hpp"
#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/text/pretrained_tokenizer.hpp"
#include "core/text/sentencepiece_model.hpp"
#include "core/text/vocab.hpp"

// Declared by SentencePiece's common.h, which it does not install; exported by libsentencepiece.
namespace sentencepiece::logging {
void SetMinLogLevel(int v);
}

namespace attnviz {

namespace {

// Feeds SentencePiece's trainer from memory: no temporary file.
class SentenceList : public sentencepiece::SentenceIterator {
public:
    explicit SentenceList(const std::vector<std::string>& sentences) : m_sentences(sentences) { skip_empty(); }
    bool done() const override { return m_i >= m_sentences.size(); }
    void Next() override {
        ++m_i;
        skip_empty();
    }
    const std::string& value() const override { return m_sentences[m_i]; }
    sentencepiece::util::Status status() const override { return {}; }

private:
    void skip_empty() {
        while (m_i < m_sentences.size() && m_sentences[m_i].empty()) ++m_i;
    }
    const std::vector<std::string>& m_sentences;
    size_t m_i = 0;
};

// Distinct code points of the text (spaces excluded: SentencePiece turns them into "▁").
size_t distinct_characters(const std::vector<std::string>& sentences) {
    std::set<UChar32> chars;
    for (const auto& s : sentences) {
        const auto* p = reinterpret_cast<const uint8_t*>(s.data());
        const int32_t n = static_cast<int32_t>(s.size());
        for (int32_t i = 0; i < n;) {
            UChar32 c = 0;
            U8_NEXT(p, i, n, c);
            if (c != ' ') chars.insert(c);
        }
    }
    return chars.size();
}

/// SentencePiece writes its log lines (LOG(INFO), LOG(WARNING), LOG(ERROR)) to stderr, where
/// they would break the CLI's one-line errors; everything it has to say comes back as a
/// status, which attnviz turns into its own message. Its fatal errors stay on.
void quiet_sentencepiece() {
    static const bool once = [] {
        sentencepiece::logging::SetMinLogLevel(3);
        return true;
    }();
    (void)once;
}

}  // namespace

Tokenizer::Tokenizer(TokenLevel level) : m_level(level) {}
Tokenizer::~Tokenizer() = default;

std::shared_ptr<const Tokenizer> Tokenizer::for_level(TokenLevel level) {
    if (level == TokenLevel::subword)
        throw ConfigError("a subword tokenizer needs a SentencePiece model: train one on a corpus first");
    static const std::shared_ptr<const Tokenizer> word(new Tokenizer(TokenLevel::word));
    static const std::shared_ptr<const Tokenizer> character(new Tokenizer(TokenLevel::character));
    return level == TokenLevel::word ? word : character;
}

std::shared_ptr<const Tokenizer> Tokenizer::train_subword(const std::vector<std::string>& sentences,
                                                          const SubwordOptions& options) {
    const size_t needed = distinct_characters(sentences) + 1;  // + <unk>
    if (needed <= 1) throw ConfigError("subword model: the training text is empty");
    if (static_cast<size_t>(options.vocab_size) < needed)
        throw ConfigError("subword vocabulary size " + std::to_string(options.vocab_size) + " is too small: the text has " +
                          std::to_string(needed - 1) + " distinct characters, and each needs a piece (plus <unk>); "
                          "choose --subword-vocab " + std::to_string(needed) + " or more");
    // SentencePiece's trainer flags. Special pieces: only <unk> (attnviz's Vocab adds
    // <pad>/<bos>/<eos>); hard_vocab_limit=false lets a small corpus give fewer pieces
    // than asked instead of failing; threads fixed so the model does not depend on the machine.
    const std::unordered_map<std::string, std::string> flags = {
        {"vocab_size", std::to_string(options.vocab_size)},
        {"model_type", to_string(options.algorithm)},
        {"normalization_rule_name", "identity"},
        {"character_coverage", "1.0"},
        {"hard_vocab_limit", "false"},
        {"unk_id", "0"},
        {"bos_id", "-1"},
        {"eos_id", "-1"},
        {"pad_id", "-1"},
        {"unk_piece", Vocab::unk_token},
        {"input_sentence_size", "0"},       // every sentence: no random sample
        {"max_sentence_length", "100000"},  // bytes; the corpus reader bounds lines already
        {"num_threads", "2"},
        {"minloglevel", "2"},  // no progress chatter on stderr
    };
    quiet_sentencepiece();
    SentenceList list(sentences);
    std::string proto;
    const auto status = sentencepiece::SentencePieceTrainer::Train(flags, &list, &proto);
    if (!status.ok()) throw ConfigError("training the subword model failed: " + status.ToString());
    return from_sentencepiece(proto, options);
}

std::shared_ptr<const Tokenizer> Tokenizer::from_sentencepiece(const std::string& model_proto,
                                                               const SubwordOptions& options) {
    quiet_sentencepiece();
    // SentencePiece trusts parts of a model (its normalizer's rule table): it loads a model
    // rebuilt from the parts attnviz checked, never the bytes it was given
    // (core/text/sentencepiece_model.hpp).
    std::string checked = serialize_sentencepiece_model(parse_sentencepiece_model(model_proto));
    auto processor = std::make_unique<sentencepiece::SentencePieceProcessor>();
    const auto status = processor->LoadFromSerializedProto(checked);
    if (!status.ok()) throw FileError("the subword model is not a SentencePiece model: " + printable(status.ToString(), 200));
    std::shared_ptr<Tokenizer> t(new Tokenizer(TokenLevel::subword));
    t->m_model_proto = std::move(checked);
    t->m_options = options;
    t->m_processor = std::move(processor);
    return t;
}

int Tokenizer::piece_count() const { return m_processor ? m_processor->GetPieceSize() : 0; }

std::shared_ptr<const Tokenizer> Tokenizer::for_pretrained(std::shared_ptr<const PretrainedTokenizer> tokenizer,
                                                           const PretrainedRows& rows,
                                                           std::array<PretrainedVocabLayout, 2>* layouts) {
    if (!tokenizer) throw ConfigError("tokenizer: no pretrained tokenizer");
    std::shared_ptr<Tokenizer> t(new Tokenizer(TokenLevel::subword));
    t->m_pretrained = std::move(tokenizer);
    t->m_rows = rows;
    auto src = t->pretrained_layout(false);
    const bool same = t->pretrained_sides_equal();  // one vocabulary: its layout made once
    auto own = same ? PretrainedVocabLayout{} : t->pretrained_layout(true);
    const auto& tgt = same ? src : own;
    t->m_src_names = src.to_name;
    t->m_tgt_names = tgt.to_name;
    t->m_from_names = tgt.from_name;
    if (layouts) *layouts = {std::move(src), std::move(own)};
    return t;
}

std::shared_ptr<const Tokenizer> Tokenizer::with_default_languages(const std::string& source, const std::string& target) const {
    if (!m_pretrained) throw ConfigError("this model has no languages to choose from (it is not a pretrained model's)");
    return for_pretrained(m_pretrained->with_default_languages(source, target), m_rows);
}

bool Tokenizer::pretrained_sides_equal() const {
    return m_pretrained && !m_pretrained->has_separate_target() && m_rows.source_rows == m_rows.target_rows;
}

PretrainedVocabLayout Tokenizer::pretrained_layout(bool target) const {
    if (!m_pretrained) throw ConfigError("tokenizer: not a pretrained model's");
    return m_pretrained->vocab_layout(target, target ? m_rows.target_rows : m_rows.source_rows, m_rows.pad_id,
                                      m_rows.eos_id, m_rows.unk_id);
}

std::vector<int64_t> Tokenizer::pretrained_rows(bool target) const {
    if (!m_pretrained) throw ConfigError("tokenizer: not a pretrained model's");
    return PretrainedTokenizer::layout_rows(target ? m_rows.target_rows : m_rows.source_rows, m_rows.pad_id, m_rows.eos_id,
                                            m_rows.unk_id);
}

std::string Tokenizer::pretrained_name(const std::string& model_token, bool target) const {
    const auto& names = target ? m_tgt_names : m_src_names;
    const auto it = names.find(model_token);
    return it == names.end() ? model_token : it->second;
}

std::vector<std::string> Tokenizer::pretrained_names(std::vector<std::string> tokens, bool target) const {
    const auto& names = target ? m_tgt_names : m_src_names;
    if (!names.empty())
        for (auto& token : tokens)
            if (const auto it = names.find(token); it != names.end()) token = it->second;
    return tokens;
}

std::vector<std::string> Tokenizer::encode_target(const std::string& sentence, bool normalize_text) const {
    if (m_pretrained) return pretrained_names(m_pretrained->encode(sentence, /*target=*/true), true);
    return encode(sentence, normalize_text);
}

std::string Tokenizer::decode(const std::vector<std::string>& tokens) const {
    if (!m_pretrained) return detokenize(tokens, m_level);
    std::vector<std::string> model_tokens = tokens;
    for (auto& token : model_tokens)
        if (const auto it = m_from_names.find(token); it != m_from_names.end()) token = it->second;
    return m_pretrained->decode(model_tokens);
}

std::vector<std::string> Tokenizer::encode(const std::string& sentence, bool normalize_text) const {
    if (m_pretrained) return pretrained_names(m_pretrained->encode(sentence, /*target=*/false), false);
    if (m_level != TokenLevel::subword) return prepare_source(sentence, m_level, normalize_text);
    // SentencePiece works on code points: ill-formed bytes are refused here (word level
    // passes them through; a corpus reader skips such lines).
    if (!is_valid_utf8(sentence)) throw Error("the sentence is not valid UTF-8: expected UTF-8 text");
    const std::string text = normalize_text ? normalize(sentence) : sentence;
    std::vector<std::string> pieces;
    const auto status = m_processor->Encode(text, &pieces);
    if (!status.ok()) throw Error("subword tokenisation failed: " + status.ToString());
    return pieces;
}

std::vector<std::string> Tokenizer::split_words(const std::vector<std::string>& words) const {
    if (m_level != TokenLevel::subword) return words;
    if (m_pretrained)
        throw ConfigError("tokenizer: a pretrained model's tokenizer reads sentences as they are, not normalised words");
    std::string text;
    for (const auto& w : words) {
        if (!text.empty()) text += ' ';
        text += w;
    }
    std::vector<std::string> pieces;
    const auto status = m_processor->Encode(text, &pieces);
    if (!status.ok()) throw Error("subword tokenisation failed: " + status.ToString());
    return pieces;
}

nlohmann::json Tokenizer::to_json() const {
    if (m_pretrained) {
        nlohmann::json j = m_pretrained->to_json();
        j["level"] = to_string(m_level);
        j["rows"] = {m_rows.source_rows, m_rows.target_rows};
        j["special_ids"] = {{"pad", m_rows.pad_id}, {"eos", m_rows.eos_id}, {"unk", m_rows.unk_id}};
        return j;
    }
    nlohmann::json j{{"level", to_string(m_level)}};
    if (m_level == TokenLevel::subword) {
        j["type"] = "sentencepiece";
        j["algorithm"] = to_string(m_options.algorithm);
        j["vocab_size"] = m_options.vocab_size;
        j["pieces"] = piece_count();
        j["model"] = base64_encode(m_model_proto);
    }
    return j;
}

std::shared_ptr<const Tokenizer> Tokenizer::from_json(const nlohmann::json& j) {
    if (!j.is_object() || !j.contains("level") || !j["level"].is_string())
        throw FileError("tokenizer: expected an object with \"level\": \"word\", \"char\" or \"subword\"");
    const std::string level = j["level"];
    if (level == "word") return for_level(TokenLevel::word);
    if (level == "char") return for_level(TokenLevel::character);
    if (level != "subword")
        throw FileError("tokenizer: level " + quote(level) + " is not one of word, char, subword");
    if (j.value("type", std::string()) == "pretrained") {
        PretrainedRows rows;
        const auto& r = j.contains("rows") ? j["rows"] : nlohmann::json();
        const auto& ids = j.contains("special_ids") ? j["special_ids"] : nlohmann::json();
        auto id = [&](const nlohmann::json& v, int64_t max) {
            if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > max)
                throw FileError("tokenizer: a pretrained tokenizer needs \"rows\" [source, target] and \"special_ids\" "
                                "{pad, eos, unk} within them");
            return v.get<int64_t>();
        };
        if (!r.is_array() || r.size() != 2 || !ids.is_object()) id(nlohmann::json(), 0);
        rows.source_rows = id(r[0], 1 << 22);
        rows.target_rows = id(r[1], 1 << 22);
        const int64_t last = std::min(rows.source_rows, rows.target_rows) - 1;
        rows.pad_id = id(ids.value("pad", nlohmann::json()), last);
        rows.eos_id = id(ids.value("eos", nlohmann::json()), last);
        rows.unk_id = id(ids.value("unk", nlohmann::json()), last);
        return for_pretrained(PretrainedTokenizer::from_json(j, std::max(rows.source_rows, rows.target_rows)), rows);
    }
    if (j.value("type", std::string()) != "sentencepiece" || !j.contains("model") || !j["model"].is_string())
        throw FileError("tokenizer: a subword tokenizer needs \"type\": \"sentencepiece\" and the model as base64 in \"model\"");
    SubwordOptions options;
    try {
        if (j.contains("algorithm")) options.algorithm = subword_model_from_string(j["algorithm"].get<std::string>());
    } catch (const std::exception& e) {
        throw FileError(std::string("tokenizer: \"algorithm\": ") + e.what());
    }
    if (j.contains("vocab_size") && j["vocab_size"].is_number_integer()) options.vocab_size = j["vocab_size"];
    return from_sentencepiece(base64_decode(j["model"].get<std::string>()), options);
}

}  // namespace attnviz
