// Built-in tasks, generated from a seed, each pair with its true alignment.
#include "core/data/tasks.hpp"

#include <algorithm>
#include <random>

#include "core/io/error.hpp"
#include "core/io/message.hpp"

namespace attnviz {

namespace {

// Unbiased integer in [lo, hi], written out so a seed gives the same data everywhere.
int uniform(std::mt19937_64& rng, int lo, int hi) {
    const auto n = static_cast<uint64_t>(hi - lo) + 1;
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x = rng();
    while (x >= limit) x = rng();
    return lo + static_cast<int>(x % n);
}

bool chance(std::mt19937_64& rng, int percent) { return uniform(rng, 0, 99) < percent; }

void check_options(const TaskOptions& o) {
    if (o.min_len < 1 || o.max_len < o.min_len)
        throw ConfigError("task lengths " + std::to_string(o.min_len) + ".." + std::to_string(o.max_len) +
                          " are invalid: expected 1 <= min_len <= max_len");
    if (o.vocab < 2 || o.vocab > 1000)
        throw ConfigError("task vocabulary of " + std::to_string(o.vocab) +
                          " symbols is invalid: expected 2..1000");
}

// Symbols: "a".."z" for up to 26, else "w0".."wN".
std::string symbol(int i, int vocab) {
    if (vocab <= 26) return std::string(1, static_cast<char>('a' + i));
    return "w" + std::to_string(i);
}

std::vector<std::string> random_symbols(std::mt19937_64& rng, const TaskOptions& o) {
    std::vector<std::string> seq(static_cast<size_t>(uniform(rng, o.min_len, o.max_len)));
    for (auto& s : seq) s = symbol(uniform(rng, 0, o.vocab - 1), o.vocab);
    return seq;
}

AlignedPair make_reverse(std::mt19937_64& rng, const TaskOptions& o) {
    AlignedPair a;
    a.pair.src = random_symbols(rng, o);
    a.pair.tgt.assign(a.pair.src.rbegin(), a.pair.src.rend());
    const int n = static_cast<int>(a.pair.src.size());
    for (int i = 0; i < n; ++i) a.alignment.push_back(n - 1 - i);
    a.alignment.push_back(n);  // <eos> looks at the source <eos>
    return a;
}

// "@k s0 s1 ..." -> "sk": the index token comes first, positions count from 0.
AlignedPair make_lookup(std::mt19937_64& rng, const TaskOptions& o) {
    AlignedPair a;
    const auto seq = random_symbols(rng, o);
    const int k = uniform(rng, 0, static_cast<int>(seq.size()) - 1);
    a.pair.src.push_back("@" + std::to_string(k));
    a.pair.src.insert(a.pair.src.end(), seq.begin(), seq.end());
    a.pair.tgt = {seq[static_cast<size_t>(k)]};
    a.alignment = {k + 1, static_cast<int>(a.pair.src.size())};
    return a;
}

// ---------------------------------------------------------------------------
// dates: proleptic Gregorian calendar arithmetic (H. Hinnant's algorithms)

struct Civil {
    int year, month, day;
};

int64_t days_from_civil(int y, int m, int d) {
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const int64_t yoe = y - era * 400;
    const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

Civil civil_from_days(int64_t z) {
    z += 719468;
    const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const int64_t doe = z - era * 146097;
    const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const int64_t mp = (5 * doy + 2) / 153;
    const int d = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
    const int m = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
    return {static_cast<int>(yoe + era * 400 + (m <= 2)), m, d};
}

const char* const k_weekdays[] = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"};
const char* const k_months[] = {"january", "february", "march",     "april",   "may",      "june",
                                "july",    "august",   "september", "october", "november", "december"};

std::string two_digits(int v) { return (v < 10 ? "0" : "") + std::to_string(v); }

// Builds the source text piece by piece, remembering where each field starts.
struct DateSource {
    std::string text;
    int year = -1, month = -1, day = -1;  // first character of each field
    int day_chars = 0;                    // 1 or 2
    bool numeric_month = false;           // month written as two digits
    void add(const std::string& s) { text += s; }
    void field(int& where, const std::string& s) { where = static_cast<int>(text.size()), text += s; }
};

AlignedPair make_date(std::mt19937_64& rng) {
    static const int64_t first = days_from_civil(1950, 1, 1), last = days_from_civil(2049, 12, 31);
    const int64_t z = first + uniform(rng, 0, static_cast<int>(last - first));
    const Civil c = civil_from_days(z);
    const int weekday = static_cast<int>(((z % 7) + 7 + 3) % 7);  // 1970-01-01 (z = 0) was a Thursday
    const std::string wd = k_weekdays[weekday], mon = k_months[c.month - 1];
    const std::string d = std::to_string(c.day), dd = two_digits(c.day), y = std::to_string(c.year);
    DateSource s;
    switch (uniform(rng, 0, 3)) {
    case 0:  // wednesday 9 may 2018
        s.add(wd + " "), s.field(s.day, d), s.add(" "), s.field(s.month, mon), s.add(" "), s.field(s.year, y);
        s.day_chars = static_cast<int>(d.size());
        break;
    case 1:  // 9 may 2018
        s.field(s.day, d), s.add(" "), s.field(s.month, mon), s.add(" "), s.field(s.year, y);
        s.day_chars = static_cast<int>(d.size());
        break;
    case 2:  // may 9, 2018
        s.field(s.month, mon), s.add(" "), s.field(s.day, d), s.add(", "), s.field(s.year, y);
        s.day_chars = static_cast<int>(d.size());
        break;
    default:  // wed 09/05/2018
        s.add(wd.substr(0, 3) + " "), s.field(s.day, dd), s.add("/"), s.field(s.month, two_digits(c.month));
        s.add("/"), s.field(s.year, y);
        s.day_chars = 2, s.numeric_month = true;
    }
    AlignedPair a;
    a.pair.src = tokenize_chars(s.text);
    const std::string iso = y + "-" + two_digits(c.month) + "-" + dd;
    a.pair.tgt = tokenize_chars(iso);
    for (int i = 0; i < 4; ++i) a.alignment.push_back(s.year + i);
    a.alignment.push_back(-1);
    for (int i = 0; i < 2; ++i) a.alignment.push_back(s.numeric_month ? s.month + i : s.month);
    a.alignment.push_back(-1);
    for (int i = 0; i < 2; ++i) a.alignment.push_back(s.day_chars == 2 ? s.day + i : s.day);
    a.alignment.push_back(static_cast<int>(a.pair.src.size()));
    return a;
}

// ---------------------------------------------------------------------------
// toy-french: determiner [adjective] noun -> déterminant nom [adjectif].
// Every adjective follows its noun in the target (as French colour, shape and
// state adjectives do), so each adjective gives a crossing alignment. Nouns that
// would need elision (l'arbre) are left out so one word maps to one word.

struct Noun {
    const char *en, *en_pl, *fr, *fr_pl;
    bool feminine;
};
const Noun k_nouns[] = {
    {"dog", "dogs", "chien", "chiens", false},         {"cat", "cats", "chat", "chats", false},
    {"car", "cars", "voiture", "voitures", true},      {"house", "houses", "maison", "maisons", true},
    {"book", "books", "livre", "livres", false},       {"horse", "horses", "cheval", "chevaux", false},
    {"apple", "apples", "pomme", "pommes", true},      {"table", "tables", "table", "tables", true},
    {"girl", "girls", "fille", "filles", true},        {"boy", "boys", "garçon", "garçons", false},
    {"city", "cities", "ville", "villes", true},       {"flower", "flowers", "fleur", "fleurs", true},
    {"door", "doors", "porte", "portes", true},        {"window", "windows", "fenêtre", "fenêtres", true},
    {"garden", "gardens", "jardin", "jardins", false}, {"mouse", "mice", "souris", "souris", true},
    {"train", "trains", "train", "trains", false},     {"boat", "boats", "bateau", "bateaux", false},
    {"chair", "chairs", "chaise", "chaises", true},    {"bus", "buses", "bus", "bus", false},
};
struct Adjective {
    const char *en, *fr, *fr_fem;
};
const Adjective k_adjectives[] = {
    {"red", "rouge", "rouge"}, {"green", "vert", "verte"},   {"blue", "bleu", "bleue"},
    {"black", "noir", "noire"}, {"white", "blanc", "blanche"}, {"fast", "rapide", "rapide"},
    {"slow", "lent", "lente"},  {"heavy", "lourd", "lourde"}, {"round", "rond", "ronde"},
    {"tired", "fatigué", "fatiguée"},
};
struct Verb {
    const char *en, *en_pl, *fr, *fr_pl;
};
const Verb k_verbs[] = {
    {"sees", "see", "voit", "voient"},        {"likes", "like", "aime", "aiment"},
    {"eats", "eat", "mange", "mangent"},      {"finds", "find", "trouve", "trouvent"},
    {"follows", "follow", "suit", "suivent"}, {"wants", "want", "veut", "veulent"},
    {"has", "have", "a", "ont"},              {"takes", "take", "prend", "prennent"},
    {"watches", "watch", "regarde", "regardent"}, {"pushes", "push", "pousse", "poussent"},
};
constexpr int k_num_nouns = sizeof k_nouns / sizeof k_nouns[0];
constexpr int k_num_adjectives = sizeof k_adjectives / sizeof k_adjectives[0];
constexpr int k_num_verbs = sizeof k_verbs / sizeof k_verbs[0];

std::string adjective_fr(const Adjective& a, bool feminine, bool plural) {
    return std::string(feminine ? a.fr_fem : a.fr) + (plural ? "s" : "");
}

// Appends a noun phrase to both sides and its alignment; returns the noun.
const Noun& noun_phrase(std::mt19937_64& rng, AlignedPair& a, bool plural, int adjective) {
    const Noun& n = k_nouns[uniform(rng, 0, k_num_nouns - 1)];
    const bool definite = chance(rng, 50);
    auto& src = a.pair.src;
    auto& tgt = a.pair.tgt;
    const int det_pos = static_cast<int>(src.size());
    src.push_back(definite ? "the" : plural ? "some" : "a");
    const int adj_pos = static_cast<int>(src.size());
    if (adjective >= 0) src.push_back(k_adjectives[adjective].en);
    const int noun_pos = static_cast<int>(src.size());
    src.push_back(plural ? n.en_pl : n.en);
    tgt.push_back(plural ? (definite ? "les" : "des") : definite ? (n.feminine ? "la" : "le") : (n.feminine ? "une" : "un"));
    tgt.push_back(plural ? n.fr_pl : n.fr);
    a.alignment.insert(a.alignment.end(), {det_pos, noun_pos});
    if (adjective >= 0) {
        tgt.push_back(adjective_fr(k_adjectives[adjective], n.feminine, plural));
        a.alignment.push_back(adj_pos);
    }
    return n;
}

AlignedPair make_toy_french(std::mt19937_64& rng) {
    AlignedPair a;
    const bool plural = chance(rng, 30);
    const int subject_adj = chance(rng, 50) ? uniform(rng, 0, k_num_adjectives - 1) : -1;
    const Noun& subject = noun_phrase(rng, a, plural, subject_adj);
    const int verb_pos = static_cast<int>(a.pair.src.size());
    if (chance(rng, 70)) {  // the dog sees a black cat -> le chien voit un chat noir
        const Verb& v = k_verbs[uniform(rng, 0, k_num_verbs - 1)];
        a.pair.src.push_back(plural ? v.en_pl : v.en);
        a.pair.tgt.push_back(plural ? v.fr_pl : v.fr);
        a.alignment.push_back(verb_pos);
        const bool object_plural = chance(rng, 30);
        noun_phrase(rng, a, object_plural, chance(rng, 50) ? uniform(rng, 0, k_num_adjectives - 1) : -1);
    } else {  // the red car is fast -> la voiture rouge est rapide
        int adj = uniform(rng, 0, k_num_adjectives - 2);
        if (adj >= subject_adj && subject_adj >= 0) ++adj;  // not "the red car is red"
        a.pair.src.push_back(plural ? "are" : "is");
        a.pair.tgt.push_back(plural ? "sont" : "est");
        a.alignment.push_back(verb_pos);
        a.pair.src.push_back(k_adjectives[adj].en);
        a.pair.tgt.push_back(adjective_fr(k_adjectives[adj], subject.feminine, plural));
        a.alignment.push_back(verb_pos + 1);
    }
    a.alignment.push_back(static_cast<int>(a.pair.src.size()));
    return a;
}

}  // namespace

std::vector<AlignedPair> generate_task(TaskKind kind, const TaskOptions& options) {
    check_options(options);
    // Each task gets its own stream, so "reverse" and "lookup" with one seed differ.
    std::mt19937_64 rng(options.seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(kind) + 1);
    std::vector<AlignedPair> out;
    out.reserve(options.num_pairs);
    for (size_t i = 0; i < options.num_pairs; ++i) {
        switch (kind) {
        case TaskKind::reverse: out.push_back(make_reverse(rng, options)); break;
        case TaskKind::lookup: out.push_back(make_lookup(rng, options)); break;
        case TaskKind::dates: out.push_back(make_date(rng)); break;
        case TaskKind::toy_french: out.push_back(make_toy_french(rng)); break;
        }
        // The pair carries its true links too (real tokens only: the <eos> entry is left out).
        auto& a = out.back();
        a.pair.alignment = links_from_positions({a.alignment.begin(), a.alignment.end() - 1});
    }
    return out;
}

Corpus task_corpus(TaskKind kind, const TaskOptions& options) {
    Corpus corpus;
    corpus.name = task_name(kind);
    corpus.level = task_level(kind);
    for (auto& a : generate_task(kind, options)) corpus.pairs.push_back(std::move(a.pair));
    return corpus;
}

std::string task_name(TaskKind kind) {
    switch (kind) {
    case TaskKind::reverse: return "reverse";
    case TaskKind::lookup: return "lookup";
    case TaskKind::dates: return "dates";
    case TaskKind::toy_french: return "toy-french";
    }
    throw Error("unknown task kind " + std::to_string(static_cast<int>(kind)));
}

TaskKind task_from_name(const std::string& name) {
    std::string valid;
    for (const TaskKind k : all_tasks()) {
        if (task_name(k) == name) return k;
        valid += (valid.empty() ? "" : ", ") + task_name(k);
    }
    throw ConfigError("unknown task " + quote(name) + ": expected one of " + valid);
}

std::vector<TaskKind> all_tasks() {
    return {TaskKind::reverse, TaskKind::lookup, TaskKind::dates, TaskKind::toy_french};
}

std::string task_description(TaskKind kind) {
    switch (kind) {
    case TaskKind::reverse: return "Reverse a sequence of symbols (\"a b c\" -> \"c b a\"): attention is an anti-diagonal.";
    case TaskKind::lookup:
        return "Index lookup (\"@2 c a j f\" -> \"j\"): output the symbol at the given 0-based position.";
    case TaskKind::dates:
        return "Normalise dates, character by character (\"wednesday 9 may 2018\" -> \"2018-05-09\").";
    case TaskKind::toy_french:
        return "A toy English->French (\"the red car is fast\" -> \"la voiture rouge est rapide\"): "
               "adjectives move after nouns.";
    }
    throw Error("unknown task kind " + std::to_string(static_cast<int>(kind)));
}

TokenLevel task_level(TaskKind kind) {
    return kind == TaskKind::dates ? TokenLevel::character : TokenLevel::word;
}

std::vector<std::string> task_examples(TaskKind kind) {
    switch (kind) {
    case TaskKind::reverse: return {"a b c d e", "j i h g", "c a f f e b d", "b e e f"};
    case TaskKind::lookup: return {"@0 d c b", "@2 c a j f e", "@4 a b c d e f g", "@1 h h i"};
    case TaskKind::dates:
        return {"wednesday 9 may 2018", "9 may 2018", "may 9, 2018", "wed 09/05/2018", "friday 31 december 1999"};
    case TaskKind::toy_french:
        return {"the red car is fast", "the dog sees a black cat", "some green apples are heavy",
                "a tired girl watches the white boats", "the horses follow a slow bus"};
    }
    throw Error("unknown task kind " + std::to_string(static_cast<int>(kind)));
}

}  // namespace attnviz
