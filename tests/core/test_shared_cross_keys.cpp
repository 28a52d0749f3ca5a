// Beam search's rows sharing their sentence's cross-attention keys (PretrainedCache::cross_group,
// attend_heads over fewer key rows than queries): the same outputs, weights and scores as every
// row holding its own copy, for the pretrained family (Marian's layout) and T5; the groups kept
// while a reordering stays within them and given up when it mixes them.
#include "catch_torch.hpp"

#include <vector>

#include <nlohmann/json.hpp>

#include "core/config/pretrained_config.hpp"
#include "core/model/attention_blocks.hpp"
#include "core/model/pretrained_model.hpp"
#include "test_support.hpp"

using namespace attnviz;

namespace {

torch::Tensor longs(std::vector<int64_t> v) { return torch::tensor(v, torch::kLong); }

/// A tiny random network of the family: Marian's layout, or T5 (gated-gelu, relative buckets).
Network tiny_network(bool t5) {
    ModelConfig c = testing::marian_config();  // d 16, 1 + 2 layers, 2 and 4 heads, vocabulary 9
    if (t5) {
        auto spec = std::make_shared<PretrainedSpec>();
        const auto j = nlohmann::json{{"model_type", "t5"},          {"d_model", 16},
                                      {"d_kv", 4},                   {"d_ff", 24},
                                      {"num_layers", 1},             {"num_decoder_layers", 2},
                                      {"num_heads", 4},              {"relative_attention_num_buckets", 8},
                                      {"relative_attention_max_distance", 16}, {"vocab_size", 9},
                                      {"feed_forward_proj", "gated-gelu"},     {"tie_word_embeddings", false},
                                      {"pad_token_id", 0},           {"eos_token_id", 1},
                                      {"decoder_start_token_id", 0}};
        spec->model = t5_config_from_json(j, "test config");
        c.pretrained = spec;
    }
    c.src_vocab = c.tgt_vocab = 9;
    Network net = build_network(c);
    torch::NoGradGuard ng;
    torch::manual_seed(t5 ? 23 : 21);
    for (auto& w : net->parameters()) w.normal_(0.0, 0.5);
    net->to(torch::kDouble);
    net->eval();
    return net;
}

/// The cache with every row's own copy of its sentence's keys (what the cache held before).
std::unique_ptr<DecoderCache> expanded(const DecoderCache& grouped) {
    auto copy = grouped.clone();
    auto& c = dynamic_cast<PretrainedCache&>(*copy);
    const int64_t g = c.cross_group;
    for (auto* list : {&c.cross_k, &c.cross_v})
        for (auto& t : *list) t = t.repeat_interleave(g, 0);
    c.cross_group = 1;
    return copy;
}

void check_same_step(const StepOutput& got, const StepOutput& want) {
    REQUIRE(torch::allclose(got.logits, want.logits, 1e-12, 1e-12));
    REQUIRE(torch::allclose(got.context, want.context, 1e-12, 1e-12));
    REQUIRE(got.maps.size() == want.maps.size());
    for (size_t i = 0; i < got.maps.size(); ++i) {
        REQUIRE(torch::allclose(got.maps[i].weights, want.maps[i].weights, 1e-12, 1e-12));
        if (want.maps[i].scores.defined())
            REQUIRE(torch::allclose(got.maps[i].scores, want.maps[i].scores, 1e-12, 1e-12, /*equal_nan=*/true));
    }
}

}  // namespace

TEST_CASE("attention over keys shared by a group of rows equals each row with its own copy: outputs, "
          "weights and scores, with a bias per row, given weights and heads switched off",
          "[decode][beam]") {
    torch::manual_seed(31);
    const int64_t G = 3, g = 4, h = 2, S = 6, dh = 5;
    const auto q = torch::randn({G * g, h, 1, dh}, torch::kDouble);
    const auto k = torch::randn({G, h, S, dh}, torch::kDouble), v = torch::randn({G, h, S, dh}, torch::kDouble);
    auto mask = torch::ones({G * g, S}, torch::kBool);
    mask.index_put_({torch::indexing::Slice(0, g), torch::indexing::Slice(4, S)}, false);  // sentence 0: 4 tokens
    mask.index_put_({g + 1, 2}, false);  // one row's own erased key
    const auto bias = key_bias(mask).to(torch::kDouble);
    const auto kk = k.repeat_interleave(g, 0), vv = v.repeat_interleave(g, 0);
    for (int variant = 0; variant < 3; ++variant) {
        torch::Tensor given, heads;
        if (variant == 1) given = torch::softmax(torch::randn({G * g, 1, 1, S}, torch::kDouble), -1);
        if (variant == 2) heads = torch::tensor({1.0, 0.0}, torch::kDouble);
        const auto got = attend_heads(q, k, v, 0.3, bias, 0.0, false, true, given, heads);
        const auto want = attend_heads(q, kk, vv, 0.3, bias, 0.0, false, true, given, heads);
        CHECK(got.merged.sizes() == want.merged.sizes());
        CHECK(torch::allclose(got.merged, want.merged, 1e-12, 1e-12));
        CHECK(torch::allclose(got.weights, want.weights, 1e-12, 1e-12));
        CHECK(torch::allclose(got.scores, want.scores, 1e-12, 1e-12, /*equal_nan=*/true));
    }
    // A broadcast bias of one row; and a grouping that does not divide the rows.
    const auto one = key_bias(torch::ones({1, S}, torch::kBool)).to(torch::kDouble);
    CHECK(torch::allclose(attend_heads(q, k, v, 1.0, one, 0.0, false, false).merged,
                          attend_heads(q, kk, vv, 1.0, one, 0.0, false, false).merged, 1e-12, 1e-12));
    CHECK_THROWS_AS(attend_heads(q.narrow(0, 0, 5), k, v, 1.0, {}, 0.0, false, false), std::logic_error);
}

TEST_CASE("repeated_row_group finds beam search's layout of an encoding's rows and nothing else", "[decode][beam]") {
    CHECK(repeated_row_group(longs({0, 0, 0, 0, 1, 1, 1, 1})) == 4);
    CHECK(repeated_row_group(longs({0, 0, 1, 1, 2, 2})) == 2);
    CHECK(repeated_row_group(longs({0, 1, 2})) == 1);
    CHECK(repeated_row_group(longs({0, 0, 1})) == 1);           // groups of unequal size
    CHECK(repeated_row_group(longs({1, 1, 0, 0})) == 1);        // not in order
    CHECK(repeated_row_group(longs({0, 0, 0, 0})) == 4);        // one sentence, 4 beams
    CHECK(repeated_row_group(longs({3})) == 1);
    CHECK(repeated_row_group(torch::Tensor()) == 1);
    const auto x = torch::arange(12).view({6, 2});
    CHECK(torch::equal(every_nth_row(x, 3), x.index_select(0, longs({0, 3}))));
    CHECK(every_nth_row(x, 1).data_ptr() == x.data_ptr());
}

TEST_CASE("a beam's rows share their sentence's cross-attention keys in Marian's and T5's decoder: each step "
          "as with a copy per row, through reorderings within sentences and one that mixes them",
          "[decode][beam]") {
    const bool t5 = GENERATE(false, true);
    INFO((t5 ? "T5" : "Marian"));
    torch::NoGradGuard ng;
    Network net = tiny_network(t5);
    const int64_t B = 2, K = 3;
    const auto src = longs({4, 5, 6, 7, 2, 8, 3, 2}).view({B, 4});
    const auto len = longs({4, 4});
    const auto enc = net->encode(src, len, true)->select(torch::arange(B).repeat_interleave(K));
    auto cache = net->start(*enc);
    const auto& grouped = dynamic_cast<const PretrainedCache&>(*cache);
    REQUIRE(grouped.cross_group == K);
    REQUIRE(grouped.cross_k.front().size(0) == B);  // one copy per sentence
    auto reference = expanded(*cache);
    torch::manual_seed(5);
    const std::vector<std::vector<int64_t>> reorderings{
        {0, 0, 1, 3, 5, 4},  // within each sentence
        {0, 1, 2, 3, 4, 5},  // nothing moves
        {2, 2, 2, 4, 3, 3},
        {0, 4, 1, 3, 5, 2},  // rows of two sentences in one group: a copy per row from here
        {1, 1, 0, 5, 5, 4}};
    for (size_t step = 0; step <= reorderings.size(); ++step) {
        const auto tokens = torch::randint(3, 9, {B * K}, torch::kLong);
        check_same_step(net->step(tokens, *cache, *enc), net->step(tokens, *reference, *enc));
        if (step == reorderings.size()) break;
        const void* before = grouped.cross_k.front().data_ptr();
        const auto rows = longs(reorderings[step]);
        cache->select(rows);
        reference->select(rows);
        if (step < 3) {
            CHECK(grouped.cross_group == K);
            CHECK(grouped.cross_k.front().data_ptr() == before);  // the same sentences: nothing copied
        } else {
            CHECK(grouped.cross_group == 1);
            CHECK(grouped.cross_k.front().size(0) == B * K);
        }
    }
}

TEST_CASE("a beam's groups follow a reordering that moves whole sentences, and a copied cache keeps its own",
          "[decode][beam]") {
    torch::NoGradGuard ng;
    Network net = tiny_network(false);
    const int64_t B = 3, K = 2;
    const auto src = longs({4, 5, 2, 6, 7, 2, 8, 3, 2}).view({B, 3});
    const auto enc = net->encode(src, longs({3, 3, 3}), false)->select(torch::arange(B).repeat_interleave(K));
    auto cache = net->start(*enc);
    auto reference = expanded(*cache);
    // Sentence 2's beams in sentence 0's rows (as a search reorders whole sentences): still groups.
    const auto rows = longs({5, 4, 2, 3, 0, 1});
    cache->select(rows);
    reference->select(rows);
    const auto& grouped = dynamic_cast<const PretrainedCache&>(*cache);
    CHECK(grouped.cross_group == K);
    const auto tokens = longs({4, 5, 6, 7, 8, 3});
    auto copy = cache->clone();
    const auto first = net->step(tokens, *cache, *enc);
    check_same_step(first, net->step(tokens, *reference, *enc));
    check_same_step(net->step(tokens, *copy, *enc), first);  // the copy, one step behind, steps on its own
    const auto& copied = dynamic_cast<const PretrainedCache&>(*copy);
    CHECK(copied.cross_group == K);
    CHECK(copied.steps == 1);
    CHECK(grouped.steps == 1);
}
