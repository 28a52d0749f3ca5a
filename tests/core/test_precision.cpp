// Mixed precision (--precision bf16): the guard's autocast state, a Transformer's
// step in bfloat16 against float32, the split step's per-thread guard, training,
// and the RNN's refusal. Subnormal numbers flushed to zero: the guard, and every
// thread of a training step and of validation.
#include "catch_torch.hpp"

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>

#include <cmath>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "core/config/registry.hpp"
#include "core/data/tasks.hpp"
#include "core/io/error.hpp"
#include "core/model/families.hpp"
#include "core/model/transformer_model.hpp"
#include "core/train/precision.hpp"
#include "core/train/split_step.hpp"
#include "core/train/train.hpp"
#include "test_support.hpp"
#include "tiny_transformer.hpp"

using namespace attnviz;
using attnviz::testing::ragged_batch;
using attnviz::testing::ThreadCount;

namespace {

struct Step {
    double loss = 0;
    std::map<std::string, torch::Tensor> grads;
};

Batch ragged(int64_t rows, int64_t src_vocab, int64_t tgt_vocab) {
    std::mt19937 rng(4);
    std::vector<int64_t> src_lens, tgt_lens;
    for (int64_t i = 0; i < rows; ++i) {
        src_lens.push_back(1 + static_cast<int64_t>(rng() % 8));
        tgt_lens.push_back(1 + static_cast<int64_t>(rng() % 8));
    }
    const auto r = ragged_batch(src_lens, tgt_lens, src_vocab, tgt_vocab, 31);
    Batch b;
    b.src = r.src;
    b.src_len = r.src_len;
    b.tgt_in = r.tgt_in;
    b.tgt_out = r.tgt_out;
    return b;
}

Step step(EncoderDecoder& net, const Batch& b, int parts, Precision precision) {
    net.zero_grad();
    Step s;
    s.loss = split_loss_backward(net, b, 1.0, parts, 1.0, precision);
    for (const auto& p : net.named_parameters()) s.grads[p.key()] = p.value().grad().clone();
    return s;
}

/// Whether this thread's arithmetic flushes subnormals now: half the smallest normal float
/// is a subnormal under IEEE rules and zero when flushed.
bool flushes_subnormals() {
    volatile float smallest_normal = std::numeric_limits<float>::min();
    volatile float half = smallest_normal * 0.5f;
    return half == 0.0f;
}

/// A Transformer that notes, in its loss, at the start of the loss's backward pass and in
/// validation's forward pass, whether the thread running them flushes subnormals.
class ProbedTransformer : public TransformerImpl {
public:
    using TransformerImpl::TransformerImpl;
    torch::Tensor loss(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                       const torch::Tensor& tgt_out, const LossOptions& options = {}) override {
        note("loss");
        auto l = TransformerImpl::loss(src, src_len, tgt_in, tgt_out, options);
        l.register_hook([this](torch::Tensor g) {
            note("backward");
            return g;
        });
        return l;
    }
    TokenLogits real_token_logits(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                                  const torch::Tensor& tgt_out) override {
        note("validation");
        return TransformerImpl::real_token_logits(src, src_len, tgt_in, tgt_out);
    }
    /// pass -> (times it ran, times it ran flushed)
    std::map<std::string, std::pair<int, int>> notes() {
        std::lock_guard<std::mutex> lock(m_mutex);
        return m_notes;
    }
    void clear() {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_notes.clear();
    }

private:
    void note(const std::string& pass) {
        const bool flushed = flushes_subnormals();
        std::lock_guard<std::mutex> lock(m_mutex);
        auto& n = m_notes[pass];
        ++n.first;
        n.second += flushed ? 1 : 0;
    }
    std::mutex m_mutex;
    std::map<std::string, std::pair<int, int>> m_notes;
};

double cosine(const torch::Tensor& a, const torch::Tensor& b) {
    return (a * b).sum().item<double>() / (a.norm().item<double>() * b.norm().item<double>() + 1e-30);
}

}  // namespace

TEST_CASE("ScopedPrecision: bf16 runs matrix products in bfloat16 on its thread and restores the state, fp32 "
          "changes nothing",
          "[precision]") {
    const auto x = torch::randn({3, 8});
    const auto w = torch::randn({5, 8});
    REQUIRE_FALSE(at::autocast::is_autocast_enabled(at::kCPU));
    {
        const ScopedPrecision fp32(Precision::fp32, torch::kCPU);
        CHECK_FALSE(at::autocast::is_autocast_enabled(at::kCPU));
        CHECK(torch::nn::functional::linear(x, w).scalar_type() == torch::kFloat);
    }
    {
        const ScopedPrecision bf16(Precision::bf16, torch::kCPU);
        CHECK(at::autocast::is_autocast_enabled(at::kCPU));
        CHECK(torch::nn::functional::linear(x, w).scalar_type() == torch::kBFloat16);
        // The loss stays float32 (autocast's own list), and a sum with a float32 tensor (the
        // Transformer's residual stream, its attention masks) is float32 again.
        const auto logits = torch::nn::functional::linear(x, w);
        CHECK(torch::nn::functional::cross_entropy(logits, torch::tensor({0, 1, 4})).scalar_type() == torch::kFloat);
        CHECK((logits + torch::zeros({3, 5})).scalar_type() == torch::kFloat);
        {
            const ScopedPrecision nested(Precision::bf16, torch::kCPU);
            CHECK(at::autocast::is_autocast_enabled(at::kCPU));
        }
        CHECK(at::autocast::is_autocast_enabled(at::kCPU));  // the outer guard's state is back
    }
    CHECK_FALSE(at::autocast::is_autocast_enabled(at::kCPU));
    CHECK(torch::nn::functional::linear(x, w).scalar_type() == torch::kFloat);
    const std::string hardware = cpu_bf16_hardware();
    CHECK((hardware == "amx" || hardware == "avx512_bf16" || hardware == "none"));
}

TEST_CASE("a Transformer's bf16 step: a loss and gradients close to float32's but computed otherwise, weights and "
          "gradients float32",
          "[precision][transformer]") {
    ThreadCount threads(1);
    const ModelConfig c = testing::tiny_transformer_config(13, 11);
    auto net = build_network(c);
    net->train();  // dropout 0 in the tiny config: the two steps see the same network
    REQUIRE(c.dropout == 0.0);
    const Batch b = ragged(24, c.src_vocab, c.tgt_vocab);
    const Step f32 = step(*net, b, 1, Precision::fp32);
    const Step b16 = step(*net, b, 1, Precision::bf16);
    REQUIRE(std::isfinite(b16.loss));
    // bfloat16 keeps 8 bits of mantissa: the loss moves a little, never not at all.
    CHECK(b16.loss != f32.loss);
    CHECK(std::abs(b16.loss - f32.loss) < 0.02 * f32.loss);
    for (const auto& p : net->named_parameters()) {
        INFO(p.key());
        CHECK(p.value().scalar_type() == torch::kFloat);
        const auto& g = b16.grads.at(p.key());
        CHECK(g.scalar_type() == torch::kFloat);
        CHECK(torch::isfinite(g).all().item<bool>());
        if (f32.grads.at(p.key()).norm().item<double>() > 1e-6) CHECK(cosine(g, f32.grads.at(p.key())) > 0.98);
    }
    CHECK_FALSE(at::autocast::is_autocast_enabled(at::kCPU));  // nothing left on after the step
}

TEST_CASE("a bf16 step split over threads computes in bf16 on every thread", "[precision][transformer][split]") {
    ThreadCount threads(2);
    const ModelConfig c = testing::tiny_transformer_config(13, 11);
    auto net = build_network(c);
    net->train();
    REQUIRE(net->trains_in_parts(1.0));
    const Batch b = ragged(64, c.src_vocab, c.tgt_vocab);
    const double f32 = step(*net, b, 1, Precision::fp32).loss;
    const double whole = step(*net, b, 1, Precision::bf16).loss;
    const double parts = step(*net, b, 2, Precision::bf16).loss;
    const double f32_parts = step(*net, b, 2, Precision::fp32).loss;
    INFO("fp32 " << f32 << ", fp32 in parts " << f32_parts << ", bf16 " << whole << ", bf16 in parts " << parts);
    // Each part rounds as the whole batch does: far closer to the whole bf16 loss than to float32's
    // (a part that ran in float32 would give float32's loss, to its last digits).
    CHECK(std::abs(f32_parts - f32) < 1e-5 * f32);
    CHECK(std::abs(parts - f32) > 10 * std::abs(f32_parts - f32));
    CHECK(std::abs(parts - whole) < 0.25 * std::abs(whole - f32));
}

TEST_CASE("a Transformer trained in bf16 learns as it does in float32", "[precision][transformer][train]") {
    ThreadCount threads(1);
    TaskOptions task;
    task.num_pairs = 300;
    task.max_len = 5;
    TrainConfig t;
    t.epochs = 6;
    t.batch_size = 32;
    t.lr = 0.003;
    t.device = "cpu";
    t.eval_sample = 0;
    t.seed = 3;
    const TrainingData data = prepare_data(task_corpus(TaskKind::reverse, task), t);
    ModelConfig m = testing::tiny_transformer_config(0, 0);
    m.hidden_size = 32;
    m.dropout = 0.1;
    auto final_loss = [&](Precision p) {
        TrainConfig tc = t;
        tc.precision = p;
        Trainer trainer(data, m, tc);
        REQUIRE(trainer.run() == StopReason::finished);
        const auto& epochs = trainer.history().epochs;
        REQUIRE(epochs.size() == 6);
        CHECK(epochs.back().train_loss < 0.7 * epochs.front().train_loss);  // it learns
        return epochs.back().val_loss;
    };
    const double f32 = final_loss(Precision::fp32);
    const double b16 = final_loss(Precision::bf16);
    INFO("validation loss after 6 epochs: fp32 " << f32 << ", bf16 " << b16);
    CHECK(b16 != f32);
    CHECK(b16 < 1.1 * f32);
}

TEST_CASE("mixed precision is the Transformer's: an RNN refuses it with the reason, in the registry and the Trainer",
          "[precision][config]") {
    Hyperparameters h;
    set_parameter(h, "precision", "bf16");
    CHECK(h.train.precision == Precision::bf16);
    CHECK_THROWS_WITH(validate(h), Catch::Contains("--precision bf16 applies to the Transformer only") &&
                                       Catch::Contains("fused recurrent kernels compute in fp32"));
    h.model.arch = ModelArch::transformer;
    h.model.hidden_size = 16;
    CHECK_NOTHROW(validate(h));
    CHECK_THROWS_AS(set_parameter(h, "precision", "fp16"), ConfigError);
    // A checkpoint's training config keeps it; an older one without the key reads as fp32.
    CHECK(TrainConfig::from_json(h.train.to_json()).precision == Precision::bf16);
    auto old = h.train.to_json();
    old.erase("precision");
    CHECK(TrainConfig::from_json(old).precision == Precision::fp32);

    TaskOptions task;
    task.num_pairs = 20;
    TrainConfig t;
    t.precision = Precision::bf16;
    t.device = "cpu";
    const TrainingData data = prepare_data(task_corpus(TaskKind::reverse, task), t);
    CHECK_THROWS_AS(Trainer(data, ModelConfig{}, t), ConfigError);
}

TEST_CASE("ScopedFlushDenormal: subnormal results and inputs are zero on its thread while it lives, and the mode before "
          "comes back",
          "[precision][subnormal]") {
    if (!ScopedFlushDenormal::supported()) {
        WARN("this CPU or build has no flush-to-zero mode: the guard does nothing here");
        return;
    }
    ThreadCount threads(1);
    REQUIRE_FALSE(flushes_subnormals());  // the IEEE default
    const float subnormal = std::numeric_limits<float>::min() / 1024;
    REQUIRE(std::fpclassify(subnormal) == FP_SUBNORMAL);
    const auto input = torch::full({4, 4}, subnormal);
    const auto big = torch::full({4, 4}, 1e30f);
    // A thread that was running before the guard: the mode is per thread (a thread started
    // while a guard lives starts with its mode, as Linux copies the control register).
    std::promise<void> go;
    std::promise<bool> answer;
    std::thread other([&] {
        go.get_future().wait();
        answer.set_value(flushes_subnormals());
    });
    // Unflushed, four products of a subnormal (1.1e-41) and 1e30 add up to 4.6e-11.
    REQUIRE(torch::mm(input, big).max().item<float>() > 1e-12f);
    {
        const ScopedFlushDenormal flush;
        CHECK(flushes_subnormals());
        CHECK(torch::mm(input, big).abs().max().item<float>() == 0.0f);    // inputs read as zero (MKL too)
        CHECK((input * big).abs().max().item<float>() == 0.0f);            // ATen's vectorised kernels
        CHECK((torch::full({3}, std::numeric_limits<float>::min()) * 0.25f).abs().max().item<float>() == 0.0f);
        go.set_value();
        CHECK_FALSE(answer.get_future().get());  // the other thread's arithmetic is its own
        other.join();
        {
            const ScopedFlushDenormal nested;
            CHECK(flushes_subnormals());
        }
        CHECK(flushes_subnormals());  // the outer guard's mode is back
    }
    CHECK_FALSE(flushes_subnormals());
    CHECK(torch::mm(input, big).max().item<float>() > 1e-12f);
}

TEST_CASE("a training step and validation flush subnormals on every thread they use, whole or in parts, and leave "
          "each thread's mode as it was",
          "[precision][subnormal][split]") {
    if (!ScopedFlushDenormal::supported()) {
        WARN("this CPU or build has no flush-to-zero mode: the guard does nothing here");
        return;
    }
    const ModelConfig c = testing::tiny_transformer_config(13, 11);
    auto net = std::make_shared<ProbedTransformer>(c);
    const Batch b = ragged(64, c.src_vocab, c.tgt_vocab);
    // Everything runs on a new thread, whose OpenMP worker threads start (with its first parallel
    // region, below) in the IEEE mode: a worker started inside a guard would inherit the guard's
    // mode and hide a missing guard. Catch's assertions stay on this thread.
    struct Seen {
        bool before = true, after = true;        // any worker flushing outside a guard
        std::map<std::string, std::pair<int, int>> steps[2], validation[2];
        bool caller_after = true;
        int planned_parts = 0;
        double loss[2] = {0, 0}, tokens[2] = {0, 0};
    } seen;
    int probed_threads = 0;
    const auto workers_flush = [&probed_threads] {
        std::mutex m;
        bool any = false;
        std::set<std::thread::id> ids;
        at::parallel_for(0, 2, 1, [&](int64_t, int64_t) {
            const bool f = flushes_subnormals();
            std::lock_guard<std::mutex> lock(m);
            any = any || f;
            ids.insert(std::this_thread::get_id());
        });
        probed_threads = static_cast<int>(ids.size());
        return any;
    };
    std::thread([&] {
        ThreadCount threads(2);
        seen.before = workers_flush() || flushes_subnormals();
        seen.planned_parts = split_step_parts(*net, torch::kCPU, b.src.size(0), 1.0, 2);
        for (const int parts : {1, 2}) {
            const size_t k = static_cast<size_t>(parts - 1);
            net->train();
            net->clear();
            net->zero_grad();
            seen.loss[k] = split_loss_backward(*net, b, 1.0, parts);
            seen.steps[k] = net->notes();
            net->clear();
            net->eval();
            seen.tokens[k] = split_validation_sums(*net, b, parts).tokens;
            seen.validation[k] = net->notes();
        }
        seen.after = workers_flush();
        seen.caller_after = flushes_subnormals();
    }).join();

    REQUIRE_FALSE(seen.before);
#ifdef _OPENMP
    REQUIRE(probed_threads == 2);  // the probe did reach a worker thread (this file has OpenMP)
#endif
    REQUIRE(seen.planned_parts == 2);
    for (const int parts : {1, 2}) {
        INFO(parts << " part(s)");
        const size_t k = static_cast<size_t>(parts - 1);
        CHECK(std::isfinite(seen.loss[k]));
        CHECK(seen.tokens[k] > 0);
        // (runs, runs flushed): every part's forward pass, its backward pass and its validation
        CHECK(seen.steps[k]["loss"] == std::make_pair(parts, parts));
        CHECK(seen.steps[k]["backward"] == std::make_pair(parts, parts));
        CHECK(seen.validation[k]["validation"] == std::make_pair(parts, parts));
    }
    CHECK_FALSE(seen.after);  // the workers' mode is back
    CHECK_FALSE(seen.caller_after);
}
