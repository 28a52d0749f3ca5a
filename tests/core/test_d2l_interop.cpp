// Models to and from d2l's PyTorch layout (core/persist/d2l_interop.hpp): vocabularies in
// d2l's order, the config object, export + import, and files that are wrong.
// (The PyTorch side itself is checked by tests/cli/interop_d2l.py.)
#include "catch_torch.hpp"
#include "cli_support.hpp"

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/persist/model_file.hpp"
#include "core/persist/checkpoint.hpp"
#include "core/persist/d2l_interop.hpp"
#include "core/io/error.hpp"
#include "core/analysis/export.hpp"
#include "core/persist/parameter_names.hpp"
#include "core/persist/safetensors_torch.hpp"
#include "test_support.hpp"

using namespace attnviz;
using nlohmann::json;

namespace {

using attnviz_cli_test::TempDir;  // mkdtemp + nftw: no std::filesystem (see cli_support.hpp)

Vocab vocab_of(std::vector<std::string> words) { return Vocab::build({std::move(words)}); }

TranslationModelPtr small_model(ModelConfig cfg) {
    const Vocab src = vocab_of({"go", "i", "lost", "home", "he", "."}), tgt = vocab_of({"va", "j'ai", "perdu", "!", "."});
    cfg.src_vocab = static_cast<int64_t>(src.size());
    cfg.tgt_vocab = static_cast<int64_t>(tgt.size());
    cfg.embed_size = 8;
    cfg.hidden_size = 12;
    cfg.num_layers = 2;
    cfg.seed = 3;
    return testing::as_model(Seq2Seq(cfg), src, tgt);
}

const std::vector<std::string> k_sentences = {"go .", "i lost .", "he lost home .", "zebra go .", ""};

void check_same_translations(const TranslationModel& a, const TranslationModel& b, double tolerance) {
    DecodeOptions o;
    o.max_length = 6;
    const auto ta = a.translate(k_sentences, o), tb = b.translate(k_sentences, o);
    for (size_t i = 0; i < ta.size(); ++i) {
        INFO("sentence '" << k_sentences[i] << "'");
        CHECK(ta[i].src_tokens == tb[i].src_tokens);
        REQUIRE(ta[i].hypotheses.size() == tb[i].hypotheses.size());
        if (ta[i].empty()) continue;
        CHECK(ta[i].best().tokens == tb[i].best().tokens);
        const auto &wa = ta[i].best().attention.weights(), &wb = tb[i].best().attention.weights();
        REQUIRE(wa.size() == wb.size());
        for (size_t r = 0; r < wa.size(); ++r) {
            REQUIRE(wa[r].size() == wb[r].size());
            for (size_t s = 0; s < wa[r].size(); ++s) CHECK(std::abs(wa[r][s] - wb[r][s]) <= tolerance);
        }
    }
}

/// Writes a file in d2l's own order: each vocabulary sorted as d2l's Vocab sorts it
/// (the source without <bos>), the rows of the embeddings and of the output layer
/// permuted to match, under the names of parameter_names().
void write_d2l_ordered(const TranslationModel& m, const std::string& path, json config,
                       const std::map<std::string, std::string>& extra_meta = {}) {
    auto sorted_without = [](const Vocab& v, const std::string& drop) {
        std::vector<std::string> t;
        for (const auto& tok : v.tokens())
            if (tok != drop) t.push_back(tok);
        std::sort(t.begin(), t.end());
        return t;
    };
    const auto src = sorted_without(m.src_vocab(), Vocab::bos_token), tgt = sorted_without(m.tgt_vocab(), "");
    auto rows = [](const Vocab& v, const std::vector<std::string>& order) {
        std::vector<int64_t> r;
        for (const auto& t : order) r.push_back(v.id(t));
        return torch::tensor(r, torch::kLong);
    };
    safetensors::TensorWriter w;
    auto params = m.network()->named_parameters();
    for (const auto& n : parameter_names(m.config())) {
        torch::Tensor t = params[n.module].detach();
        if (n.module == "enc_embedding.weight") t = t.index_select(0, rows(m.src_vocab(), src));
        if (n.module == "dec_embedding.weight" || n.module == "dense.weight" || n.module == "dense.bias")
            t = t.index_select(0, rows(m.tgt_vocab(), tgt));
        w.add(n.file, t);
    }
    std::map<std::string, std::string> meta{
        {"src_vocab", json(src).dump()}, {"tgt_vocab", json(tgt).dump()}, {"config", config.dump()}};
    for (const auto& [k, v] : extra_meta) meta[k] = v;
    write_file_atomic(path, w.serialize(meta));
}

json d2l_config(const ModelConfig& c) {
    return {{"embed", c.embed_size}, {"hidden", c.hidden_size}, {"layers", c.num_layers}};
}

}  // namespace

TEST_CASE("d2l vocabulary: specials first, the rest in d2l's order, a missing <bos> takes <unk>'s row",
          "[d2l]") {
    // d2l's source Vocab: sorted, reserved tokens inside the order, no <bos>.
    const std::vector<std::string> d2l = {"!", ".", "<eos>", "<pad>", "<unk>", "go", "i"};
    const auto m = map_d2l_vocab(d2l, "src_vocab");
    CHECK(m.vocab.tokens() == std::vector<std::string>{"<pad>", "<bos>", "<eos>", "<unk>", "!", ".", "go", "i"});
    CHECK(m.rows == std::vector<int64_t>{3, 4, 2, 4, 0, 1, 5, 6});
    CHECK(m.added == std::vector<bool>{false, true, false, false, false, false, false, false});
    CHECK_THROWS_WITH(map_d2l_vocab({"<unk>", "a", "a"}, "tgt_vocab"), Catch::Contains("'a' is listed twice"));
    CHECK_THROWS_WITH(map_d2l_vocab({"a", "b"}, "tgt_vocab"), Catch::Contains("has no <unk>"));
    CHECK_THROWS_AS(map_d2l_vocab({}, "tgt_vocab"), FileError);
}

TEST_CASE("d2l config: embed, hidden, layers required, the rest d2l's, num_steps is source_steps", "[d2l]") {
    const auto c = d2l_model_config({{"embed", 32}, {"hidden", 48}, {"layers", 2}});
    CHECK(c.embed_size == 32);
    CHECK(c.hidden_size == 48);
    CHECK(c.num_layers == 2);
    CHECK(c.cell == CellType::gru);
    CHECK(c.scoring == Scoring::additive);
    CHECK(c.dropout == 0.2);
    CHECK(c.source_steps == 0);
    CHECK(d2l_model_config({{"embed", 32}, {"hidden", 48}, {"layers", 2}, {"num_steps", 9}}).source_steps == 9);
    CHECK(d2l_model_config({{"embed", 4}, {"hidden", 4}, {"layers", 1}, {"cell", "lstm"}}).cell == CellType::lstm);
    CHECK_THROWS_WITH(d2l_model_config({{"embed", 32}, {"layers", 2}}), Catch::Contains("\"hidden\""));
    CHECK_THROWS_AS(d2l_model_config({{"embed", 32}, {"hidden", 48}, {"layers", 2}, {"cell", "rnn"}}), FileError);
    CHECK_THROWS_AS(d2l_model_config({{"embed", -1}, {"hidden", 48}, {"layers", 2}}), FileError);
    CHECK_THROWS_AS(d2l_model_config(json::array()), FileError);
    // What export writes reads back as the same shape.
    ModelConfig m;
    m.embed_size = 16;
    m.cell = CellType::lstm;
    m.bidirectional = true;
    m.source_steps = 7;
    m.dropout = 0.1;
    const auto back = d2l_model_config(d2l_config_json(m, TokenLevel::word));
    CHECK(back.to_json() == [&] { auto x = m; x.seed = back.seed; return x.to_json(); }());
}

TEST_CASE("d2l variants: described exactly when d2l's classes cannot hold the model", "[d2l]") {
    std::vector<ModelConfig> configs(7, testing::tiny_config(Scoring::additive));
    configs[1].cell = CellType::lstm;
    configs[2].scoring = Scoring::dot;
    configs[3].bidirectional = true;
    configs[4].reverse_source = true;
    configs[5].attention_size = 5;
    configs[6].attention_size = configs[6].hidden_size;  // the same as 0
    for (const auto& c : configs) {
        INFO(c.to_json().dump());
        CHECK(d2l_variant(c).empty() == has_d2l_shape(c));
    }
    CHECK(d2l_variant(configs[1]) == "LSTM cell");
    CHECK(d2l_variant(configs[3]) == "bidirectional encoder");
}

TEST_CASE("export then import gives the same model, d2l-shaped or a variant", "[d2l]") {
    TempDir dir;
    ModelConfig plain, padded, variant;
    padded.source_steps = 4;
    variant.cell = CellType::lstm;
    variant.bidirectional = true;
    variant.scoring = Scoring::general;
    int i = 0;
    for (const auto& cfg : {plain, padded, variant}) {
        INFO("config " << cfg.to_json().dump());
        const auto model = small_model(cfg);
        const std::string path = dir / ("m" + std::to_string(i++) + ".safetensors");
        const std::string note = export_d2l(*model, path);
        CHECK(note.empty() == has_d2l_shape(model->config()));
        const auto back = load_model(path);  // dispatched by content
        CHECK(back->config().source_steps == cfg.source_steps);
        CHECK(back->src_vocab() == model->src_vocab());
        CHECK(back->tgt_vocab() == model->tgt_vocab());
        auto a = model->network()->named_parameters(), b = back->network()->named_parameters();
        for (const auto& p : a) CHECK(torch::equal(p.value(), b[p.key()]));
        check_same_translations(*model, *back, 0.0);
    }
}

TEST_CASE("a file in d2l's order (sorted vocabularies, no source <bos>) translates as the model it came from",
          "[d2l]") {
    TempDir dir;
    for (int64_t steps : {0, 4}) {
        ModelConfig cfg;
        cfg.source_steps = steps;
        const auto model = small_model(cfg);
        json config = d2l_config(model->config());
        if (steps > 0) config["num_steps"] = steps;
        const std::string path = dir / "d2l.safetensors";
        write_d2l_ordered(*model, path, config);
        const auto imported = import_d2l(path);
        CHECK(imported->config().source_steps == steps);
        CHECK(imported->src_vocab().size() == model->src_vocab().size());  // <bos> added back
        check_same_translations(*model, *imported, 1e-6);
    }
}

TEST_CASE("d2l files that are wrong are refused naming what is wrong", "[d2l]") {
    TempDir dir;
    const auto model = small_model(ModelConfig{});
    const json config = d2l_config(model->config());
    const std::string path = dir / "bad.safetensors";
    SECTION("a tensor of the wrong shape") {
        write_d2l_ordered(*model, path, {{"embed", 8}, {"hidden", 12}, {"layers", 1}});
        CHECK_THROWS_WITH(import_d2l(path), Catch::Contains("unexpected tensor") || Catch::Contains("shape"));
    }
    SECTION("a config that does not match the tensors") {
        write_d2l_ordered(*model, path, {{"embed", 9}, {"hidden", 12}, {"layers", 2}});
        CHECK_THROWS_WITH(import_d2l(path), Catch::Contains("encoder.embedding.weight") && Catch::Contains(", 9]"));
    }
    SECTION("metadata missing") {
        std::map<std::string, std::string> no_config{{"format", d2l_format}, {"src_vocab", "[\"<unk>\"]"}};
        safetensors::TensorWriter w;
        w.add("x", torch::zeros({2}));
        write_file_atomic(path, w.serialize(no_config));
        CHECK_THROWS_WITH(import_d2l(path), Catch::Contains("no \"tgt_vocab\""));
    }
    SECTION("config not JSON") {
        write_d2l_ordered(*model, path, config, {{"config", "{\"embed\": "}});
        CHECK_THROWS_AS(import_d2l(path), FileError);
    }
    SECTION("a safetensors file without a model's metadata names the formats attnviz reads") {
        safetensors::TensorWriter w;
        w.add("weight", torch::zeros({2, 2}));
        write_file_atomic(path, w.serialize({}));
        CHECK_THROWS_WITH(load_model(path), Catch::Contains("attnviz reads"));
    }
    SECTION("a file that is no model at all") {
        write_file_atomic(path, "PK\x03\x04 a zip, as torch.save writes");
        CHECK_THROWS_WITH(load_model(path), Catch::Contains("attnviz reads"));
    }
}
