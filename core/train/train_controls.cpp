// The training controls, written once: early stopping, keep-best and the
// learning-rate schedules (TrainConfig::patience, min_delta, keep_best, lr_schedule). The
// trainer calls after_epoch() once per completed epoch, and schedule_batch() before
// each batch (the warmup schedule changes the rate batch by batch).
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/train/train.hpp"

#include "core/model/families.hpp"

namespace attnviz {

double warmup_learning_rate(double peak, int64_t warmup_steps, int64_t step) {
    const double s = static_cast<double>(std::max<int64_t>(step, 1)), w = static_cast<double>(std::max<int64_t>(warmup_steps, 1));
    return s < w ? peak * s / w : peak * std::sqrt(w / s);
}

void Trainer::schedule_batch() {
    const auto& cfg = m_train_config;
    if (cfg.lr_schedule == LrSchedule::warmup)
        set_learning_rate(warmup_learning_rate(cfg.lr, cfg.warmup_steps, m_history.global_step + 1));
}

double Trainer::learning_rate() const {
    return m_optimizer->param_groups().front().options().get_lr();
}

void Trainer::set_learning_rate(double lr) {
    for (auto& group : m_optimizer->param_groups()) group.options().set_lr(lr);
}

bool Trainer::after_epoch(const EpochReport& er) {
    const auto& cfg = m_train_config;
    const double best = m_history.best_val_loss();
    const bool improved = std::isfinite(er.val_loss) && (!std::isfinite(best) || er.val_loss < best);
    if (improved) {
        m_history.best_epoch = er.epoch;
        if (cfg.keep_best) {
            if (!m_best) m_best = clone_network(*m_model, torch::kCPU);
            else copy_weights(*m_best, *m_model);
        }
    }
    // Learning-rate schedule for the next epoch.
    if (cfg.lr_schedule == LrSchedule::step && er.epoch % cfg.lr_step == 0) {
        set_learning_rate(learning_rate() * cfg.lr_factor);
    } else if (cfg.lr_schedule == LrSchedule::plateau && std::isfinite(er.val_loss)) {
        m_plateau = improved ? 0 : m_plateau + 1;
        if (m_plateau > cfg.lr_patience) {
            set_learning_rate(learning_rate() * cfg.lr_factor);
            m_plateau = 0;
        }
    }
    // Early stopping: patience epochs in a row without an improvement of more than min_delta.
    const int last = last_improvement_epoch(m_history.epochs, cfg.min_delta);
    return cfg.patience > 0 && last > 0 && er.epoch - last >= cfg.patience;
}

int last_improvement_epoch(const std::vector<EpochReport>& epochs, double min_delta) {
    // Keras' and Lightning's rule: the reference is the loss of the last improvement, and
    // a loss improves on it when it is lower by more than min_delta. Read from the history,
    // so a resumed run counts on where it stopped.
    int last = 0;
    double reference = std::numeric_limits<double>::infinity();
    for (const auto& e : epochs) {
        if (!std::isfinite(e.val_loss) || !(e.val_loss < reference - min_delta)) continue;
        reference = e.val_loss;
        last = e.epoch;
    }
    return last;
}

}  // namespace attnviz
