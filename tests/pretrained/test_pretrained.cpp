// Pretrained Hugging Face models (Marian, M2M100) against transformers itself: the fixtures
// tools/make_hf_fixtures.py made (tiny models trained a little by transformers, and what
// transformers computed with them: tokenizer ids, logits, every attention map, greedy and beam
// outputs of generate()). Skipped when the fixtures are absent (no transformers in the .venv).
#include "catch_torch.hpp"
#include "test_support.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>

#include <nlohmann/json.hpp>

#include "core/analysis/heads.hpp"
#include "core/analysis/subword_merge.hpp"
#include "core/config/pretrained_config.hpp"
#include "core/data/data.hpp"
#include "core/data/training_data.hpp"
#include "core/io/error.hpp"
#include "core/io/safetensors.hpp"
#include "core/decode/translation_model.hpp"
#include "core/model/small_linear.hpp"
#include "core/persist/hf_folder.hpp"
#include "core/persist/model_file.hpp"
#include "core/persist/safetensors_torch.hpp"
#include "core/text/pretrained_tokenizer.hpp"
#include "core/train/train.hpp"

using namespace attnviz;
using json = nlohmann::json;

namespace {

// ATTNVIZ_HF_FIXTURES in the environment: another fixture folder (one tools/make_hf_fixtures.py wrote elsewhere).
const std::string k_fixtures = std::getenv("ATTNVIZ_HF_FIXTURES") ? std::getenv("ATTNVIZ_HF_FIXTURES") : ATTNVIZ_HF_FIXTURES;

bool have_fixtures() {
    if (std::filesystem::exists(k_fixtures + "/reference.json")) return true;
    WARN("no pretrained fixtures at " << k_fixtures << " (tools/make_hf_fixtures.py needs transformers); skipping");
    return false;
}

const json& reference() {
    static const json j = [] {
        std::ifstream in(k_fixtures + "/reference.json");
        return json::parse(in);
    }();
    return j;
}

/// The model's ids of attnviz ids (and back), for one side.
struct IdMap {
    std::vector<int64_t> to_model;
    std::map<int64_t, int64_t> to_attnviz;
    IdMap(const TranslationModel& m, bool target) {
        to_model = m.tokenizer().pretrained_layout(target).rows;
        REQUIRE(m.tokenizer().pretrained_rows(target) == to_model);  // the rows alone, as the names' layout has them
        for (size_t i = 0; i < to_model.size(); ++i)
            if (to_model[i] >= 0) to_attnviz[to_model[i]] = static_cast<int64_t>(i);
    }
    std::vector<int64_t> model_ids(const std::vector<int64_t>& ids) const {
        std::vector<int64_t> out;
        for (auto id : ids) out.push_back(to_model.at(static_cast<size_t>(id)));
        return out;
    }
};

std::vector<int64_t> ints(const json& j) { return j.get<std::vector<int64_t>>(); }

/// generate()'s sequences without the padding it adds after an end when it returns several (pad, or
/// for T5 the end token again: everything after the first end).
std::vector<int64_t> without_padding(std::vector<int64_t> ids, int64_t pad, int64_t eos = -1) {
    if (const auto end = std::find(ids.begin(), ids.end(), eos); eos >= 0 && end != ids.end()) ids.erase(end + 1, ids.end());
    while (!ids.empty() && ids.back() == pad) ids.pop_back();
    return ids;
}

/// The source tokens attnviz reads for a sample, as model ids, with the </s> the model adds.
std::vector<int64_t> source_ids(const TranslationModel& m, const std::string& text, const std::string& src_lang) {
    auto tokens = m.tokenizer().encode(text, false);
    if (!src_lang.empty())
        tokens.insert(tokens.begin(), m.tokenizer().pretrained_name(m.tokenizer().pretrained()->language_token(src_lang, false), false));
    std::vector<int64_t> ids = m.src_vocab().encode(tokens);
    ids.push_back(Vocab::eos_id);
    return IdMap(m, false).model_ids(ids);
}

DecodeOptions options_for(const TranslationModel& m, const json& variant, const std::string& tgt_lang) {
    DecodeOptions d = m.decode_defaults();
    d.target_lang = tgt_lang;
    if (variant.contains("num_beams")) d.beam_size = variant["num_beams"];
    if (variant.contains("length_penalty")) d.length_penalty = variant["length_penalty"];
    if (variant.contains("num_return_sequences")) d.num_hypotheses = variant["num_return_sequences"];
    if (variant.contains("no_repeat_ngram_size")) d.generation.no_repeat_ngram = variant["no_repeat_ngram_size"];
    if (variant.contains("early_stopping")) {
        const auto& e = variant["early_stopping"];
        d.generation.early_stopping = e.is_boolean() ? (e.get<bool>() ? 1 : 0) : 2;
    }
    return d;
}

struct Case {
    const char* name;
    const char* folder;
    const char* src_lang;
    const char* tgt_lang;
};
// nllb: an NLLB folder as transformers 5 saves it, tokenizer.json and tokenizer_config.json only;
// m2m100_json: the m2m100 model with tokenizer.json instead of its SentencePiece files.
const Case k_cases[] = {{"marian", "marian", "", ""},
                        {"m2m100", "m2m100", "en", "fr"},
                        {"nllb", "nllb", "eng_Latn", "fra_Latn"},
                        {"m2m100_json", "m2m100_json", "en", "fr"},
                        // T5 (ReLU, tied and rescaled) and Flan-T5-style (gated-GELU, own lm_head): tools/hf_fixtures_t5.py
                        {"t5", "t5", "", ""},
                        {"flan_t5", "flan_t5", "", ""},
                        // BART (byte-level BPE, <s> forced first) and mBART-50 (en_XX, fr_XX), both as
                        // transformers 5 saves them: tokenizer.json and tokenizer_config.json only.
                        {"bart", "bart", "", ""},
                        {"mbart50", "mbart50", "en_XX", "fr_XX"},
                        // bart_files: the bart model with vocab.json and merges.txt instead of tokenizer.json.
                        {"bart", "bart_files", "", ""}};

}  // namespace

TEST_CASE("a Marian folder and an M2M100 folder open, and tokenise as transformers does", "[pretrained][tokenizer]") {
    if (!have_fixtures()) return;
    for (const auto& c : k_cases) {
        INFO(c.name);
        const auto model = load_model(k_fixtures + "/" + c.folder);
        REQUIRE(model->config().is_pretrained());
        for (const auto& e : reference()[c.name]) {
            const std::string text = e["text"];
            INFO("sentence " << json(text).dump());
            CHECK(source_ids(*model, text, c.src_lang) == ints(e["input_ids"]));
            // decode(skip_special_tokens=True) of the same ids.
            std::vector<std::string> tokens;
            IdMap map(*model, false);
            for (auto id : ints(e["input_ids"])) tokens.push_back(model->src_vocab().token(map.to_attnviz.at(id)));
            CHECK(model->tokenizer().decode(tokens) == e["decoded"].get<std::string>());
        }
    }
}

TEST_CASE("pretrained logits and every attention map equal transformers' (1e-5)", "[pretrained][maps]") {
    if (!have_fixtures()) return;
    torch::NoGradGuard no_grad;
    for (const auto& c : k_cases) {
        INFO(c.name);
        const auto model = load_model(k_fixtures + "/" + c.folder);
        const IdMap src_map(*model, false), tgt_map(*model, true);
        for (const auto& e : reference()[c.name]) {
            const std::string text = e["text"];
            INFO("sentence " << json(text).dump());
            std::vector<int64_t> src;
            for (auto id : ints(e["input_ids"])) src.push_back(src_map.to_attnviz.at(id));
            std::vector<int64_t> tgt{Vocab::bos_id};
            const auto dec = ints(e["decoder_input_ids"]);
            for (size_t i = 1; i < dec.size(); ++i) tgt.push_back(tgt_map.to_attnviz.at(dec[i]));
            const auto S = static_cast<int64_t>(src.size()), T = static_cast<int64_t>(tgt.size());
            auto logits = model->network()->forward(torch::tensor(src).view({1, S}), torch::tensor({S}),
                                                    torch::tensor(tgt).view({1, T}));
            const auto ref = e["logits"];
            float worst = 0;
            for (int64_t t = 0; t < T; ++t)
                for (size_t id = 0; id < tgt_map.to_model.size(); ++id) {
                    if (tgt_map.to_model[id] < 0) continue;
                    const float want = ref[static_cast<size_t>(t)][static_cast<size_t>(tgt_map.to_model[id])];
                    worst = std::max(worst, std::abs(logits[0][t][static_cast<int64_t>(id)].item<float>() - want));
                }
            CHECK(worst < 2e-4f);
            // Every map of greedy decoding (the same tokens as the pass above) against output_attentions.
            // (An empty sentence is nothing to translate for attnviz, whatever the model; transformers
            // still generates from its lone </s>.)
            if (text.empty()) continue;
            DecodeOptions d = model->decode_defaults();
            d.beam_size = d.num_hypotheses = 1;
            d.target_lang = c.tgt_lang;
            const auto t = model->translate({text}, d).at(0);
            REQUIRE_FALSE(t.empty());
            const auto& h = t.best();
            REQUIRE(tgt_map.model_ids(h.ids) == ints(e["greedy"]));
            float worst_map = 0;
            size_t maps = 0;
            for (const auto& [kind, key] : {std::pair{AttentionKind::encoder_self, "encoder_attentions"},
                                            std::pair{AttentionKind::decoder_self, "decoder_attentions"},
                                            std::pair{AttentionKind::cross, "cross_attentions"}}) {
                const auto& layers = e[key];
                for (size_t l = 0; l < layers.size(); ++l)
                    for (size_t hd = 0; hd < layers[l].size(); ++hd) {
                        const auto* m = h.attention.find({kind, static_cast<int>(l), static_cast<int>(hd)});
                        REQUIRE(m != nullptr);
                        ++maps;
                        const auto& want = layers[l][hd];
                        REQUIRE(m->weights.size() == std::min(want.size(), m->weights.size()));
                        for (size_t q = 0; q < m->weights.size(); ++q)
                            for (size_t k = 0; k < m->weights[q].size(); ++k)
                                worst_map = std::max(worst_map, std::abs(m->weights[q][k] - want[q][k].get<float>()));
                    }
            }
            CHECK(maps > 0);
            CHECK(worst_map < 1e-5f);
        }
    }
}

TEST_CASE("pretrained greedy and beam search are token-identical to generate()", "[pretrained][generate]") {
    if (!have_fixtures()) return;
    const json variants = {
        {"marian", {{"beam", json::object()},
                    {"beam_lp", {{"num_beams", 3}, {"length_penalty", 0.6}, {"num_return_sequences", 2}}},
                    {"beam_early", {{"num_beams", 5}, {"early_stopping", true}}},
                    {"beam_never", {{"num_beams", 2}, {"early_stopping", "never"}, {"no_repeat_ngram_size", 2}}}}},
        {"m2m100", {{"beam", json::object()},
                    {"beam_lp", {{"num_beams", 4}, {"length_penalty", 2.0}, {"num_return_sequences", 2}}}}},
        {"m2m100_json", {{"beam", json::object()},
                         {"beam_lp", {{"num_beams", 4}, {"length_penalty", 2.0}, {"num_return_sequences", 2}}}}},
        {"nllb", {{"beam", json::object()},
                  {"beam_lp", {{"num_beams", 3}, {"length_penalty", 1.5}, {"num_return_sequences", 2}}}}},
        {"t5", {{"beam", json::object()},
                {"beam_lp", {{"num_beams", 4}, {"length_penalty", 0.6}, {"num_return_sequences", 2}}},
                {"beam_never", {{"num_beams", 2}, {"early_stopping", "never"}, {"no_repeat_ngram_size", 2}}}}},
        {"flan_t5", {{"beam", json::object()},
                     {"beam_lp", {{"num_beams", 4}, {"length_penalty", 0.6}, {"num_return_sequences", 2}}},
                     {"beam_never", {{"num_beams", 2}, {"early_stopping", "never"}, {"no_repeat_ngram_size", 2}}}}},
        {"bart", {{"beam", json::object()},
                  {"beam_lp", {{"num_beams", 3}, {"length_penalty", 0.6}, {"num_return_sequences", 2}}},
                  {"beam_never", {{"num_beams", 2}, {"early_stopping", "never"}, {"no_repeat_ngram_size", 2}}}}},
        {"mbart50", {{"beam", json::object()},
                     {"beam_lp", {{"num_beams", 4}, {"length_penalty", 1.5}, {"num_return_sequences", 2}}}}}};
    for (const auto& c : k_cases) {
        INFO(c.name);
        const auto model = load_model(k_fixtures + "/" + c.folder);
        const IdMap tgt_map(*model, true);
        for (const auto& e : reference()[c.name]) {
            const std::string text = e["text"];
            INFO("sentence " << json(text).dump());
            if (text.empty()) continue;  // nothing to translate (see above)
            DecodeOptions greedy = model->decode_defaults();
            greedy.beam_size = greedy.num_hypotheses = 1;
            greedy.target_lang = c.tgt_lang;
            const auto g = model->translate({text}, greedy).at(0);
            REQUIRE_FALSE(g.empty());
            CHECK(tgt_map.model_ids(g.best().ids) == ints(e["greedy"]));
            CHECK(g.best().text == e["greedy_text"].get<std::string>());
            for (const auto& [name, variant] : variants[c.name].items()) {
                INFO("variant " << name);
                const auto t = model->translate({text}, options_for(*model, variant, c.tgt_lang)).at(0);
                const auto& want = e[name];
                REQUIRE(t.hypotheses.size() == want.size());
                const int64_t pad = model->config().pretrained->model.pad_token_id;
                for (size_t i = 0; i < want.size(); ++i)
                    CHECK(tgt_map.model_ids(t.hypotheses[i].ids) ==
                          without_padding(ints(want[i]), pad, model->config().pretrained->model.eos_token_id));
            }
        }
    }
}

TEST_CASE("an NLLB folder saved by transformers 5 (tokenizer.json only) lists its languages and is written back with it",
          "[pretrained][tokenizer_json]") {
    if (!have_fixtures()) return;
    const std::string dir = k_fixtures + "/nllb";
    REQUIRE_FALSE(std::filesystem::exists(dir + "/sentencepiece.bpe.model"));
    const auto model = load_model(dir);
    const auto* pt = model->tokenizer().pretrained().get();
    REQUIRE(pt != nullptr);
    REQUIRE(pt->tokenizer_json() != nullptr);
    CHECK(pt->kind() == PretrainedTokenizerKind::nllb);
    // The languages are tokenizer.json's added tokens (FAIRSEQ_LANGUAGE_CODES: 202).
    const auto langs = model->source_languages();
    CHECK(langs.size() == 202);
    CHECK(std::find(langs.begin(), langs.end(), "fra_Latn") != langs.end());
    CHECK(model->target_languages() == langs);
    CHECK(pt->language_token("fra_Latn", true) == "fra_Latn");
    CHECK(pt->default_source_language() == "eng_Latn");
    CHECK(pt->is_special("fra_Latn"));
    CHECK_THROWS_WITH(pt->language_token("xx_Yyyy", true), Catch::Contains("no target language 'xx_Yyyy'"));

    // Exported: tokenizer.json goes back as it came (and no SentencePiece file appears); the copy
    // translates as the original.
    attnviz::testing::ScratchDir scratch("nllb-export");
    const std::string out = scratch / "exported";
    save_model_folder(*model, out);
    std::ifstream a(dir + "/tokenizer.json", std::ios::binary), b(out + "/tokenizer.json", std::ios::binary);
    const std::string original((std::istreambuf_iterator<char>(a)), {}), written((std::istreambuf_iterator<char>(b)), {});
    CHECK(!original.empty());
    CHECK(written == original);
    CHECK_FALSE(std::filesystem::exists(out + "/sentencepiece.bpe.model"));
    const auto again = load_model(out);
    DecodeOptions d = model->decode_defaults();
    d.target_lang = "fra_Latn";
    d.beam_size = d.num_hypotheses = 1;
    const auto first = model->translate({"Hello, Tom."}, d).at(0), second = again->translate({"Hello, Tom."}, d).at(0);
    REQUIRE_FALSE(first.empty());
    CHECK(first.best().ids == second.best().ids);
    CHECK(first.best().text == second.best().text);

    // A checkpoint embeds tokenizer.json: the model saved as attnviz's file opens with the same languages and ids.
    const std::string ckpt = scratch / "nllb.attnviz";
    save_model(*model, ckpt);
    const auto reopened = load_model(ckpt);
    CHECK(reopened->source_languages() == langs);
    CHECK(reopened->translate({"Hello, Tom."}, d).at(0).best().ids == first.best().ids);
}

TEST_CASE("an M2M100 folder with tokenizer.json alone lists its 100 languages from its added tokens",
          "[pretrained][tokenizer_json]") {
    if (!have_fixtures()) return;
    const auto model = load_model(k_fixtures + "/m2m100_json");
    const auto* pt = model->tokenizer().pretrained().get();
    REQUIRE(pt->tokenizer_json() != nullptr);
    CHECK(pt->kind() == PretrainedTokenizerKind::m2m100);
    CHECK(model->source_languages() == load_model(k_fixtures + "/m2m100")->source_languages());
    CHECK(pt->language_token("fr", true) == "__fr__");
    CHECK(pt->default_source_language() == "en");
}

TEST_CASE("pytorch_model.bin opens through the restricted reader with the same weights as model.safetensors",
          "[pretrained][bin]") {
    if (!have_fixtures()) return;
    // marian_bin holds the marian fixture's weights as torch.save wrote them (tools/make_hf_fixtures.py).
    const auto safe = load_model(k_fixtures + "/marian");
    const auto bin = load_model(k_fixtures + "/marian_bin");
    auto a = safe->network()->named_parameters(), b = bin->network()->named_parameters();
    REQUIRE(a.size() == b.size());
    size_t compared = 0;
    for (const auto& item : a) {
        INFO(item.key());
        REQUIRE(b.contains(item.key()));
        CHECK(torch::equal(item.value(), b[item.key()]));
        ++compared;
    }
    CHECK(compared > 10);
    DecodeOptions d = safe->decode_defaults();
    d.target_lang = "fra";
    CHECK(safe->translate({"the cat sees the dog"}, d).at(0).best().ids == bin->translate({"the cat sees the dog"}, d).at(0).best().ids);
}

TEST_CASE("the generation config becomes attnviz's decoding defaults", "[pretrained][generate]") {
    if (!have_fixtures()) return;
    const auto marian = load_model(k_fixtures + "/marian");
    const DecodeOptions d = marian->decode_defaults();
    CHECK(d.beam_size == 4);
    CHECK(d.max_length == 15);  // max_length 16 counts the decoder's start token
    CHECK(d.generation.transformers_search);
    CHECK(d.generation.forced_last == Vocab::eos_id);
    REQUIRE(d.generation.bad_words.size() == 1);
    CHECK(d.generation.bad_words[0] == std::vector<int64_t>{Vocab::pad_id});
    CHECK(marian->target_languages() == std::vector<std::string>({"fra", "deu"}));
    const auto m2m = load_model(k_fixtures + "/m2m100");
    CHECK(m2m->decode_defaults().beam_size == 3);
    CHECK(m2m->source_languages().size() == 100);
    DecodeOptions bad = m2m->decode_defaults();
    bad.target_lang = "xx";
    CHECK_THROWS_WITH(m2m->translate({"Hello"}, bad), Catch::Contains("no target language 'xx'"));
}

namespace {

/// A copy of a fixture folder to break, in this run's scratch directory.
std::string copy_fixture(const std::string& name, const std::string& as) {
    static const attnviz::testing::ScratchDir scratch("pretrained");
    const std::string dir = scratch / as;
    std::filesystem::copy(k_fixtures + "/" + name, dir, std::filesystem::copy_options::recursive);
    return dir;
}

json read_json_file(const std::string& path) {
    std::ifstream in(path);
    return json::parse(in);
}

void write_text(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
}

}  // namespace

TEST_CASE("a folder stored in float16 or bfloat16 opens in float32 with the stored values, its vocabulary "
          "matrices included",
          "[pretrained]") {
    if (!have_fixtures()) return;
    // The vocabulary matrices are copied block by block in the file's own type (hf_folder.cpp),
    // the other weights converted as they are read.
    const auto original = load_model(k_fixtures + "/marian");
    for (const auto& [dtype, name] : {std::pair{torch::kHalf, "f16"}, std::pair{torch::kBFloat16, "bf16"}}) {
        const auto dir = copy_fixture("marian", std::string("stored-") + name);
        std::string bytes;
        {
            const auto src = safetensors::read_file(dir + "/model.safetensors");
            safetensors::TensorWriter writer;
            for (const auto& t : src.tensors) writer.add(t.name, safetensors::to_float_tensor(src, t).to(dtype));
            bytes = writer.serialize(src.metadata);
        }
        write_text(dir + "/model.safetensors", bytes);
        const auto read = load_model(dir);
        torch::NoGradGuard no_grad;
        const auto want = original->network()->named_parameters();
        int64_t compared = 0;
        for (const auto& item : read->network()->named_parameters()) {
            INFO(name << ": " << item.key());
            const torch::Tensor* w = want.find(item.key());
            REQUIRE(w);
            CHECK(item.value().scalar_type() == torch::kFloat);
            CHECK(torch::equal(item.value(), w->to(dtype).to(torch::kFloat)));
            ++compared;
        }
        CHECK(compared == static_cast<int64_t>(want.size()));
    }
}

TEST_CASE("a broken model folder is refused in one line naming the file and the problem", "[pretrained][hostile]") {
    if (!have_fixtures()) return;
    auto edit_config = [](const std::string& as, const std::function<void(json&)>& edit) {
        const auto dir = copy_fixture("marian", as);
        json c = read_json_file(dir + "/config.json");
        edit(c);
        write_text(dir + "/config.json", c.dump());
        return dir;
    };
    SECTION("a missing field") {
        const auto dir = edit_config("no-d-model", [](json& c) { c.erase("d_model"); });
        CHECK_THROWS_WITH(load_model(dir), Catch::Contains("config.json") && Catch::Contains("\"d_model\" is missing"));
    }
    SECTION("an unknown model_type names the supported ones") {
        const auto dir = edit_config("gpt2", [](json& c) { c["model_type"] = "gpt2"; });
        CHECK_THROWS_WITH(load_model(dir), Catch::Contains("'gpt2'") && Catch::Contains("marian, m2m_100") &&
                                               Catch::Contains("bart, mbart"));
    }
    SECTION("a field of the wrong type") {
        const auto dir = edit_config("heads-text", [](json& c) { c["encoder_attention_heads"] = "four"; });
        CHECK_THROWS_WITH(load_model(dir), Catch::Contains("\"encoder_attention_heads\"") && Catch::Contains("whole number"));
    }
    SECTION("shapes that disagree with config.json") {
        const auto dir = edit_config("wider", [](json& c) { c["d_model"] = 64; });
        CHECK_THROWS_WITH(load_model(dir), Catch::Contains("model.safetensors") || Catch::Contains("has shape"));
    }
    SECTION("a vocabulary size that disagrees") {
        const auto smaller = edit_config("smaller-vocab", [](json& c) { c["vocab_size"] = 100; });
        CHECK_THROWS_WITH(load_model(smaller), Catch::Contains("config.json") && Catch::Contains("\"pad_token_id\" is"));
        const auto larger = edit_config("larger-vocab", [](json& c) { c["vocab_size"] = 300; });
        CHECK_THROWS_WITH(load_model(larger), Catch::Contains("model.shared.weight") && Catch::Contains("300 rows"));
    }
    SECTION("a vocab.json without the model's special token") {
        const auto dir = copy_fixture("marian", "no-eos");
        json v = read_json_file(dir + "/vocab.json");
        const auto id = v["</s>"];
        v.erase("</s>");
        v["<eos-renamed>"] = id;
        write_text(dir + "/vocab.json", v.dump());
        CHECK_THROWS_WITH(load_model(dir), Catch::Contains("vocab.json has no '</s>'"));
    }
    SECTION("a truncated weights file") {
        const auto dir = copy_fixture("marian", "truncated");
        const auto path = dir + "/model.safetensors";
        std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
        CHECK_THROWS_AS(load_model(dir), FileError);
    }
    SECTION("a tensor of another architecture") {
        const auto dir = copy_fixture("marian", "extra");
        // A model folder of another kind shows itself by a tensor this family does not have.
        const auto src = safetensors::read_file(dir + "/model.safetensors");
        std::vector<safetensors::TensorToWrite> out;
        for (const auto& t : src.tensors)
            out.push_back({t.name, t.dtype, t.shape, src.data(t), t.end - t.begin});
        const float one = 1;
        out.push_back({"model.encoder.layernorm_embedding.weight", safetensors::DType::F32, {1}, &one, sizeof one});
        write_text(dir + "/model.safetensors", safetensors::serialize(out, src.metadata));
        CHECK_THROWS_WITH(load_model(dir), Catch::Contains("unexpected tensor 'model.encoder.layernorm_embedding.weight'"));
    }
    SECTION("a folder without config.json, and a hub id that is not in the cache") {
        const auto dir = copy_fixture("marian", "no-config");
        std::filesystem::remove(dir + "/config.json");
        CHECK_THROWS_WITH(load_model(dir), Catch::Contains("without config.json"));
        CHECK_THROWS_WITH(load_model("nobody-here/opus-mt-xx-yy"),
                          Catch::Contains("local Hugging Face cache") && Catch::Contains("download nobody-here/opus-mt-xx-yy"));
    }
}

TEST_CASE("a model folder whose two sides read one vocabulary holds it once, and Marian's target_vocab.json gets its own",
          "[pretrained][tokenizer]") {
    if (!have_fixtures()) return;
    for (const std::string folder : {"marian", "nllb", "m2m100", "bart", "t5"}) {
        INFO(folder);
        const auto model = load_model(k_fixtures + "/" + folder);
        CHECK(model->src_vocab_ptr() == model->tgt_vocab_ptr());
        CHECK(model->tokenizer().pretrained_sides_equal());
    }
    // A target vocabulary of its own (MarianTokenizer's separate_vocabs): the same tokens, two ids swapped.
    const auto dir = copy_fixture("marian", "separate-vocabs");
    json vocab = read_json_file(dir + "/vocab.json");
    REQUIRE((vocab.at("e") == 4 && vocab.at("s") == 6));
    vocab["e"] = 6;
    vocab["s"] = 4;
    write_text(dir + "/target_vocab.json", vocab.dump());
    const auto model = load_model(dir);
    CHECK_FALSE(model->tokenizer().pretrained_sides_equal());
    REQUIRE(model->src_vocab_ptr() != model->tgt_vocab_ptr());
    CHECK(model->src_vocab().tokens() != model->tgt_vocab().tokens());
    CHECK(model->src_vocab().size() == model->tgt_vocab().size());
}

TEST_CASE("a model folder's tokenizer.json attnviz cannot read is refused in one line naming it", "[pretrained][hostile][tokenizer_json]") {
    if (!have_fixtures()) return;
    auto edit_tokenizer = [](const std::string& as, const std::function<void(json&)>& edit) {
        const auto dir = copy_fixture("nllb", as);
        json t = read_json_file(dir + "/tokenizer.json");
        edit(t);
        write_text(dir + "/tokenizer.json", t.dump());
        return dir;
    };
    SECTION("an unknown component names the supported ones") {
        const auto dir = edit_tokenizer("tj-unknown", [](json& t) { t["pre_tokenizer"] = {{"type", "UnicodeScripts"}}; });
        CHECK_THROWS_WITH(load_model(dir), Catch::Contains("tokenizer.json: pre_tokenizer: unknown pre_tokenizer type 'UnicodeScripts'; "
                                                           "attnviz reads") &&
                                               Catch::Contains("Metaspace"));
    }
    SECTION("a value of the wrong type names the key") {
        const auto dir = edit_tokenizer("tj-type", [](json& t) { t["added_tokens"][0]["special"] = "yes"; });
        CHECK_THROWS_WITH(load_model(dir), Catch::Contains("tokenizer.json: added_tokens[0].special: expected true or false"));
    }
    SECTION("a token past the model's rows") {
        // The library gives a new added token the next id after the tokenizer's (the file's 100000 is
        // not read back): one past the model's rows here.
        const auto dir = edit_tokenizer("tj-rows", [](json& t) {
            t["added_tokens"].push_back({{"id", 100000}, {"content", "<far>"}, {"special", true}, {"normalized", false}});
        });
        CHECK_THROWS_WITH(load_model(dir), Catch::Contains("tokenizer.json: token '<far>' has id") &&
                                               Catch::Contains("past the model's") && Catch::Contains("config.json's vocab_size"));
    }
}

TEST_CASE("a hub id is found in the local Hugging Face cache", "[pretrained][hub]") {
    if (!have_fixtures()) return;
    const attnviz::testing::ScratchDir scratch("hub-cache");
    const std::filesystem::path cache = scratch.path;
    const auto snap = cache / "models--Tiny-NLP--opus-mt-tiny" / "snapshots" / "0123abcd";
    std::filesystem::create_directories(snap.parent_path());
    std::filesystem::copy(k_fixtures + "/marian", snap, std::filesystem::copy_options::recursive);
    std::filesystem::create_directories(cache / "models--Tiny-NLP--opus-mt-tiny" / "refs");
    write_text((cache / "models--Tiny-NLP--opus-mt-tiny" / "refs" / "main").string(), "0123abcd");
    setenv("HF_HUB_CACHE", cache.c_str(), 1);
    const auto model = load_model("Tiny-NLP/opus-mt-tiny");
    unsetenv("HF_HUB_CACHE");
    CHECK(model->config().is_pretrained());
    CHECK(model->corpus_name() == "Tiny-NLP/opus-mt-tiny");
}

TEST_CASE("the vocabulary matrices are row-major: the output projection by few_rows_linear, embeddings as "
          "torch::embedding, no gradient for the pad row",
          "[pretrained][layout]") {
    if (!have_fixtures()) return;
    const auto model = load_model(k_fixtures + "/marian");
    Network net = model->clone_network(torch::kCPU);  // a copy to train: the model stays as it was
    net->train();
    torch::Tensor weight;
    for (const auto& p : net->named_parameters())
        if (p.key().find("embed") != std::string::npos || p.key().find("shared") != std::string::npos) weight = p.value();
    REQUIRE(weight.defined());
    CHECK(weight.is_contiguous());  // [V, d] row-major: each output a contiguous row (small_linear.hpp)
    {
        torch::NoGradGuard no_grad;  // a decoder step's few rows go to few_rows_linear
        CHECK(few_rows_linear_applies(torch::randn({4, weight.size(1)}), weight) ==
              few_rows_linear_applies(torch::randn({4, 8}), torch::randn({16, 8})));
    }
    // A batch with padding and the decoder's start token (Marian's start row is its pad row).
    const std::vector<int64_t> values = {4, 5, Vocab::eos_id, Vocab::pad_id, Vocab::bos_id, 6, 7, 8};
    const auto ids = torch::tensor(values, torch::kLong).view({2, 4});
    const auto got = net->embed_target(ids);
    const auto rows = ids.masked_fill(ids.eq(Vocab::bos_id), model->config().pretrained->decoder_start_row);
    CHECK(got.allclose(torch::embedding(weight.detach(), rows, Vocab::pad_id)));
    got.pow(2).sum().backward();
    REQUIRE(weight.grad().defined());
    CHECK(weight.grad()[Vocab::pad_id].abs().sum().item<double>() == 0.0);  // as padding_idx: the pad row stays
    CHECK(weight.grad()[5].abs().sum().item<double>() > 0.0);
    CHECK(weight.grad().strides() == weight.strides());  // the gradient in the parameter's own layout: no copy across
}

TEST_CASE("BART's byte-level pieces show as text, its source starts with <s>, and its words merge", "[pretrained][bart]") {
    if (!have_fixtures()) return;
    const auto model = load_model(k_fixtures + "/bart");
    const auto* pt = model->tokenizer().pretrained().get();
    REQUIRE(pt != nullptr);
    CHECK(pt->kind() == PretrainedTokenizerKind::bart);
    CHECK(model->config().pretrained->model.family == PretrainedFamily::bart);
    CHECK(model->source_languages().empty());
    CHECK(model->target_languages().empty());
    // The model's pieces are GPT-2's byte symbols ("Ġca", "fÃ©"); attnviz's names are their text.
    const auto tokens = model->tokenizer().encode("naïve café ☃ Привет", false);
    REQUIRE(tokens.size() > 3);
    CHECK(tokens.front() == "<s>");
    std::string joined;
    for (const auto& t : tokens) {
        INFO(t);
        CHECK(t.find("\xC4\xA0") == std::string::npos);  // "Ġ"
        CHECK(t.find("\xC3\x83") == std::string::npos);  // "Ã"
        CHECK(model->src_vocab().contains(t));
        joined += t;
    }
    CHECK(joined.find("caf") != std::string::npos);
    CHECK(joined.find("\xE2\x96\x81") != std::string::npos);  // a space shows as "▁"
    // The names decode to the text, as the model's own tokens do.
    CHECK(model->tokenizer().decode(tokens) == "naïve café ☃ Привет");
    // Merged into words: <s> on its own, then the words as typed.
    const WordGroups words = group_subwords(tokens);
    INFO(json(tokens).dump() << " -> " << json(words.words).dump());
    REQUIRE(words.words.size() == 5);
    CHECK(words.words[0] == "<s>");
    CHECK(words.words[1] == "naïve");
    CHECK(words.words[2] == "café");
    CHECK(words.words[3] == "☃");  // three pieces of one byte each, named \xE2 \x98 \x83
    CHECK(words.words[4] == "Привет");
    // A language is no choice for BART: one line saying so.
    DecodeOptions d = model->decode_defaults();
    d.target_lang = "fr";
    CHECK_THROWS_WITH(model->translate({"Hello"}, d), Catch::Contains("no target languages"));
    // <s> is forced first (generation_config.json's forced_bos_token_id) and dropped from the text.
    const auto t = model->translate({"Hello, Tom."}, model->decode_defaults()).at(0);
    REQUIRE_FALSE(t.empty());
    CHECK(t.best().tokens.front() == "<s>");
    CHECK(t.best().text == "Hello, Tom.");
    // Scoring a reference: its <s> is the forced first token, not added twice.
    const auto scored = model->force({{"Hello, Tom.", "Hello, Tom."}}, ForceMode::reference, model->decode_defaults()).at(0);
    REQUIRE_FALSE(scored.empty());
    CHECK(scored.best().tokens.front() == "<s>");
    CHECK(std::count(scored.best().tokens.begin(), scored.best().tokens.end(), "<s>") == 1);
}

TEST_CASE("BART and mBART-50 folders are written back and saved as checkpoints with their tokenizers",
          "[pretrained][bart][export]") {
    if (!have_fixtures()) return;
    attnviz::testing::ScratchDir scratch("bart-export");
    for (const auto& [name, lang] : {std::pair<std::string, std::string>{"bart", ""}, {"bart_files", ""}, {"mbart50", "fr_XX"},
                                   {"mbart50_spm", "fr_XX"}}) {
        INFO(name);
        const auto model = load_model(k_fixtures + "/" + name);
        DecodeOptions d = model->decode_defaults();
        d.target_lang = lang;
        const auto first = model->translate({"I am a small frog."}, d).at(0);
        REQUIRE_FALSE(first.empty());
        const std::string out = scratch / (name + "-exported");
        save_model_folder(*model, out);
        // The tokenizer's files as they came: tokenizer.json, or vocab.json and merges.txt.
        CHECK(std::filesystem::exists(out + "/tokenizer.json") == std::filesystem::exists(k_fixtures + "/" + name + "/tokenizer.json"));
        CHECK(std::filesystem::exists(out + "/merges.txt") == std::filesystem::exists(k_fixtures + "/" + name + "/merges.txt"));
        // Every tensor of the original, under its name, bit for bit (learned positions and layernorm_embedding too).
        const auto a = safetensors::read_file(k_fixtures + "/" + name + "/model.safetensors");
        const auto b = safetensors::read_file(out + "/model.safetensors");
        CHECK(b.find("model.encoder.embed_positions.weight") != nullptr);
        CHECK(b.find("model.decoder.layernorm_embedding.bias") != nullptr);
        size_t equal = 0;
        for (const auto& t : a.tensors) {
            const auto* u = b.find(t.name);
            if (!u) continue;
            if (std::string_view(a.data(t), t.end - t.begin) == std::string_view(b.data(*u), u->end - u->begin)) ++equal;
        }
        CHECK(equal == a.tensors.size());
        const auto again = load_model(out);
        const auto second = again->translate({"I am a small frog."}, d).at(0);
        CHECK(second.best().ids == first.best().ids);
        CHECK(second.best().text == first.best().text);
        const std::string ckpt = scratch / (name + ".attnviz");
        save_model(*model, ckpt);
        const auto reopened = load_model(ckpt);
        CHECK(reopened->source_languages() == model->source_languages());
        CHECK(reopened->translate({"I am a small frog."}, d).at(0).best().ids == first.best().ids);
    }
}

TEST_CASE("an mBART-50 folder saved by transformers 5 lists its 52 languages from tokenizer.json", "[pretrained][mbart]") {
    if (!have_fixtures()) return;
    const auto model = load_model(k_fixtures + "/mbart50");
    const auto* pt = model->tokenizer().pretrained().get();
    REQUIRE(pt->tokenizer_json() != nullptr);
    // The same languages, ids and tokens from sentencepiece.bpe.model alone.
    const auto spm = load_model(k_fixtures + "/mbart50_spm");
    REQUIRE(spm->tokenizer().pretrained()->tokenizer_json() == nullptr);
    CHECK(spm->source_languages() == model->source_languages());
    CHECK(spm->tokenizer().pretrained()->id_tokens() == pt->id_tokens());
    // SentencePiece's own pieces equal transformers 5's on ordinary text (not on a "</s>" typed in the
    // text, which SentencePiece cuts without the space before it: docs/pretrained.md).
    for (const auto& e : reference()["mbart50"]) {
        const std::string text = e["text"];
        if (text.find("</s>") != std::string::npos) continue;
        INFO("sentence " << json(text).dump());
        CHECK(source_ids(*spm, text, "en_XX") == ints(e["input_ids"]));
    }
    CHECK(pt->kind() == PretrainedTokenizerKind::mbart50);
    CHECK(model->config().pretrained->model.family == PretrainedFamily::mbart);
    const auto langs = model->source_languages();
    CHECK(langs.size() == 52);
    CHECK(std::find(langs.begin(), langs.end(), "fr_XX") != langs.end());
    CHECK(model->target_languages() == langs);
    CHECK(pt->language_token("fr_XX", true) == "fr_XX");
    CHECK(pt->default_source_language() == "en_XX");
    CHECK(pt->is_special("de_DE"));
    DecodeOptions d = model->decode_defaults();
    d.target_lang = "fr";
    CHECK_THROWS_WITH(model->translate({"Hello"}, d), Catch::Contains("no target language 'fr'"));
}

TEST_CASE("a broken BART or mBART folder is refused in one line naming the file", "[pretrained][hostile][bart]") {
    if (!have_fixtures()) return;
    SECTION("a merges.txt line that is not two symbols") {
        const auto dir = copy_fixture("bart_files", "bad-merges");
        write_text(dir + "/merges.txt", "#version: 0.2\nĠ t\nabc\n");
        CHECK_THROWS_WITH(load_model(dir), Catch::Contains("merges.txt: line 3 is 'abc', expected two symbols"));
    }
    SECTION("no tokenizer files at all") {
        const auto dir = copy_fixture("bart_files", "no-merges");
        std::filesystem::remove(dir + "/merges.txt");
        CHECK_THROWS_WITH(load_model(dir), Catch::Contains("has no merges.txt"));
    }
    SECTION("mBART-cc25's tokenizer") {
        const auto dir = copy_fixture("mbart50", "cc25");
        json t = read_json_file(dir + "/tokenizer_config.json");
        t["tokenizer_class"] = "MBartTokenizer";
        write_text(dir + "/tokenizer_config.json", t.dump());
        CHECK_THROWS_WITH(load_model(dir), Catch::Contains("tokenizer_class 'MBartTokenizer'") &&
                                               Catch::Contains("MBart50Tokenizer"));
    }
    SECTION("an mBART-50 folder without tokenizer.json or sentencepiece.bpe.model") {
        const auto dir = copy_fixture("mbart50", "no-json");
        std::filesystem::remove(dir + "/tokenizer.json");
        CHECK_THROWS_WITH(load_model(dir), Catch::Contains("has no sentencepiece.bpe.model"));
    }
    SECTION("learned positions of the wrong shape") {
        const auto dir = copy_fixture("bart", "short-positions");
        json c = read_json_file(dir + "/config.json");
        c["max_position_embeddings"] = 32;
        write_text(dir + "/config.json", c.dump());
        CHECK_THROWS_WITH(load_model(dir), Catch::Contains("'model.encoder.embed_positions.weight' has shape [66, 32]") &&
                                               Catch::Contains("[34, 32]"));
    }
    SECTION("a source past the learned positions") {
        const auto model = load_model(k_fixtures + "/bart");
        std::string text;
        for (int i = 0; i < 80; ++i) text += " cat";
        CHECK_THROWS_WITH(model->translate({text}, model->decode_defaults()), Catch::Contains("max_position_embeddings"));
    }
}

TEST_CASE("an M2M100 or NLLB folder with tokenizer.json alone: the language codes' layout comes from tokenizer.json",
          "[pretrained][tokenizer_json][languages]") {
    if (!have_fixtures()) return;
    // No tokenizer_config.json (no tokenizer_class, no src_lang): M2M100's "__en__" or NLLB's "eng_Latn"
    // from tokenizer.json's added tokens, the default source language from its template's first token.
    const struct {
        const char* fixture;
        PretrainedTokenizerKind kind;
        const char* src_lang;
        const char* target;
    } cases[] = {{"nllb", PretrainedTokenizerKind::nllb, "eng_Latn", "fra_Latn"},
                 {"m2m100_json", PretrainedTokenizerKind::m2m100, "en", "__fr__"}};
    for (const auto& c : cases) {
        INFO(c.fixture);
        const auto dir = copy_fixture(c.fixture, std::string(c.fixture) + "-no-config");
        std::filesystem::remove(dir + "/tokenizer_config.json");
        const auto model = load_model(dir);
        const auto* pt = model->tokenizer().pretrained().get();
        REQUIRE(pt->tokenizer_json() != nullptr);
        CHECK(pt->kind() == c.kind);
        CHECK(pt->default_source_language() == c.src_lang);
        CHECK(model->source_languages() == load_model(k_fixtures + "/" + c.fixture)->source_languages());
        CHECK(pt->language_token(c.kind == PretrainedTokenizerKind::m2m100 ? "fr" : "fra_Latn", true) == c.target);
        // The source reads as transformers' input_ids: [source code] tokens </s>.
        for (const auto& e : reference()[c.fixture]) {
            INFO("sentence " << e["text"].dump());
            CHECK(source_ids(*model, e["text"], pt->default_source_language()) == ints(e["input_ids"]));
        }
    }
    SECTION("a template with the code after the text (NLLB's legacy_behaviour) is refused in one line") {
        const auto dir = copy_fixture("nllb", "nllb-legacy");
        json t = read_json_file(dir + "/tokenizer.json");
        json& single = t["post_processor"]["single"];
        std::rotate(single.begin(), single.begin() + 1, single.end());  // A </s> eng_Latn
        write_text(dir + "/tokenizer.json", t.dump());
        CHECK_THROWS_WITH(load_model(dir), Catch::Contains("tokenizer.json: post_processor: the template puts the language code "
                                                           "'eng_Latn' after the text") &&
                                               Catch::Contains("legacy_behaviour=False"));
        const auto flagged = copy_fixture("nllb", "nllb-legacy-config");
        json c = read_json_file(flagged + "/tokenizer_config.json");
        c["legacy_behaviour"] = true;
        write_text(flagged + "/tokenizer_config.json", c.dump());
        CHECK_THROWS_WITH(load_model(flagged), Catch::Contains("tokenizer_config.json: legacy_behaviour is true"));
    }
}

TEST_CASE("fine-tuning M2M100, NLLB and mBART-50 teacher-forces transformers' labels: the language codes first",
          "[pretrained][train][languages]") {
    if (!have_fixtures()) return;
    if (!reference().contains("training")) {
        WARN("the fixtures predate reference.json's training entries (tools/make_hf_fixtures.py); skipping");
        return;
    }
    for (const auto& [name, entries] : reference()["training"].items()) {
        INFO(name);
        const auto model = load_model(k_fixtures + "/" + name);
        const Tokenizer& tok = model->tokenizer();
        const std::string src_lang = entries.at(0)["src_lang"], tgt_lang = entries.at(0)["tgt_lang"];
        std::vector<SentencePair> pairs;
        for (const auto& e : entries) pairs.push_back({tok.encode(e["source"], false), tok.encode_target(e["target"], false)});
        // The languages named, and the tokenizer's own (tokenizer_config.json's src_lang and tgt_lang): the same.
        std::vector<SentencePair> named = pairs, defaults = pairs;
        add_language_codes(named, tok, src_lang, tgt_lang);
        add_language_codes(defaults, tok);
        std::vector<size_t> rows(pairs.size());
        std::iota(rows.begin(), rows.end(), size_t{0});
        const Batch b = make_batch(named, rows, model->src_vocab(), model->tgt_vocab());
        const Batch d = make_batch(defaults, rows, model->src_vocab(), model->tgt_vocab());
        CHECK(torch::equal(b.src, d.src));
        CHECK(torch::equal(b.tgt_in, d.tgt_in));
        CHECK(torch::equal(b.tgt_out, d.tgt_out));
        const IdMap src_map(*model, false), tgt_map(*model, true);
        auto row = [](const torch::Tensor& t, int64_t r, int64_t from, int64_t n) {
            std::vector<int64_t> ids;
            for (int64_t k = from; k < n; ++k) ids.push_back(t[r][k].item<int64_t>());
            return ids;
        };
        for (size_t r = 0; r < entries.size(); ++r) {
            const auto& e = entries[r];
            INFO("pair " << e["source"].dump());
            const auto i = static_cast<int64_t>(r);
            const int64_t S = b.src_len[i].item<int64_t>(), T = b.tgt_len[i].item<int64_t>();
            CHECK(src_map.model_ids(row(b.src, i, 0, S)) == ints(e["input_ids"]));
            CHECK(tgt_map.model_ids(row(b.tgt_out, i, 0, T)) == ints(e["labels"]));
            // The decoder's input: the start token (attnviz's <bos>, read as decoder_start_token_id's row),
            // then the labels shifted: </s> [tgt] target for transformers.
            const auto dec_in = ints(e["decoder_input_ids"]);
            CHECK(b.tgt_in[i][0].item<int64_t>() == Vocab::bos_id);
            CHECK(model->config().pretrained->model.decoder_start_token_id == dec_in.front());
            CHECK(tgt_map.model_ids(row(b.tgt_in, i, 1, T)) == std::vector<int64_t>(dec_in.begin() + 1, dec_in.end()));
            // The loss fine-tuning minimises: transformers' model(input_ids, labels=labels).loss.
            torch::NoGradGuard no_grad;
            model->network()->eval();
            const Batch one = make_batch(named, {r}, model->src_vocab(), model->tgt_vocab());
            const TokenLogits t = model->network()->real_token_logits(one.src, one.src_len, one.tgt_in, one.tgt_out);
            CHECK(torch::nn::functional::cross_entropy(t.logits, t.targets).item<double>() ==
                  Approx(e["loss"].get<double>()).epsilon(1e-4));
        }
        // The trainer fine-tunes on such pairs (train --init-from and the app's Train: a Trainer from the model).
        Corpus corpus;
        corpus.name = "pairs";
        corpus.level = model->level();
        corpus.model_pieces = true;
        for (int k = 0; k < 4; ++k) corpus.pairs.insert(corpus.pairs.end(), pairs.begin(), pairs.end());
        TrainConfig tc;
        tc.device = "cpu";
        tc.val_fraction = 0.25;
        Checkpoint c;
        c.model = model;
        const Trainer trainer(c, prepare_data(corpus, tc, model->tokenizer_ptr()), tc);
        REQUIRE_FALSE(trainer.data().train.empty());
        for (const auto& p : trainer.data().train) {
            CHECK(p.src.front() == named.front().src.front());
            CHECK(p.tgt.front() == named.front().tgt.front());
            CHECK(std::count(p.tgt.begin(), p.tgt.end(), p.tgt.front()) == 1);
        }
    }
    SECTION("a model whose tokenizer names no target language asks for one") {
        const auto dir = copy_fixture("nllb", "nllb-no-tgt");
        json c = read_json_file(dir + "/tokenizer_config.json");
        c.erase("tgt_lang");
        write_text(dir + "/tokenizer_config.json", c.dump());
        const auto model = load_model(dir);
        std::vector<SentencePair> pairs{{{"a"}, {"b"}}};
        CHECK_THROWS_WITH(add_language_codes(pairs, model->tokenizer()),
                          Catch::Contains("fine-tuning this model needs its target language") && Catch::Contains("tgt_lang"));
        add_language_codes(pairs, model->tokenizer(), "", "fra_Latn");
        CHECK(pairs[0].tgt == std::vector<std::string>{"fra_Latn", "b"});
        CHECK(pairs[0].src == std::vector<std::string>{"eng_Latn", "a"});
    }
}

TEST_CASE("a T5 folder with spiece.model and no tokenizer.json opens with transformers 5's ids", "[pretrained][t5][tokenizer]") {
    if (!have_fixtures()) return;
    if (!std::filesystem::exists(k_fixtures + "/t5_spm")) {
        WARN("the fixtures predate t5_spm (tools/hf_fixtures_t5.py); skipping");
        return;
    }
    REQUIRE_FALSE(std::filesystem::exists(k_fixtures + "/t5_spm/tokenizer.json"));
    const auto model = load_model(k_fixtures + "/t5_spm");
    const auto from_json = load_model(k_fixtures + "/t5");
    const auto* pt = model->tokenizer().pretrained().get();
    CHECK(pt->kind() == PretrainedTokenizerKind::t5);
    // The same vocabulary as the tokenizer.json transformers 5 saved: the sentinels last, <extra_id_0> at the end.
    CHECK(pt->id_tokens() == from_json->tokenizer().pretrained()->id_tokens());
    const auto& tokens = pt->id_tokens();
    const auto last = std::find_if(tokens.rbegin(), tokens.rend(), [](const std::string& t) { return !t.empty(); });
    CHECK(*last == "<extra_id_0>");
    CHECK(pt->is_special("<extra_id_3>"));
    for (const auto& e : reference()["t5_extra"]["spm_reference"]) {
        const std::string text = e["text"];
        INFO("sentence " << json(text).dump());
        CHECK(source_ids(*model, text, "") == ints(e["input_ids"]));  // </s> appended
        std::vector<std::string> toks;
        IdMap map(*model, false);
        for (auto id : ints(e["input_ids"])) toks.push_back(model->src_vocab().token(map.to_attnviz.at(id)));
        CHECK(model->tokenizer().decode(toks) == e["decoded"].get<std::string>());
    }
    // It translates as the tokenizer.json folder does, and is written back with spiece.model.
    DecodeOptions o = model->decode_defaults();
    o.beam_size = o.num_hypotheses = 1;
    CHECK(model->translate({"Hello, Tom."}, o).at(0).best().ids == from_json->translate({"Hello, Tom."}, o).at(0).best().ids);
    attnviz::testing::ScratchDir scratch("t5-spm-export");
    const std::string out = scratch / "exported";
    save_model_folder(*model, out);
    CHECK(std::filesystem::exists(out + "/spiece.model"));
    CHECK(load_model(out)->tokenizer().pretrained()->id_tokens() == tokens);
    SECTION("without spiece.model either, one line names both files") {
        const auto dir = copy_fixture("t5_spm", "t5-no-tokenizer");
        std::filesystem::remove(dir + "/spiece.model");
        CHECK_THROWS_WITH(load_model(dir), Catch::Contains("has no spiece.model") && Catch::Contains("tokenizer.json"));
    }
}

TEST_CASE("src_lang and tgt_lang null in tokenizer_config.json read as unset, as transformers reads None",
          "[pretrained][languages]") {
    if (!have_fixtures()) return;
    const struct {
        const char* fixture;
        const char* src_lang;  // the default: M2M100Tokenizer's "en", NLLB's template code
    } cases[] = {{"m2m100", "en"}, {"m2m100_json", "en"}, {"nllb", "eng_Latn"}, {"mbart50_spm", "en_XX"}, {"mbart50", "en_XX"}};
    for (const auto& c : cases) {
        INFO(c.fixture);
        const auto dir = copy_fixture(c.fixture, std::string(c.fixture) + "-null-langs");
        json t = read_json_file(dir + "/tokenizer_config.json");
        t["src_lang"] = nullptr;
        t["tgt_lang"] = nullptr;
        write_text(dir + "/tokenizer_config.json", t.dump());
        const auto model = load_model(dir);
        CHECK(model->tokenizer().pretrained()->default_source_language() == c.src_lang);
        CHECK(model->tokenizer().pretrained()->default_target_language().empty());
    }
}

TEST_CASE("heads' importance loss of a multilingual model teacher-forces the pairs with their language codes",
          "[pretrained][languages][heads]") {
    if (!have_fixtures()) return;
    if (!reference().contains("training")) return;
    for (const char* name : {"nllb", "mbart50"}) {
        INFO(name);
        const auto model = load_model(k_fixtures + "/" + name);
        std::vector<SentencePair> pairs;
        for (const auto& e : reference()["training"][name])
            pairs.push_back({model->tokenizer().encode(e["source"], false), model->tokenizer().encode_target(e["target"], false)});
        HeadStatsOptions o;
        o.maps = false;
        o.batch_size = 8;
        const HeadReport report = head_stats(*model, pairs, o);
        std::vector<SentencePair> coded = pairs;
        add_language_codes(coded, model->tokenizer());
        const HeadImportance want = head_importance(*model->network(), coded, model->src_vocab(), model->tgt_vocab(), o,
                                                    model->device());
        REQUIRE(want.tokens > 0);
        CHECK(report.tokens == want.tokens);
        CHECK(report.loss == Approx(want.loss_sum / double(want.tokens)).epsilon(1e-6));
    }
}
