#pragma once
// What training reports and records: per-batch and per-epoch reports, the
// history a checkpoint keeps and the GUI plots, and why a run ended.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/config/bounded_curve.hpp"

namespace attnviz {

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
    double lr = 0.0;              ///< the learning rate the batch trained with
};

/// One head's importance and confidence at one validation (TrainConfig::head_stats;
/// core/analysis/heads.hpp says how they are measured).
struct HeadSnapshot {
    std::string kind;  ///< "cross", "encoder_self", "decoder_self"
    int layer = 0;
    int head = 0;
    double importance = std::numeric_limits<double>::quiet_NaN();  ///< Michel's, normalised per kind and layer
    double confidence = std::numeric_limits<double>::quiet_NaN();  ///< Voita's mean max weight
};

/// One epoch's report.
struct EpochReport {
    int epoch = 0;               ///< 1-based
    double train_loss = 0.0;     ///< token-weighted mean training loss of the epoch
    double val_loss = 0.0;       ///< validation loss (NaN when there is no validation set)
    double val_accuracy = 0.0;   ///< exact-match accuracy on (a sample of) validation, greedy (NaN: not measured)
    double val_token_accuracy = 0.0; ///< token accuracy (teacher-forced argmax) on validation
    double val_bleu = 0.0;       ///< corpus BLEU-4 (0..100) on the validation sample (NaN: not measured)
    /// Alignment accuracy (0..1) of the attention on the validation sample's references,
    /// teacher-forced, against the true alignments (core/analysis/alignment.hpp: the share of target
    /// tokens whose attention argmax is a true link). NaN: not measured (no true alignments,
    /// e.g. a TSV corpus, or no attention).
    double val_align_accuracy = std::numeric_limits<double>::quiet_NaN();
    /// Alignment error rate (Och & Ney, 0..1, lower is better) of the same argmax alignments. NaN: not measured.
    double val_aer = std::numeric_limits<double>::quiet_NaN();
    double tokens_per_second = 0.0;  ///< target tokens/s over the epoch
    double elapsed = 0.0;        ///< seconds since training began
    double lr = 0.0;             ///< learning rate the epoch trained with (0: not recorded)
    /// Every head's importance and confidence on the fixed validation sample of
    /// TrainConfig::head_stats pairs; empty when not measured (off, or no attention heads).
    std::vector<HeadSnapshot> heads;
};

/// Everything recorded while training: what a checkpoint keeps and the GUI plots.
struct TrainHistory {
    /// At most this many per-batch loss points are kept. Reaching it halves the
    /// points (neighbours averaged) and doubles the curve's stride, so a run of any
    /// length keeps a loss curve of uniform resolution in bounded memory, and its
    /// checkpoint's metadata stays far below the 64 MiB header a reader accepts
    /// (~27 bytes a point: unbounded, ~2.4 million batches — a day of training —
    /// made a checkpoint that saved but could not be opened).
    static constexpr size_t max_batch_points = 20000;
    /// (global step, loss): each point the mean loss of batch_loss.stride() consecutive
    /// batches ending at that step (one batch each until max_batch_points is reached).
    BoundedCurve batch_loss{max_batch_points};
    std::vector<EpochReport> epochs;
    /// Validation before the first epoch, as epoch 0: a pretrained model's own loss before it is
    /// fine-tuned (Trainer::run measures it; absent for models trained from scratch).
    std::optional<EpochReport> start;
    int64_t global_step = 0;     ///< batches done so far
    int epochs_done = 0;         ///< completed epochs
    int best_epoch = 0;          ///< epoch with the lowest validation loss so far (0: none measured)
    double seconds = 0.0;        ///< training time so far
    /// The validation loss of best_epoch (NaN when none).
    double best_val_loss() const;
    /// Records one batch's loss at `step` (the caller advances global_step) in batch_loss.
    void record_batch(int64_t step, double loss);
    nlohmann::json to_json() const;
    static TrainHistory from_json(const nlohmann::json& j);
};

/// Why training ended.
enum class StopReason {
    finished,    ///< every planned epoch ran
    stopped,     ///< stop() was called (or the batch limit was reached)
    early_stop,  ///< the validation loss stopped improving for `patience` epochs
    diverged,    ///< the loss or the gradient became NaN or infinite; the last good weights are kept
    error        ///< something failed (bad data, out of memory, ...); the message says what
};
std::string to_string(StopReason r);  ///< "finished", "stopped", "early_stop", "diverged", "error"

}  // namespace attnviz
