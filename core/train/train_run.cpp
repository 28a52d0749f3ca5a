// Trainer::run: one run of the training loop, in named steps -- begin the run,
// train an epoch batch by batch, finish the epoch (validation, history, controls,
// snapshot), end the run.
#include <chrono>
#include <cmath>
#include <sstream>

#include "core/io/message.hpp"
#include "core/model/families.hpp"
#include "core/train/precision.hpp"
#include "core/train/train.hpp"

namespace attnviz {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
std::string number_text(double v) {
    std::ostringstream s;
    s << v;  // 0.001, 1e-05
    return s.str();
}
}  // namespace

/// What one run counts as it goes.
struct Trainer::RunState {
    TrainObserver* obs = nullptr;
    StopReason reason = StopReason::finished;
    std::string message = "training finished";
    BatchOptions batches;       ///< how each epoch's batches are made
    double base_seconds = 0;    ///< training time before this run (a resumed model's)
    double active = 0;          ///< seconds of training in this run, pauses excluded
    int64_t run_batches = 0;    ///< batches trained in this run
    double total_tokens = 0;    ///< target tokens trained in this run
    int64_t planned = 0;        ///< batches this run plans (for the ETA)
};

/// One epoch's sums.
struct Trainer::EpochSums {
    double loss = 0, tokens = 0, seconds = 0;
    size_t batches_done = 0, batches = 0;
    bool complete() const { return batches_done == batches; }
};

StopReason Trainer::run(TrainObserver* observer) {
    TrainObserver null_observer;
    RunState run;
    run.obs = observer ? observer : &null_observer;
    // The optimiser, validation and the sample translations on this thread as the steps
    // compute (split_loss_backward flushes its own threads too).
    const ScopedFlushDenormal flush;
    try {
        begin_run(run);
        for (int epoch = m_history.epochs_done + 1; epoch <= m_train_config.epochs; ++epoch) {
            schedule_batch();  // the rate the epoch starts with (warmup: its first batch's)
            const double epoch_lr = learning_rate();
            const EpochSums sums = train_epoch(run, epoch);
            if (run.reason == StopReason::diverged) break;
            // A stopped, partial epoch is not an epoch: resuming starts it again.
            if (!sums.complete()) break;
            if (finish_epoch(run, epoch, epoch_lr, sums) || m_stop.load()) break;
        }
        end_run(run);
    } catch (const std::exception& e) {
        run.reason = StopReason::error;
        run.message = "training failed: " + without_stack_trace(e.what());
    }
    run.obs->on_finished(run.reason, run.message);
    return run.reason;
}

void Trainer::begin_run(RunState& run) {
    const auto& cfg = m_train_config;
    torch::manual_seed(cfg.seed + static_cast<uint64_t>(m_history.epochs_done));
    if (!m_history.epochs.empty() && m_history.epochs.back().lr > 0 && cfg.lr_schedule != LrSchedule::none)
        set_learning_rate(m_history.epochs.back().lr);  // a schedule goes on where it was
    m_plateau = 0;
    if (cfg.keep_best && !m_best && m_history.best_epoch > 0 && m_history.best_epoch == m_history.epochs_done)
        m_best = clone_network(*m_model, torch::kCPU);  // resumed at its best: that is the one to beat
    run.batches.batch_size = cfg.batch_size;
    run.batches.shuffle = true;
    run.batches.bucket_window = cfg.bucket_window;
    run.batches.fixed_steps = cfg.fixed_steps;
    run.base_seconds = m_history.seconds;
    const int64_t batches_per_epoch = (static_cast<int64_t>(m_data.train.size()) + cfg.batch_size - 1) / cfg.batch_size;
    run.planned = static_cast<int64_t>(cfg.epochs - m_history.epochs_done) * batches_per_epoch;
    // A pretrained model starts from what it knows: its own validation loss is the curve's first
    // point, epoch 0, before a batch changes it.
    if (m_model_config.is_pretrained() && m_history.global_step == 0 && !m_history.start && !m_data.val.empty()) {
        ValidationSample sample;
        EpochReport er = evaluate(m_data.val, cfg.eval_sample, &sample);
        er.epoch = 0;
        er.train_loss = std::nan("");
        er.lr = learning_rate();
        m_history.start = er;
        if (!sample.hypotheses.empty()) run.obs->on_validation(sample);
        run.obs->on_epoch(er);
    }
}

Trainer::EpochSums Trainer::train_epoch(RunState& run, int epoch) {
    const auto& cfg = m_train_config;
    m_model->train();
    auto batches = make_epoch_batches(m_data.train, m_data.src_vocab, m_data.tgt_vocab, run.batches, cfg.seed, epoch);
    EpochSums sums;
    sums.batches = batches.size();
    for (size_t bi = 0; bi < batches.size(); ++bi) {
        between_batches();
        if (m_paused.load()) {
            run.obs->on_paused(true);
            if (!wait_if_paused()) break;
            run.obs->on_paused(false);
        }
        if (m_stop.load()) break;
        schedule_batch();
        const auto t0 = Clock::now();
        double grad_norm = 0;
        std::string error;
        const double loss = train_batch(batches[bi], &grad_norm, &error);
        if (!error.empty()) {
            m_history.seconds = run.base_seconds + run.active;
            run.reason = StopReason::diverged;
            run.message = error;
            break;
        }
        const double dt = seconds_since(t0);
        run.active += dt;
        sums.seconds += dt;
        const double tokens = static_cast<double>(batches[bi].target_tokens());
        sums.loss += loss * tokens;
        sums.tokens += tokens;
        run.total_tokens += tokens;
        ++run.run_batches;
        ++sums.batches_done;
        ++m_history.global_step;
        m_history.record_batch(m_history.global_step, loss);
        report_batch(run, epoch, static_cast<int>(bi + 1), static_cast<int>(batches.size()), loss, grad_norm);
        if (cfg.snapshot_every > 0 && m_history.global_step % cfg.snapshot_every == 0) {
            publish_snapshot();
            run.obs->on_snapshot(epoch, m_history.global_step);
        }
        if (cfg.max_batches > 0 && run.run_batches >= cfg.max_batches) m_stop = true;
    }
    return sums;
}

void Trainer::report_batch(const RunState& run, int epoch, int batch, int batches, double loss, double grad_norm) {
    BatchReport br;
    br.epoch = epoch;
    br.batch = batch;
    br.batches_per_epoch = batches;
    br.global_step = m_history.global_step;
    br.loss = loss;
    br.grad_norm = grad_norm;
    br.tokens_per_second = run.active > 0 ? run.total_tokens / run.active : 0;
    br.elapsed = run.active;
    const int64_t left = std::max<int64_t>(0, run.planned - run.run_batches);
    br.lr = learning_rate();
    br.eta = run.run_batches > 0 ? run.active / static_cast<double>(run.run_batches) * static_cast<double>(left) : 0;
    run.obs->on_batch(br);
}

bool Trainer::finish_epoch(RunState& run, int epoch, double epoch_lr, const EpochSums& sums) {
    const auto& cfg = m_train_config;
    ValidationSample sample;
    EpochReport er = evaluate(m_data.val, cfg.eval_sample, &sample);
    er.epoch = epoch;
    er.train_loss = sums.tokens > 0 ? sums.loss / sums.tokens : std::nan("");
    er.tokens_per_second = sums.seconds > 0 ? sums.tokens / sums.seconds : 0;
    er.elapsed = run.base_seconds + run.active;
    er.lr = epoch_lr;
    m_history.epochs.push_back(er);
    m_history.epochs_done = epoch;
    m_history.seconds = run.base_seconds + run.active;
    const bool early = after_epoch(er);
    publish_snapshot();
    if (!sample.hypotheses.empty()) {
        sample.epoch = epoch;
        sample.global_step = m_history.global_step;
        run.obs->on_validation(sample);
    }
    run.obs->on_epoch(er);
    run.obs->on_snapshot(epoch, m_history.global_step);
    if (!early || epoch >= cfg.epochs) return false;
    run.reason = StopReason::early_stop;
    run.message = "early stop: the validation loss has not improved" +
                  (cfg.min_delta > 0 ? " by more than " + number_text(cfg.min_delta) : std::string()) + " for " +
                  std::to_string(cfg.patience) + " epochs (best: epoch " + std::to_string(m_history.best_epoch) + ")";
    return true;
}

void Trainer::end_run(RunState& run) {
    const auto& cfg = m_train_config;
    m_history.seconds = run.base_seconds + run.active;
    if (run.reason == StopReason::finished && m_stop.load() && m_history.epochs_done < cfg.epochs) {
        run.reason = StopReason::stopped;
        run.message = "training stopped";
    }
    m_stop = false;
    if (cfg.keep_best && m_best && m_history.best_epoch != m_history.epochs_done) {
        copy_weights(*m_model, *m_best);  // the kept model is the best epoch's
        run.message += "; kept the weights of epoch " + std::to_string(m_history.best_epoch) + " (lowest validation loss)";
    }
    publish_snapshot();
}

}  // namespace attnviz
