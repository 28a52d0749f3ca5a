// Pretrained tokenizers as transformers' (core/text/pretrained_tokenizer.hpp).
#include "core/text/pretrained_tokenizer.hpp"

#include <algorithm>
#include <stdexcept>
#include <string_view>
#include <unordered_set>

#include <nlohmann/json.hpp>
#include <sentencepiece_processor.h>

#include "core/io/base64.hpp"
#include "core/io/error.hpp"
#include "core/io/json_bounded.hpp"
#include "core/io/message.hpp"
#include "core/text/sentencepiece_model.hpp"
#include "core/text/tokenizer_json.hpp"
#include "core/text/unicode.hpp"
#include "core/text/vocab.hpp"

namespace attnviz {

using json = nlohmann::json;

namespace {

/// M2M100Tokenizer's FAIRSEQ_LANGUAGE_CODES (tokenizer_config.json's "language_codes"): the
/// language codes that follow the vocabulary, in id order, for folders whose
/// tokenizer_config.json does not list its added tokens.
const std::vector<std::string> k_m2m100_languages = {
    "af", "am", "ar", "ast", "az", "ba", "be", "bg", "bn", "br", "bs", "ca", "ceb", "cs", "cy", "da", "de", "el", "en",
    "es", "et", "fa", "ff", "fi", "fr", "fy", "ga", "gd", "gl", "gu", "ha", "he", "hi", "hr", "ht", "hu", "hy", "id",
    "ig", "ilo", "is", "it", "ja", "jv", "ka", "kk", "km", "kn", "ko", "lb", "lg", "ln", "lo", "lt", "lv", "mg", "mk",
    "ml", "mn", "mr", "ms", "my", "ne", "nl", "no", "ns", "oc", "or", "pa", "pl", "ps", "pt", "ro", "ru", "sd", "si",
    "sk", "sl", "so", "sq", "sr", "ss", "su", "sv", "sw", "ta", "th", "tl", "tn", "tr", "uk", "ur", "uz", "vi", "wo",
    "xh", "yi", "yo", "zh", "zu"};
const std::vector<std::string> k_wmt21_languages = {"en", "ha", "is", "ja", "cs", "ru", "zh", "de"};
/// MBart50Tokenizer's FAIRSEQ_LANGUAGE_CODES, in id order after the SentencePiece pieces.
const std::vector<std::string> k_mbart50_languages = {
    "ar_AR", "cs_CZ", "de_DE", "en_XX", "es_XX", "et_EE", "fi_FI", "fr_XX", "gu_IN", "hi_IN", "it_IT", "ja_XX", "kk_KZ",
    "ko_KR", "lt_LT", "lv_LV", "my_MM", "ne_NP", "nl_XX", "ro_RO", "ru_RU", "si_LK", "tr_TR", "vi_VN", "zh_CN", "af_ZA",
    "az_AZ", "bn_IN", "fa_IR", "he_IL", "hr_HR", "id_ID", "ka_GE", "km_KH", "mk_MK", "ml_IN", "mn_MN", "mr_IN", "pl_PL",
    "ps_AF", "pt_XX", "sv_SE", "sw_KE", "ta_IN", "te_IN", "th_TH", "tl_XX", "uk_UA", "ur_PK", "xh_ZA", "gl_ES", "sl_SI"};

/// The most tokens a vocabulary file may hold (NLLB: 256,206).
constexpr size_t k_max_vocab = size_t{1} << 20;

std::string token_content(const json& v) {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
    return {};
}

json parse_optional(const std::string& text, const std::string& what) {
    if (text.empty()) return json::object();
    json j = parse_json_bounded(text, what);
    if (!j.is_object()) throw FileError(what + ": expected a JSON object, got " + describe_json(j));
    return j;
}

/// vocab.json: {"token": id, ...} with ids in [0, rows) and no id twice.
std::unordered_map<std::string, int64_t> read_vocab(const std::string& text, int64_t rows, const std::string& what,
                                                    std::vector<std::string>& by_id) {
    const json j = parse_json_bounded(text, what);
    if (!j.is_object()) throw FileError(what + ": expected a JSON object of token ids, got " + describe_json(j));
    if (j.size() > k_max_vocab) throw FileError(what + ": " + std::to_string(j.size()) + " tokens, more than attnviz reads");
    std::unordered_map<std::string, int64_t> ids;
    by_id.assign(static_cast<size_t>(std::max<int64_t>(rows, 0)), std::string());
    for (const auto& [token, v] : j.items()) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= rows)
            throw FileError(what + ": token " + quote(token) + " has id " + describe_json(v) + ", expected 0.." +
                            std::to_string(rows - 1) + " (the model's vocab_size is " + std::to_string(rows) + ")");
        const int64_t id = v.get<int64_t>();
        if (!by_id[static_cast<size_t>(id)].empty())
            throw FileError(what + ": tokens " + quote(by_id[static_cast<size_t>(id)]) + " and " + quote(token) +
                            " have the same id " + std::to_string(id));
        if (token.empty()) throw FileError(what + ": an empty token (id " + std::to_string(id) + ")");
        by_id[static_cast<size_t>(id)] = token;
        ids.emplace(token, id);
    }
    return ids;
}

std::unique_ptr<sentencepiece::SentencePieceProcessor> load_spm(const std::string& bytes, const std::string& what) {
    const std::string checked = check_pretrained_sentencepiece_model(bytes, what);
    auto p = std::make_unique<sentencepiece::SentencePieceProcessor>();
    const auto status = p->LoadFromSerializedProto(checked);
    if (!status.ok()) throw FileError(what + ": not a SentencePiece model: " + printable(status.ToString(), 200));
    return p;
}

/// Python's str.strip(): whitespace at both ends (ASCII and the Unicode spaces SentencePiece leaves).
std::string strip(const std::string& s) {
    auto space_at = [&](size_t i, size_t& len) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f)) return len = 1, true;
        return false;
    };
    size_t b = 0, e = s.size(), len = 0;
    while (b < e && space_at(b, len)) b += len;
    while (e > b && space_at(e - 1, len)) e -= len;
    return s.substr(b, e - b);
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
    return s;
}

/// The bytes a GPT-2 byte-level piece stands for (bytes_to_unicode() inverted: printable Latin-1 bytes
/// are themselves, the others U+0100 + their rank); false when the piece holds another character.
bool byte_level_bytes(const std::string& piece, std::string& bytes) {
    bytes.clear();
    for (size_t i = 0; i < piece.size();) {
        const auto c0 = static_cast<unsigned char>(piece[i]);
        uint32_t cp;
        if (c0 < 0x80) cp = c0, i += 1;
        else if ((c0 & 0xE0) == 0xC0 && i + 1 < piece.size()) cp = (uint32_t(c0 & 0x1F) << 6) | (piece[i + 1] & 0x3F), i += 2;
        else return false;  // byte-level symbols are all below U+0800
        const bool direct = (cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 255);
        if (direct) {
            bytes += static_cast<char>(cp);
            continue;
        }
        if (cp < 256 || cp >= 256 + 68) return false;
        // The n-th byte that is not printable: 0..32, 127..160, 173.
        const uint32_t n = cp - 256;
        const uint32_t b = n <= 32 ? n : n <= 66 ? 127 + (n - 33) : 173;
        bytes += static_cast<char>(b);
    }
    return true;
}

/// BartTokenizer's tokenizer.json for a folder with vocab.json and merges.txt alone (what
/// transformers' converter builds: byte-level BPE, RoBERTa's <s> A </s>).
std::string bart_tokenizer_json(const std::string& vocab_text, const std::string& merges_text, bool add_prefix_space,
                                const std::string& what) {
    json vocab = parse_json_bounded(vocab_text, what + ": vocab.json");
    if (!vocab.is_object()) throw FileError(what + ": vocab.json: expected a JSON object of token ids, got " + describe_json(vocab));
    json merges = json::array();
    size_t start = 0, line_no = 0;
    while (start < merges_text.size()) {
        size_t end = merges_text.find('\n', start);
        if (end == std::string::npos) end = merges_text.size();
        std::string line = merges_text.substr(start, end - start);
        start = end + 1;
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty() || line.rfind("#version", 0) == 0) continue;
        const size_t sp = line.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 >= line.size() || line.find(' ', sp + 1) != std::string::npos)
            throw FileError(what + ": merges.txt: line " + std::to_string(line_no) + " is " + quote(line, 80) +
                            ", expected two symbols separated by one space");
        merges.push_back(json::array({line.substr(0, sp), line.substr(sp + 1)}));
    }
    json added = json::array();
    auto id_of = [&](const char* t) -> int64_t {
        return vocab.contains(t) && vocab[t].is_number_integer() ? vocab[t].get<int64_t>() : -1;
    };
    for (const char* t : {"<s>", "<pad>", "</s>", "<unk>", "<mask>"})
        if (id_of(t) >= 0)
            added.push_back({{"id", id_of(t)}, {"content", t}, {"single_word", false}, {"lstrip", false},
                             {"rstrip", false}, {"normalized", false}, {"special", true}});
    if (id_of("<s>") < 0 || id_of("</s>") < 0) throw FileError(what + ": vocab.json has no <s> or </s> (BART's special tokens)");
    const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", add_prefix_space}, {"trim_offsets", true}, {"use_regex", true}};
    json j = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added},
              {"normalizer", nullptr}, {"pre_tokenizer", byte_level},
              {"post_processor", {{"type", "RobertaProcessing"}, {"sep", {"</s>", id_of("</s>")}}, {"cls", {"<s>", id_of("<s>")}},
                                  {"trim_offsets", true}, {"add_prefix_space", add_prefix_space}}},
              {"decoder", byte_level},
              {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
                         {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
                         {"vocab", vocab}, {"merges", merges}}}};
    return j.dump();
}

/// T5Tokenizer's tokenizer.json for a folder with spiece.model alone (a T5 saved before transformers 5),
/// as transformers 5 builds it (tokenization_t5.py): a Unigram model over the pieces and their scores
/// (unknown: id 2), then the sentinels <extra_id_{N-1}> ... <extra_id_0> (so <extra_id_i> is id
/// pieces + N - 1 - i), SentencePiece's rule table as the normalizer, whitespace split then Metaspace
/// (always prepended), "$A </s>", and <pad>, </s>, <unk> and the sentinels as special added tokens.
std::string t5_tokenizer_json(const std::string& spm_bytes, int64_t extra_ids, const std::string& what) {
    const PretrainedSentencePiecePieces spm = pretrained_sentencepiece_pieces(spm_bytes, what);
    if (extra_ids < 0 || extra_ids > 100000)
        throw FileError(what + ": tokenizer_config.json's extra_ids is " + std::to_string(extra_ids) + ", expected 0..100000");
    json vocab = json::array();
    std::map<std::string, int64_t> ids;
    for (const auto& [piece, score] : spm.pieces) {
        ids.emplace(piece, static_cast<int64_t>(vocab.size()));
        vocab.push_back(json::array({piece, score}));
    }
    json added = json::array();
    auto add = [&](const std::string& token, int64_t id) {
        added.push_back({{"id", id}, {"content", token}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                         {"normalized", false}, {"special", true}});
    };
    for (const char* t : {"<pad>", "</s>", "<unk>"}) {
        const auto it = ids.find(t);
        if (it == ids.end()) throw FileError(what + " has no piece " + quote(t) + " (T5's pad, end and unknown pieces are 0, 1, 2)");
        add(t, it->second);
    }
    for (int64_t i = extra_ids - 1; i >= 0; --i) {
        const std::string sentinel = "<extra_id_" + std::to_string(i) + ">";
        add(sentinel, static_cast<int64_t>(vocab.size()));
        vocab.push_back(json::array({sentinel, 0.0}));
    }
    const json metaspace = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}, {"split", true}};
    const json eos = {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}};
    const json a = {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}, b = {{"Sequence", {{"id", "B"}, {"type_id", 1}}}};
    json j = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added},
              {"normalizer", spm.charsmap.empty() ? json(nullptr)
                                                  : json{{"type", "Precompiled"}, {"precompiled_charsmap", base64_encode(spm.charsmap)}}},
              {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", json::array({{{"type", "WhitespaceSplit"}}, metaspace})}}},
              {"post_processor", {{"type", "TemplateProcessing"}, {"single", json::array({a, eos})},
                                  {"pair", json::array({a, eos, b, eos})},
                                  {"special_tokens", {{"</s>", {{"id", "</s>"}, {"ids", json::array({ids.at("</s>")})},
                                                                {"tokens", json::array({"</s>"})}}}}}}},
              {"decoder", metaspace},
              {"model", {{"type", "Unigram"}, {"unk_id", ids.at("<unk>")}, {"vocab", vocab}, {"byte_fallback", false}}}};
    return j.dump();
}

/// mBART-50's language codes: "en_XX", "fr_XX", "zh_CN" (two lower-case letters, "_", two upper-case).
bool is_mbart50_code(const std::string& s) {
    auto lower = [](char c) { return c >= 'a' && c <= 'z'; };
    auto upper = [](char c) { return c >= 'A' && c <= 'Z'; };
    return s.size() == 5 && lower(s[0]) && lower(s[1]) && s[2] == '_' && upper(s[3]) && upper(s[4]);
}

/// tokenization_utils_base.py's clean_up_tokenization.
std::string clean_up_tokenization(std::string s) {
    for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
             {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"}, {" 'm", "'m"},
             {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}})
        s = replace_all(std::move(s), from, to);
    return s;
}

}  // namespace

std::string to_string(PretrainedTokenizerKind k) {
    switch (k) {
    case PretrainedTokenizerKind::marian: return "marian";
    case PretrainedTokenizerKind::m2m100: return "m2m100";
    case PretrainedTokenizerKind::nllb: return "nllb";
    case PretrainedTokenizerKind::t5: return "t5";
    case PretrainedTokenizerKind::bart: return "bart";
    case PretrainedTokenizerKind::mbart50: return "mbart50";
    }
    return "?";
}

PretrainedTokenizer::~PretrainedTokenizer() = default;

void PretrainedTokenizer::load_tokenizer_json(PretrainedTokenizer& t, const json& config, const json& special_map,
                                              const std::string& text) {
    const PretrainedTokenizerFiles& files = t.m_files;
    const std::string what = files.what + (!files.tokenizer_json.empty()                ? ": tokenizer.json"
                                           : files.kind == PretrainedTokenizerKind::t5 ? ": spiece.model"
                                                                                       : ": vocab.json and merges.txt");
    const int64_t rows = files.model_vocab_size;
    t.m_json = TokenizerJson::parse(text, what);
    const TokenizerJson& tj = *t.m_json;
    // Every id's token, within the model's rows; a token held by two ids maps to the first.
    const std::vector<std::string> tokens = tj.id_tokens();
    t.m_src_tokens.assign(static_cast<size_t>(std::max<int64_t>(rows, 0)), std::string());
    for (size_t id = 0; id < tokens.size(); ++id) {
        if (tokens[id].empty()) continue;
        if (static_cast<int64_t>(id) >= rows)
            throw FileError(what + ": token " + quote(tokens[id]) + " has id " + std::to_string(id) + ", past the model's " +
                            std::to_string(rows) + " rows (config.json's vocab_size)");
        t.m_src_tokens[id] = tokens[id];
        t.m_src_ids.emplace(tokens[id], static_cast<int64_t>(id));
    }
    // The unknown token: tokenizer_config.json's, else the model's own.
    const bool unk_named = config.contains("unk_token") || special_map.contains("unk_token");
    if (!unk_named && !tj.unk_token().empty()) t.m_unk = tj.unk_token();
    t.m_special[t.m_unk] = 1;
    for (const auto& a : tj.added_tokens())
        if (a.special) t.m_special[a.content] = 1;
    // Language codes: the added tokens that look like one (M2M100 "__fr__", NLLB "fra_Latn"), or
    // Marian's ">>fra<<" pieces of the vocabulary. T5 has none: a task prefix is typed text.
    if (files.kind == PretrainedTokenizerKind::t5) {
    } else if (files.kind == PretrainedTokenizerKind::marian) {
        for (const auto& token : t.m_src_tokens)
            if (token.size() > 4 && token.rfind(">>", 0) == 0 && token.compare(token.size() - 2, 2, "<<") == 0) {
                const std::string code = token.substr(2, token.size() - 4);
                t.m_languages.push_back(code);
                t.m_language_tokens[code] = token;
            }
    } else if (files.kind == PretrainedTokenizerKind::bart) {
        // No languages; the source starts with <s> (RobertaProcessing's <s> A </s>: attnviz adds </s>).
        t.m_prefix = tj.single_template().first;
        t.m_byte_level = true;
    } else {
        std::vector<std::pair<int64_t, std::string>> codes;
        for (const auto& a : tj.added_tokens()) {
            const std::string& s = a.content;
            if (files.kind == PretrainedTokenizerKind::m2m100 && s.size() > 4 && s.size() <= 12 && s.rfind("__", 0) == 0 &&
                s.compare(s.size() - 2, 2, "__") == 0)
                codes.emplace_back(a.id, s.substr(2, s.size() - 4));
            else if (files.kind == PretrainedTokenizerKind::nllb && s.size() == 8 && s[3] == '_')
                codes.emplace_back(a.id, s);
            else if (files.kind == PretrainedTokenizerKind::mbart50 && is_mbart50_code(s))
                codes.emplace_back(a.id, s);
        }
        std::sort(codes.begin(), codes.end());
        for (const auto& [id, code] : codes) {
            if (t.m_language_tokens.count(code)) continue;
            t.m_languages.push_back(code);
            t.m_language_tokens[code] = files.kind == PretrainedTokenizerKind::m2m100 ? "__" + code + "__" : code;
            t.m_special[t.m_language_tokens[code]] = 1;
        }
        // The post-processor's template says where the source's language code goes: transformers 5
        // saves "[src_lang] A </s>", whose code is the default source language when tokenizer_config.json
        // names none (a folder may have tokenizer.json alone). A code after the text (NLLB's
        // legacy_behaviour "A </s> [src_lang]", mBART-cc25's "A </s> en_XX") is refused: attnviz puts it first.
        auto code_of = [&](const std::string& token) {
            for (const auto& [code, tok] : t.m_language_tokens)
                if (tok == token) return code;
            return std::string();
        };
        const auto [before, after] = tj.single_template();
        for (const auto& token : after)
            if (!code_of(token).empty())
                throw FileError(what + ": post_processor: the template puts the language code " + quote(token) +
                                " after the text (NLLB's legacy_behaviour); attnviz reads the layout transformers 5 saves, "
                                "the code first (\"" + token + " $A </s>\"): NllbTokenizer.from_pretrained(folder, "
                                "legacy_behaviour=False).save_pretrained(folder) writes it");
        std::string template_lang;
        for (const auto& token : before)
            if (const std::string code = code_of(token); !code.empty()) template_lang = code;
        const std::string fallback = !template_lang.empty()                            ? template_lang
                                     : files.kind == PretrainedTokenizerKind::m2m100    ? "en"
                                     : files.kind == PretrainedTokenizerKind::mbart50 ? "en_XX"
                                                                                      : "eng_Latn";
        // A src_lang or tgt_lang of the wrong type is one line naming the file and the key, as on the
        // SentencePiece path (null: not named, as transformers saves an unset one).
        read_json_fields(files.what + ": tokenizer_config.json", [&] {
            t.m_default_src_lang = config.contains("src_lang") && !config["src_lang"].is_null()
                                       ? config["src_lang"].get<std::string>()
                                       : fallback;
            if (config.contains("tgt_lang") && !config["tgt_lang"].is_null())
                t.m_default_tgt_lang = config["tgt_lang"].get<std::string>();
        });
    }
}

std::shared_ptr<const PretrainedTokenizer> PretrainedTokenizer::load(const PretrainedTokenizerFiles& files) {
    std::shared_ptr<PretrainedTokenizer> t(new PretrainedTokenizer());
    t->m_files = files;
    const std::string& what = files.what;
    const int64_t rows = files.model_vocab_size;
    const json config = parse_optional(files.tokenizer_config, what + ": tokenizer_config.json");
    const json special_map = parse_optional(files.special_tokens_map, what + ": special_tokens_map.json");
    auto named = [&](const char* key, const std::string& fallback) {
        for (const json* j : {&config, &special_map})
            if (j->contains(key)) {
                const std::string s = token_content((*j)[key]);
                if (!s.empty()) return s;
            }
        return fallback;
    };
    t->m_eos = named("eos_token", "</s>");
    t->m_unk = named("unk_token", "<unk>");
    t->m_pad = named("pad_token", "<pad>");
    // tokenizer_config.json's values of the wrong type ("clean_up_tokenization_spaces": "yes") are
    // one line naming the file and the key (read_json_fields), not the JSON library's words.
    const std::string config_what = what + ": tokenizer_config.json";
    auto config_value = [&](const json& j, const char* key, auto fallback) {
        return read_json_fields(config_what, [&] { return j.value(key, fallback); });
    };
    t->m_clean_up_spaces = config_value(config, "clean_up_tokenization_spaces", false);
    if (files.kind == PretrainedTokenizerKind::nllb && config_value(config, "legacy_behaviour", false))
        throw FileError(config_what + ": legacy_behaviour is true (NLLB's old layout, the language code after the "
                                      "text); attnviz reads the layout transformers 5 saves, the code first: set it to false");
    for (const auto& s : {t->m_eos, t->m_unk, t->m_pad}) t->m_special[s] = 1;
    if (files.kind != PretrainedTokenizerKind::marian) {
        t->m_special[named("bos_token", "<s>")] = 1;
        t->m_special[named("sep_token", t->m_eos)] = 1;
    }
    for (const json* j : {&config, &special_map})
        for (const char* key : {"additional_special_tokens", "extra_special_tokens"})
            if (j->contains(key) && (*j)[key].is_array())
                for (const auto& v : (*j)[key])
                    if (const std::string s = token_content(v); !s.empty()) t->m_special[s] = 1;
    // Added tokens: the strings the text is split at before SentencePiece sees it.
    std::map<int64_t, std::string> added_by_id;
    if (config.contains("added_tokens_decoder") && config["added_tokens_decoder"].is_object())
        for (const auto& [id, v] : config["added_tokens_decoder"].items()) {
            const std::string s = token_content(v);
            if (s.empty()) continue;
            t->m_strip[s] = {v.is_object() && config_value(v, "lstrip", false), v.is_object() && config_value(v, "rstrip", false)};
            if (v.is_object() && config_value(v, "special", false)) t->m_special[s] = 1;
            try {
                added_by_id[std::stoll(id)] = s;
            } catch (const std::exception&) {
                throw FileError(what + ": tokenizer_config.json: added token id " + quote(id) + " is not a number");
            }
        }
    for (const auto& [s, _] : t->m_special) t->m_added[s] = s;
    for (const auto& [id, s] : added_by_id) t->m_added[s] = s;

    if (!files.tokenizer_json.empty()) {
        load_tokenizer_json(*t, config, special_map, files.tokenizer_json);
        return t;
    }
    if (files.kind == PretrainedTokenizerKind::t5) {
        // spiece.model alone (saved before transformers 5): the tokenizer.json transformers 5 builds from it.
        if (files.source_spm.empty())
            throw FileError(what + " has no tokenizer.json, nor spiece.model (the T5 tokenizer needs one of them)");
        load_tokenizer_json(*t, config, special_map,
                            t5_tokenizer_json(files.source_spm, config_value(config, "extra_ids", int64_t{100}),
                                              what + ": spiece.model"));
        return t;
    }
    if (files.kind == PretrainedTokenizerKind::bart) {
        if (files.vocab_json.empty() || files.merges_txt.empty())
            throw FileError(what + " has no tokenizer.json, nor vocab.json and merges.txt (the BART tokenizer needs them)");
        load_tokenizer_json(*t, config, special_map,
                            bart_tokenizer_json(files.vocab_json, files.merges_txt,
                                                config_value(config, "add_prefix_space", false), what));
        return t;
    }
    t->m_src_spm = load_spm(files.source_spm, what + ": " + (files.kind == PretrainedTokenizerKind::marian ? "source.spm" : "sentencepiece.bpe.model"));
    if (files.kind == PretrainedTokenizerKind::marian) {
        t->m_tgt_spm = load_spm(files.target_spm.empty() ? files.source_spm : files.target_spm, what + ": target.spm");
        t->m_src_ids = read_vocab(files.vocab_json, rows, what + ": vocab.json", t->m_src_tokens);
        if (!files.target_vocab_json.empty()) {
            t->m_tgt_ids = read_vocab(files.target_vocab_json, rows, what + ": target_vocab.json", t->m_tgt_tokens);
            t->m_separate_target = true;
        }
        for (const auto& s : {t->m_eos, t->m_unk})
            if (!t->m_src_ids.count(s)) throw FileError(what + ": vocab.json has no " + quote(s) + " (the model's special token)");
        // A multilingual model's targets: its >>xxx<< tokens (MarianTokenizer.supported_language_codes).
        for (const auto& token : t->id_tokens(true))
            if (token.size() > 4 && token.rfind(">>", 0) == 0 && token.compare(token.size() - 2, 2, "<<") == 0) {
                const std::string code = token.substr(2, token.size() - 4);
                t->m_languages.push_back(code);
                t->m_language_tokens[code] = token;
            }
    } else if (files.kind == PretrainedTokenizerKind::m2m100) {
        t->m_src_ids = read_vocab(files.vocab_json, rows, what + ": vocab.json", t->m_src_tokens);
        const int64_t base = static_cast<int64_t>(t->m_src_ids.size());
        const auto& codes = config_value(config, "language_codes", std::string("m2m100")) == "wmt21" ? k_wmt21_languages
                                                                                               : k_m2m100_languages;
        for (size_t i = 0; i < codes.size(); ++i) {
            const std::string token = "__" + codes[i] + "__";
            const int64_t id = base + static_cast<int64_t>(i);
            if (id >= rows) throw FileError(what + ": the language code " + token + " would have id " + std::to_string(id) +
                                            ", past the model's " + std::to_string(rows) + " rows");
            // transformers 5 neither splits the text at these codes nor drops them on decoding: they
            // are the source's first token and the output's first (forced) token, nothing more.
            t->m_src_ids[token] = id;
            t->m_src_tokens[static_cast<size_t>(id)] = token;
            t->m_languages.push_back(codes[i]);
            t->m_language_tokens[codes[i]] = token;
        }
        // src_lang null (an unset one, as transformers saves it): M2M100Tokenizer's default, "en".
        t->m_default_src_lang = (config.contains("src_lang") && config["src_lang"].is_null() ? std::string("en")
                                                                                        : config_value(config, "src_lang", std::string("en")));
        if (config.contains("tgt_lang") && !config["tgt_lang"].is_null())
            t->m_default_tgt_lang = config_value(config, "tgt_lang", std::string());
    } else {
        // NLLB: fairseq's ids over SentencePiece's: <s> 0, <pad> 1, </s> 2, <unk> 3, a piece its id + 1.
        t->m_spm_offset = 1;
        const int pieces = t->m_src_spm->GetPieceSize();
        t->m_src_tokens.assign(static_cast<size_t>(rows), std::string());
        auto put = [&](const std::string& token, int64_t id) {
            if (id < 0 || id >= rows)
                throw FileError(what + ": token " + quote(token) + " would have id " + std::to_string(id) + ", past the model's " +
                                std::to_string(rows) + " rows");
            t->m_src_ids[token] = id;
            t->m_src_tokens[static_cast<size_t>(id)] = token;
        };
        put("<s>", 0), put(t->m_pad, 1), put(t->m_eos, 2), put(t->m_unk, 3);
        for (int i = 3; i < pieces; ++i) put(t->m_src_spm->IdToPiece(i), i + 1);
        for (const auto& [id, token] : added_by_id)
            if (!t->m_src_ids.count(token)) put(token, id);
        for (const auto& [id, token] : added_by_id)
            if (token.size() == 8 && token[3] == '_') {  // "fra_Latn"
                t->m_languages.push_back(token);
                t->m_language_tokens[token] = token;
                t->m_special[token] = 1;
            }
        const bool mbart50 = files.kind == PretrainedTokenizerKind::mbart50;
        if (mbart50) {
            // MBart50Tokenizer (tokenization_mbart50.py): the 52 language codes follow the pieces, then <mask>.
            const int64_t first = pieces + 1;
            for (size_t k = 0; k < k_mbart50_languages.size(); ++k) {
                const std::string& code = k_mbart50_languages[k];
                if (!t->m_src_ids.count(code)) put(code, first + static_cast<int64_t>(k));
                t->m_languages.push_back(code);
                t->m_language_tokens[code] = code;
                t->m_special[code] = 1;
                t->m_added[code] = code;
            }
            if (!t->m_src_ids.count("<mask>")) put("<mask>", first + static_cast<int64_t>(k_mbart50_languages.size()));
            t->m_special["<mask>"] = 1;
            t->m_added["<mask>"] = "<mask>";
        }
        t->m_default_src_lang = (config.contains("src_lang") && config["src_lang"].is_null() ? std::string(mbart50 ? "en_XX" : "eng_Latn")
                                                                                        : config_value(config, "src_lang", std::string(mbart50 ? "en_XX" : "eng_Latn")));
        if (config.contains("tgt_lang") && !config["tgt_lang"].is_null())
            t->m_default_tgt_lang = config_value(config, "tgt_lang", std::string());
    }
    return t;
}

std::vector<std::pair<std::string, bool>> PretrainedTokenizer::split_added(const std::string& text) const {
    std::vector<std::pair<std::string, bool>> parts;
    std::string plain;
    size_t i = 0;
    while (i < text.size()) {
        // The longest added token starting here (m_added is ordered: scan the candidates sharing its first byte).
        size_t best = 0;
        for (auto it = m_added.lower_bound(std::string(1, text[i])); it != m_added.end() && it->first[0] == text[i]; ++it)
            if (it->first.size() > best && text.compare(i, it->first.size(), it->first) == 0) best = it->first.size();
        if (best == 0) {
            plain += text[i++];
            continue;
        }
        if (!plain.empty()) parts.emplace_back(std::move(plain), false);
        plain.clear();
        parts.emplace_back(text.substr(i, best), true);
        i += best;
    }
    if (!plain.empty()) parts.emplace_back(std::move(plain), false);
    // An added token with lstrip / rstrip eats the spaces beside it.
    for (size_t k = 0; k < parts.size(); ++k) {
        if (!parts[k].second) continue;
        const auto it = m_strip.find(parts[k].first);
        if (it == m_strip.end()) continue;
        if (it->second.first && k > 0 && !parts[k - 1].second) {
            auto& left = parts[k - 1].first;
            left.erase(left.find_last_not_of(" \t\n\r\f\v") + 1);
        }
        if (it->second.second && k + 1 < parts.size() && !parts[k + 1].second) {
            auto& right = parts[k + 1].first;
            right.erase(0, right.find_first_not_of(" \t\n\r\f\v") == std::string::npos ? right.size()
                                                                                        : right.find_first_not_of(" \t\n\r\f\v"));
        }
    }
    return parts;
}

std::vector<std::string> PretrainedTokenizer::encode(const std::string& text, bool target) const {
    if (!is_valid_utf8(text)) throw Error("the sentence is not valid UTF-8: expected UTF-8 text");
    if (m_json) {
        // The model's token of each id (an unknown piece's id is the unknown token's).
        std::vector<std::string> out = m_prefix;
        for (const int64_t id : m_json->encode(text, false).ids) {
            const auto& tokens = id_tokens(target);
            out.push_back(id >= 0 && id < static_cast<int64_t>(tokens.size()) && !tokens[static_cast<size_t>(id)].empty()
                              ? tokens[static_cast<size_t>(id)]
                              : m_unk);
        }
        return out;
    }
    const bool marian = kind() == PretrainedTokenizerKind::marian;
    auto& spm = marian && target ? *m_tgt_spm : *m_src_spm;
    std::vector<std::string> out;
    for (auto& [part, added] : split_added(text)) {
        if (part.empty()) continue;
        if (added) {
            out.push_back(part);
            continue;
        }
        std::string rest = part;
        if (marian && rest.rfind(">>", 0) == 0) {  // MarianTokenizer.remove_language_code
            if (const size_t end = rest.find("<<"); end != std::string::npos) {
                out.push_back(rest.substr(0, end + 2));
                rest = rest.substr(end + 2);
            }
        }
        std::vector<std::string> pieces;
        const auto status = spm.Encode(rest, &pieces);
        if (!status.ok()) throw Error("subword tokenisation failed: " + printable(status.ToString(), 200));
        out.insert(out.end(), pieces.begin(), pieces.end());
    }
    return out;
}

std::string PretrainedTokenizer::decode(const std::vector<std::string>& tokens) const {
    if (m_json) {
        std::vector<int64_t> ids;
        ids.reserve(tokens.size());
        for (const auto& t : tokens)
            if (const int64_t id = token_id(t, true); id >= 0) ids.push_back(id);
        std::string text = m_json->decode(ids, true);
        return escape_controls(m_clean_up_spaces ? clean_up_tokenization(std::move(text)) : text);
    }
    std::vector<std::string> pieces;
    for (const auto& t : tokens)
        if (!is_special(t)) pieces.push_back(t);
    // MarianTokenizer decodes with the source model unless the vocabularies are separate.
    const bool marian = kind() == PretrainedTokenizerKind::marian;
    auto& spm = marian && !m_files.target_vocab_json.empty() ? *m_tgt_spm : *m_src_spm;
    std::string text;
    const auto status = spm.Decode(pieces, &text);
    if (!status.ok()) throw Error("subword detokenisation failed: " + printable(status.ToString(), 200));
    if (marian) text = replace_all(std::move(text), "\xE2\x96\x81", " ");
    text = strip(text);
    return escape_controls(m_clean_up_spaces ? clean_up_tokenization(std::move(text)) : text);
}

int64_t PretrainedTokenizer::token_id(const std::string& token, bool target) const {
    const auto& ids = target && m_separate_target ? m_tgt_ids : m_src_ids;
    const auto it = ids.find(token);
    if (it != ids.end()) return it->second;
    if (m_spm_offset > 0) {  // NLLB: SentencePiece's own id
        const int id = m_src_spm->PieceToId(token);
        if (id > 2 && m_src_spm->IdToPiece(id) == token) return id + m_spm_offset;
    }
    return -1;
}

const std::vector<std::string>& PretrainedTokenizer::id_tokens(bool target) const {
    return target && m_separate_target ? m_tgt_tokens : m_src_tokens;
}

std::vector<std::string> PretrainedTokenizer::source_languages() const {
    return kind() == PretrainedTokenizerKind::marian ? std::vector<std::string>{} : m_languages;
}

std::vector<std::string> PretrainedTokenizer::target_languages() const { return m_languages; }

std::string PretrainedTokenizer::language_token(const std::string& language, bool target) const {
    const auto it = m_language_tokens.find(language);
    if (it != m_language_tokens.end() && (target || kind() != PretrainedTokenizerKind::marian)) return it->second;
    const auto& list = target ? target_languages() : source_languages();
    if (list.empty()) {
        // Why there is nothing to choose, by kind: Marian translates one pair (or only its targets
        // are chosen), BART reads and writes one language, T5 reads its task from the text.
        const std::string why = kind() == PretrainedTokenizerKind::bart
                                    ? "a BART model reads and writes one language"
                                : kind() == PretrainedTokenizerKind::t5
                                    ? "a T5 model reads its task from the text: type a prefix such as "
                                      "'translate English to German: '"
                                    : "it translates one language pair";
        throw ConfigError(std::string("this model has no ") + (target ? "target" : "source") +
                          " languages to choose from (" + why + ")");
    }
    std::string names;
    for (size_t i = 0; i < list.size() && i < 40; ++i) names += (i ? ", " : "") + list[i];
    if (list.size() > 40) names += ", ... (" + std::to_string(list.size()) + " in all)";
    throw ConfigError(std::string("the model has no ") + (target ? "target" : "source") + " language " + quote(language) +
                      "; it has: " + names);
}

std::shared_ptr<const PretrainedTokenizer> PretrainedTokenizer::with_default_languages(const std::string& source,
                                                                                   const std::string& target) const {
    // The codes as the tokenizer_config.json of each kind names them: M2M100 "fr" (its token
    // "__fr__"), NLLB "fra_Latn", mBART-50 "fr_XX"; checked first (a language the model lacks).
    if (kind() == PretrainedTokenizerKind::marian && (!source.empty() || !target.empty())) {
        if (!source.empty()) language_token(source, false);  // no source languages: says so
        throw ConfigError("a Marian model's target language is a token at the start of each source (>>fra<<), not a "
                          "language to set: put it before the corpus's sources");
    }
    if (!source.empty()) language_token(source, false);
    if (!target.empty()) language_token(target, true);
    PretrainedTokenizerFiles files = m_files;
    json config = files.tokenizer_config.empty() ? json::object()
                                                 : parse_json_bounded(files.tokenizer_config, files.what + ": tokenizer_config.json");
    if (!source.empty()) config["src_lang"] = source;
    if (!target.empty()) config["tgt_lang"] = target;
    files.tokenizer_config = config.dump(2);
    return load(files);
}

PretrainedVocabLayout PretrainedTokenizer::vocab_layout(bool target, int64_t rows, int64_t pad_id, int64_t eos_id,
                                                       int64_t unk_id) const {
    const auto& tokens = id_tokens(target);
    PretrainedVocabLayout v;
    v.rows = layout_rows(rows, pad_id, eos_id, unk_id);
    // Every name is pushed into the reserved vector and the taken set holds views of them: no copy of
    // a name, no reallocation (naming NLLB's 256,206 tokens took ~0.3 s with copies).
    v.names.reserve(v.rows.size());
    v.names = {Vocab::pad_token, Vocab::bos_token, Vocab::eos_token, Vocab::unk_token};
    std::unordered_set<std::string_view> taken;
    taken.reserve(v.rows.size());
    for (const auto& n : v.names) taken.insert(n);
    static const std::string none;
    auto token_of = [&](int64_t id) -> const std::string& {
        return id >= 0 && id < static_cast<int64_t>(tokens.size()) ? tokens[static_cast<size_t>(id)] : none;
    };
    for (const auto& [id, name] : {std::pair{pad_id, Vocab::pad_token}, std::pair{eos_id, Vocab::eos_token},
                                   std::pair{unk_id, Vocab::unk_token}})
        if (const std::string& t = token_of(id); !t.empty() && t != name) {
            v.to_name[t] = name;
            v.from_name[name] = t;
        }
    std::string shown_bytes;
    for (int64_t id = 0; id < rows; ++id) {
        if (id == pad_id || id == eos_id || id == unk_id) continue;
        const std::string& token = token_of(id);
        // A byte-level piece is shown as the text it stands for ("Ġthe" -> "▁the", "Ã©" -> "é"), part of a
        // character as its bytes; the model's token stays the name's meaning (to_name / from_name).
        const std::string* shown = &token;
        if (m_byte_level && !token.empty() && !is_special(token) && !m_added.count(token)) {
            std::string bytes;
            if (byte_level_bytes(token, bytes)) {
                bytes = replace_all(std::move(bytes), " ", "\xE2\x96\x81");
                shown_bytes = is_valid_utf8(bytes) ? bytes : printable(bytes, bytes.size() * 4 + 8);
                shown = &shown_bytes;
            }
        }
        std::string name;
        if (token.empty()) {
            name = "<hf:" + std::to_string(id) + ">";
        } else if (!is_vocab_token(*shown) || taken.count(*shown)) {
            name = replace_all(printable(*shown, shown->size() * 4 + 8), "|||", "||\\x7c");
            if (name.empty() || taken.count(name)) name = "<hf:" + std::to_string(id) + ">";
        } else {
            name = *shown;
        }
        while (taken.count(name)) name += "#";
        if (name != token && !token.empty()) {
            v.to_name[token] = name;
            v.from_name[name] = token;
        }
        if (v.names.size() == v.names.capacity())
            throw std::logic_error("vocab_layout: more names than rows");  // the views would move
        v.names.push_back(std::move(name));
        taken.insert(v.names.back());
    }
    return v;
}

std::vector<int64_t> PretrainedTokenizer::layout_rows(int64_t rows, int64_t pad_id, int64_t eos_id, int64_t unk_id) {
    std::vector<int64_t> out = {pad_id, -1, eos_id, unk_id};
    out.reserve(static_cast<size_t>(std::max<int64_t>(rows, 0)) + 4);
    for (int64_t id = 0; id < rows; ++id)
        if (id != pad_id && id != eos_id && id != unk_id) out.push_back(id);
    return out;
}

json PretrainedTokenizer::to_json() const {
    json j{{"type", "pretrained"}, {"kind", to_string(kind())}};
    auto put = [&](const char* key, const std::string& bytes) {
        if (!bytes.empty()) j[key] = base64_encode(bytes);
    };
    put("source_spm", m_files.source_spm);
    put("target_spm", m_files.target_spm);
    put("vocab_json", m_files.vocab_json);
    put("target_vocab_json", m_files.target_vocab_json);
    put("merges_txt", m_files.merges_txt);
    put("tokenizer_config", m_files.tokenizer_config);
    put("special_tokens_map", m_files.special_tokens_map);
    put("tokenizer_json", m_files.tokenizer_json);
    return j;
}

std::shared_ptr<const PretrainedTokenizer> PretrainedTokenizer::from_json(const json& j, int64_t model_vocab_size) {
    if (!j.is_object() || j.value("type", std::string()) != "pretrained" || !j.contains("kind") || !j["kind"].is_string())
        throw FileError("tokenizer: expected {\"type\": \"pretrained\", \"kind\": ...}");
    PretrainedTokenizerFiles f;
    const std::string kind = j["kind"];
    if (kind == "marian") f.kind = PretrainedTokenizerKind::marian;
    else if (kind == "m2m100") f.kind = PretrainedTokenizerKind::m2m100;
    else if (kind == "nllb") f.kind = PretrainedTokenizerKind::nllb;
    else if (kind == "t5") f.kind = PretrainedTokenizerKind::t5;
    else if (kind == "bart") f.kind = PretrainedTokenizerKind::bart;
    else if (kind == "mbart50") f.kind = PretrainedTokenizerKind::mbart50;
    else throw FileError("tokenizer: kind " + quote(kind) + " is not marian, m2m100, nllb, bart or mbart50");
    auto get = [&](const char* key) {
        if (!j.contains(key)) return std::string();
        if (!j[key].is_string()) throw FileError(std::string("tokenizer: \"") + key + "\" is not a base64 string");
        return base64_decode(j[key].get<std::string>());
    };
    f.source_spm = get("source_spm");
    f.target_spm = get("target_spm");
    f.vocab_json = get("vocab_json");
    f.target_vocab_json = get("target_vocab_json");
    f.merges_txt = get("merges_txt");
    f.tokenizer_config = get("tokenizer_config");
    f.special_tokens_map = get("special_tokens_map");
    f.tokenizer_json = get("tokenizer_json");
    f.model_vocab_size = model_vocab_size;
    f.what = "the checkpoint's tokenizer";
    return load(f);
}

}  // namespace attnviz
