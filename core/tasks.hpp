#pragma once
// Built-in tasks, generated in code so the project has data of its own on any
// machine. Each pair can carry its true alignment, for tests.
#include <cstdint>
#include <string>
#include <vector>

#include "core/data.hpp"

namespace attnviz {

/// The built-in tasks.
enum class TaskKind {
    reverse,     ///< reverse a sequence of symbols: "a b c" -> "c b a"
    lookup,      ///< seed 001's index lookup: "3 : 7 1 4 9" -> "9" (the entry at index 3)
    dates,       ///< date normalisation, character level: "saturday 9 may 2018" -> "2018-05-09"
    toy_french   ///< a toy English->French-like language; adjectives follow nouns in the target
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
struct AlignedPair {
    SentencePair pair;
    std::vector<int> alignment;  ///< size tgt.size() + 1 (last entry: the <eos> step)
};

/// Generates a task's pairs (deterministic in options.seed).
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
