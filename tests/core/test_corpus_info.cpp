// The corpus summary the GUI shows: its sizes are prepare_data's under the same settings.
#include "catch_torch.hpp"

#include "core/data/corpus_info.hpp"
#include "core/io/error.hpp"
#include "core/data/tasks.hpp"
#include "core/train/train.hpp"

using namespace attnviz;

namespace {

void check_matches_prepare_data(const Corpus& corpus, const TrainConfig& config) {
    const CorpusSummary s = summarize_corpus(corpus, config);
    const TrainingData d = prepare_data(corpus, config);
    CHECK(s.problem.empty());
    CHECK(s.train_pairs == d.train.size());
    CHECK(s.val_pairs == d.val.size());
    CHECK(s.src_vocab == d.src_vocab.size());
    CHECK(s.tgt_vocab == d.tgt_vocab.size());
    CHECK(s.skipped_lines == d.skipped_lines);
}

size_t sum(const std::vector<size_t>& v) {
    size_t n = 0;
    for (size_t x : v) n += x;
    return n;
}

}  // namespace

TEST_CASE("corpus summary: sizes are prepare_data's for the same data settings", "[corpus_info]") {
    TaskOptions o;
    o.num_pairs = 600;
    const Corpus corpus = task_corpus(TaskKind::toy_french, o);
    TrainConfig t;
    check_matches_prepare_data(corpus, t);

    // Every setting prepare_data reads changes the numbers the way it changes the data.
    t.min_freq = 3;
    t.max_length = 5;
    t.val_fraction = 0.25;
    t.seed = 9;
    check_matches_prepare_data(corpus, t);
    t.vocab_includes_val = true;
    t.split_shuffle = false;
    check_matches_prepare_data(corpus, t);

    const CorpusSummary s = summarize_corpus(corpus, t);
    CHECK(s.pairs == 600);
    CHECK(s.name == "toy-french");
    CHECK(s.train_pairs + s.val_pairs + s.too_long == s.pairs);
    CHECK(s.too_long > 0);
    // min_freq 3 drops rare words: the vocabularies shrink compared with min_freq 1.
    TrainConfig all = t;
    all.min_freq = 1;
    CHECK(summarize_corpus(corpus, all).src_vocab > s.src_vocab);
}

TEST_CASE("corpus summary: optimisation settings do not matter, histograms count every pair", "[corpus_info]") {
    TaskOptions o;
    o.num_pairs = 300;
    const Corpus corpus = task_corpus(TaskKind::reverse, o);
    TrainConfig a, b;
    b.lr = 123;  // invalid for training, irrelevant for the data
    b.epochs = 0;
    CHECK(same_data_settings(a, b));
    const CorpusSummary sa = summarize_corpus(corpus, a), sb = summarize_corpus(corpus, b);
    CHECK(sb.problem.empty());
    CHECK(sa.src_vocab == sb.src_vocab);
    CHECK(sa.train_pairs == sb.train_pairs);
    b.min_freq = 2;
    CHECK_FALSE(same_data_settings(a, b));

    const CorpusSummary s = summarize_corpus(corpus, a, 5);
    REQUIRE(s.src_lengths.size() == 5);
    REQUIRE(s.tgt_lengths.size() == 5);
    CHECK(sum(s.src_lengths) == 300);
    CHECK(sum(s.tgt_lengths) == 300);
    CHECK(s.src_lengths[4] > 0);  // lengths 3..8: everything from 4 up lands in the last bin
    CHECK(s.src_lengths[0] == 0);
    CHECK_THROWS_AS(summarize_corpus(corpus, a, 1), ConfigError);
}

TEST_CASE("corpus summary: skipped lines and unusable settings are reported", "[corpus_info]") {
    std::string text;
    for (int i = 0; i < 30; ++i) text += "a b c\tx y z\nno tab here\n";
    const Corpus corpus = parse_tsv(text, "bad.tsv");
    TrainConfig t;
    const CorpusSummary s = summarize_corpus(corpus, t);
    CHECK(s.pairs == 30);
    CHECK(s.skipped_lines == 30);
    CHECK(s.first_skipped.size() == max_skipped_listed);
    CHECK(s.first_skipped.front().line == 2);
    CHECK(s.problem.empty());

    t.max_length = 2;  // no pair is that short
    const CorpusSummary none = summarize_corpus(corpus, t);
    CHECK_FALSE(none.problem.empty());
    CHECK(none.problem.find("max length") != std::string::npos);
    CHECK(none.train_pairs == 0);
    CHECK(none.too_long == 30);
    CHECK(none.pairs == 30);  // what was read is still described

    t.max_length = 0;
    t.val_fraction = 1.5;  // out of range: reported, not thrown
    CHECK_FALSE(summarize_corpus(corpus, t).problem.empty());
}

TEST_CASE("prepare_data: the pairs filter_by_length and split_train_val give, vocabularies capped by max_vocab",
          "[corpus_info][max_vocab]") {
    TaskOptions o;
    o.num_pairs = 800;
    const Corpus corpus = task_corpus(TaskKind::toy_french, o);
    TrainConfig t;
    t.max_length = 6;
    t.val_fraction = 0.2;
    t.seed = 5;
    // prepare_data copies each pair once (by position); the result is the one of the
    // filter-then-split it replaced.
    const TrainingData d = prepare_data(corpus, t);
    const auto [train, val] =
        split_train_val(filter_by_length(corpus.pairs, 6), t.val_fraction, t.seed, t.split_shuffle);
    REQUIRE(d.train.size() == train.size());
    REQUIRE(d.val.size() == val.size());
    for (size_t i = 0; i < train.size(); ++i) CHECK((d.train[i].src == train[i].src && d.train[i].tgt == train[i].tgt));
    for (size_t i = 0; i < val.size(); ++i) CHECK((d.val[i].src == val[i].src && d.val[i].tgt == val[i].tgt));

    // The cap keeps the most frequent tokens of each side; the summary follows it.
    TrainConfig capped = t;
    capped.max_vocab = 10;
    const TrainingData c = prepare_data(corpus, capped);
    REQUIRE(d.src_vocab.size() > 4 + 10);
    CHECK(c.src_vocab.size() == 4 + 10);
    CHECK(c.tgt_vocab.size() == 4 + 10);
    for (size_t i = 0; i < 4 + 10; ++i) CHECK(c.src_vocab.tokens()[i] == d.src_vocab.tokens()[i]);
    const CorpusSummary s = summarize_corpus(corpus, capped);
    CHECK(s.src_vocab == 4 + 10);
    CHECK_FALSE(same_data_settings(t, capped));
    CHECK(data_settings(capped).max_vocab == 10);
}
