#pragma once
// One small model trained on the reverse task, shared by the tests of one executable
// that need a model which really uses its attention (interventions, attribution).
#include "core/data/tasks.hpp"
#include "core/decode/translation_model.hpp"
#include "core/train/train.hpp"

namespace attnviz::testing {

/// The reverse task's held-out pairs (another generator seed than training's).
inline std::vector<SentencePair> reverse_test_pairs(size_t n = 200) {
    TaskOptions task;
    task.num_pairs = n;
    task.seed = 1001;
    return task_corpus(TaskKind::reverse, task).pairs;
}

/// Embedding 32, hidden 64, additive attention, the source read right to left, 20 epochs on
/// 2000 pairs of "a".."j" sequences of 3-8 symbols (seconds): 89-100% exact match in the learning
/// test's runs. Trained once per process.
inline TranslationModelPtr trained_reverse() {
    static const TranslationModelPtr model = [] {
        TaskOptions task;
        task.num_pairs = 2000;
        task.seed = 1;
        ModelConfig m;
        m.embed_size = 32;
        m.hidden_size = 64;
        m.reverse_source = true;
        TrainConfig train;
        train.epochs = 20;
        train.batch_size = 32;
        train.lr = 0.005;
        train.seed = 1;
        train.device = "cpu";
        Trainer trainer(prepare_data(task_corpus(TaskKind::reverse, task), train), m, train);
        trainer.run();
        return trainer.snapshot();
    }();
    return model;
}

}  // namespace attnviz::testing
