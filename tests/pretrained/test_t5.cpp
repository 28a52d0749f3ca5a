// The T5 family (core/model/t5_model.hpp) against transformers beyond what test_pretrained.cpp's
// cases check for every family (tokens, maps, generate()): each head's relative position bias
// against compute_bias, the task prefixes, lm_head tied or not as transformers 5 loads it, the
// folder written back, and config.json's T5 fields refused in one line naming the file and the key.
// The fixtures are tools/make_hf_fixtures.py's (t5, flan_t5: tools/hf_fixtures_t5.py).
#include "catch_torch.hpp"
#include "test_support.hpp"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include <nlohmann/json.hpp>

#include "core/config/t5_config.hpp"
#include "core/decode/translation_model.hpp"
#include "core/io/error.hpp"
#include "core/model/families.hpp"
#include "core/model/t5_model.hpp"
#include "core/persist/hf_folder.hpp"
#include "core/persist/model_file.hpp"

using namespace attnviz;
using json = nlohmann::json;

namespace {

const std::string t5_fixtures =
    std::getenv("ATTNVIZ_HF_FIXTURES") ? std::getenv("ATTNVIZ_HF_FIXTURES") : ATTNVIZ_HF_FIXTURES;

bool have_t5_fixtures() {
    if (std::filesystem::exists(t5_fixtures + "/t5/config.json")) return true;
    WARN("no T5 fixtures at " << t5_fixtures << " (tools/make_hf_fixtures.py needs transformers); skipping");
    return false;
}

const json& t5_reference() {
    static const json j = [] {
        std::ifstream in(t5_fixtures + "/reference.json");
        return json::parse(in);
    }();
    return j;
}

const char* const k_t5_models[] = {"t5", "flan_t5"};

json t5_read(const std::string& path) {
    std::ifstream in(path);
    return json::parse(in);
}

void t5_write(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
}

}  // namespace

TEST_CASE("T5's relative position bias per head equals transformers' compute_bias over -N..N", "[pretrained][t5]") {
    if (!have_t5_fixtures()) return;
    for (const char* name : k_t5_models) {
        INFO(name);
        const auto model = load_model(t5_fixtures + "/" + name);
        const json& want = t5_reference()[std::string(name) + "_extra"]["position_bias"];
        const int64_t span = want["span"];
        const auto curves = position_bias_curves(*model->network(), span);
        const int64_t heads = model->config().pretrained->model.encoder_heads;
        REQUIRE(static_cast<int64_t>(curves.size()) == 2 * heads);
        float worst = 0;
        size_t values = 0;
        for (const auto& c : curves) {
            const auto& ref = want[c.kind == AttentionKind::encoder_self ? "encoder" : "decoder"][static_cast<size_t>(c.head)];
            REQUIRE(c.bias.size() == ref.size());
            REQUIRE(c.bias.size() == static_cast<size_t>(2 * span + 1));
            for (size_t i = 0; i < c.bias.size(); ++i) {
                worst = std::max(worst, std::abs(c.bias[i] - ref[i].get<float>()));
                ++values;
            }
        }
        CHECK(values == static_cast<size_t>(2 * heads * (2 * span + 1)));
        CHECK(worst <= 1e-7f);  // the same rows of the same table: equal
        // The decoder's bias is causal: every key after the query reads the bucket of distance 0.
        for (const auto& c : curves)
            if (c.kind == AttentionKind::decoder_self)
                for (int64_t i = span; i < 2 * span + 1; ++i) CHECK(c.bias[static_cast<size_t>(i)] == c.bias[static_cast<size_t>(span)]);
        // Cross-attention has none; other families have none.
        const auto* t5 = dynamic_cast<const T5Impl*>(model->network().get());
        REQUIRE(t5 != nullptr);
        CHECK_THROWS_AS(t5->position_bias_curve(AttentionKind::cross, 4), ConfigError);
    }
    if (std::filesystem::exists(t5_fixtures + "/marian/config.json"))
        CHECK(position_bias_curves(*load_model(t5_fixtures + "/marian")->network(), 4).empty());
}

TEST_CASE("T5's task prefixes come from config.json's task_specific_params", "[pretrained][t5]") {
    if (!have_t5_fixtures()) return;
    for (const char* name : k_t5_models) {
        INFO(name);
        const auto model = load_model(t5_fixtures + "/" + name);
        std::map<std::string, std::string> got, want;
        for (const auto& [task, prefix] : task_prefixes(model->config().pretrained->model)) got[task] = prefix;
        for (const auto& [task, prefix] : t5_reference()[std::string(name) + "_extra"]["task_prefixes"].items())
            want[task] = prefix.get<std::string>();
        CHECK(got == want);
        CHECK(got.count("translation_en_to_de") == 1);
    }
}

TEST_CASE("T5 ties lm_head as transformers 5 loads it, and rescales only when the config says so", "[pretrained][t5]") {
    if (!have_t5_fixtures()) return;
    const auto t5 = load_model(t5_fixtures + "/t5");
    const auto flan = load_model(t5_fixtures + "/flan_t5");
    const auto* a = dynamic_cast<const T5Impl*>(t5->network().get());
    const auto* b = dynamic_cast<const T5Impl*>(flan->network().get());
    REQUIRE(a != nullptr);
    REQUIRE(b != nullptr);
    CHECK(a->lm_head.is_same(a->shared));
    CHECK(a->t5().scale_decoder_outputs);
    CHECK_FALSE(b->lm_head.is_same(b->shared));
    CHECK_FALSE(b->t5().scale_decoder_outputs);
    CHECK(b->t5().gated);
    CHECK(t5->config().pretrained->model.describe().find("T5, d 32") == 0);
}

TEST_CASE("a T5 folder written back opens with the same weights and translates alike, also from a checkpoint",
          "[pretrained][t5]") {
    if (!have_t5_fixtures()) return;
    attnviz::testing::ScratchDir scratch("t5-export");
    for (const char* name : k_t5_models) {
        INFO(name);
        const auto model = load_model(t5_fixtures + "/" + name);
        const std::string out = scratch / (std::string(name) + "-exported");
        save_model_folder(*model, out);
        CHECK(std::filesystem::exists(out + "/tokenizer.json"));
        const json config = t5_read(out + "/config.json");
        CHECK(config["model_type"] == "t5");
        CHECK(config["tie_word_embeddings"] == (std::string(name) == "t5"));
        const auto again = load_model(out);
        auto p = model->network()->named_parameters(), q = again->network()->named_parameters();
        REQUIRE(p.size() == q.size());
        for (const auto& item : p) {
            INFO(item.key());
            REQUIRE(q.contains(item.key()));
            CHECK(torch::equal(item.value(), q[item.key()]));
        }
        DecodeOptions d = model->decode_defaults();
        const std::string text = "translate English to German: I am a small frog.";
        const auto first = model->translate({text}, d).at(0);
        REQUIRE_FALSE(first.empty());
        CHECK(again->translate({text}, d).at(0).best().ids == first.best().ids);
        const std::string ckpt = scratch / (std::string(name) + ".attnviz");
        save_model(*model, ckpt);
        const auto reopened = load_model(ckpt);
        CHECK(reopened->translate({text}, d).at(0).best().ids == first.best().ids);
        CHECK(task_prefixes(reopened->config().pretrained->model).size() == task_prefixes(model->config().pretrained->model).size());
    }
}

TEST_CASE("a T5 config.json field attnviz cannot use is refused in one line naming the file and the key",
          "[pretrained][t5][hostile]") {
    if (!have_t5_fixtures()) return;
    attnviz::testing::ScratchDir scratch("t5-hostile");
    auto edit = [&](const std::string& as, const std::function<void(json&)>& change) {
        const std::string dir = scratch / as;
        std::filesystem::copy(t5_fixtures + "/t5", dir, std::filesystem::copy_options::recursive);
        json c = t5_read(dir + "/config.json");
        change(c);
        t5_write(dir + "/config.json", c.dump());
        return dir;
    };
    CHECK_THROWS_WITH(load_model(edit("ffn", [](json& c) { c["feed_forward_proj"] = "gated-gelu-x"; })),
                      Catch::Contains("config.json") && Catch::Contains("\"feed_forward_proj\""));
    // The activation save_pretrained writes beside it (dense_act_fn) wins, as in T5Config: the error names
    // the key the name came from.
    CHECK_THROWS_WITH(load_model(edit("act", [](json& c) {
                          c["feed_forward_proj"] = "mish";
                          c.erase("dense_act_fn");
                      })),
                      Catch::Contains("\"feed_forward_proj\" is 'mish'"));
    CHECK_THROWS_WITH(load_model(edit("dense", [](json& c) { c["dense_act_fn"] = "mish"; })),
                      Catch::Contains("\"dense_act_fn\" is 'mish'"));
    CHECK_THROWS_WITH(load_model(edit("dist", [](json& c) { c["relative_attention_max_distance"] = 2; })),
                      Catch::Contains("config.json") && Catch::Contains("\"relative_attention_max_distance\" is 2") &&
                          Catch::Contains("expected at least") && Catch::Contains("exact buckets"));
    CHECK_THROWS_WITH(load_model(edit("dkv", [](json& c) { c["d_kv"] = "twelve"; })),
                      Catch::Contains("\"d_kv\"") && Catch::Contains("whole number"));
    CHECK_THROWS_WITH(load_model(edit("tasks", [](json& c) { c["task_specific_params"]["summarization"]["prefix"] = 3; })),
                      Catch::Contains("\"task_specific_params.summarization.prefix\""));
    // A width the weights do not have: the tensor and both shapes named.
    CHECK_THROWS_WITH(load_model(edit("wider", [](json& c) { c["d_kv"] = 16; })),
                      Catch::Contains("encoder.block.0.layer.0.SelfAttention.q.weight") && Catch::Contains("has shape"));
    // No tokenizer.json and no spiece.model (which would do: test_pretrained.cpp's t5_spm): both named.
    const std::string bare = edit("no-tokenizer", [](json&) {});
    std::filesystem::remove(bare + "/tokenizer.json");
    CHECK_THROWS_WITH(load_model(bare), Catch::Contains("has no spiece.model") && Catch::Contains("or tokenizer.json"));
}

TEST_CASE("T5's RMS norm in one loop a row gives ATen's values, and ATen's path where a gradient is recorded",
          "[t5]") {
    torch::manual_seed(21);
    const auto weight = torch::randn({37});
    for (const auto& x : {torch::randn({1, 1, 37}) * 30, torch::randn({3, 5, 37}), torch::zeros({2, 37})}) {
        const auto want = weight * (x * torch::rsqrt(x.pow(2).mean(-1, true) + 1e-6));
        torch::Tensor got;
        {
            torch::NoGradGuard no_grad;
            got = t5_rms_norm(x, weight, 1e-6);
        }
        CHECK(got.sizes() == x.sizes());
        CHECK(torch::allclose(got, want, 1e-5, 1e-6));
        // Recording a gradient: ATen's operations, so that backward reaches the weight.
        const auto w = weight.clone().requires_grad_(true);
        t5_rms_norm(x, w, 1e-6).sum().backward();
        REQUIRE(w.grad().defined());
        CHECK(torch::allclose(w.grad(), (x * torch::rsqrt(x.pow(2).mean(-1, true) + 1e-6)).reshape({-1, 37}).sum(0),
                              1e-4, 1e-4));
    }
    // Not contiguous, or double: ATen's operations, the same values.
    const auto x = torch::randn({37, 4}).t();
    torch::NoGradGuard no_grad;
    CHECK(torch::allclose(t5_rms_norm(x, weight, 1e-6), weight * (x * torch::rsqrt(x.pow(2).mean(-1, true) + 1e-6)),
                          1e-5, 1e-6));
    const auto xd = x.to(torch::kDouble);
    CHECK(t5_rms_norm(xd, weight.to(torch::kDouble), 1e-6).scalar_type() == torch::kDouble);
}

TEST_CASE("T5's buckets are transformers' at every distance, both directions", "[t5]") {
    // t5-small's 32 buckets over 128 positions; the values transformers 5.24's
    // T5Attention._relative_position_bucket gives for these distances (8 exact buckets a side in the
    // encoder, 16 in the decoder, then logarithmic ones up to 128, the last one shared past it).
    const auto rel = torch::tensor({0, 1, -1, 7, 8, -8, 12, 100, 127, 128, 1000, -1000}, torch::kLong);
    const auto enc = t5_relative_bucket(rel, true, 32, 128);
    const std::vector<int64_t> enc_want{0, 17, 1, 23, 24, 8, 25, 31, 31, 31, 31, 15};
    CHECK(std::vector<int64_t>(enc.data_ptr<int64_t>(), enc.data_ptr<int64_t>() + enc.numel()) == enc_want);
    // Causal: a key r positions before the query reads bucket(r); one after it, bucket 0.
    const auto dec = t5_relative_bucket(-rel, false, 32, 128);
    const std::vector<int64_t> dec_want{0, 1, 0, 7, 8, 0, 12, 30, 31, 31, 31, 0};
    CHECK(std::vector<int64_t>(dec.data_ptr<int64_t>(), dec.data_ptr<int64_t>() + dec.numel()) == dec_want);
}

namespace {

/// attnviz-cli's stdout and exit status (stderr to /dev/null).
std::pair<std::string, int> t5_cli(const std::string& args) {
    const std::string command = std::string("'") + ATTNVIZ_CLI_PATH + "' " + args + " 2>/dev/null";
    FILE* pipe = ::popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    std::string out;
    char buf[4096];
    while (const size_t n = std::fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
    const int status = ::pclose(pipe);
    return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

}  // namespace

TEST_CASE("attnviz-cli position-bias and prefixes print T5's curves and task prefixes", "[pretrained][t5][cli]") {
    if (!have_t5_fixtures()) return;
    const std::string folder = t5_fixtures + "/flan_t5";
    const auto [out, status] = t5_cli("position-bias --model '" + folder + "' --span 5");
    REQUIRE(status == 0);
    const json j = json::parse(out);
    CHECK(j["span"] == 5);
    CHECK(j["distances"].front() == -5);
    CHECK(j["distances"].back() == 5);
    const json& want = t5_reference()["flan_t5_extra"]["position_bias"];
    const int64_t span = want["span"];
    for (const auto& [kind, side] : {std::pair{"encoder_self", "encoder"}, std::pair{"decoder_self", "decoder"}}) {
        INFO(kind);
        const json& got = j["bias"][kind];
        REQUIRE(got.size() == want[side].size());
        for (size_t h = 0; h < got.size(); ++h)
            for (int64_t i = 0; i <= 10; ++i)
                CHECK(got[h][static_cast<size_t>(i)].get<float>() ==
                      want[side][h][static_cast<size_t>(span - 5 + i)].get<float>());
    }
    const auto [prefixes, prefix_status] = t5_cli("prefixes --json --model '" + folder + "'");
    REQUIRE(prefix_status == 0);
    const json p = json::parse(prefixes);
    REQUIRE(p.size() == 1);
    CHECK(p[0]["task"] == "translation_en_to_de");
    CHECK(p[0]["prefix"] == "translate English to German: ");
    if (std::filesystem::exists(t5_fixtures + "/marian/config.json")) {
        const auto [none, none_status] = t5_cli("position-bias --model '" + t5_fixtures + "/marian'");
        CHECK(none_status == 2);  // a model without the bias: refused before any work, in one line
        CHECK(none.empty());
    }
}

TEST_CASE("an mt5 config.json opens as mT5: never rescaled, written back as mt5", "[pretrained][t5]") {
    if (!have_t5_fixtures()) return;
    // The Flan-T5-style fixture (its own lm_head, no rescaling) is an mT5 in all but its model_type.
    attnviz::testing::ScratchDir scratch("mt5");
    const std::string dir = scratch / "mt5";
    std::filesystem::copy(t5_fixtures + "/flan_t5", dir, std::filesystem::copy_options::recursive);
    json c = t5_read(dir + "/config.json");
    c["model_type"] = "mt5";
    c["tie_word_embeddings"] = true;  // mT5 never rescales, whatever this says
    c.erase("scale_decoder_outputs");
    t5_write(dir + "/config.json", c.dump());
    const auto mt5 = load_model(dir);
    const auto flan = load_model(t5_fixtures + "/flan_t5");
    CHECK(mt5->config().pretrained->model.describe().rfind("mT5", 0) == 0);
    CHECK_FALSE(mt5->config().pretrained->model.t5->scale_decoder_outputs);
    DecodeOptions d = flan->decode_defaults();
    const std::string text = "I am a small frog.";
    CHECK(mt5->translate({text}, d).at(0).best().ids == flan->translate({text}, d).at(0).best().ids);
    const std::string out = scratch / "mt5-exported";
    save_model_folder(*mt5, out);
    const json written = t5_read(out + "/config.json");
    CHECK(written["model_type"] == "mt5");
    CHECK(written["architectures"][0] == "MT5ForConditionalGeneration");
    CHECK(written["tie_word_embeddings"] == false);  // the weights hold their own lm_head
}
