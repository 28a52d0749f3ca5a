// Built-in tasks: names, determinism and true alignments.
#include "catch_torch.hpp"

#include <map>
#include <set>

#include "core/io/error.hpp"
#include "core/data/tasks.hpp"

using namespace attnviz;
using Tokens = std::vector<std::string>;

namespace {

bool same_pairs(const std::vector<AlignedPair>& a, const std::vector<AlignedPair>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i].pair.src != b[i].pair.src || a[i].pair.tgt != b[i].pair.tgt || a[i].alignment != b[i].alignment)
            return false;
    return true;
}

// Zeller's congruence (0 = monday), independent of the generator's day counting.
int weekday(int y, int m, int d) {
    if (m < 3) m += 12, y -= 1;
    const int h = (d + 13 * (m + 1) / 5 + y % 100 + (y % 100) / 4 + (y / 100) / 4 + 5 * (y / 100)) % 7;
    return (h + 5) % 7;  // Zeller: 0 = saturday
}

int days_in_month(int y, int m) {
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : days[m - 1];
}

const char* const weekdays[] = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"};
const char* const months[] = {"january", "february", "march",     "april",   "may",      "june",
                              "july",    "august",   "september", "october", "november", "december"};

}  // namespace

TEST_CASE("task names round trip and unknown names list the valid ones", "[tasks]") {
    REQUIRE(all_tasks().size() == 4);
    for (const TaskKind k : all_tasks()) {
        CHECK(task_from_name(task_name(k)) == k);
        CHECK_FALSE(task_description(k).empty());
    }
    CHECK(task_name(TaskKind::toy_french) == "toy-french");
    CHECK_THROWS_AS(task_from_name("french"), ConfigError);
    CHECK_THROWS_WITH(task_from_name("french"), Catch::Contains("'french'") && Catch::Contains("reverse") &&
                                                    Catch::Contains("lookup") && Catch::Contains("dates") &&
                                                    Catch::Contains("toy-french"));
    CHECK(task_level(TaskKind::dates) == TokenLevel::character);
    CHECK(task_level(TaskKind::reverse) == TokenLevel::word);
    CHECK(task_level(TaskKind::toy_french) == TokenLevel::word);
}

TEST_CASE("tasks are deterministic in the seed and alignments are well-formed", "[tasks]") {
    for (const TaskKind k : all_tasks()) {
        INFO(task_name(k));
        TaskOptions opt;
        opt.num_pairs = 300;
        opt.seed = 5;
        const auto a = generate_task(k, opt);
        REQUIRE(a.size() == 300);
        CHECK(same_pairs(a, generate_task(k, opt)));
        opt.seed = 6;
        CHECK_FALSE(same_pairs(a, generate_task(k, opt)));
        std::set<std::string> distinct;
        for (const auto& p : a) {
            REQUIRE_FALSE(p.pair.src.empty());
            REQUIRE_FALSE(p.pair.tgt.empty());
            REQUIRE(p.alignment.size() == p.pair.tgt.size() + 1);
            CHECK(p.alignment.back() == static_cast<int>(p.pair.src.size()));  // <eos> -> source <eos>
            for (const int s : p.alignment) REQUIRE((s >= -1 && s <= static_cast<int>(p.pair.src.size())));
            distinct.insert(detokenize(p.pair.src, task_level(k)));
        }
        CHECK(distinct.size() > 100);  // real variety, not one sentence repeated

        const Corpus c = task_corpus(k, opt);
        CHECK(c.name == task_name(k));
        CHECK(c.level == task_level(k));
        REQUIRE(c.pairs.size() == 300);
        CHECK(c.pairs[7].tgt == generate_task(k, opt)[7].pair.tgt);
    }
}

TEST_CASE("reverse: target reversed, alignment anti-diagonal", "[tasks]") {
    TaskOptions opt;
    opt.num_pairs = 500;
    opt.min_len = 2;
    opt.max_len = 6;
    opt.vocab = 5;
    std::set<std::string> symbols;
    for (const auto& a : generate_task(TaskKind::reverse, opt)) {
        const auto& src = a.pair.src;
        const auto& tgt = a.pair.tgt;
        REQUIRE((src.size() >= 2 && src.size() <= 6));
        REQUIRE(tgt == Tokens(src.rbegin(), src.rend()));
        const int n = static_cast<int>(src.size());
        for (int i = 0; i < n; ++i) REQUIRE(a.alignment[static_cast<size_t>(i)] == n - 1 - i);
        symbols.insert(src.begin(), src.end());
    }
    CHECK(symbols == std::set<std::string>{"a", "b", "c", "d", "e"});
    opt.vocab = 40;
    CHECK(generate_task(TaskKind::reverse, opt)[0].pair.src[0][0] == 'w');
    opt.min_len = 0;
    CHECK_THROWS_AS(generate_task(TaskKind::reverse, opt), ConfigError);
    opt.min_len = 7;
    CHECK_THROWS_AS(generate_task(TaskKind::reverse, opt), ConfigError);
    opt.min_len = 2;
    opt.vocab = 1;
    CHECK_THROWS_AS(generate_task(TaskKind::lookup, opt), ConfigError);
}

TEST_CASE("lookup: the target is the symbol at the index, aligned to it", "[tasks]") {
    TaskOptions opt;
    opt.num_pairs = 500;
    std::set<int> indices;
    for (const auto& a : generate_task(TaskKind::lookup, opt)) {
        const auto& src = a.pair.src;
        REQUIRE(src[0][0] == '@');
        const int k = std::stoi(src[0].substr(1));
        REQUIRE(src.size() >= 1 + static_cast<size_t>(opt.min_len));
        REQUIRE(k < static_cast<int>(src.size()) - 1);
        REQUIRE(a.pair.tgt == Tokens{src[static_cast<size_t>(k) + 1]});
        REQUIRE(a.alignment[0] == k + 1);
        indices.insert(k);
    }
    CHECK(indices.size() == static_cast<size_t>(opt.max_len));  // every index 0..max_len-1 occurs
}

TEST_CASE("dates: a valid ISO date that matches the source, digits aligned", "[tasks]") {
    TaskOptions opt;
    opt.num_pairs = 1000;
    std::set<std::string> shapes;
    for (const auto& a : generate_task(TaskKind::dates, opt)) {
        const std::string src = detokenize(a.pair.src, TokenLevel::character);
        const std::string iso = detokenize(a.pair.tgt, TokenLevel::character);
        INFO(src << " -> " << iso);
        REQUIRE(a.pair.tgt.size() == 10);
        REQUIRE((iso[4] == '-' && iso[7] == '-'));
        const int y = std::stoi(iso.substr(0, 4)), m = std::stoi(iso.substr(5, 2)), d = std::stoi(iso.substr(8, 2));
        REQUIRE((y >= 1950 && y <= 2049));
        REQUIRE((m >= 1 && m <= 12));
        REQUIRE((d >= 1 && d <= days_in_month(y, m)));
        const auto& al = a.alignment;
        CHECK((al[4] == -1 && al[7] == -1));
        const auto at = [&](size_t i) { return a.pair.src[static_cast<size_t>(al[i])]; };
        for (size_t i = 0; i < 4; ++i) REQUIRE(at(i) == a.pair.tgt[i]);  // year digits
        if (al[8] == al[9]) {  // one-digit day: both target digits look at it
            REQUIRE(d < 10);
            REQUIRE(at(9) == a.pair.tgt[9]);
        } else {
            REQUIRE(al[9] == al[8] + 1);
            REQUIRE((at(8) == a.pair.tgt[8] && at(9) == a.pair.tgt[9]));
        }
        // Month digits point at the month name (its first letter) or at the month digits.
        const size_t mpos = static_cast<size_t>(al[5]);
        if (a.pair.src[mpos][0] >= 'a' && a.pair.src[mpos][0] <= 'z') {
            CHECK(al[6] == al[5]);
            REQUIRE(src.compare(mpos, std::string(months[m - 1]).size(), months[m - 1]) == 0);
        } else {
            REQUIRE(src.substr(mpos, 2) == iso.substr(5, 2));
            CHECK(al[6] == al[5] + 1);
        }
        // A weekday, when given, is the right one.
        const int wd = weekday(y, m, d);
        const std::string first = src.substr(0, src.find(' '));
        bool has_weekday = false;
        for (const char* w : weekdays) has_weekday |= first == w || first == std::string(w).substr(0, 3);
        if (has_weekday) REQUIRE(std::string(weekdays[wd]).compare(0, first.size(), first) == 0);
        shapes.insert(src.find('/') != std::string::npos   ? "numeric"
                      : src.find(',') != std::string::npos ? "month first"
                      : has_weekday                        ? "weekday"
                                                           : "day month");
    }
    CHECK(shapes.size() == 4);  // every format occurs
}

TEST_CASE("toy-french: words align to their translations, adjectives cross", "[tasks]") {
    TaskOptions opt;
    opt.num_pairs = 500;
    const std::map<std::string, std::set<std::string>> lexicon = {
        {"le", {"the"}},       {"la", {"the"}},         {"les", {"the"}},  {"un", {"a"}},
        {"une", {"a"}},        {"des", {"some"}},       {"est", {"is"}},   {"sont", {"are"}},
        {"chien", {"dog"}},    {"chiens", {"dogs"}},    {"voiture", {"car"}}, {"chevaux", {"horses"}},
        {"souris", {"mouse", "mice"}}, {"rouge", {"red"}}, {"blanches", {"white"}}, {"voit", {"sees"}},
        {"voient", {"see"}},   {"rapide", {"fast"}},    {"ont", {"have"}},
    };
    size_t crossings = 0, checked = 0;
    for (const auto& a : generate_task(TaskKind::toy_french, opt)) {
        const auto& src = a.pair.src;
        const auto& tgt = a.pair.tgt;
        INFO(detokenize(src, TokenLevel::word) << " -> " << detokenize(tgt, TokenLevel::word));
        for (size_t i = 0; i < tgt.size(); ++i) {
            const int s = a.alignment[i];
            REQUIRE(s >= 0);  // every word of this toy language has a source word
            const auto it = lexicon.find(tgt[i]);
            if (it != lexicon.end()) {
                REQUIRE(it->second.count(src[static_cast<size_t>(s)]) == 1);
                ++checked;
            }
            for (size_t j = i + 1; j < tgt.size(); ++j) crossings += a.alignment[j] < s ? 1 : 0;
        }
        // Agreement: a feminine determiner is never followed by a masculine noun we know.
        for (size_t i = 0; i + 1 < tgt.size(); ++i)
            if (tgt[i] == "la" || tgt[i] == "une") REQUIRE((tgt[i + 1] != "chien" && tgt[i + 1] != "bateau"));
    }
    CHECK(checked > 300);
    CHECK(crossings > 50);
}

TEST_CASE("task examples use only symbols the task's model will know", "[tasks]") {
    for (const TaskKind k : all_tasks()) {
        INFO(task_name(k));
        const auto examples = task_examples(k);
        CHECK((examples.size() >= 3 && examples.size() <= 5));
        const Corpus c = task_corpus(k, {});
        std::set<std::string> known;
        for (const auto& p : c.pairs) known.insert(p.src.begin(), p.src.end());
        for (const auto& e : examples)
            for (const auto& t : tokenize(e, c.level)) {
                INFO(e << ": " << t);
                CHECK(known.count(t) == 1);
            }
    }
    // The date examples carry correct weekdays: 9 May 2018 was a Wednesday.
    CHECK(task_examples(TaskKind::dates)[0] == "wednesday 9 may 2018");
    CHECK(weekday(2018, 5, 9) == 2);
    CHECK(weekday(1999, 12, 31) == 4);
}

// Hidden (run with "[.samples]" -s): prints a few pairs of each task with their alignments.
TEST_CASE("print task samples", "[.samples]") {
    for (const TaskKind k : all_tasks()) {
        TaskOptions opt;
        opt.num_pairs = 6;
        for (const auto& a : generate_task(k, opt)) {
            std::string al;
            for (const int s : a.alignment) al += " " + std::to_string(s);
            WARN(task_name(k) << ": " << detokenize(a.pair.src, task_level(k)) << " => "
                              << detokenize(a.pair.tgt, task_level(k)) << "   [" << al << " ]");
        }
    }
}
