// Is attention an explanation? The torch-free parts: Kendall's tau-b against SciPy,
// the corpus table, attention sinks, interventions as data, the attribute file and
// the shareable web page.
#include "catch_torch.hpp"

#include <cmath>
#include <optional>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/analysis/agreement.hpp"
#include "core/analysis/attribution_result.hpp"
#include "core/analysis/sinks.hpp"
#include "core/analysis/web_page.hpp"
#include "core/decode/intervention.hpp"
#include "core/io/error.hpp"
#include "core/text/unicode.hpp"
#include "web_page_check.hpp"

using namespace attnviz;

namespace {
nlohmann::json fixtures() {
    std::ifstream in(std::string(ATTNVIZ_TEST_DATA) + "/kendall_fixtures.json");
    REQUIRE(in.good());
    return nlohmann::json::parse(in);
}

std::vector<float> floats(const nlohmann::json& a) {
    std::vector<float> v;
    for (const auto& x : a) v.push_back(x.get<float>());
    return v;
}

// A sentence attributed by hand: three source tokens and <eos>, two output steps.
SentenceAttribution sample() {
    SentenceAttribution s;
    s.input = "a cat .";
    s.source = {"a", "cat", ".", "<eos>"};
    s.output = {"un", "chat", "<eos>"};
    s.text = "un chat";
    s.attention_map = "cross, layer 0, head 0";
    s.methods = {AttributionMethod::saliency, AttributionMethod::occlusion};
    const std::vector<std::vector<float>> att{{0.7f, 0.1f, 0.1f, 0.1f}, {0.1f, 0.6f, 0.2f, 0.1f}, {0.05f, 0.05f, 0.3f, 0.6f}};
    const std::vector<std::vector<float>> sal{{0.9f, 0.2f, 0.1f, 0.3f}, {0.2f, 0.1f, 0.8f, 0.4f}, {0.1f, 0.2f, 0.3f, 0.9f}};
    const std::vector<std::vector<float>> occ{{-2.0f, 0.1f, 0.0f, 0.2f}, {0.3f, 0.1f, 1.5f, -0.2f}, {0.0f, 0.1f, 0.2f, 3.0f}};
    for (size_t t = 0; t < 3; ++t) {
        StepAttribution st;
        st.token = s.output[t];
        st.id = static_cast<int64_t>(4 + t);
        st.log_prob = -0.5 * static_cast<double>(t + 1);
        st.attention = att[t];
        st.scores[AttributionMethod::saliency] = {sal[t], std::vector<float>(t + 1, 0.5f)};
        st.scores[AttributionMethod::occlusion] = {occ[t], {}};
        s.steps.push_back(st);
    }
    return s;
}
}  // namespace

TEST_CASE("Kendall's tau-b equals SciPy's on every fixture, ties and constant rows included", "[agreement]") {
    const auto j = fixtures();
    REQUIRE(j["cases"].size() >= 30);
    for (const auto& c : j["cases"]) {
        INFO(c["name"].get<std::string>());
        const double tau = kendall_tau_b(floats(c["x"]), floats(c["y"]));
        if (c["tau_b"].is_null()) {
            CHECK(std::isnan(tau));
        } else {
            CHECK(tau == Approx(c["tau_b"].get<double>()).margin(1e-12));
        }
    }
    CHECK_THROWS_AS(kendall_tau_b({1, 2}, {1}), std::invalid_argument);
}

TEST_CASE("top-1 agreement takes the first largest entry of each", "[agreement]") {
    CHECK(same_top({0.1f, 0.8f, 0.1f}, {0.0f, 5.0f, 1.0f}));
    CHECK_FALSE(same_top({0.1f, 0.8f, 0.1f}, {7.0f, 5.0f, 1.0f}));
    CHECK(same_top({0.5f, 0.5f}, {1.0f, 0.0f}));  // ties: the first
    CHECK_FALSE(same_top({}, {}));
}

TEST_CASE("a distribution's summary follows NumPy's defaults", "[agreement]") {
    Distribution d;
    for (double v : {0.5, -0.25, 1.0, 0.0}) d.add(v);
    d.add(std::nan(""));  // left out
    CHECK(d.count() == 4);
    CHECK(d.mean() == Approx(0.3125));
    CHECK(d.std_dev() == Approx(std::sqrt((0.1875 * 0.1875 + 0.5625 * 0.5625 + 0.6875 * 0.6875 + 0.3125 * 0.3125) / 4)));
    CHECK(d.quantile(0.5) == Approx(0.25));   // numpy.median([-0.25, 0, 0.5, 1])
    CHECK(d.quantile(0.25) == Approx(-0.0625));  // numpy.quantile(..., 0.25)
    const auto h = d.histogram(4, -1.0, 1.0);
    CHECK(h == std::vector<size_t>{0, 1, 1, 2});  // 1.0 lands in the last bin
    CHECK(std::isnan(Distribution{}.mean()));
}

TEST_CASE("the agreement table collects pairs per step and per sentence", "[agreement]") {
    AgreementTable table;
    add_to_table(table, sample());
    REQUIRE(table.pairs() == std::vector<std::string>{"attention vs saliency", "attention vs occlusion",
                                                      "saliency vs occlusion"});
    const AgreementRow& sal = table.row("attention vs saliency");
    CHECK(sal.steps == 3);
    // Step by step, computed here from the definition.
    const SentenceAttribution s = sample();
    double sum = 0;
    size_t top = 0;
    for (const auto& st : s.steps) {
        sum += kendall_tau_b(st.attention, st.scores.at(AttributionMethod::saliency).source);
        top += same_top(st.attention, st.scores.at(AttributionMethod::saliency).source) ? 1 : 0;
    }
    CHECK(sal.step_tau.mean() == Approx(sum / 3));
    CHECK(sal.top1 == top);
    CHECK(sal.sentence_tau.count() == 1);
    // Occlusion is compared by magnitude: step 0's -2.0 is its largest.
    CHECK(attention_agreement(s.steps[0]).at(AttributionMethod::occlusion).top1);
    const auto j = table.to_json();
    CHECK(j["pairs"].size() == 3);
    CHECK(j["pairs"][0]["kendall_tau"]["histogram"]["counts"].size() == 20);
    CHECK(table.to_text().find("saliency vs occlusion") != std::string::npos);
}

TEST_CASE("the attribute file's entry carries the names the checks rely on", "[agreement][attribution]") {
    const auto j = to_json(sample());
    CHECK(j["output"] == nlohmann::json({"un", "chat", "<eos>"}));
    REQUIRE(j["steps"].size() == 3);
    const auto& step = j["steps"][1];
    for (const char* key : {"token", "log_prob", "attention", "attributions", "target_attributions",
                            "baseline_log_prob", "agreement", "sink_share"})
        CHECK(step.contains(key));
    CHECK(step["attributions"]["saliency"].size() == 4);
    CHECK(step["attributions"]["occlusion"].size() == 4);
    CHECK(step["target_attributions"]["saliency"].size() == 2);  // <bos> and the first output
    CHECK_FALSE(step["target_attributions"].contains("occlusion"));
    CHECK(step["agreement"]["saliency"].contains("kendall_tau"));
    CHECK(step["agreement"]["saliency"].contains("top1"));
    CHECK(step["baseline_log_prob"].is_null());  // no integrated gradients here
    CHECK(step["sink_share"].get<double>() == Approx(0.3));  // "." and <eos>
    CHECK(attribution_method_from_string("grad-input") == AttributionMethod::grad_input);
    CHECK(attribution_method_from_string("integrated_gradients") == AttributionMethod::integrated_gradients);
    CHECK_THROWS_AS(attribution_method_from_string("lime"), ConfigError);
}

TEST_CASE("attention sinks: <eos> and punctuation, their share, and rows without them", "[agreement][sinks]") {
    CHECK(is_punctuation("."));
    CHECK(is_punctuation("«"));
    CHECK(is_punctuation("?!"));
    CHECK(is_punctuation("\xE2\x96\x81,"));  // "▁," a SentencePiece piece
    CHECK_FALSE(is_punctuation("a."));
    CHECK_FALSE(is_punctuation(""));
    CHECK_FALSE(is_punctuation("\xE2\x96\x81"));
    CHECK_FALSE(is_punctuation("\xff"));
    const std::vector<std::string> src{"the", "cat", ",", "sleeps", "<eos>"};
    const AttentionMatrix w{{0.1f, 0.1f, 0.2f, 0.1f, 0.5f}, {0.0f, 0.8f, 0.0f, 0.2f, 0.0f}};
    const auto share = sink_share(w, src);
    CHECK(share[0] == Approx(0.7));
    CHECK(share[1] == Approx(0.0));
    CHECK(sink_flags(w, src) == std::vector<bool>{true, false});
    const auto clean = without_sinks(w, src);
    CHECK(clean[0][2] == 0.0f);
    CHECK(clean[0][4] == 0.0f);
    CHECK(clean[0][0] == Approx(1.0 / 3));
    CHECK(clean[1] == w[1]);
    Translation t;
    t.src_tokens = src;
    Hypothesis h;
    h.attention.at(AttentionMapId{}).weights = w;
    t.hypotheses.push_back(h);
    const Translation e = exclude_sinks(t);
    CHECK(e.best().attention.weights() == clean);
    CHECK(e.merged == sinks_excluded_note);
}

TEST_CASE("interventions: the command line's forms, checks and descriptions", "[intervention]") {
    CHECK(parse_intervention("uniform").kind == InterventionKind::uniform);
    CHECK(parse_intervention("permute").kind == InterventionKind::permute);
    const auto z = parse_intervention("zero=2");
    CHECK(z.kind == InterventionKind::zero_token);
    CHECK(z.source_token == 2);
    const auto w = parse_intervention("weights=0.5,0.25,0.25");
    CHECK(w.weights == std::vector<float>{0.5f, 0.25f, 0.25f});
    const auto h = parse_intervention("head-off=1:3");
    CHECK(h.head == AttentionMapId{AttentionKind::cross, 1, 3});
    CHECK(parse_intervention("head-off=decoder_self:0:1").head.kind == AttentionKind::decoder_self);
    for (const char* bad : {"", "uniformly", "uniform=1", "zero=", "zero=x", "zero=-1", "weights=1,x", "weights=0,0",
                            "weights=-1,2", "head-off=1", "head-off=encoder_self:0:0", "head-off=a:b"})
        CHECK_THROWS_AS(parse_intervention(bad), ConfigError);
    Intervention at;
    at.kind = InterventionKind::uniform;
    at.step = 2;
    CHECK(at.applies_at(2));
    CHECK_FALSE(at.applies_at(1));
    CHECK(at.describe() == "uniform attention at step 2");
    CHECK(at.to_json()["step"] == 2);
    DecodeOptions d;
    d.intervention = at;
    d.beam_size = 4;
    CHECK_THROWS_AS(d.validate(), ConfigError);  // greedy only
    d.beam_size = 1;
    CHECK_NOTHROW(d.validate());
    CHECK(d.to_json()["intervention"]["kind"] == "uniform");
    CHECK_FALSE(DecodeOptions{}.to_json().contains("intervention"));
}

TEST_CASE("the web page is well formed, self-contained, and carries the data escaped", "[web_page]") {
    SentenceAttribution s = sample();
    s.input = "</script><script>alert(1)</script> http://example.org";
    s.source[0] = "<b>&";
    s.source[1] = "href=x src=y url(z) @import";  // inert words, but the page holds none of them
    s.top_k = {{{4, "un", 0.9f}}, {{5, "chat", 0.8f}}, {{2, "<eos>", 0.99f}}};
    WebPageOptions o;
    o.title = "a <title> & more";
    o.model = "m.ckpt // test (href=x)";
    const std::string page = web_page({s, sample()}, o);
    INFO(page.substr(0, 400));
    CHECK(testing::web_page_problem(page).empty());
    CHECK(page.find("</script><script>alert") == std::string::npos);
    CHECK(page.find("attnviz-data") != std::string::npos);
    // The data reads back as JSON once the script element's text is taken out.
    const auto open = page.find("id=\"attnviz-data\">") + std::string("id=\"attnviz-data\">").size();
    const auto close = page.find("</script>", open);
    const auto data = nlohmann::json::parse(page.substr(open, close - open));
    CHECK(data["sentences"].size() == 2);
    CHECK(data["sentences"][0]["input"] == s.input);
    CHECK(data["sentences"][0]["source"][0] == "<b>&");
    CHECK(data["sentences"][0]["source"][1] == s.source[1]);
    CHECK(data["sentences"][0]["steps"][0]["top_k"][0]["token"] == "un");
    // The checker itself catches what it is for.
    CHECK_FALSE(testing::web_page_problem("<!DOCTYPE html><html><script src=\"x.js\"></script></html>").empty());
    CHECK_FALSE(testing::web_page_problem("<!DOCTYPE html><html><body></html>").empty());
    CHECK_FALSE(testing::web_page_problem("<!DOCTYPE html><html><p>http://x</p></html>").empty());
}

namespace {
/// A record of a 2-layer, 2-head model for sample(): cross 3x4, encoder_self 4x4, decoder_self
/// 3 causal rows, every map different (its entries name kind, layer and head).
AttentionRecord page_record() {
    AttentionRecord r;
    auto fill = [&](AttentionKind kind, int layer, int head, size_t rows, size_t cols, bool causal) {
        AttentionMap m;
        m.id = {kind, layer, head};
        for (size_t q = 0; q < rows; ++q) {
            const size_t n = causal ? q + 1 : cols;
            std::vector<float> row(n);
            float sum = 0;
            for (size_t k = 0; k < n; ++k) sum += row[k] = 1.0f + float(k == q % n) * float(1 + layer * 2 + head);
            for (float& v : row) v /= sum;
            m.weights.push_back(row);
        }
        r.maps.push_back(m);
    };
    fill(AttentionKind::cross, 1, -1, 3, 4, false);  // the primary map: last layer's mean, as a Transformer records it
    for (int l = 0; l < 2; ++l)
        for (int h = 0; h < 2; ++h) {
            fill(AttentionKind::cross, l, h, 3, 4, false);
            fill(AttentionKind::encoder_self, l, h, 4, 4, false);
            fill(AttentionKind::decoder_self, l, h, 3, 3, true);
        }
    return r;
}

nlohmann::json page_data_of(const std::string& page) {
    const auto open = page.find("id=\"attnviz-data\">") + std::string("id=\"attnviz-data\">").size();
    const auto close = page.find("</script>", open);
    return nlohmann::json::parse(page.substr(open, close - open));
}
}  // namespace

TEST_CASE("the web page's head view: every kind, layer and head, means, rollouts, within the bound", "[web_page]") {
    const SentenceAttribution s = sample();
    const AttentionRecord r = page_record();
    WebPageOptions o;
    o.model = "tf.ckpt: Transformer: d 16, 2+2 layers, 2 heads, ffn 24";
    const std::string page = web_page({s}, o, {r});
    CHECK(testing::web_page_problem(page).empty());
    CHECK(page.find("Transformer: d 16, 2+2 layers, 2 heads") != std::string::npos);
    const auto heads = page_data_of(page)["sentences"][0]["heads"];
    REQUIRE(heads["kinds"].size() == 3);
    CHECK(heads["default"] == nlohmann::json({{"kind", "cross"}, {"layer", 1}, {"head", "mean"}}));
    for (const auto& k : heads["kinds"]) {
        const AttentionKind kind = attention_kind_from_string(k["kind"]);
        INFO(k["kind"]);
        REQUIRE(k["layers"].size() == 2);
        for (int l = 0; l < 2; ++l) {
            REQUIRE(k["layers"][l]["heads"].size() == 2);
            for (int h = 0; h < 2; ++h) {
                const auto& want = r.find({kind, l, h})->weights;
                const auto& got = k["layers"][l]["heads"][h];
                REQUIRE(got.size() == want.size());
                for (size_t q = 0; q < want.size(); ++q) {
                    REQUIRE(got[q].size() == want[q].size());
                    for (size_t c = 0; c < want[q].size(); ++c) CHECK(got[q][c].get<double>() == Approx(want[q][c]).margin(1e-4));
                }
            }
            HeadSelection all;
            all.kind = kind;
            all.layer = l;
            const auto mean = r.select(all);
            CHECK(k["layers"][l]["mean"][0][0].get<double>() == Approx(mean[0][0]).margin(1e-4));
        }
        if (kind == AttentionKind::cross) {
            CHECK(k["rollout"].is_null());
            CHECK(k["rows"] == nlohmann::json(s.output));
            CHECK(k["columns"] == nlohmann::json(s.source));
        } else {
            const auto rollout = r.rollout(kind);
            REQUIRE(k["rollout"].size() == rollout.size());
            CHECK(k["rollout"][1][0].get<double>() == Approx(rollout[1][0]).margin(1e-4));
        }
        if (kind == AttentionKind::decoder_self) CHECK(k["columns"] == nlohmann::json({"<bos>", "un", "chat"}));
        if (kind == AttentionKind::encoder_self) CHECK(k["rows"] == nlohmann::json(s.source));
    }
    // One map (the RNN's): no head view.
    AttentionRecord one;
    one.maps.push_back(r.maps.at(1));
    CHECK_FALSE(page_data_of(web_page({s}, o, {one}))["sentences"][0].contains("heads"));
    CHECK_FALSE(page_data_of(web_page({s}, o))["sentences"][0].contains("heads"));
    // The bound: the cost counts the maps, and a page beyond the bound is refused before it is built.
    const int64_t with_maps = web_page_cost({s}, {r}), without = web_page_cost({s}, {});
    CHECK(with_maps > without);
    CHECK(with_maps - without >= 48 * (2 * 3 * 3 * 4 + (2 * 3 + 1) * 4 * 4 + (2 * 3 + 1) * 3 * 3));
    WebPageOptions tight = o;
    tight.memory_bound = with_maps - 1;
    try {
        (void)web_page({s}, tight, {r});
        FAIL("a page beyond the bound was written");
    } catch (const ConfigError& e) {
        CHECK(std::string(e.what()).find("fewer or shorter sentences") != std::string::npos);
    }
    tight.memory_bound = with_maps;
    CHECK_NOTHROW(web_page({s}, tight, {r}));
    CHECK_THROWS_AS(web_page({s, s}, o, {r}), ConfigError);  // a record per sentence
}

TEST_CASE("the web page's erasure table: removals per step and order, means, escaped tokens", "[web_page]") {
    SentenceAttribution s = sample();
    s.output[1] = "</script><b>chat</b> http://x";
    s.steps[1].token = s.output[1];
    SentenceErasure e;
    e.source = s.source;
    e.output = s.output;
    e.orders = all_erasure_orders();
    const std::vector<std::vector<std::optional<int64_t>>> removals{
        {1, 2, 2, 3}, {2, std::nullopt, 1, 4}, {1, 1, std::nullopt, std::nullopt}};
    for (size_t t = 0; t < 3; ++t) {
        StepErasure st;
        st.step = static_cast<int64_t>(t);
        st.token = s.output[t];
        for (size_t o = 0; o < 4; ++o) st.removals[e.orders[o]] = removals[t][o];
        e.steps.push_back(st);
    }
    WebPageOptions o;
    const std::string page = web_page({s, sample()}, o, {}, {e, SentenceErasure{}});
    INFO(page.substr(0, 400));
    CHECK(testing::web_page_problem(page).empty());
    CHECK(page.find("</script><b>chat") == std::string::npos);
    CHECK(page.find("<b>chat</b>") == std::string::npos);
    const auto data = page_data_of(page);
    REQUIRE(data["sentences"][0].contains("erasure"));
    const auto& er = data["sentences"][0]["erasure"];
    CHECK(er["orders"] == nlohmann::json({"attention", "grad_input", "integrated_gradients", "random"}));
    REQUIRE(er["steps"].size() == 3);
    for (size_t t = 0; t < 3; ++t)
        for (size_t k = 0; k < 4; ++k) {
            INFO("step " << t << ", order " << k);
            const auto& got = er["steps"][t]["removals"][to_string(e.orders[k])];
            if (removals[t][k]) CHECK(got == *removals[t][k]);
            else CHECK(got.is_null());
        }
    CHECK(er["steps"][1]["token"] == s.output[1]);  // escaped in the page, as given in the data
    CHECK(er["mean_removals"]["attention"].get<double>() == Approx(4.0 / 3.0));
    CHECK(er["mean_removals"]["grad_input"].get<double>() == Approx(1.5));
    CHECK(er["never"]["random"] == 1);
    CHECK_FALSE(er.contains("source"));  // the sentence's own
    // A sentence without steps, or a page without erasures, shows none.
    CHECK_FALSE(data["sentences"][1].contains("erasure"));
    CHECK_FALSE(page_data_of(web_page({s}, o))["sentences"][0].contains("erasure"));
    // The page's script builds the table and names the orders.
    CHECK(page.find("fewer removals") != std::string::npos);
    // The cost counts it; one erasure per sentence or none.
    CHECK(web_page_cost({s}, {}, {e}) > web_page_cost({s}, {}));
    WebPageOptions tight;
    tight.memory_bound = web_page_cost({s}, {}, {e}) - 1;
    CHECK_THROWS_AS(web_page({s}, tight, {}, {e}), ConfigError);
    tight.memory_bound += 1;
    CHECK_NOTHROW(web_page({s}, tight, {}, {e}));
    CHECK_THROWS_AS(web_page({s, s}, o, {}, {e}), ConfigError);
}
