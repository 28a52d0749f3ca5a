// Erasure flip curves (core/analysis/erasure.hpp): a model whose attention cannot matter never
// flips, a trained reverse model flips by attention, the random order is reproducible, and the
// counts equal a brute-force re-run of the model with those positions' attention zeroed.
#include "catch_torch.hpp"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "core/analysis/erasure.hpp"
#include "core/io/error.hpp"
#include "core/model/families.hpp"
#include "test_support.hpp"
#include "tiny_transformer.hpp"
#include "trained_reverse.hpp"

using namespace attnviz;

namespace {

/// The tiny Transformer with sharp maps (tests/support/tiny_transformer.hpp).
TranslationModelPtr erasure_test_transformer() { return testing::sharp_tiny_transformer(); }

/// The argmax at step t of the best hypothesis, the decoder run from its start on one row with the
/// outputs before t given and step t attending as `intervene` says from the weights it would use.
template <class Intervene>
int64_t erasure_brute_argmax(const TranslationModel& model, const Translation& tr, int64_t t, Intervene intervene) {
    c10::InferenceMode inference;
    EncoderDecoder& net = *model.network();
    std::vector<int64_t> ids;
    for (const auto& tok : tr.src_tokens) ids.push_back(model.src_vocab().id(tok));
    const auto S = static_cast<int64_t>(ids.size());
    const auto enc = net.encode(torch::tensor(ids).unsqueeze(0), torch::tensor({S}), false);
    auto cache = net.start(*enc);
    int64_t previous = Vocab::bos_id;
    for (int64_t i = 0; i < t; ++i) {
        net.step(torch::tensor({previous}), *cache, *enc);
        previous = tr.best().ids[static_cast<size_t>(i)];
    }
    const auto copy = cache->clone();
    const auto own = net.step(torch::tensor({previous}), *copy, *enc);
    const AttentionIntervention iv = intervene(own);
    return net.step(torch::tensor({previous}), *cache, *enc, &iv).logits[0].argmax().item<int64_t>();
}

std::vector<Translation> erasure_test_translations(const TranslationModel& model,
                                                   const std::vector<std::vector<std::string>>& sources) {
    DecodeOptions d;
    d.maps = MapsKept::primary;
    return model.translate_tokens(sources, d);
}

}  // namespace

TEST_CASE("erasure: no order flips a model whose cross heads are all masked", "[erasure]") {
    const auto model = erasure_test_transformer();
    EncoderDecoder& net = *model->network();
    std::vector<AttentionMapId> cross;
    for (int l = 0; l < 2; ++l)
        for (int h = 0; h < 4; ++h) cross.push_back({AttentionKind::cross, l, h});
    ScopedHeadGates masked(net, HeadGates::mask(net.head_groups(), cross));
    const auto translations = erasure_test_translations(*model, {{"a", "b", "c", "d"}, {"e", "c", "a"}});
    ErasureOptions o;
    o.ig_steps = 4;
    size_t steps = 0;
    for (size_t i = 0; i < translations.size(); ++i) {
        const SentenceErasure e = erase_sentence(*model, translations[i], o, i);
        CHECK((e.orders == all_erasure_orders()));
        REQUIRE(e.steps.size() == translations[i].best().ids.size());
        for (const auto& st : e.steps) {
            ++steps;
            for (auto order : all_erasure_orders()) {
                INFO("sentence " << i << " step " << st.step << " order " << to_string(order));
                CHECK_FALSE(st.removals.at(order).has_value());
                CHECK(st.order.at(order).size() == translations[i].src_tokens.size());
            }
        }
        for (auto order : all_erasure_orders()) {
            CHECK_FALSE(e.mean_removals(order).has_value());
            CHECK(e.never(order) == e.steps.size());
        }
    }
    CHECK(steps >= 2);
}

TEST_CASE("erasure: erasing by attention flips a trained reverse model's decisions within S removals", "[erasure]") {
    const auto model = testing::trained_reverse();
    std::vector<std::vector<std::string>> sources;
    for (const auto& p : testing::reverse_test_pairs(6)) sources.push_back(p.src);
    const auto translations = erasure_test_translations(*model, sources);
    ErasureOptions o;
    o.orders = {ErasureOrder::attention, ErasureOrder::grad_input, ErasureOrder::random};
    ErasureSummary summary;
    size_t flipped = 0, steps = 0;
    for (size_t i = 0; i < translations.size(); ++i) {
        const SentenceErasure e = erase_sentence(*model, translations[i], o, i);
        summary.add(e);
        const auto S = static_cast<int64_t>(translations[i].src_tokens.size());
        for (const auto& st : e.steps) {
            ++steps;
            const auto k = st.removals.at(ErasureOrder::attention);
            if (!k) continue;
            ++flipped;
            CHECK(*k >= 1);
            CHECK(*k <= S);
        }
    }
    // The reverse task reads one source symbol per output symbol: removing what it attends to
    // changes most decisions (the <eos> step may survive on position alone).
    CHECK(flipped * 2 > steps);
    CHECK(summary.steps == steps);
    CHECK(summary.flipped.at(ErasureOrder::attention) == flipped);
    CHECK(summary.mean.at(ErasureOrder::attention) >= 1.0);
    const auto race = summary.attention_vs.at(ErasureOrder::random);
    CHECK(race.sooner + race.same + race.later + race.neither == steps);
    CHECK(race.sooner > race.later);  // attention explains the decisions better than chance
    const nlohmann::json j = summary.to_json();
    for (const char* key : {"steps", "orders", "flipped", "mean_removals", "median_removals", "attention_vs"})
        CHECK(j.contains(key));
    CHECK(summary.to_text().find("attention vs random") != std::string::npos);
}

TEST_CASE("erasure: the random order is a permutation reproducible from its seed", "[erasure]") {
    const auto a = random_erasure_order(9, 7, 2, 3);
    CHECK(a == random_erasure_order(9, 7, 2, 3));
    CHECK(std::set<int64_t>(a.begin(), a.end()).size() == 9);
    CHECK(*std::max_element(a.begin(), a.end()) == 8);
    CHECK(a != random_erasure_order(9, 8, 2, 3));
    CHECK(a != random_erasure_order(9, 7, 3, 3));
    CHECK(a != random_erasure_order(9, 7, 2, 4));
    // Through a sentence: the same removals run after run, from the seed alone.
    const auto model = testing::trained_reverse();
    const auto tr = erasure_test_translations(*model, {{"a", "c", "e", "g", "i", "b"}}).at(0);
    ErasureOptions o;
    o.orders = {ErasureOrder::random};
    o.seed = 11;
    const auto first = erase_sentence(*model, tr, o, 4), second = erase_sentence(*model, tr, o, 4);
    REQUIRE(first.steps.size() == second.steps.size());
    for (size_t t = 0; t < first.steps.size(); ++t) {
        CHECK(first.steps[t].order.at(ErasureOrder::random) ==
              random_erasure_order(7, 11, 4, static_cast<int64_t>(t)));
        CHECK(first.steps[t].removals.at(ErasureOrder::random) == second.steps[t].removals.at(ErasureOrder::random));
    }
}

TEST_CASE("erasure: the counts equal re-running the RNN with those positions' attention zeroed", "[erasure]") {
    // The brute force renormalises the step's own weights by hand and gives them as the step's
    // cross_weights (what-if's path), not through erasure's cross_erased.
    const auto model = testing::trained_reverse();
    std::vector<std::vector<std::string>> sources;
    for (const auto& p : testing::reverse_test_pairs(3)) sources.push_back(p.src);
    const auto translations = erasure_test_translations(*model, sources);
    ErasureOptions o;
    o.ig_steps = 8;
    o.memory_bound = 1 << 20;  // small passes: the rows of a step run in several
    int checked = 0;
    for (size_t i = 0; i < translations.size(); ++i) {
        const Translation& tr = translations[i];
        const auto S = static_cast<int64_t>(tr.src_tokens.size());
        const SentenceErasure e = erase_sentence(*model, tr, o, i);
        for (const auto& st : e.steps)
            for (auto order : all_erasure_orders()) {
                const auto& positions = st.order.at(order);
                auto argmax_after = [&](int64_t k) {
                    return erasure_brute_argmax(*model, tr, st.step, [&](const StepOutput& own) {
                        auto w = own.maps.at(0).weights.clone();
                        for (int64_t j = 0; j < k; ++j) w[0][positions[static_cast<size_t>(j)]] = 0.0f;
                        const float rest = w.sum().item<float>();
                        AttentionIntervention iv;
                        iv.cross_weights = rest > 0 ? w / rest : w;
                        return iv;
                    });
                };
                const int64_t top = model->tgt_vocab().id(st.token);
                const auto k = st.removals.at(order);
                INFO("sentence " << i << " step " << st.step << " order " << to_string(order));
                CHECK(argmax_after(0) == top);
                if (k) {
                    CHECK(argmax_after(*k) != top);
                    for (int64_t j = 1; j < *k; ++j) CHECK(argmax_after(j) == top);
                } else {
                    for (int64_t j = 1; j <= S; ++j) CHECK(argmax_after(j) == top);
                }
                ++checked;
            }
    }
    CHECK(checked >= 12);
}

TEST_CASE("erasure: a Transformer's every cross head drops the erased positions and renormalises", "[erasure]") {
    const auto model = erasure_test_transformer();
    const auto tr = erasure_test_translations(*model, {{"a", "b", "c", "d", "e"}}).at(0);
    REQUIRE(tr.best().ids.size() >= 2);
    const int64_t t = 1;
    const std::vector<int64_t> erased{1, 3};
    // The step's maps with and without the erasure: every head's weights zero there, the rest in proportion.
    std::vector<StepMap> own_maps, erased_maps;
    erasure_brute_argmax(*model, tr, t, [&](const StepOutput& own) {
        own_maps = own.maps;
        AttentionIntervention iv;
        iv.cross_erased = torch::zeros({1, 6}, torch::kBool);
        for (int64_t p : erased) iv.cross_erased[0][p] = true;
        return iv;
    });
    {
        c10::InferenceMode inference;
        EncoderDecoder& net = *model->network();
        std::vector<int64_t> ids;
        for (const auto& tok : tr.src_tokens) ids.push_back(model->src_vocab().id(tok));
        const auto enc = net.encode(torch::tensor(ids).unsqueeze(0), torch::tensor({int64_t{6}}), false);
        auto cache = net.start(*enc);
        net.step(torch::tensor({Vocab::bos_id}), *cache, *enc);
        AttentionIntervention iv;
        iv.cross_erased = torch::zeros({1, 6}, torch::kBool);
        for (int64_t p : erased) iv.cross_erased[0][p] = true;
        erased_maps = net.step(torch::tensor({tr.best().ids[0]}), *cache, *enc, &iv).maps;
    }
    REQUIRE(own_maps.size() == erased_maps.size());
    int heads = 0;
    const auto keep = torch::tensor({1.0f, 0.0f, 1.0f, 0.0f, 1.0f, 1.0f});
    for (size_t m = 0; m < own_maps.size(); ++m) {
        if (own_maps[m].id.kind != AttentionKind::cross || own_maps[m].id.head < 0) continue;
        const auto expected = own_maps[m].weights[0] * keep / (own_maps[m].weights[0] * keep).sum();
        INFO(describe(own_maps[m].id));
        const auto w = erased_maps[m].weights[0];
        CHECK((w * (1 - keep)).abs().sum().item<float>() == 0.0f);
        CHECK(w.sum().item<float>() == Approx(1.0f).margin(1e-5));
        // Layer 0's queries are the step's own: its weights are its own renormalised (a later
        // layer's queries read what the erased layers before it gave).
        if (own_maps[m].id.layer == 0) CHECK(w.allclose(expected, 1e-5, 1e-6));
        ++heads;
    }
    CHECK(heads == 8);
    // Every position erased: no attention at all (weights 0, not NaN).
    {
        c10::InferenceMode inference;
        EncoderDecoder& net = *model->network();
        std::vector<int64_t> ids;
        for (const auto& tok : tr.src_tokens) ids.push_back(model->src_vocab().id(tok));
        const auto enc = net.encode(torch::tensor(ids).unsqueeze(0), torch::tensor({int64_t{6}}), false);
        auto cache = net.start(*enc);
        AttentionIntervention iv;
        iv.cross_erased = torch::ones({1, 6}, torch::kBool);
        const auto out = net.step(torch::tensor({Vocab::bos_id}), *cache, *enc, &iv);
        CHECK(torch::isfinite(out.logits).all().item<bool>());
        CHECK(out.maps.at(1).weights.abs().sum().item<float>() == 0.0f);
    }
    // And erase_sentence's counts equal single-row re-runs with cross_erased (its passes batch them).
    ErasureOptions o;
    o.orders = {ErasureOrder::attention, ErasureOrder::random};
    const SentenceErasure e = erase_sentence(*model, tr, o);
    for (const auto& st : e.steps)
        for (auto order : o.orders) {
            const auto& positions = st.order.at(order);
            const int64_t top = model->tgt_vocab().id(st.token);
            std::optional<int64_t> flip;
            for (int64_t k = 1; k <= 6 && !flip; ++k)
                if (erasure_brute_argmax(*model, tr, st.step, [&](const StepOutput&) {
                        AttentionIntervention iv;
                        iv.cross_erased = torch::zeros({1, 6}, torch::kBool);
                        for (int64_t j = 0; j < k; ++j) iv.cross_erased[0][positions[static_cast<size_t>(j)]] = true;
                        return iv;
                    }) != top)
                    flip = k;
            INFO("step " << st.step << " order " << to_string(order));
            CHECK(st.removals.at(order) == flip);
        }
}

TEST_CASE("erasure: a sentence past the work bound is refused before any work, naming it", "[erasure][work]") {
    const auto model = erasure_test_transformer();
    const EncoderDecoder& net = *model->network();
    const std::vector<std::string> source{"a", "b", "c", "d", "e", "a", "b", "c"};
    const auto translations = erasure_test_translations(*model, {source});
    const Translation& t = translations.at(0);
    const auto S = static_cast<int64_t>(t.src_tokens.size()), T = static_cast<int64_t>(t.best().ids.size());
    ErasureOptions o;
    o.orders = {ErasureOrder::attention, ErasureOrder::random};  // no attribution: erasure's own work alone
    const int64_t work = erasure_work(net, S, T, o.orders.size());
    // More orders, more removals, longer sentences: more work.
    CHECK(erasure_work(net, S, T, 4) > work);
    CHECK(erasure_work(net, 2 * S, T, 2) > 2 * work);
    o.work_bound = work - 1;
    CHECK_THROWS_WITH(erase_sentence(*model, t, o, 4),
                      Catch::StartsWith("erasure of sentence 5: a sentence of " + std::to_string(S) + " source") &&
                          Catch::Contains("2 orders") && Catch::Contains("ATTNVIZ_WORK_BOUND"));
    // Over a corpus, checked before any sentence is erased: the first that passes it, named.
    const auto two = erasure_test_translations(*model, {{"a"}, source});
    CHECK_THROWS_WITH(check_erasure_fits(*model, two, o), Catch::StartsWith("erasure of sentence 2:"));
    o.work_bound = work;
    CHECK_NOTHROW(check_erasure_fits(*model, two, o));
    const SentenceErasure e = erase_sentence(*model, t, o, 4);
    CHECK(e.steps.size() == static_cast<size_t>(T));
    o.work_bound = -1;
    CHECK_THROWS_AS(erase_sentence(*model, t, o, 4), ConfigError);
}
