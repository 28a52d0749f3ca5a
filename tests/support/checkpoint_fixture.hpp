// A small trained model for the checkpoint and resume tests: the reverse task (150
// pairs, up to 5 tokens), a tiny network, a few epochs on the CPU, and a fresh folder.
#pragma once

#include "catch_torch.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "core/data/tasks.hpp"
#include "core/data/training_data.hpp"
#include "core/train/train.hpp"

namespace attnviz::testing {

/// A new folder under the system's temporary one, named after `prefix` and this process.
inline std::filesystem::path checkpoint_temp_dir(const std::string& prefix) {
    auto d = std::filesystem::temp_directory_path() /
             (prefix + std::to_string(::getpid()) + "-" + std::to_string(std::rand()));
    std::filesystem::create_directories(d);
    return d;
}

/// The reverse task prepared as training prepares it.
inline TrainingData reverse_data(const TrainConfig& c) {
    TaskOptions t;
    t.num_pairs = 150;
    t.max_len = 5;
    return prepare_data(task_corpus(TaskKind::reverse, t), c);
}

/// A quick CPU run of `epochs` with the given optimiser (its usual learning rate).
inline TrainConfig quick(int epochs, OptimizerKind optimizer = OptimizerKind::adam) {
    TrainConfig c;
    c.epochs = epochs;
    c.batch_size = 32;
    c.device = "cpu";
    c.eval_sample = 0;
    c.optimizer = optimizer;
    if (optimizer == OptimizerKind::sgd) {
        c.lr = 0.1;
        c.momentum = 0.9;
    }
    if (optimizer == OptimizerKind::adadelta) c.lr = 1.0;
    return c;
}

/// A tiny RNN (embedding 8, hidden 16).
inline ModelConfig small_model() {
    ModelConfig m;
    m.embed_size = 8;
    m.hidden_size = 16;
    return m;
}

/// A trainer that has run `epochs` to the end.
inline std::unique_ptr<Trainer> trained(int epochs = 2, OptimizerKind optimizer = OptimizerKind::adam) {
    const auto c = quick(epochs, optimizer);
    auto tr = std::make_unique<Trainer>(reverse_data(c), small_model(), c);
    REQUIRE(tr->run() == StopReason::finished);
    return tr;
}

}  // namespace attnviz::testing
