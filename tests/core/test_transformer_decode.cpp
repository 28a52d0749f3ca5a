// Decoding a Transformer through the seam, unchanged: greedy, beam, N-best, top-k,
// forced (reference and prefix), the beam tree and batch translation, with every
// map in each hypothesis; and its checkpoints and d2l files.
#include "catch_torch.hpp"

#include <filesystem>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/decode/beam_tree.hpp"
#include "core/model/families.hpp"
#include "core/persist/checkpoint.hpp"
#include "core/persist/d2l_interop.hpp"
#include "core/persist/model_file.hpp"
#include "test_support.hpp"
#include "tiny_transformer.hpp"

using namespace attnviz;

namespace {

struct TinyTransformer {
    Vocab src = Vocab::build({{"a", "b", "c", "d"}});
    Vocab tgt = Vocab::build({{"x", "y", "z"}});
    ModelConfig config;
    TranslationModelPtr model;
    TinyTransformer() {
        config = testing::tiny_transformer_config(static_cast<int64_t>(src.size()), static_cast<int64_t>(tgt.size()),
                                                  /*heads=*/2, /*ffn=*/20, /*seed=*/9);
        Network net = build_network(config);
        {
            // Sharpen the output layer so that greedy and beam search can differ.
            torch::NoGradGuard ng;
            for (auto& p : net->named_parameters())
                if (p.key().rfind("decoder.dense", 0) == 0) p.value().mul_(5.0);
        }
        model = testing::as_model(net, src, tgt);
    }
};

const std::vector<std::vector<std::string>> k_sources = {{"a", "b"}, {"c"}, {"b", "d", "a", "c", "a"}};

/// Every map of a hypothesis has the shape its kind asks for.
void check_maps(const Translation& t, const Hypothesis& h, int layers, int heads) {
    const size_t n = t.src_tokens.size(), steps = h.tokens.size();
    REQUIRE(h.attention.maps.size() == static_cast<size_t>(1 + 3 * layers * heads));
    CHECK(h.attention.primary().id == (AttentionMapId{AttentionKind::cross, layers - 1, -1}));
    for (const auto& m : h.attention.maps) {
        INFO(describe(m.id));
        if (m.id.kind == AttentionKind::encoder_self) {
            REQUIRE(m.weights.size() == n);
            for (const auto& row : m.weights) CHECK(row.size() == n);
            continue;
        }
        REQUIRE(m.weights.size() == steps);
        for (size_t s = 0; s < steps; ++s) {
            const auto& row = m.weights[s];
            CHECK(row.size() == (m.id.kind == AttentionKind::cross ? n : s + 1));
            float sum = 0;
            for (float w : row) sum += w;
            CHECK(sum == Approx(1.0f).margin(1e-5));
        }
        if (m.id.head >= 0) CHECK(m.scores.size() == steps);
    }
}

}  // namespace

TEST_CASE("a Transformer translates greedily in a batch as one sentence at a time, every map kept",
          "[transformer][decode]") {
    TinyTransformer t;
    DecodeOptions o;
    o.max_length = 7;
    const auto batch = t.model->translate_tokens(k_sources, o);
    REQUIRE(batch.size() == k_sources.size());
    for (size_t i = 0; i < k_sources.size(); ++i) {
        INFO("sentence " << i);
        check_maps(batch[i], batch[i].best(), 2, 2);
        const auto alone = t.model->translate_tokens({k_sources[i]}, o);
        CHECK(alone[0].best().ids == batch[i].best().ids);
        CHECK(alone[0].best().log_prob == Approx(batch[i].best().log_prob).margin(1e-5));
        const auto& a = alone[0].best().attention.maps;
        const auto& b = batch[i].best().attention.maps;
        REQUIRE(a.size() == b.size());
        for (size_t m = 0; m < a.size(); ++m)
            for (size_t r = 0; r < a[m].weights.size(); ++r)
                for (size_t c = 0; c < a[m].weights[r].size(); ++c)
                    CHECK(a[m].weights[r][c] == Approx(b[m].weights[r][c]).margin(1e-5));
    }
}

TEST_CASE("a Transformer's beam search, N-best, top-k and beam tree", "[transformer][decode]") {
    TinyTransformer t;
    DecodeOptions o;
    o.max_length = 7;
    const auto greedy = t.model->translate_tokens(k_sources, o);
    o.beam_size = 1;
    o.beam_tree = true;
    const auto beam1 = t.model->translate_tokens(k_sources, o);
    for (size_t i = 0; i < k_sources.size(); ++i) CHECK(beam1[i].best().ids == greedy[i].best().ids);
    o.beam_size = 4;
    o.num_hypotheses = 3;
    o.top_k = 3;
    o.length_penalty = 0;
    const auto beam = t.model->translate_tokens(k_sources, o);
    for (size_t i = 0; i < k_sources.size(); ++i) {
        INFO("sentence " << i);
        REQUIRE(beam[i].hypotheses.size() == 3);
        CHECK(beam[i].hypotheses[0].score >= beam[i].hypotheses[1].score);
        for (const auto& h : beam[i].hypotheses) {
            check_maps(beam[i], h, 2, 2);
            CHECK(h.top_k.size() == h.tokens.size());
        }
        REQUIRE(beam[i].beam_tree);
        CHECK_FALSE(beam[i].beam_tree->finished.empty());
        CHECK(beam[i].beam_tree->attention_map == (AttentionMapId{AttentionKind::cross, 1, -1}));
    }
}

TEST_CASE("forcing a Transformer's own greedy output gives its log-probability and maps, and a prefix goes on",
          "[transformer][decode]") {
    TinyTransformer t;
    DecodeOptions o;
    o.max_length = 7;
    const auto greedy = t.model->translate_tokens(k_sources, o);
    std::vector<std::vector<std::string>> targets;
    for (const auto& g : greedy) targets.push_back(until_eos(g.best().tokens));
    const auto forced = t.model->force_tokens(k_sources, targets, ForceMode::reference, o);
    for (size_t i = 0; i < k_sources.size(); ++i) {
        const auto& f = forced[i].best();
        if (greedy[i].best().tokens.back() != Vocab::eos_token) continue;  // cut at max_length: no <eos> to force
        CHECK(f.ids == greedy[i].best().ids);
        CHECK(f.log_prob == Approx(greedy[i].best().log_prob).margin(1e-5));
        CHECK(f.first_divergence == -1);
        check_maps(forced[i], f, 2, 2);
    }
    const auto prefixed = t.model->force_tokens(k_sources, {{"z"}, {"z"}, {"y", "z"}}, ForceMode::prefix, o);
    CHECK(prefixed[0].best().tokens.front() == "z");
    CHECK(prefixed[2].best().forced_steps == 2);
    check_maps(prefixed[2], prefixed[2].best(), 2, 2);
}

TEST_CASE("a Transformer checkpoint and its d2l file translate as the model they were written from",
          "[transformer][checkpoint]") {
    TinyTransformer t;
    const auto dir = std::filesystem::temp_directory_path() / ("attnviz-tf-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    DecodeOptions o;
    o.max_length = 6;
    const auto before = t.model->translate_tokens(k_sources, o);
    save_model(*t.model, (dir / "m.ckpt").string());
    const auto loaded = load_model((dir / "m.ckpt").string());
    CHECK(loaded->config().is_transformer());
    CHECK(loaded->config().num_heads == 2);
    CHECK(loaded->config().ffn_size == 20);
    REQUIRE(export_d2l(*loaded, (dir / "m.safetensors").string()).empty());
    const auto imported = import_d2l((dir / "m.safetensors").string());
    CHECK_FALSE(imported->config().d2l_decode_positions);  // attnviz's own model: true positions
    for (const auto& m : {loaded, imported}) {
        const auto after = m->translate_tokens(k_sources, o);
        for (size_t i = 0; i < k_sources.size(); ++i) {
            CHECK(after[i].best().ids == before[i].best().ids);
            CHECK(after[i].best().attention.weights() == before[i].best().attention.weights());
        }
    }
    testing::remove_tree(dir);
}

TEST_CASE("a d2l Transformer file's config: d2l's predict_step positions unless it says otherwise",
          "[transformer][d2l]") {
    nlohmann::json c = {{"arch", "transformer"}, {"hidden", 16}, {"layers", 2}, {"heads", 2}, {"ffn", 8},
                        {"num_steps", 9}};
    ModelConfig m = d2l_model_config(c);
    CHECK(m.is_transformer());
    CHECK(m.num_heads == 2);
    CHECK(m.ffn_size == 8);
    CHECK(m.source_steps == 9);
    CHECK(m.dropout == 0.2);  // d2l's
    CHECK(m.d2l_decode_positions);
    c["d2l_decode_positions"] = false;
    CHECK_FALSE(d2l_model_config(c).d2l_decode_positions);
    c.erase("heads");
    CHECK_THROWS_WITH(d2l_model_config(c), Catch::Contains("no \"heads\""));
    c["heads"] = 3;  // 16 is no multiple of 3
    CHECK_THROWS_WITH(d2l_model_config(c), Catch::Contains("multiple of its heads"));
    c["arch"] = "lstm";
    CHECK_THROWS_WITH(d2l_model_config(c), Catch::Contains("\"arch\""));
}
