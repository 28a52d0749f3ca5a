// Corpora: the TSV reader, filtering, splitting and batching.
#include "catch_torch.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include <unistd.h>

#include <torch/torch.h>

#include "core/data/data.hpp"
#include "core/io/error.hpp"

using namespace attnviz;
using Tokens = std::vector<std::string>;

namespace {

std::string temp_path(const std::string& name) {
    return (std::filesystem::temp_directory_path() / ("attnviz_data_" + std::to_string(::getpid()) + "_" + name))
        .string();
}

std::vector<int64_t> row(const torch::Tensor& t, int64_t r) {
    auto c = t[r].contiguous();
    return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// Pairs whose lengths vary a lot, so bucketing has something to do.
std::vector<SentencePair> varied_pairs(size_t n) {
    std::vector<SentencePair> pairs;
    for (size_t i = 0; i < n; ++i) {
        const size_t len = 1 + (i * 7919) % 23;
        // Targets about as long as their sources, as in translation.
        pairs.push_back({Tokens(len, "w" + std::to_string(i % 5)), Tokens(len + i % 3, "v")});
    }
    return pairs;
}

// Padded positions on both sides: the encoder and the decoder each run them.
int64_t padding(const std::vector<Batch>& batches) {
    int64_t pad = 0;
    for (const auto& b : batches)
        pad += b.src.numel() - b.src_len.sum().item<int64_t>() + b.tgt_out.numel() - b.tgt_len.sum().item<int64_t>();
    return pad;
}

}  // namespace

TEST_CASE("parse_tsv reads 2 and 3 columns, CRLF, a BOM and blank lines", "[data][tsv]") {
    const std::string text =
        "\xEF\xBB\xBFGo.\tVa !\r\n"
        "\r\n"
        "Hi.\tSalut !\tCC-BY 2.0 (France) Attribution: tatoeba.org #538123\r\n"
        "   \n"
        "I'm OK.\tJe vais bien.";  // no final newline
    const Corpus c = parse_tsv(text, "mem.tsv");
    CHECK(c.name == "mem.tsv");
    CHECK(c.level == TokenLevel::word);
    CHECK(c.skipped.empty());
    REQUIRE(c.pairs.size() == 3);
    CHECK(c.pairs[0].src == Tokens{"go", "."});  // the BOM is not part of the first token
    CHECK(c.pairs[0].tgt == Tokens{"va", "!"});
    CHECK(c.pairs[1].tgt == Tokens{"salut", "!"});  // attribution column ignored
    CHECK(c.pairs[2].src == Tokens{"i'm", "ok", "."});
    CHECK(c.pairs[2].tgt == Tokens{"je", "vais", "bien", "."});
}

TEST_CASE("parse_tsv skips each kind of bad line with its line number", "[data][tsv]") {
    TsvOptions opt;
    opt.max_line_bytes = 40;
    const std::string text =
        "good one\tbon un\n"                              // 1
        "no tab here\n"                                   // 2
        "\tmissing source\n"                              // 3
        "missing target\t  \n"                            // 4
        "bad \xff byte\tmauvais\n"                        // 5
        "\n"                                              // 6: blank, silent
        + std::string(50, 'x') + "\t" + "y\n" +           // 7: 52 bytes
        "good two\tbon deux\r\n";                         // 8
    const Corpus c = parse_tsv(text, "bad.tsv", opt);
    REQUIRE(c.pairs.size() == 2);
    CHECK(c.pairs[1].src == Tokens{"good", "two"});
    REQUIRE(c.skipped.size() == 5);
    CHECK(c.skipped[0].line == 2);
    CHECK(c.skipped[0].reason == "no tab");
    CHECK(c.skipped[1].line == 3);
    CHECK(c.skipped[1].reason == "empty source");
    CHECK(c.skipped[2].line == 4);
    CHECK(c.skipped[2].reason == "empty target");
    CHECK(c.skipped[3].line == 5);
    CHECK(c.skipped[3].reason == "invalid UTF-8");
    CHECK(c.skipped[4].line == 7);
    CHECK(c.skipped[4].reason == "line too long (52 bytes, limit 40)");
}

TEST_CASE("parse_tsv options: reverse, max_pairs, character level", "[data][tsv]") {
    const std::string text = "a b\tc d\nE f\tg h\ni j\tk l\n";
    TsvOptions opt;
    opt.reverse = true;
    opt.max_pairs = 2;
    Corpus c = parse_tsv(text, "x", opt);
    REQUIRE(c.pairs.size() == 2);
    CHECK(c.pairs[0].src == Tokens{"c", "d"});
    CHECK(c.pairs[1].tgt == Tokens{"e", "f"});

    TsvOptions chars;
    chars.level = TokenLevel::character;
    c = parse_tsv("May 9\t2018-05-09 \n", "x", chars);
    CHECK(c.level == TokenLevel::character);
    CHECK(c.pairs[0].src == Tokens{"M", "a", "y", " ", "9"});  // not lower-cased
    CHECK(c.pairs[0].tgt.size() == 10);                          // surrounding spaces trimmed
}

TEST_CASE("parse_tsv: no usable pair is an error that says why", "[data][tsv]") {
    CHECK_THROWS_AS(parse_tsv("", "empty.tsv"), FileError);
    CHECK_THROWS_WITH(parse_tsv("\n\r\n", "empty.tsv"), Catch::Contains("empty.tsv") && Catch::Contains("empty"));
    CHECK_THROWS_WITH(parse_tsv("one\ntwo\n\tx\n", "junk.tsv"),
                      Catch::Contains("junk.tsv") && Catch::Contains("3 non-blank lines") &&
                          Catch::Contains("2 no tab") && Catch::Contains("line 1: no tab"));
}

TEST_CASE("read_tsv reads a file and reports missing ones", "[data][tsv]") {
    const std::string path = temp_path("pairs.tsv");
    std::ofstream(path, std::ios::binary) << "\xEF\xBB\xBFHe's calm.\tIl est calme.\tattr\r\nnope\r\n";
    const Corpus c = read_tsv(path);
    CHECK(c.name == std::filesystem::path(path).filename().string());
    REQUIRE(c.pairs.size() == 1);
    CHECK(c.pairs[0].src == Tokens{"he's", "calm", "."});
    REQUIRE(c.skipped.size() == 1);
    CHECK(c.skipped[0].line == 2);
    std::filesystem::remove(path);

    const std::string missing = temp_path("missing.tsv");
    CHECK_THROWS_AS(read_tsv(missing), FileError);
    CHECK_THROWS_WITH(read_tsv(missing),
                      Catch::Contains("cannot open '" + missing + "'") && Catch::Contains("No such file"));
    CHECK_THROWS_WITH(read_tsv(std::filesystem::temp_directory_path().string()),
                      Catch::Contains("Is a directory"));

    const std::string empty = temp_path("empty.tsv");
    std::ofstream(empty).close();
    CHECK_THROWS_WITH(read_tsv(empty), Catch::Contains(empty));
    std::filesystem::remove(empty);
}

TEST_CASE("read_tsv reads the Tatoeba sample like d2l", "[data][tsv][tatoeba]") {
    if (!std::filesystem::exists(ATTNVIZ_TATOEBA)) {
        WARN("Tatoeba sample not found at " ATTNVIZ_TATOEBA "; skipping");
        return;
    }
    const Corpus c = read_tsv(ATTNVIZ_TATOEBA);
    CHECK(c.pairs.size() == 5000);
    CHECK(c.skipped.empty());
    CHECK(c.pairs[0].src == Tokens{"go", "."});
    CHECK(c.pairs[0].tgt == Tokens{"va", "!"});
    // Accented capitals and U+202F before "?" are normalised on the French side.
    size_t question = 0;
    for (const auto& p : c.pairs)
        for (const auto& t : p.tgt) {
            REQUIRE(t.find("\u202F") == std::string::npos);
            question += t == "?" ? 1 : 0;
        }
    CHECK(question > 0);
}

TEST_CASE("filter_by_length keeps pairs with both sides short enough", "[data]") {
    const std::vector<SentencePair> pairs = {{{"a"}, {"b", "c"}}, {{"a", "b", "c"}, {"d"}}, {{"a"}, {"b", "c", "d"}}};
    CHECK(filter_by_length(pairs, 2).size() == 1);
    CHECK(filter_by_length(pairs, 3).size() == 3);
    CHECK(filter_by_length(pairs, 0).size() == 3);
}

TEST_CASE("split_train_val is seeded and partitions the pairs", "[data]") {
    std::vector<SentencePair> pairs;
    for (int i = 0; i < 100; ++i) pairs.push_back({{std::to_string(i)}, {"x"}});
    const auto [train, val] = split_train_val(pairs, 0.2, 7);
    CHECK(train.size() == 80);
    CHECK(val.size() == 20);
    std::set<std::string> seen;
    for (const auto& p : train) seen.insert(p.src[0]);
    for (const auto& p : val) seen.insert(p.src[0]);
    CHECK(seen.size() == 100);
    const auto again = split_train_val(pairs, 0.2, 7);
    CHECK(again.second.front().src == val.front().src);
    CHECK(again.second.back().src == val.back().src);
    const auto other = split_train_val(pairs, 0.2, 8);
    bool differs = false;
    for (size_t i = 0; i < val.size(); ++i) differs |= other.second[i].src != val[i].src;
    CHECK(differs);

    const auto ordered = split_train_val(pairs, 0.1, 7, false);
    CHECK(ordered.first.front().src == Tokens{"0"});
    CHECK(ordered.second.front().src == Tokens{"90"});
    CHECK(split_train_val(pairs, 0.0, 1).second.empty());
    CHECK(split_train_val({pairs[0], pairs[1]}, 0.01, 1).second.size() == 1);
    CHECK_THROWS_AS(split_train_val(pairs, 1.0, 1), ConfigError);
    CHECK_THROWS_AS(split_train_val(pairs, -0.1, 1), ConfigError);
}

TEST_CASE("make_batch pads, appends <eos> and shifts the target", "[data][batch]") {
    const std::vector<SentencePair> pairs = {{{"a", "b", "c"}, {"x"}}, {{"b"}, {"y", "x", "zz"}}};
    const Vocab sv = Vocab::build({{"a", "b", "c"}});  // a=4, b=5, c=6 (ties: alphabetical)
    const Vocab tv = Vocab::build({{"x", "y"}});       // x=4, y=5; "zz" is unknown
    const Batch b = make_batch(pairs, {1, 0}, sv, tv);
    REQUIRE(b.src.sizes() == torch::IntArrayRef{2, 4});
    REQUIRE(b.tgt_in.sizes() == torch::IntArrayRef{2, 4});
    REQUIRE(b.tgt_out.sizes() == torch::IntArrayRef{2, 4});
    CHECK(b.src.dtype() == torch::kInt64);
    CHECK(row(b.src, 0) == std::vector<int64_t>{5, 2, 0, 0});
    CHECK(row(b.src, 1) == std::vector<int64_t>{4, 5, 6, 2});
    CHECK(row(b.src_len, 0) == std::vector<int64_t>{2});
    CHECK(row(b.tgt_in, 0) == std::vector<int64_t>{1, 5, 4, Vocab::unk_id});
    CHECK(row(b.tgt_out, 0) == std::vector<int64_t>{5, 4, Vocab::unk_id, 2});
    CHECK(row(b.tgt_in, 1) == std::vector<int64_t>{1, 4, 0, 0});
    CHECK(row(b.tgt_out, 1) == std::vector<int64_t>{4, 2, 0, 0});
    CHECK(b.src_len[1].item<int64_t>() == 4);
    CHECK(b.tgt_len[0].item<int64_t>() == 4);
    CHECK(b.tgt_len[1].item<int64_t>() == 2);
    CHECK(b.target_tokens() == 6);
    CHECK(b.index == std::vector<size_t>{1, 0});
    const Batch c = b.to(torch::kCPU);
    CHECK(torch::equal(c.tgt_out, b.tgt_out));
    CHECK(c.index == b.index);
    CHECK_THROWS_AS(make_batch(pairs, {2}, sv, tv), Error);
}

TEST_CASE("make_batch with fixed_steps pads and truncates like d2l", "[data][batch]") {
    const std::vector<SentencePair> pairs = {{{"a", "b", "c", "a", "b"}, {"x", "y", "x", "y"}}, {{"a"}, {"x"}}};
    const Vocab sv = Vocab::build({{"a", "b", "c"}});
    const Vocab tv = Vocab::build({{"x", "y"}});
    const Batch b = make_batch(pairs, {0, 1}, sv, tv, 4);
    REQUIRE(b.src.sizes() == torch::IntArrayRef{2, 4});
    REQUIRE(b.tgt_out.sizes() == torch::IntArrayRef{2, 4});
    // d2l: pad_or_trim(tokens + <eos>, 4): the long row loses its <eos>.
    CHECK(row(b.src, 0) == std::vector<int64_t>{4, 5, 6, 4});
    CHECK(row(b.src_len, 0) == std::vector<int64_t>{4});
    CHECK(row(b.src, 1) == std::vector<int64_t>{4, 2, 0, 0});
    CHECK(b.src_len[1].item<int64_t>() == 2);
    CHECK(row(b.tgt_out, 0) == std::vector<int64_t>{4, 5, 4, 5});
    CHECK(row(b.tgt_in, 0) == std::vector<int64_t>{1, 4, 5, 4});
    CHECK(row(b.tgt_out, 1) == std::vector<int64_t>{4, 2, 0, 0});
    CHECK(row(b.tgt_in, 1) == std::vector<int64_t>{1, 4, 2, 0});  // d2l's [:-1] slice keeps <eos>
    CHECK(b.tgt_len[1].item<int64_t>() == 2);
    // Short batches are still padded to the full width.
    CHECK(make_batch(pairs, {1}, sv, tv, 6).src.size(1) == 6);
}

TEST_CASE("make_epoch_batches covers every pair once and is seeded", "[data][batch]") {
    const auto pairs = varied_pairs(1000);
    Tokens all_words;
    for (const auto& p : pairs) all_words.insert(all_words.end(), p.src.begin(), p.src.end());
    const Vocab sv = Vocab::build({all_words});
    const Vocab tv = Vocab::build({{"v"}});
    BatchOptions opt;
    opt.batch_size = 32;
    opt.bucket_window = 8;
    const auto a = make_epoch_batches(pairs, sv, tv, opt, 42, 0);
    CHECK(a.size() == 32);  // 31 full batches and one of 8
    std::vector<size_t> seen;
    for (const auto& b : a) {
        CHECK(b.src.size(0) == static_cast<int64_t>(b.index.size()));
        seen.insert(seen.end(), b.index.begin(), b.index.end());
        // Each row really is the pair its index names.
        CHECK(b.src_len[0].item<int64_t>() == static_cast<int64_t>(pairs[b.index[0]].src.size()) + 1);
    }
    std::sort(seen.begin(), seen.end());
    for (size_t i = 0; i < seen.size(); ++i) REQUIRE(seen[i] == i);
    CHECK(seen.size() == 1000);

    const auto same = make_epoch_batches(pairs, sv, tv, opt, 42, 0);
    REQUIRE(same.size() == a.size());
    for (size_t i = 0; i < a.size(); ++i) {
        CHECK(same[i].index == a[i].index);
        CHECK(torch::equal(same[i].src, a[i].src));
    }
    const auto next_epoch = make_epoch_batches(pairs, sv, tv, opt, 42, 1);
    const auto other_seed = make_epoch_batches(pairs, sv, tv, opt, 43, 0);
    CHECK(next_epoch[0].index != a[0].index);
    CHECK(other_seed[0].index != a[0].index);

    opt.shuffle = false;
    opt.bucket_window = 0;
    const auto plain = make_epoch_batches(pairs, sv, tv, opt, 42, 0);
    CHECK(plain[0].index == std::vector<size_t>{0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15,
                                                16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31});
    opt.batch_size = 0;
    CHECK_THROWS_AS(make_epoch_batches(pairs, sv, tv, opt, 1, 0), ConfigError);
}

TEST_CASE("length bucketing reduces padding", "[data][batch]") {
    const auto pairs = varied_pairs(2000);
    Tokens all_words;
    for (const auto& p : pairs) all_words.insert(all_words.end(), p.src.begin(), p.src.end());
    const Vocab sv = Vocab::build({all_words});
    const Vocab tv = Vocab::build({{"v"}});
    BatchOptions opt;
    opt.batch_size = 32;
    opt.bucket_window = 0;
    const int64_t unbucketed = padding(make_epoch_batches(pairs, sv, tv, opt, 3, 0));
    opt.bucket_window = 20;
    const auto bucketed_batches = make_epoch_batches(pairs, sv, tv, opt, 3, 0);
    const int64_t bucketed = padding(bucketed_batches);
    INFO("padding without bucketing " << unbucketed << ", with " << bucketed);
    CHECK(bucketed * 4 < unbucketed);
    // Batch order is shuffled: the first batches are not simply the shortest ones.
    std::vector<int64_t> widths;
    for (const auto& b : bucketed_batches) widths.push_back(b.src.size(1));
    CHECK_FALSE(std::is_sorted(widths.begin(), widths.end()));
}
