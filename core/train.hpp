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

#include "core/data.hpp"
#include "core/model.hpp"

namespace attnviz {

enum class OptimizerKind { adam, sgd, adadelta };
std::string to_string(OptimizerKind o);                  ///< "adam", "sgd", "adadelta"
OptimizerKind optimizer_from_string(const std::string& s);  ///< throws ConfigError

/// Training settings. Defaults train the built-in tasks well on a CPU.
struct TrainConfig {
    int epochs = 20;                  ///< passes over the training pairs
    int64_t batch_size = 64;          ///< sentences per batch (d2l: 128)
    OptimizerKind optimizer = OptimizerKind::adam;  ///< optimiser
    double lr = 0.005;                ///< learning rate (d2l: 0.005 with Adam; Adadelta: 1.0)
    double momentum = 0.0;            ///< SGD momentum
    double grad_clip = 1.0;           ///< clip the global gradient norm to this; 0 = no clipping
    double teacher_forcing = 1.0;     ///< probability of feeding the true previous token
    uint64_t seed = 0;                ///< seeds weights, shuffling, dropout and teacher forcing
    std::string device = "auto";      ///< "auto", "cpu", "cuda", "cuda:N"
    int bucket_window = 20;           ///< length bucketing window in batches (0 = off)
    int64_t fixed_steps = 0;          ///< > 0: pad/truncate to this many steps like d2l (0 = natural lengths)
    int64_t max_length = 0;           ///< drop pairs longer than this (tokens, per side); 0 = keep all
    double val_fraction = 0.1;        ///< share of pairs held out for validation
    int64_t max_batches = 0;          ///< stop after this many batches in total; 0 = no limit (tests)
    int snapshot_every = 0;           ///< also publish weights every N batches (0 = once per epoch)
    int min_freq = 1;                 ///< vocabulary: tokens seen fewer times map to <unk>
    bool split_shuffle = true;        ///< false: first pairs train, last pairs validate (d2l's split)
    bool vocab_includes_val = false;  ///< true: build vocabularies from train + validation (as d2l does)
    size_t eval_sample = 200;         ///< validation pairs greedily decoded each epoch for accuracy/BLEU
                                      ///< (0 = none: accuracy and BLEU are then NaN, i.e. not measured)

    void validate() const;            ///< throws ConfigError
    nlohmann::json to_json() const;
    static TrainConfig from_json(const nlohmann::json& j);
};

/// One batch's report.
struct BatchReport {
    int epoch = 0;                ///< 1-based
    int batch = 0;                ///< 1-based within the epoch
    int batches_per_epoch = 0;
    int64_t global_step = 0;      ///< batches since training began (continues after resume)
    double loss = 0.0;            ///< mean masked cross-entropy of the batch
    double grad_norm = 0.0;       ///< global gradient norm before clipping
    double tokens_per_second = 0.0;  ///< target tokens/s over the last batches
    double elapsed = 0.0;         ///< seconds of training in this run (pauses excluded)
    double eta = 0.0;             ///< estimated seconds left
};

/// One epoch's report.
struct EpochReport {
    int epoch = 0;               ///< 1-based
    double train_loss = 0.0;     ///< token-weighted mean training loss of the epoch
    double val_loss = 0.0;       ///< validation loss (NaN when there is no validation set)
    double val_accuracy = 0.0;   ///< exact-match accuracy on (a sample of) validation, greedy (NaN: not measured)
    double val_token_accuracy = 0.0; ///< token accuracy (teacher-forced argmax) on validation
    double val_bleu = 0.0;       ///< corpus BLEU-4 (0..100) on the validation sample (NaN: not measured)
    double tokens_per_second = 0.0;  ///< target tokens/s over the epoch
    double elapsed = 0.0;        ///< seconds since training began
};

/// Everything recorded while training: what a checkpoint keeps and the GUI plots.
struct TrainHistory {
    std::vector<std::pair<int64_t, double>> batch_loss;  ///< (global step, loss)
    std::vector<EpochReport> epochs;
    int64_t global_step = 0;     ///< batches done so far
    int epochs_done = 0;         ///< completed epochs
    double seconds = 0.0;        ///< training time so far
    nlohmann::json to_json() const;
    static TrainHistory from_json(const nlohmann::json& j);
};

/// Why training ended.
enum class StopReason { finished, stopped, diverged, error };

/// Receives progress; called on the training thread (the ui adapter queues it to the GUI).
class TrainObserver {
public:
    virtual ~TrainObserver() = default;
    virtual void on_batch(const BatchReport&) {}
    virtual void on_epoch(const EpochReport&) {}
    /// A fresh copy of the weights was published (see Trainer::snapshot()).
    virtual void on_snapshot(int epoch, int64_t global_step) {}
    virtual void on_paused(bool paused) {}
    virtual void on_finished(StopReason reason, const std::string& message) {}
};

/// The prepared data a Trainer works on.
struct TrainingData {
    std::string name;                  ///< corpus name for display
    TokenLevel level = TokenLevel::word;
    std::vector<SentencePair> train;
    std::vector<SentencePair> val;
    Vocab src_vocab, tgt_vocab;
    size_t skipped_lines = 0;          ///< bad lines skipped while reading (for the summary)
};

/// Splits, filters and builds vocabularies from a corpus per the config.
TrainingData prepare_data(const Corpus& corpus, const TrainConfig& config);

/// Trains a Seq2Seq model. Construct, then call run() on a worker thread; the
/// pause/resume/stop calls and snapshot() are safe from any thread.
class Trainer {
public:
    /// Fresh model: model_config's vocabulary sizes are filled in from data.
    Trainer(TrainingData data, ModelConfig model_config, TrainConfig train_config);
    ~Trainer();

    /// Runs until the epochs are done, stop() is called, or the loss diverges.
    /// Never throws: failures reach observer->on_finished(error, message) and the return value.
    StopReason run(TrainObserver* observer = nullptr);

    void pause();
    void resume();
    void stop();
    bool paused() const { return m_paused.load(); }

    /// Latest published copy of the weights, for translating during training (eval mode, CPU).
    /// Null before the first publication.
    std::shared_ptr<Seq2Seq> snapshot() const;
    /// Publishes a copy now (called by run() after each epoch).
    void publish_snapshot();

    Seq2Seq& model() { return m_model; }
    const TrainingData& data() const { return m_data; }
    const ModelConfig& model_config() const { return m_model_config; }
    const TrainConfig& train_config() const { return m_train_config; }
    /// Lets a resumed run train for more epochs (or change the learning rate).
    void set_train_config(const TrainConfig& config);
    const TrainHistory& history() const { return m_history; }
    TrainHistory& history() { return m_history; }
    torch::optim::Optimizer& optimizer() { return *m_optimizer; }
    torch::Device device() const { return m_device; }

    /// Loss, accuracies and BLEU of the current weights on pairs, decoding the first
    /// max_decode of them greedily for exact match and BLEU (0: none, both NaN).
    EpochReport evaluate(const std::vector<SentencePair>& pairs, size_t max_decode);

private:
    bool wait_if_paused();
    double train_batch(const Batch& batch, double* grad_norm, std::string* error);
    TrainingData m_data;
    ModelConfig m_model_config;
    TrainConfig m_train_config;
    torch::Device m_device;
    Seq2Seq m_model{nullptr};
    std::unique_ptr<torch::optim::Optimizer> m_optimizer;
    TrainHistory m_history;
    std::atomic<bool> m_stop{false};
    std::atomic<bool> m_paused{false};
    std::mutex m_pause_mutex;
    std::condition_variable m_pause_cv;
    mutable std::mutex m_snapshot_mutex;
    std::shared_ptr<Seq2Seq> m_snapshot;
};

}  // namespace attnviz
