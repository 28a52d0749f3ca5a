#pragma once
// Training: a Trainer that the caller runs on a thread of its own. It reports
// through an observer, checks cooperative pause/stop flags between batches,
// and publishes a copy of the weights for translating while it trains.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/config/config.hpp"
#include "core/data/data.hpp"
#include "core/data/training_data.hpp"
#include "core/config/history.hpp"
#include "core/model/encoder_decoder.hpp"
#include "core/io/process_memory.hpp"
#include "core/text/tokenizer.hpp"
#include "core/decode/translation_model.hpp"

namespace attnviz {

/// What one validation decoded, for logs that show translations (core/train/tensorboard_log.hpp):
/// the first sentences of the greedily decoded sample with their attention, and the whole
/// sample as text.
struct ValidationSample {
    static constexpr size_t kept_translations = 3;  ///< how many translations `first` keeps
    int epoch = 0;                  ///< the epoch validated (0: a pretrained model before fine-tuning)
    int64_t global_step = 0;        ///< batches trained when it was validated
    std::vector<Translation> first; ///< the sample's first kept_translations sentences, attention included
    /// The sample (TrainConfig::eval_sample pairs) as text, in order: source, reference, the greedy output.
    std::vector<std::string> sources, references, hypotheses;
};

/// Receives progress; called on the training thread (the ui adapter queues it to the GUI).
class TrainObserver {
public:
    virtual ~TrainObserver() = default;
    virtual void on_batch(const BatchReport&) {}
    virtual void on_epoch(const EpochReport&) {}
    /// Each validation's decoded sample, just before its on_epoch (none without a sample to decode).
    virtual void on_validation(const ValidationSample&) {}
    /// A fresh copy of the weights was published (see Trainer::snapshot()).
    virtual void on_snapshot(int epoch, int64_t global_step) {}
    virtual void on_paused(bool paused) {}
    virtual void on_finished(StopReason reason, const std::string& message) {}
};

struct Checkpoint;

/// The warmup schedule's learning rate at batch `step` (1-based): peak * step / warmup while
/// step < warmup, then peak * sqrt(warmup / step) ("Attention is all you need", with the
/// peak given instead of derived from the width).
double warmup_learning_rate(double peak, int64_t warmup_steps, int64_t step);

/// Early stopping's last improvement: the last epoch (0: none) whose finite validation loss
/// was lower by more than min_delta than that of the improvement before it (the first finite
/// one counts). With min_delta 0 it is the epoch of the lowest loss (its first occurrence).
int last_improvement_epoch(const std::vector<EpochReport>& epochs, double min_delta);

/// Trains a network of any family (core/model/encoder_decoder.hpp): the training loop of a TrainingSession (core/session/session.hpp),
/// which is what the CLI and the GUI use. Construct, then call run() on a worker
/// thread; pause/resume/stop/wake and snapshot() are safe from any thread.
class Trainer {
public:
    /// Fresh model: model_config's vocabulary sizes are filled in from data.
    Trainer(TrainingData data, ModelConfig model_config, TrainConfig train_config);
    /// Continues a checkpoint's model on data, whose vocabularies are replaced by the
    /// checkpoint's; weights, optimiser state (same optimiser only) and history are restored.
    Trainer(const Checkpoint& checkpoint, TrainingData data, TrainConfig train_config);
    ~Trainer();

    /// Runs until the epochs are done, stop() is called, the validation loss stops
    /// improving (TrainConfig::patience) or the loss diverges. Never throws:
    /// failures reach observer->on_finished(error, message) and the return value.
    /// With TrainConfig::keep_best the weights of the best epoch are put back at the end.
    StopReason run(TrainObserver* observer = nullptr);

    void pause();
    void resume();
    void stop();
    bool paused() const { return m_paused.load(); }
    /// Work run on the training thread between two batches, while paused too
    /// (the session saves there, where the weights are consistent).
    void set_between_batches(std::function<void()> work) { m_between = std::move(work); }
    /// Makes a paused run do its between-batches work now.
    void wake();

    /// Latest published model, for translating during training (eval mode, CPU).
    /// Null before the first publication.
    TranslationModelPtr snapshot() const;
    /// Publishes a copy of the current weights now (run() does after each epoch).
    void publish_snapshot();
    /// The current weights, optimiser state and history, copied (CPU). Call it on
    /// the training thread between batches, or when no run is going on.
    Checkpoint checkpoint() const;

    Network& model() { return m_model; }
    const TrainingData& data() const { return m_data; }
    const ModelConfig& model_config() const { return m_model_config; }
    const TrainConfig& train_config() const { return m_train_config; }
    /// Lets a continued run train for more epochs (or change the learning rate, controls, ...).
    void set_train_config(const TrainConfig& config);
    /// The memory a step's attention and output layer may take (core/model/memory_bound.hpp;
    /// default memory_bound()): batches above it train and validate in chunks, and a pair
    /// that cannot fit alone is refused (ConfigError naming it), as at construction.
    void set_step_memory_bound(int64_t bytes);
    const TrainHistory& history() const { return m_history; }
    TrainHistory& history() { return m_history; }
    torch::optim::Optimizer& optimizer() { return *m_optimizer; }
    torch::Device device() const { return m_device; }

    /// Loss, accuracies and BLEU of the current weights on pairs, decoding the first
    /// max_decode of them greedily for exact match and BLEU (0: none, both NaN), and
    /// forcing the references of those among them with a true alignment for alignment
    /// accuracy and AER (evaluate_alignment; NaN when none has one).
    EpochReport evaluate(const std::vector<SentencePair>& pairs, size_t max_decode);
    /// The same, keeping what the greedy decoding produced in *sample (when not null):
    /// ValidationSample's first, sources, references and hypotheses.
    EpochReport evaluate(const std::vector<SentencePair>& pairs, size_t max_decode, ValidationSample* sample);

private:
    struct RunState;
    struct EpochSums;
    // The steps of run() (core/train/train_run.cpp).
    void begin_run(RunState& run);
    EpochSums train_epoch(RunState& run, int epoch);
    void report_batch(const RunState& run, int epoch, int batch, int batches, double loss, double grad_norm);
    /// Validation, history, the training controls and a snapshot; true when early stopping ends the run.
    bool finish_epoch(RunState& run, int epoch, double epoch_lr, const EpochSums& sums);
    void end_run(RunState& run);

    void init_model();
    bool wait_if_paused();
    void between_batches();
    double train_batch(const Batch& batch, double* grad_norm, std::string* error);
    double learning_rate() const;
    void set_learning_rate(double lr);
    /// The warmup schedule: sets the learning rate of the next batch (global_step + 1).
    void schedule_batch();
    /// After an epoch: records the best weights; returns true when early stopping ends the run.
    bool after_epoch(const EpochReport& report);
    TrainingData m_data;
    std::shared_ptr<const Vocab> m_src_vocab, m_tgt_vocab;  ///< shared with every snapshot
    ModelConfig m_model_config;
    TrainConfig m_train_config;
    torch::Device m_device;
    Network m_model;
    Network m_best;              ///< keep_best: CPU copy of the best epoch's weights
    int m_plateau = 0;           ///< lr plateau schedule: epochs since the lr last changed or the loss improved
    int64_t m_step_memory_bound; ///< set_step_memory_bound
    void check_pairs_fit_bound() const;
    std::unique_ptr<torch::optim::Optimizer> m_optimizer;
    TrainHistory m_history;
    std::function<void()> m_between;
    /// Gives the heap's free pages back every minute between batches: batch shapes vary, and
    /// without it the free blocks the allocator keeps grow the resident memory over hours.
    HeapReleaser m_heap_releaser{60.0};
    std::atomic<bool> m_stop{false};
    std::atomic<bool> m_paused{false};
    std::atomic<bool> m_wake{false};
    std::mutex m_pause_mutex;
    std::condition_variable m_pause_cv;
    mutable std::mutex m_snapshot_mutex;
    std::shared_ptr<TranslationModel> m_snapshot;
};

}  // namespace attnviz
