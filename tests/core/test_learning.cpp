// Learning tests: small models must really learn the built-in tasks, and
// their attention must find the true alignment. These prove the attention
// does its job, not only that the code runs.
#include "catch_torch.hpp"

#include <chrono>
#include <cstdlib>

#include "core/analysis/alignment.hpp"
#include "core/analysis/alignment_eval.hpp"
#include "core/decode/translation.hpp"
#include "core/analysis/metrics.hpp"
#include "core/data/tasks.hpp"
#include "core/train/train.hpp"

using namespace attnviz;

namespace {
struct Outcome {
    double exact = 0;           ///< exact-sequence accuracy on held-out pairs
    AlignmentScore alignment;   ///< attention argmax on the forced references vs the true alignment
    double first_epoch_align = 0, last_epoch_align = 0;  ///< the trainer's val_align_accuracy, epochs 1 and last
    double bleu = 0;
    double seconds = 0;
};

Outcome train_and_test(TaskKind kind, TaskOptions task, ModelConfig model, TrainConfig train, size_t held_out = 300) {
    const auto t0 = std::chrono::steady_clock::now();
    train.device = "cpu";
    Trainer trainer(prepare_data(task_corpus(kind, task), train), model, train);
    REQUIRE(trainer.run() == StopReason::finished);
    // Held-out pairs come from another generator seed.
    TaskOptions test = task;
    test.seed = task.seed + 1000;
    test.num_pairs = held_out;
    const auto pairs = task_corpus(kind, test).pairs;
    std::vector<std::vector<std::string>> sources, refs, hyps;
    for (const auto& p : pairs) {
        sources.push_back(p.src);
        refs.push_back(p.tgt);
    }
    DecodeOptions o;
    o.max_length = 40;
    const auto model_now = trainer.snapshot();
    for (const auto& t : model_now->translate_tokens(sources, o)) {
        std::vector<std::string> words(t.best().tokens.begin(), t.best().tokens.end());
        if (!words.empty() && words.back() == "<eos>") words.pop_back();
        hyps.push_back(words);
    }
    Outcome r;
    r.exact = exact_match(hyps, refs);
    r.bleu = corpus_bleu(hyps, refs).score;
    // Teacher-forced, so every target position is the reference's (also where the output is wrong).
    r.alignment = evaluate_alignment(*model_now, pairs, o);
    r.first_epoch_align = trainer.history().epochs.front().val_align_accuracy;
    r.last_epoch_align = trainer.history().epochs.back().val_align_accuracy;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

/// The small model all learning tests use: embedding 32, hidden 64, batch 32.
struct Setup {
    TaskOptions task;
    ModelConfig model;
    TrainConfig train;
};
Setup small_setup(uint64_t seed, size_t pairs, int epochs, double lr, bool reverse_source) {
    Setup s;
    s.task.num_pairs = pairs;
    s.task.seed = seed;
    s.model.embed_size = 32;
    s.model.hidden_size = 64;
    s.model.reverse_source = reverse_source;
    s.train.epochs = epochs;
    s.train.batch_size = 32;
    s.train.lr = lr;
    s.train.seed = seed;
    return s;
}
}  // namespace

// Why reverse_source: with a left-to-right encoder, the state at position p
// also carries x[p-1], and a decoder that just wrote x[p] finds h[p] by content
// and reads x[p-1] out of it -- a correct translation whose attention is one
// position off the diagonal. Read right to left, h[p] carries x[p] and x[p+1],
// and the only content match that yields x[p] is h[p] itself.
TEST_CASE("reverse: additive attention learns the task and the anti-diagonal alignment", "[learning]") {
    // 60 epochs (~15 s): the outcome of a short run moves with the floating-point
    // summation order alone (thread count, fused or step-by-step RNN, folded
    // embedding, the CPU's vector instructions). Seeds 1-6 reached 89-100% exact after 20
    // epochs, 92.7-100% after 30, and 96.7-100% after 40 on the machine this was written on;
    // on a fresh clone on an AVX-512 Xeon seed 1 reached only 92% after 40 epochs (the test
    // failed there) and seeds 1, 3, 5, 6 reached 99.7-100% exact (attention 99.1-99.9% on
    // the anti-diagonal) after 60.
    auto s = small_setup(1, 2000, 60, 0.005, /*reverse_source=*/true);
    s.task.min_len = 3;
    s.task.max_len = 8;
    auto r = train_and_test(TaskKind::reverse, s.task, s.model, s.train);
    WARN("reverse: exact " << r.exact << ", alignment accuracy " << r.alignment.accuracy() << " (attention on the "
                           << "anti-diagonal, " << r.alignment.gold_tokens << " target tokens), AER "
                           << r.alignment.aer() << "; per epoch on validation " << r.first_epoch_align << " -> "
                           << r.last_epoch_align << ", " << r.seconds << " s");
    CHECK(r.exact >= 0.95);
    CHECK(r.alignment.accuracy() >= 0.90);
    // The alignment emerges as the model learns (Bahdanau et al.'s lesson): epoch 1 is far from it.
    CHECK(r.last_epoch_align >= 0.90);
    CHECK(r.first_epoch_align < r.last_epoch_align - 0.2);
}

TEST_CASE("reverse: a Transformer learns the task", "[learning][transformer]") {
    // d2l's Transformer scales the embeddings by √d, which drowns the positional encoding
    // that reversing needs: it learns slowly. Measured with the CLI on the same task and seeds
    // (one thread): width 64, lr 0.002 without warm-up reached 0.56 exact after 12 epochs and
    // 0.69 after 30; width 32 with a warm-up of 200 batches to lr 0.005 reached 0.895 after 40
    // epochs and 0.94-0.96 after 60 on 2,000 pairs (not reliably 0.95). More pairs generalise
    // better for the same work: on 4,000 pairs, seeds 1-5 reached 0.91-0.99 after 30 epochs
    // and 0.98, 0.993, 0.99, 0.993, 1.0 after 45 (about 50 s of CPU): what this test runs.
    auto s = small_setup(1, 4000, 45, 0.005, /*reverse_source=*/false);
    s.task.min_len = 3;
    s.task.max_len = 8;
    s.model.arch = ModelArch::transformer;
    s.model.embed_size = ModelConfig{}.embed_size;  // the RNN's own setting stays at its default
    s.model.hidden_size = 32;
    s.model.num_layers = 2;
    s.model.num_heads = 4;
    s.model.ffn_size = 64;
    s.train.lr_schedule = LrSchedule::warmup;
    s.train.warmup_steps = 200;
    auto r = train_and_test(TaskKind::reverse, s.task, s.model, s.train);
    WARN("reverse, Transformer: exact " << r.exact << ", alignment accuracy of the last layer's mean "
                                        << r.alignment.accuracy() << ", AER " << r.alignment.aer() << "; "
                                        << r.seconds << " s");
    CHECK(r.exact >= 0.95);
    CHECK(r.alignment.accuracy() >= 0.80);
}

TEST_CASE("dates: the character-level date task learns", "[learning]") {
    auto s = small_setup(2, 3000, 6, 0.01, /*reverse_source=*/false);
    auto r = train_and_test(TaskKind::dates, s.task, s.model, s.train, 200);
    WARN("dates: exact " << r.exact << ", BLEU " << r.bleu << ", alignment accuracy " << r.alignment.accuracy()
                         << ", AER " << r.alignment.aer() << ", " << r.seconds << " s");
    CHECK(r.exact >= 0.80);
}

TEST_CASE("toy-french: the toy language learns, crossing alignments included", "[learning]") {
    auto s = small_setup(3, 3000, 6, 0.01, /*reverse_source=*/true);
    auto r = train_and_test(TaskKind::toy_french, s.task, s.model, s.train, 200);
    WARN("toy-french: exact " << r.exact << ", BLEU " << r.bleu << ", alignment accuracy "
                              << r.alignment.accuracy() << ", AER " << r.alignment.aer() << "; per epoch "
                              << r.first_epoch_align << " -> " << r.last_epoch_align << ", " << r.seconds << " s");
    CHECK(r.exact >= 0.80);
    CHECK(r.alignment.accuracy() >= 0.80);
}
