// Hugging Face model folders in and out (core/persist/hf_folder.hpp).
#include "core/persist/hf_folder.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config/pretrained_config.hpp"
#include "core/hub/hub_cache.hpp"
#include "core/io/atomic_file.hpp"
#include "core/io/error.hpp"
#include "core/io/file_read.hpp"
#include "core/io/mapped_file.hpp"
#include "core/io/process_memory.hpp"
#include "core/io/json_bounded.hpp"
#include "core/io/message.hpp"
#include "core/model/families.hpp"
#include "core/persist/parameter_names.hpp"
#include "core/persist/safetensors_torch.hpp"
#include "core/persist/weights_file.hpp"
#include "core/text/pretrained_tokenizer.hpp"

namespace attnviz {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

/// The most a folder's JSON and tokenizer files may be (NLLB's tokenizer.json is ~17 MB; vocab.json
/// of a 250k vocabulary ~6 MB; a SentencePiece model ~5 MB).
constexpr uint64_t k_max_text_file = uint64_t(64) << 20;

bool is_file(const fs::path& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string read_text(const fs::path& p, const std::string& what) {
    return read_regular_file(p.string(), k_max_text_file, what);
}

std::string read_if_there(const fs::path& p, const std::string& what) {
    return is_file(p) ? read_text(p, what) : std::string();
}

json read_json(const fs::path& p, const std::string& what) { return parse_json_bounded(read_text(p, what), what); }

/// Which tokenizer the folder has: tokenizer_config.json's tokenizer_class, else the files present.
PretrainedTokenizerKind tokenizer_kind(const fs::path& dir, const PretrainedConfig& c, const std::string& tokenizer_config,
                                       const std::string& what) {
    std::string cls;
    if (!tokenizer_config.empty()) {
        const json j = parse_json_bounded(tokenizer_config, what + ": tokenizer_config.json");
        if (j.is_object() && j.contains("tokenizer_class") && j["tokenizer_class"].is_string()) cls = j["tokenizer_class"];
    }
    if (cls.rfind("Marian", 0) == 0) return PretrainedTokenizerKind::marian;
    if (cls.rfind("M2M100", 0) == 0) return PretrainedTokenizerKind::m2m100;
    if (cls.rfind("Nllb", 0) == 0) return PretrainedTokenizerKind::nllb;
    if (cls.rfind("T5", 0) == 0 || cls.rfind("MT5", 0) == 0) return PretrainedTokenizerKind::t5;
    // transformers 5 saves BART's as RobertaTokenizer (BartTokenizer is its alias).
    if (cls.rfind("Bart", 0) == 0 || cls.rfind("Roberta", 0) == 0) return PretrainedTokenizerKind::bart;
    if (cls.rfind("MBart50", 0) == 0) return PretrainedTokenizerKind::mbart50;
    if (cls.rfind("MBart", 0) == 0)
        throw FileError(what + ": tokenizer_class " + quote(cls) +
                        " (mBART-cc25, its language code after </s>) is not one attnviz reads; it reads mBART-50's "
                        "MBart50Tokenizer");
    if (!cls.empty())
        throw FileError(what + ": tokenizer_class " + quote(cls) +
                        " is not one attnviz reads (MarianTokenizer, M2M100Tokenizer, NllbTokenizer, BartTokenizer, "
                        "MBart50Tokenizer)");
    if (c.family == PretrainedFamily::t5) return PretrainedTokenizerKind::t5;
    if (c.family == PretrainedFamily::marian) return PretrainedTokenizerKind::marian;
    if (c.family == PretrainedFamily::bart) return PretrainedTokenizerKind::bart;
    if (c.family == PretrainedFamily::mbart) return PretrainedTokenizerKind::mbart50;
    // M2M100 or NLLB (both model_type m2m_100) without a tokenizer_class: tokenizer.json's added
    // tokens tell (M2M100's codes "__en__", NLLB's "eng_Latn"), else the files (M2M100 has vocab.json).
    if (is_file(dir / "tokenizer.json")) {
        const std::string tj_what = what + ": tokenizer.json";
        const json tj = parse_json_bounded(read_text(dir / "tokenizer.json", tj_what), tj_what);
        size_t m2m100 = 0, nllb = 0;
        if (tj.is_object() && tj.contains("added_tokens") && tj["added_tokens"].is_array())
            for (const auto& a : tj["added_tokens"]) {
                if (!a.is_object() || !a.contains("content") || !a["content"].is_string()) continue;
                const std::string& s = a["content"].get_ref<const std::string&>();
                if (s.size() > 4 && s.size() <= 12 && s.rfind("__", 0) == 0 && s.compare(s.size() - 2, 2, "__") == 0) ++m2m100;
                else if (s.size() == 8 && s[3] == '_' && std::isupper(static_cast<unsigned char>(s[4]))) ++nllb;
            }
        if (m2m100 > 0 || nllb > 0) return m2m100 >= nllb ? PretrainedTokenizerKind::m2m100 : PretrainedTokenizerKind::nllb;
    }
    return is_file(dir / "vocab.json") ? PretrainedTokenizerKind::m2m100 : PretrainedTokenizerKind::nllb;
}

std::shared_ptr<const PretrainedTokenizer> read_tokenizer(const fs::path& dir, const PretrainedConfig& c,
                                                          const std::string& what) {
    PretrainedTokenizerFiles f;
    f.what = what;
    f.model_vocab_size = std::max(c.vocab_size, c.target_vocab_size());
    f.tokenizer_config = read_if_there(dir / "tokenizer_config.json", what + ": tokenizer_config.json");
    f.special_tokens_map = read_if_there(dir / "special_tokens_map.json", what + ": special_tokens_map.json");
    f.kind = tokenizer_kind(dir, c, f.tokenizer_config, what);
    // tokenizer.json, when there, is the tokenizer (as transformers 5 prefers it); the SentencePiece
    // and vocabulary files are then read only if present, to be written back on export.
    f.tokenizer_json = read_if_there(dir / "tokenizer.json", what + ": tokenizer.json");
    const bool optional = !f.tokenizer_json.empty();
    auto need = [&](const char* name) {
        if (optional) return read_if_there(dir / name, what + ": " + name);
        if (!is_file(dir / name))
            throw FileError(what + " has no " + name + " (the " + to_string(f.kind) + " tokenizer needs it; or tokenizer.json)");
        return read_text(dir / name, what + ": " + name);
    };
    if (f.kind == PretrainedTokenizerKind::t5) {
        // tokenizer.json, else spiece.model (a folder saved before transformers 5): the tokenizer.json
        // transformers 5 builds from it. With tokenizer.json, spiece.model is kept for export.
        f.source_spm = need("spiece.model");
    } else if (f.kind == PretrainedTokenizerKind::marian) {
        f.source_spm = need("source.spm");
        f.target_spm = need("target.spm");
        f.vocab_json = need("vocab.json");
        f.target_vocab_json = read_if_there(dir / "target_vocab.json", what + ": target_vocab.json");
    } else if (f.kind == PretrainedTokenizerKind::bart) {
        f.vocab_json = need("vocab.json");
        f.merges_txt = need("merges.txt");
    } else if (f.kind == PretrainedTokenizerKind::mbart50) {
        f.source_spm = need("sentencepiece.bpe.model");  // fairseq's ids, the language codes after the pieces
    } else {
        f.source_spm = need("sentencepiece.bpe.model");
        if (f.kind == PretrainedTokenizerKind::m2m100) f.vocab_json = need("vocab.json");
    }
    return PretrainedTokenizer::load(f);
}

/// The tensor a parameter is read from, by its name or the names older files use for it.
const torch::Tensor* find_weight(const std::map<std::string, torch::Tensor>& w, const std::string& name,
                                 std::set<std::string>& used) {
    std::vector<std::string> names{name};
    if (name == "model.shared.weight")
        names.insert(names.end(), {"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"});
    if (name.rfind("model.", 0) == 0) names.push_back(name.substr(6));  // a base model saved without its prefix
    for (const auto& n : names)
        if (const auto it = w.find(n); it != w.end()) {
            used.insert(n);
            return &it->second;
        }
    return nullptr;
}

/// Tensors a folder may hold that the network does not read: position tables (computed), and
/// the tied copies of the shared embedding.
bool ignorable(const std::string& name) {
    // T5 checkpoints of transformers 4 and older: a cross-attention bias no layer reads.
    if (name == "decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight") return true;
    static const std::regex ignored(
        R"((model\.)?(encoder|decoder)\.embed_positions\.(weight|weights|_float_tensor)|)"
        R"((model\.)?(encoder|decoder)\.embed_tokens\.weight|lm_head\.weight|final_logits_bias)");
    return std::regex_match(name, ignored);
}

/// A weight the folder may leave out: Marian's, BART's and mBART's final_logits_bias (transformers loads
/// such a folder with the bias at zero, _keys_to_ignore_on_load_missing); the network's is zero already.
bool may_be_missing(const PretrainedConfig& c, const std::string& name) {
    return (c.family == PretrainedFamily::marian || c.family == PretrainedFamily::bart || c.family == PretrainedFamily::mbart) &&
           name == "final_logits_bias";
}

/// The mapped file's pages under a tensor read from it dropped from this process's memory (a copy or
/// a conversion of it is what the network keeps): MappedFile::release_pages, nothing for a copy.
void release_file_pages(const torch::Tensor& t) {
    if (t.defined() && t.has_storage() && t.is_contiguous()) MappedFile::release_pages(t.data_ptr(), t.nbytes());
}

/// release_file_pages for the pages rows `ids` of a matrix [rows, ...] read from the file touch, rounded
/// outwards but kept within the matrix's own pages (one it shares with another tensor stays): a block
/// being converted, or a lookup's rows, let go once read. Consecutive rows go in one call.
void release_file_rows(const torch::Tensor& t, const torch::Tensor& ids) {
    if (!t.defined() || !t.has_storage() || !t.is_contiguous() || t.dim() < 1 || ids.numel() == 0) return;
    const auto flat = ids.to(torch::kLong).reshape(-1).contiguous();
    std::vector<int64_t> sorted(flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + flat.numel());
    std::sort(sorted.begin(), sorted.end());
    const char* base = static_cast<const char*>(t.data_ptr());
    const size_t row = static_cast<size_t>(t.stride(0)) * t.element_size();
    for (size_t i = 0; i < sorted.size();) {
        size_t j = i + 1;
        while (j < sorted.size() && sorted[j] <= sorted[j - 1] + 1) ++j;  // a run of consecutive rows
        if (sorted[i] >= 0 && sorted[j - 1] < t.size(0))
            MappedFile::release_pages_within(base + static_cast<size_t>(sorted[i]) * row,
                                             static_cast<size_t>(sorted[j - 1] - sorted[i] + 1) * row, base, t.nbytes());
        i = j;
    }
}

/// Whether two weights of the file hold the same values: the same storage, or equal block by block
/// (as float; the pages read to compare are let go).
bool same_values(const torch::Tensor& a, const torch::Tensor& b) {
    if (a.sizes() != b.sizes()) return false;
    if (a.data_ptr() == b.data_ptr() && a.strides() == b.strides() && a.scalar_type() == b.scalar_type()) return true;
    bool equal = true;
    const int64_t n = a.dim() == 0 ? 0 : a.size(0), block = 4096;
    for (int64_t r = 0; r < n && equal; r += block) {
        const int64_t k = std::min(block, n - r);
        equal = a.narrow(0, r, k).to(torch::kFloat).equal(b.narrow(0, r, k).to(torch::kFloat));
    }
    release_file_pages(a);
    release_file_pages(b);
    return equal;
}

/// The embedding matrices as transformers 5 ties them (PreTrainedModel.tie_weights over each model's
/// _tied_weights_keys), for every family but T5: with tie_word_embeddings (the default) the encoder's and
/// the decoder's embed_tokens and lm_head are model.shared, except one the file holds with other values
/// (transformers then warns and ties it not); a missing model.shared takes a tied one's place. Without it
/// transformers ties nothing: each reads its own tensor (a missing one is read from model.shared, as
/// transformers 4 built it, not from random values). Marian without shared embeddings: lm_head is the
/// decoder's embed_tokens when tied. Sets share_embeddings / tie_word_embeddings to what the weights
/// are and puts each under the name the network reads it by (views, no copies). Where they differ the
/// three are apart, so that an export's config.json (tie_word_embeddings false) reads back the same.
void tie_as_transformers(PretrainedConfig& c, std::map<std::string, torch::Tensor>& w) {
    auto held = [&](const std::string& name) -> std::string {  // the name the file holds it under, "" if none
        if (w.count(name)) return name;
        if (name.rfind("model.", 0) == 0 && w.count(name.substr(6))) return name.substr(6);
        return "";
    };
    const std::string shared = held("model.shared.weight"), enc = held("model.encoder.embed_tokens.weight"),
                      dec = held("model.decoder.embed_tokens.weight"), head = held("lm_head.weight");
    auto differ = [&](const std::string& a, const std::string& b) {
        return !a.empty() && !b.empty() && a != b && !same_values(w.at(a), w.at(b));
    };
    const bool marian_apart = c.family == PretrainedFamily::marian && !c.share_embeddings;
    std::string src_enc, src_dec, src_head;
    if (marian_apart) {
        src_enc = enc;
        src_dec = dec;
        src_head = head.empty() || (c.tie_word_embeddings && !differ(head, dec)) ? dec : head;
        c.tie_word_embeddings = src_head == src_dec;
    } else {
        const std::string base = !shared.empty() ? shared : !enc.empty() ? enc : !dec.empty() ? dec : head;
        auto source = [&](const std::string& own) {
            if (own.empty()) return base;
            return c.tie_word_embeddings && !differ(own, base) ? base : own;
        };
        src_enc = source(enc);
        src_dec = source(dec);
        src_head = source(head);
        const bool one = src_enc == src_dec && src_dec == src_head;
        c.share_embeddings = one;
        c.tie_word_embeddings = one;
    }
    if (src_enc.empty() || src_dec.empty()) return;  // the parameter check names what is missing
    const torch::Tensor enc_t = w.at(src_enc), dec_t = w.at(src_dec), head_t = src_head.empty() ? torch::Tensor() : w.at(src_head);
    if (c.share_embeddings) {
        if (!shared.empty() && shared != "model.shared.weight") w.erase(shared);  // "shared.weight": read by its full name
        w["model.shared.weight"] = enc_t;
    } else {
        for (const auto& name : {shared, std::string("model.shared.weight")})
            if (!name.empty()) w.erase(name);
        w["model.encoder.embed_tokens.weight"] = enc_t;
        w["model.decoder.embed_tokens.weight"] = dec_t;
    }
    if (!c.tie_word_embeddings && head_t.defined()) w["lm_head.weight"] = head_t;
}

/// What the model is called: a hub cache snapshot's ORG/NAME, else the folder's name.
std::string folder_name(const std::string& dir) {
    fs::path p = fs::path(dir).lexically_normal();
    if (p.filename().empty()) p = p.parent_path();
    const std::string repo = p.parent_path().parent_path().filename().string();
    if (p.parent_path().filename() == "snapshots" && repo.rfind("models--", 0) == 0) {
        std::string id = repo.substr(8);
        if (const size_t sep = id.find("--"); sep != std::string::npos) return id.replace(sep, 2, "/");
    }
    return p.filename().string();
}

}  // namespace

bool is_model_file_name(const std::string& name) {
    static const std::regex model_file(
        R"((config|generation_config|tokenizer|tokenizer_config|special_tokens_map|added_tokens|vocab|target_vocab)\.json|)"
        R"(merges\.txt|source\.spm|target\.spm|sentencepiece\.bpe\.model|spiece\.model|)"
        R"((model|pytorch_model|tf_model|flax_model)[-.0-9a-z_]*\.(safetensors|bin|h5|msgpack|json))");
    return std::regex_match(name, model_file);
}

bool is_model_folder(const std::string& dir) {
    struct stat st {};
    return ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && is_file(fs::path(dir) / "config.json");
}

bool looks_like_hub_id(const std::string& name) {
    static const std::regex id(R"([A-Za-z0-9][A-Za-z0-9_.\-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.\-]{0,95})");
    return std::regex_match(name, id) && name.find("..") == std::string::npos;
}

std::vector<std::string> hub_cache_dirs() { return hub::cache_dirs(); }

std::string find_in_hub_cache(const std::string& id) {
    if (!looks_like_hub_id(id)) throw FileError(quote(id) + " is not a hub id (ORGANISATION/NAME)");
    // The revision refs/main names (a commit folder of snapshots/, never a path out of it), else
    // the newest snapshot with a config.json (core/hub/hub_cache.hpp).
    std::vector<std::string> looked;
    if (std::string snapshot = hub::find_snapshot(id, "main", &looked); !snapshot.empty()) return snapshot;
    std::string where;
    for (const auto& l : looked) where += (where.empty() ? "" : ", ") + quote(l, 300);
    throw FileError("model " + quote(id) + " is neither a folder nor in the local Hugging Face cache (looked in " +
                    (where.empty() ? std::string("no cache: HOME is not set") : where) +
                    "); opening a model never downloads it: download it with `attnviz-cli download " + id +
                    "` (or in the app: File → Open from the Hugging Face Hub…) and open it again");
}

TranslationModelPtr load_model_folder(const std::string& dir_in, InferencePrecision precision) {
    const fs::path dir(dir_in);
    const std::string what = "model folder " + quote(dir_in, 300);
    if (!is_model_folder(dir_in)) throw FileError(what + " has no config.json");
    const json config = read_json(dir / "config.json", what + ": config.json");
    auto spec = std::make_shared<PretrainedSpec>();
    spec->model = PretrainedConfig::from_json(config, what + ": config.json");
    const PretrainedConfig& c = spec->model;
    spec->generation = is_file(dir / "generation_config.json")
                           ? GenerationConfig::from_json(read_json(dir / "generation_config.json", what + ": generation_config.json"),
                                                         c, what + ": generation_config.json")
                           : GenerationConfig::from_json(config, c, what + ": config.json");
    // The model config.json describes, with the model's own row counts: its tensors' shapes are
    // what the file must hold. Checked against the weights' headers (mapped, not read) before the
    // tokenizer or the network is sized from the config (issue 46: a 124 KB folder claiming a
    // vocabulary of a million rows took 840 MB before it was refused).
    ModelConfig mc;
    mc.arch = ModelArch::pretrained;
    mc.hidden_size = c.d_model;
    mc.num_layers = std::min<int64_t>(c.encoder_layers, 48);
    mc.num_heads = std::min<int64_t>(c.encoder_heads, 64);
    mc.ffn_size = std::min<int64_t>(c.encoder_ffn, 16384);
    mc.dropout = c.dropout;
    mc.pretrained = spec;
    mc.src_vocab = c.vocab_size;
    mc.tgt_vocab = c.target_vocab_size();
    WeightsReadOptions read_options;
    read_options.view = true;
    std::map<std::string, torch::Tensor> tensors;
    for (auto& [name, t] : read_weights(dir_in, read_options))
        if (!tensors.emplace(name, t).second) throw FileError(what + ": the weights hold " + quote(name, 200) + " twice");
    // T5: transformers 5 ties lm_head to `shared` unless the weights hold one of their own (Flan-T5, mT5).
    if (c.family == PretrainedFamily::t5) spec->model.tie_word_embeddings = !tensors.count("lm_head.weight");
    else tie_as_transformers(spec->model, tensors);
    {
        std::set<std::string> seen;
        for (const auto& p : parameter_names(mc)) {
            const torch::Tensor* t = find_weight(tensors, p.file, seen);
            if (!t && may_be_missing(c, p.file)) continue;
            if (!t)
                throw FileError(what + ": the weights have no " + quote(p.file) + ", which config.json's model (" +
                                c.describe() + ") needs");
            if (t->sizes().vec() == p.shape) continue;
            const int64_t dim = p.file == "final_logits_bias" ? 1 : 0;
            if (p.rows != VocabRows::none && t->dim() == static_cast<int64_t>(p.shape.size()) &&
                t->size(dim) != p.shape[static_cast<size_t>(dim)])
                throw FileError(what + ": " + quote(p.file) + " has shape " + shape_to_string(t->sizes().vec()) + ", but the " +
                                "vocabulary has " + std::to_string(p.shape[static_cast<size_t>(dim)]) +
                                " rows (config.json's vocab_size)");
            throw FileError(what + ": " + quote(p.file) + " has shape " + shape_to_string(t->sizes().vec()) +
                            ", but config.json describes " + c.describe() + ", which needs " + shape_to_string(p.shape));
        }
    }
    const auto pretrained = read_tokenizer(dir, c, what);
    Tokenizer::PretrainedRows rows;
    rows.source_rows = c.vocab_size;
    rows.target_rows = c.target_vocab_size();
    rows.pad_id = c.pad_token_id;
    rows.eos_id = c.eos_token_id;
    rows.unk_id = pretrained->token_id(pretrained->unk_token());
    if (rows.unk_id < 0 || rows.unk_id == rows.pad_id || rows.unk_id == rows.eos_id)
        throw FileError(what + ": the tokenizer's unknown token " + quote(pretrained->unk_token()) +
                        " has no id of its own in the vocabulary");
    const auto eos_id = pretrained->token_id(pretrained->eos_token());
    if (eos_id != c.eos_token_id)
        throw FileError(what + ": the tokenizer's " + quote(pretrained->eos_token()) + " has id " + std::to_string(eos_id) +
                        ", config.json's eos_token_id is " + std::to_string(c.eos_token_id) + ": they disagree");
    // The layouts the tokenizer was made from, made once; one where both sides are the same (NLLB, M2M100,
    // BART, T5, most Marian models): a 256k vocabulary's names are ~10 MB, and what is freed here stays in
    // the heap's holes.
    std::array<PretrainedVocabLayout, 2> layouts;
    const TokenizerPtr tokenizer = Tokenizer::for_pretrained(pretrained, rows, &layouts);
    const bool same_sides = tokenizer->pretrained_sides_equal();
    auto& src_layout = layouts[0];
    auto& tgt_own = layouts[1];
    const PretrainedVocabLayout& tgt_layout = same_sides ? src_layout : tgt_own;
    const auto start = std::find(tgt_layout.rows.begin(), tgt_layout.rows.end(), c.decoder_start_token_id);
    if (start == tgt_layout.rows.end())
        throw FileError(what + ": decoder_start_token_id " + std::to_string(c.decoder_start_token_id) + " is not a row of the model");
    spec->decoder_start_row = start - tgt_layout.rows.begin();

    mc.src_vocab = static_cast<int64_t>(src_layout.names.size());
    mc.tgt_vocab = static_cast<int64_t>(tgt_layout.names.size());
    // One vocabulary for both sides where they are the same: a second copy was 7 MB at opus-mt's 58k
    // rows, 36 MB at NLLB's 256k. The layouts' names become the vocabularies' own (only the rows are
    // read below).
    const bool same_names = same_sides || tgt_layout.names == src_layout.names;
    auto src_vocab = std::make_shared<const Vocab>(Vocab::from_tokens(std::move(src_layout.names)));
    auto tgt_vocab = same_names ? src_vocab : std::make_shared<const Vocab>(Vocab::from_tokens(std::move(tgt_own.names)));
    for (auto* layout : {&src_layout, &tgt_own}) {
        layout->to_name = {};
        layout->from_name = {};
    }

    // The weights are views of the mapped file (core/persist/weights_file.hpp): a parameter
    // stored as float32 in the order the network uses becomes a view of the file's pages
    // (copied page by page only if training writes it), so opening a 300 MB model costs
    // its pages once, not a copy on top of them. Vocabulary rows are permuted into a copy.
    const auto expected = parameter_names(mc);
    Network network = build_network(mc, NetworkFill::unfilled);
    auto named = network->named_parameters();
    std::set<std::string> used;
    torch::NoGradGuard no_grad;
    std::vector<ConvertedLoad> conversions;  // the layers' int8 / bf16 weights (vocabulary matrices as they come)
    if (precision != InferencePrecision::fp32)
        for (const auto& p : expected)
            if (auto* dst = named.find(p.module); dst && converts_parameter(p.module, *dst))
                dst->set_data(torch::empty({1}).expand(dst->sizes()));  // its float32 allocation let go at once
    for (const auto& p : expected) {
        const torch::Tensor* t = find_weight(tensors, p.file, used);
        if (!t && may_be_missing(c, p.file)) continue;
        if (!t) throw FileError(what + ": the weights have no " + quote(p.file) + " (a " + c.describe() + " model needs it)");
        if (!t->is_floating_point())
            throw FileError(what + ": " + quote(p.file) + " holds " + std::string(c10::toString(t->scalar_type())) +
                            " values, expected floating point");
        torch::Tensor& dst = named[p.module];
        // int8 / bf16: straight from the file's pages (in their stored type, a block of rows at a time) to
        // the converted weight, the pages then let go: set_inference_precision's result, without the
        // float32 weight (issue 49: the float32 model is never resident).
        const bool convert = precision != InferencePrecision::fp32 && converts_parameter(p.module, dst);
        if (p.rows != VocabRows::none) {
            const auto& layout = p.rows == VocabRows::source ? src_layout : tgt_layout;
            const int64_t dim = p.file == "final_logits_bias" ? 1 : 0;
            const int64_t model_rows = p.rows == VocabRows::source ? c.vocab_size : c.target_vocab_size();
            if (t->dim() != static_cast<int64_t>(p.shape.size()) || t->size(dim) != model_rows)
                throw FileError(what + ": " + quote(p.file) + " has shape " + shape_to_string(t->sizes().vec()) + ", but the " +
                                "vocabulary has " + std::to_string(model_rows) + " rows (config.json's vocab_size)");
            // Straight into the parameter (no temporary copy of a 120 MB embedding).
            auto out_shape = t->sizes().vec();
            out_shape[static_cast<size_t>(dim)] = static_cast<int64_t>(layout.rows.size());
            if (out_shape != dst.sizes().vec())
                throw FileError(what + ": " + quote(p.file) + " has shape " + shape_to_string(t->sizes().vec()) +
                                ", which does not fit " + c.describe() + " (config.json)");
            const auto index = torch::tensor(layout.rows, torch::kLong).clamp_min(0);
            if (convert && dim == 0) {
                // A block of rows at a time, in attnviz's row order (<bos> zero as below), each block's
                // pages of the file let go once read.
                const WeightRows rows = [&](int64_t first, int64_t count) {
                    const auto ids = index.narrow(0, first, count);
                    auto block = t->index_select(0, ids).to(torch::kFloat);
                    release_file_rows(*t, ids);
                    if (Vocab::bos_id >= first && Vocab::bos_id < first + count) block.select(0, Vocab::bos_id - first).zero_();
                    return block;
                };
                // A vocabulary matrix read as an embedding: lookups read its rows from the file again
                // (the mapping stays; each lookup's pages let go), not an int8 row table of V x d bytes.
                RowLookup lookup;
                if (MappedFile::is_mapped(t->data_ptr(), t->nbytes()))
                    lookup = [file = *t, index](const torch::Tensor& ids) {
                        const auto file_ids = index.index_select(0, ids);
                        auto block = file.index_select(0, file_ids).to(torch::kFloat);
                        release_file_rows(file, file_ids);
                        return block.masked_fill_(ids.eq(Vocab::bos_id).unsqueeze(1), 0.0);
                    };
                load_converted(dst, p.module, precision, rows, lookup);
                release_file_pages(*t);
                release_free_heap();  // the blocks' temporaries, holes between the weights kept
                continue;
            }
            if (dim != 0) {
                dst.copy_(t->index_select(dim, index));  // final_logits_bias [1, V]: one row
            } else {
                // A vocabulary matrix: block by block, in the file's type, never a temporary copy of
                // the whole matrix, each block's pages of the file let go once copied (the peak RSS:
                // one copy of the matrix, not the file's and the parameter's together). One block's
                // buffer serves every block when the file's type differs: a fresh 8 MB block each
                // time left the heap 60 MB larger than needed while the rest of the file's pages came
                // in (the fp32 peak, b4ca287).
                const int64_t n = index.size(0), block = 4096;
                const bool same_type = t->scalar_type() == dst.scalar_type() && dst.is_contiguous();
                auto block_shape = t->sizes().vec();
                block_shape[0] = std::min(block, n);
                const torch::Tensor buffer = same_type ? torch::Tensor() : torch::empty(block_shape, t->options());
                for (int64_t r = 0; r < n; r += block) {
                    const int64_t k = std::min(block, n - r);
                    const auto ids = index.narrow(0, r, k);
                    auto rows = dst.narrow(0, r, k);
                    if (same_type) {
                        torch::index_select_out(rows, *t, 0, ids);
                    } else {
                        auto staged = buffer.narrow(0, 0, k);
                        torch::index_select_out(staged, *t, 0, ids);
                        rows.copy_(staged);
                    }
                    release_file_rows(*t, ids);
                }
            }
            dst.select(dim, Vocab::bos_id).zero_();  // <bos>: a row the network never reads nor outputs
            release_file_pages(*t);  // the permuted copy is what the network reads
            continue;
        }
        if (t->sizes() != dst.sizes())
            throw FileError(what + ": " + quote(p.file) + " has shape " + shape_to_string(t->sizes().vec()) +
                            ", which does not fit " + c.describe() + " (config.json)");
        if (convert) {
            // Converted below, several at once, after every check.
            conversions.push_back({&dst, p.module, [t](int64_t first, int64_t count) { return t->narrow(0, first, count); },
                                   [t] {
                                       release_file_pages(*t);
                                       release_free_heap();  // the blocks' temporaries, holes between the weights kept
                                   }});
            continue;
        }
        torch::Tensor value = t->to(torch::kFloat);
        if (value.is_contiguous())
            dst.set_data(value);  // the file's pages (or the converted copy), no second copy
        else
            dst.copy_(value);
    }
    for (const auto& [name, t] : tensors)
        if (!used.count(name) && !ignorable(name))
            throw FileError(what + ": unexpected tensor " + quote(name, 200) + " (not a weight of a " + to_string(c.family) +
                            " model as config.json describes it: another architecture?)");
    load_converted_all(conversions, precision);
    auto model = std::make_shared<const TranslationModel>(network, src_vocab, tgt_vocab, tokenizer, TrainConfig{},
                                                          TrainHistory{}, folder_name(dir_in));
    return model;
}

void save_model_folder(const TranslationModel& model, const std::string& dir_in) {
    const auto& spec = model.config().pretrained;
    if (!model.config().is_pretrained() || !spec || !model.tokenizer().pretrained())
        throw ConfigError("export --format hf: only a pretrained (Hugging Face) model can be written as a model folder; "
                          "attnviz's own models export to d2l's layout (--format d2l)");
    const fs::path dir(dir_in);
    std::error_code ec;
    if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
        throw FileError("cannot write the model folder " + quote(dir_in, 300) + ": it is a file");
    if (fs::is_directory(dir, ec) && !is_model_folder(dir_in) && !fs::is_empty(dir, ec))
        throw FileError("cannot write the model folder " + quote(dir_in, 300) +
                        ": it is a folder of other files (no config.json); give a new folder, an empty one, or a "
                        "model folder to replace");
    if (!fs::exists(dir, ec) && !dir.parent_path().empty()) {
        fs::create_directories(dir.parent_path(), ec);
        if (ec) throw FileError("cannot create the folder of " + quote(dir_in, 300) + ": " + ec.message());
    }
    const PretrainedConfig& c = spec->model;
    const auto src_rows = model.tokenizer().pretrained_rows(false), tgt_rows = model.tokenizer().pretrained_rows(true);
    // Every path first: nothing is written when one cannot be.
    const auto files = model.tokenizer().pretrained()->files();
    std::vector<std::pair<std::string, std::string>> outputs;
    outputs.emplace_back("config.json", spec->model.to_json().dump(2) + "\n");
    outputs.emplace_back("generation_config.json", spec->generation.to_json().dump(2) + "\n");
    safetensors::TensorWriter writer;
    auto named = model.network()->named_parameters();
    for (const auto& p : parameter_names(model.config())) {
        torch::Tensor t = named[p.module].detach().to(torch::kCPU, torch::kFloat);
        if (p.rows != VocabRows::none) {
            // Back to the model's order: attnviz id i holds model row rows[i] (<bos>: none).
            const auto& rows = p.rows == VocabRows::source ? src_rows : tgt_rows;
            const int64_t dim = p.file == "final_logits_bias" ? 1 : 0;
            const int64_t model_rows = p.rows == VocabRows::source ? c.vocab_size : c.target_vocab_size();
            std::vector<int64_t> ids, to;
            for (size_t i = 0; i < rows.size(); ++i)
                if (rows[i] >= 0) ids.push_back(static_cast<int64_t>(i)), to.push_back(rows[i]);
            std::vector<int64_t> shape = t.sizes().vec();
            shape[static_cast<size_t>(dim)] = model_rows;
            auto out = torch::zeros(shape);
            out.index_copy_(dim, torch::tensor(to, torch::kLong), t.index_select(dim, torch::tensor(ids, torch::kLong)));
            t = out;
        }
        writer.add(p.file, t);
    }
    outputs.emplace_back("model.safetensors", writer.serialize({{"format", "pt"}}));
    // The tokenizer's files as they were read: tokenizer.json when the model came with one, and the
    // SentencePiece and vocabulary files it had (a folder saved by transformers 5 may have none).
    if (!files.tokenizer_json.empty()) outputs.emplace_back("tokenizer.json", files.tokenizer_json);
    if (files.kind == PretrainedTokenizerKind::t5) {
        if (!files.source_spm.empty()) outputs.emplace_back("spiece.model", files.source_spm);
    } else if (files.kind == PretrainedTokenizerKind::marian && !files.source_spm.empty()) {
        outputs.emplace_back("source.spm", files.source_spm);
        outputs.emplace_back("target.spm", files.target_spm.empty() ? files.source_spm : files.target_spm);
        if (!files.vocab_json.empty()) outputs.emplace_back("vocab.json", files.vocab_json);
        if (!files.target_vocab_json.empty()) outputs.emplace_back("target_vocab.json", files.target_vocab_json);
    } else if (files.kind == PretrainedTokenizerKind::bart) {
        if (!files.vocab_json.empty()) outputs.emplace_back("vocab.json", files.vocab_json);
        if (!files.merges_txt.empty()) outputs.emplace_back("merges.txt", files.merges_txt);
    } else if (!files.source_spm.empty()) {
        outputs.emplace_back("sentencepiece.bpe.model", files.source_spm);
        if (!files.vocab_json.empty()) outputs.emplace_back("vocab.json", files.vocab_json);
    }
    if (!files.tokenizer_config.empty()) outputs.emplace_back("tokenizer_config.json", files.tokenizer_config);
    if (!files.special_tokens_map.empty()) outputs.emplace_back("special_tokens_map.json", files.special_tokens_map);
    // All or nothing (issue 46): the new folder is written beside the old and swapped in whole, so a
    // full disk never leaves one model's config beside another's weights. Files of the old model
    // that this one does not write (another tokenizer's, other weight formats) go with the old
    // folder; anything else there (a README, a .git) is kept.
    write_folder_atomic(dir_in, outputs, is_model_file_name);
}

}  // namespace attnviz
