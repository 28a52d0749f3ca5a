#pragma once
// Built-in tasks, generated in code so the project has data of its own on any
// machine. Each pair can carry its true alignment, for tests.
#include <cstdint>
#include <string>
#include <vector>

#include "core/data/data.hpp"

namespace attnviz {

/// The built-in tasks.
enum class TaskKind {
    reverse,     ///< reverse a sequence of symbols: "a b c" -> "c b a"
    lookup,      ///< seed 001's index lookup: "@3 g b d i" -> "i" (the entry at 0-based index 3)
    dates,       ///< date normalisation, character level: "wednesday 9 may 2018" -> "2018-05-09"
                 ///< (formats "wednesday 9 may 2018", "9 may 2018", "may 9, 2018", "wed 09/05/2018";
                 ///< real calendar, years 1950..2049, weekdays always right)
    toy_french   ///< a toy English->French: "the red car is fast" -> "la voiture rouge est rapide",
                 ///< "the dog sees a black cat" -> "le chien voit un chat noir"; 20 nouns with gender,
                 ///< 10 adjectives, 10 verbs, the/a/some -> le/la/un/une/les/des, plurals. ALL
                 ///< adjectives follow the noun in the target, so each one crosses the alignment
};

/// Options for generating a task's pairs.
struct TaskOptions {
    size_t num_pairs = 2000;  ///< how many pairs to generate
    uint64_t seed = 0;        ///< generator seed: same seed, same pairs
    int min_len = 3;          ///< reverse/lookup: shortest sequence
    int max_len = 8;          ///< reverse/lookup: longest sequence
    int vocab = 10;           ///< reverse/lookup: number of distinct symbols
};

/// One generated pair with its true alignment: for each target token (and the
/// final <eos>), the source position it should attend to, or -1 when none.
/// Positions index pair.src; position src.size() is the source <eos>, which the
/// final <eos> step always aligns to. Dates: year/day digits point at the matching
/// source digits (a one-digit day: both target digits at it), month digits at the
/// month name's first character (or the matching month digit), '-' at -1.
struct AlignedPair {
    SentencePair pair;           ///< pair.alignment holds the same links (without the <eos> step)
    std::vector<int> alignment;  ///< size tgt.size() + 1 (last entry: the <eos> step)
};

/// Generates a task's pairs (deterministic in options.seed). reverse/lookup symbols are
/// "a".."z" when options.vocab <= 26, else "w0".."wN". Throws ConfigError on bad options.
std::vector<AlignedPair> generate_task(TaskKind kind, const TaskOptions& options = {});

/// The task as a Corpus (name and token level set).
Corpus task_corpus(TaskKind kind, const TaskOptions& options = {});

/// "reverse", "lookup", "dates", "toy-french".
std::string task_name(TaskKind kind);
/// Inverse of task_name; throws attnviz::ConfigError listing the valid names.
TaskKind task_from_name(const std::string& name);
/// All tasks, in menu order.
std::vector<TaskKind> all_tasks();
/// One line describing the task, for the GUI and --help.
std::string task_description(TaskKind kind);
/// Token level the task uses (dates: character, others: word).
TokenLevel task_level(TaskKind kind);
/// A few example source sentences (for the GUI's translate box and probe).
std::vector<std::string> task_examples(TaskKind kind);

}  // namespace attnviz
