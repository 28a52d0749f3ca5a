// The memory a step may take (core/model/memory_bound.hpp): long pairs that
// aborted training (issue 27, item 3) and sizes from small files that made
// decoding use many GB (item 4). A batch over the bound trains in chunks with the
// whole batch's gradient; a pair or a sentence that cannot fit alone is refused
// before any work, with a message naming it; decoding cuts its sentences into
// chunks; padded widths and forced targets are bounded.
#include "catch_torch.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <regex>

#include "core/data/corpus_reader.hpp"
#include "core/data/training_data.hpp"
#include "core/decode/search.hpp"
#include "core/io/error.hpp"
#include "core/model/memory_bound.hpp"
#include "core/train/split_step.hpp"
#include "core/train/train.hpp"
#include "test_support.hpp"

using namespace attnviz;
using attnviz::testing::ThreadCount;
using attnviz::testing::tiny_config;
using Catch::Contains;

namespace {

long max_rss_kb() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;
}

std::string words(size_t n, const char* word) {
    std::string s;
    for (size_t i = 0; i < n; ++i) s += (i ? " " : "") + std::string(word);
    return s;
}

/// `short_pairs` three-word pairs with, at line `long_line`, one pair of `long_words` words a side.
Corpus corpus_with_long_pair(size_t short_pairs, size_t long_line, size_t long_words) {
    std::string text;
    for (size_t line = 1; line <= short_pairs + 1; ++line)
        text += line == long_line ? words(long_words, "la") + "\t" + words(long_words, "le") + "\n"
                                  : std::string("a b c\tx y z\n");
    TsvOptions o;
    o.max_line_bytes = 0;  // only the hard limit: the long line is read
    return parse_tsv(text, "long.tsv", o);
}

TrainConfig one_batch(int64_t batch_size) {
    TrainConfig t;
    t.epochs = 1;
    t.batch_size = batch_size;
    t.val_fraction = 0;
    t.eval_sample = 0;
    t.device = "cpu";
    return t;
}

ModelConfig gru(int64_t hidden) {
    ModelConfig m;
    m.embed_size = 8;
    m.hidden_size = hidden;
    return m;
}

}  // namespace

TEST_CASE("a batch over the memory bound trains in chunks with the whole batch's loss and gradient", "[memory]") {
    ThreadCount threads(1);
    auto c = tiny_config(Scoring::additive);
    Seq2Seq m(c);
    m->to(torch::kDouble);
    m->train();
    // 20 short rows and one long one, in no order.
    std::vector<int64_t> src_lens, tgt_lens;
    std::mt19937 rng(3);
    for (int i = 0; i < 21; ++i) {
        src_lens.push_back(i == 9 ? 60 : 2 + static_cast<int64_t>(rng() % 5));
        tgt_lens.push_back(i == 9 ? 50 : 2 + static_cast<int64_t>(rng() % 5));
    }
    const auto r = attnviz::testing::ragged_batch(src_lens, tgt_lens, c.src_vocab, c.tgt_vocab, 4);
    Batch b;
    b.src = r.src, b.src_len = r.src_len, b.tgt_in = r.tgt_in, b.tgt_out = r.tgt_out;
    b.tgt_len = r.tgt_out.ne(Vocab::pad_id).sum(1);
    for (size_t i = 0; i < 21; ++i) b.index.push_back(100 + i);

    const ShapeCost cost = training_cost(*m);
    const int64_t bound = cost.bytes(1, 61, 51) * 2;  // the long row fits, the whole batch does not
    REQUIRE(cost.bytes(21, 61, 51) > bound);
    const auto chunks = split_batch(b, cost, 0, bound);
    REQUIRE(chunks.size() >= 2);
    int64_t rows = 0, tokens = 0;
    std::vector<size_t> index;
    for (const auto& ch : chunks) {
        CHECK(cost.bytes(ch.src.size(0), ch.src.size(1), ch.tgt_in.size(1)) <= bound);
        CHECK(ch.src.size(1) == ch.src_len.max().item<int64_t>());  // cut to its own longest source
        rows += ch.src.size(0);
        tokens += ch.target_tokens();
        index.insert(index.end(), ch.index.begin(), ch.index.end());
    }
    CHECK(rows == 21);
    CHECK(tokens == b.target_tokens());
    std::sort(index.begin(), index.end());
    CHECK(index == b.index);
    CHECK(split_batch(b, cost, 0, cost.bytes(21, 61, 51)).size() == 1);  // a batch that fits stays whole

    // Accumulated with each chunk's share of the tokens: the whole batch's mean loss and gradient.
    m->zero_grad();
    const double whole = split_loss_backward(*m, b, 1.0, 1);
    std::map<std::string, torch::Tensor> ref;
    for (const auto& p : m->named_parameters()) ref[p.key()] = p.value().grad().clone();
    m->zero_grad();
    double chunked = 0;
    for (const auto& ch : chunks) {
        const double share = double(ch.target_tokens()) / double(b.target_tokens());
        chunked += share * split_loss_backward(*m, ch, 1.0, 1, share);
    }
    CHECK(chunked == Approx(whole).epsilon(1e-10));
    for (const auto& p : m->named_parameters()) {
        INFO(p.key());
        CHECK(torch::allclose(p.value().grad(), ref.at(p.key()), 1e-9, 1e-11));
    }
}

TEST_CASE("a pair too long for the memory bound is refused before training, naming its line", "[memory]") {
    // 3000 words a side: one step of this GRU on it would ask for about 2.6 GB at once (the RNN's
    // training cost, core/model/family_costs.cpp; such a step once aborted the process).
    const Corpus corpus = corpus_with_long_pair(40, 7, 3000);
    REQUIRE(corpus.pairs.size() == 41);
    const TrainConfig t = one_batch(64);
    const long rss_before = max_rss_kb();
    std::string message;
    try {
        Trainer trainer(prepare_data(corpus, t), gru(64), t);
    } catch (const ConfigError& e) {
        message = e.what();
    }
    INFO(message);
    CHECK_THAT(message, Contains("long.tsv, line 7") && Contains("3000 source and 3000 target tokens") &&
                            Contains("GB") && Contains("--max-length"));
    CHECK(max_rss_kb() - rss_before < 100 * 1024);  // nothing of that size was asked for
    // The maximum length the message suggests leaves the pair out, and the rest trains.
    std::smatch m;
    REQUIRE(std::regex_search(message, m, std::regex("--max-length ([0-9]+)")));
    TrainConfig limited = t;
    limited.max_length = std::stoll(m[1]);
    CHECK(limited.max_length >= 3);
    CHECK(limited.max_length < 3000);
    Trainer trainer(prepare_data(corpus, limited), gru(64), limited);
    CHECK(trainer.data().train.size() == 40);
    CHECK(trainer.run() == StopReason::finished);
    // The same refusal when evaluating such pairs.
    Seq2Seq net(tiny_config(Scoring::additive));
    CHECK_THROWS_WITH(check_pairs_fit(corpus.pairs, training_cost(*net), 0, 0, corpus.name, "pair", 64 << 20),
                      Contains("long.tsv, line 7"));
}

TEST_CASE("one long pair among many short ones trains within the memory bound", "[memory]") {
    ThreadCount threads(2);
    // A batch of 1024 pairs: 1023 of three words and one of 500. Unbounded, the fused decoder
    // keeps [all target tokens × the longest source × attention] at once: about 600 MB here.
    const Corpus corpus = corpus_with_long_pair(1023, 500, 500);
    const TrainConfig t = one_batch(1024);
    Trainer trainer(prepare_data(corpus, t), gru(64), t);
    const int64_t bound = int64_t{200} << 20;
    trainer.set_step_memory_bound(bound);
    const long rss_before = max_rss_kb();
    REQUIRE(trainer.run() == StopReason::finished);
    const long grown_mb = (max_rss_kb() - rss_before) / 1024;
    INFO("peak RSS grew by " << grown_mb << " MB");
    CHECK(grown_mb < 350);
    CHECK(std::isfinite(trainer.history().epochs.back().train_loss));
    // A bound the long pair alone cannot fit is refused, naming it.
    CHECK_THROWS_WITH(trainer.set_step_memory_bound(int64_t{16} << 20), Contains("long.tsv, line 500"));
}

TEST_CASE("decoding cuts sentences into chunks within the memory bound and refuses one that cannot fit",
          "[memory][decode]") {
    Seq2Seq net(tiny_config(Scoring::additive));
    DecodeOptions o;
    o.beam_size = 3;
    const DecodeCost cost = decode_cost(*net, o, 30);
    CHECK(cost.beam == 3);
    CHECK(cost.steps == 30);
    // Widths 5, 400, 5, 5, 400: with room for about 2 wide sentences of 3 hypotheses a chunk.
    const std::vector<int64_t> width{5, 400, 5, 5, 400, 5};
    const int64_t bound = cost.bytes(2, 400) + 1;
    const auto chunks = plan_decode_chunks({0, 1, 2, 3, 4, 5}, width, 64, cost, bound);
    int64_t kept = 0;  // every sentence's kept maps stay while the chunks run
    for (int64_t w : width) kept += cost.kept_bytes(w);
    std::vector<size_t> order;
    for (const auto& ch : chunks) {
        int64_t widest = 0;
        for (size_t r : ch) widest = std::max(widest, width[r]);
        const auto n = static_cast<int64_t>(ch.size());
        CHECK(cost.per_sentence.bytes(n, widest, 30) + cost.per_hypothesis.bytes(3 * n, widest, 30) + kept <= bound);
        order.insert(order.end(), ch.begin(), ch.end());
    }
    CHECK(order == std::vector<size_t>{0, 1, 2, 3, 4, 5});  // every sentence, in order
    CHECK(chunks.size() >= 2);
    CHECK(plan_decode_chunks({0, 2, 3, 5}, width, 2, cost, bound).size() == 2);  // the batch size still applies
    CHECK_THROWS_WITH(plan_decode_chunks({0, 1}, width, 64, cost, cost.bytes(1, 100)),
                      Contains("sentence 2 is too long to decode") && Contains("beam of 3"));
    // Kept maps: each sentence fits alone, all of them together do not.
    const int64_t alone = cost.bytes(1, 400) + 9 * cost.kept_bytes(400) + 1;  // the widest with its 9 copies
    CHECK_NOTHROW(plan_decode_chunks({1}, width, 64, cost, alone, 9));
    CHECK_THROWS_WITH(plan_decode_chunks({0, 1, 2, 3, 4, 5}, width, 64, cost, alone, 9),
                      Contains("attention maps kept") && !Contains("too long"));

    // Through a model: a 300,000-token sentence at max length 1000 would keep ~2.5 GB of
    // attention rows per hypothesis: refused at once, naming it; the short one is not decoded either.
    const Vocab src = Vocab::build({{"a", "b"}}), tgt = Vocab::build({{"x", "y"}});
    auto c = tiny_config(Scoring::additive, static_cast<int64_t>(src.size()), static_cast<int64_t>(tgt.size()));
    const auto model = attnviz::testing::as_model(Seq2Seq(c), src, tgt);
    DecodeOptions d;
    d.max_length = 1000;
    const std::vector<std::vector<std::string>> sources{{"a", "b"}, std::vector<std::string>(300000, "a")};
    const long rss_before = max_rss_kb();
    CHECK_THROWS_WITH(model->translate_tokens(sources, d), Contains("sentence 2 is too long to decode"));
    CHECK(max_rss_kb() - rss_before < 100 * 1024);
    CHECK(model->translate_tokens({sources[0]}, d).front().hypotheses.size() == 1);

    // A forced target is decoded step by step: no longer than decoding's longest output.
    const std::vector<std::string> long_target(max_decode_length, "x");
    CHECK_THROWS_WITH(model->force_tokens({{"a"}}, {long_target}, ForceMode::reference, DecodeOptions{}),
                      Contains("at most 999"));
    const std::vector<std::string> longest(max_decode_length - 1, "x");
    const auto forced = model->force_tokens({{"a"}}, {longest}, ForceMode::reference, DecodeOptions{});
    CHECK(forced.front().best().ids.size() == static_cast<size_t>(max_decode_length));  // and its <eos>
}

TEST_CASE("padded widths from a file are bounded by what decoding can produce", "[memory][registry]") {
    // d2l's num_steps and --steps: 100,000 from a 200 KB file made every sentence that wide.
    ModelConfig m;
    m.source_steps = max_padded_steps + 1;
    CHECK_THROWS_WITH(m.validate(), Contains("--source-steps") && Contains("0..1000"));
    m.source_steps = max_padded_steps;
    CHECK_NOTHROW(m.validate());
    TrainConfig t;
    t.fixed_steps = 100000;
    CHECK_THROWS_WITH(t.validate(), Contains("--steps") && Contains("0..1000"));
}

TEST_CASE("a file decodes shortest first in batches bounded by tokens, results in input order", "[decode][batch]") {
    Seq2Seq net(tiny_config(Scoring::additive));
    const DecodeCost cost = decode_cost(*net, DecodeOptions{}, 30);
    // Chunks by padded tokens: 3 short sentences share one, each wide one is alone.
    const std::vector<int64_t> width{3, 3, 3, 10, 10};
    const auto chunks = plan_decode_chunks({0, 1, 2, 3, 4}, width, 64, cost, int64_t{1} << 40, 0, 12);
    CHECK(chunks == std::vector<std::vector<size_t>>{{0, 1, 2}, {3}, {4}});
    // A sentence wider than the token budget still decodes, alone.
    CHECK(plan_decode_chunks({3, 4}, width, 64, cost, int64_t{1} << 40, 0, 5).size() == 2);
    // Refusals name the first sentence in input order, whatever order the chunks take.
    CHECK_THROWS_WITH(plan_decode_chunks({4, 1, 3}, std::vector<int64_t>{3, 400, 3, 400, 3}, 64, cost, cost.bytes(1, 100)),
                      Contains("sentence 2 is too long"));

    // Through a model: the chunk decoder sees sentences shortest first; results keep input order.
    const Vocab src = Vocab::build({{"a", "b", "c"}}), tgt = Vocab::build({{"x", "y"}});
    auto c = tiny_config(Scoring::additive, static_cast<int64_t>(src.size()), static_cast<int64_t>(tgt.size()));
    const auto model = attnviz::testing::as_model(Seq2Seq(c), src, tgt);
    const std::vector<std::vector<std::string>> sources{
        {"a", "b", "c", "a", "b", "c"}, {"a"}, {"b", "c", "a"}, {"c", "c"}, std::vector<std::string>(9, "b")};
    DecodeOptions d;
    d.max_length = 5;
    std::vector<Translation> alone;
    for (const auto& s : sources) alone.push_back(model->translate_tokens({s}, d).front());
    for (const int64_t tokens : {int64_t{0}, int64_t{8}}) {
        d.batch_tokens = tokens;
        d.batch_size = 2;
        const auto all = model->translate_tokens(sources, d);
        REQUIRE(all.size() == sources.size());
        for (size_t i = 0; i < sources.size(); ++i) {
            INFO("sentence " << i << ", batch tokens " << tokens);
            CHECK(all[i].src_tokens == alone[i].src_tokens);
            CHECK(all[i].best().ids == alone[i].best().ids);
        }
    }
}
