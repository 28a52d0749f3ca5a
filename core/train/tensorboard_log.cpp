// The TensorBoard log of a training run: scalars, heatmaps and translations.
#include "core/train/tensorboard_log.hpp"

#include <cmath>

#include "core/analysis/heatmap_image.hpp"
#include "core/io/png.hpp"
#include "core/io/tensorboard_writer.hpp"

namespace attnviz {

namespace {
constexpr std::chrono::seconds flush_interval{20};
}

TensorBoardLog::TensorBoardLog(const TrainConfig& config, int64_t start_step, Warn warn)
    : m_warn(std::move(warn)), m_every(std::max(1, config.tensorboard_every)), m_step(start_step),
      m_flushed(std::chrono::steady_clock::now()) {
    try {
        m_writer = std::make_unique<tensorboard::EventWriter>(config.tensorboard);
        m_path = m_writer->path();
        m_writer->flush();  // the file and its first event exist from the start
    } catch (const std::exception& e) {
        failed(e);
    }
}

TensorBoardLog::~TensorBoardLog() {
    write_batches();  // a run stopped within an epoch: its last batches
    flush();
}

void TensorBoardLog::write_batches() {
    if (m_loss_count == 0) return;
    scalar("train/loss", m_last.global_step, m_loss_sum / m_loss_count);
    scalar("train/lr", m_last.global_step, m_last.lr);
    scalar("train/tokens_per_second", m_last.global_step, m_last.tokens_per_second);
    m_loss_sum = 0;
    m_loss_count = 0;
}

void TensorBoardLog::failed(const std::exception& e) {
    m_writer.reset();  // nothing more: a later record after a partial one would be unreadable
    if (m_warn) m_warn(std::string(e.what()) + "; training goes on without TensorBoard");
}

void TensorBoardLog::scalar(const std::string& tag, int64_t step, double value) {
    if (!m_writer || !std::isfinite(value)) return;  // NaN: not measured
    try {
        m_writer->scalar(tag, step, value);
    } catch (const std::exception& e) {
        failed(e);
    }
}

void TensorBoardLog::flush() {
    if (!m_writer) return;
    try {
        m_writer->flush();
    } catch (const std::exception& e) {
        failed(e);
    }
    m_flushed = std::chrono::steady_clock::now();
}

void TensorBoardLog::batch(const BatchReport& r) {
    if (!m_writer) return;
    m_step = r.global_step;
    m_last = r;
    m_loss_sum += r.loss;
    ++m_loss_count;
    if (r.global_step % m_every != 0) return;
    write_batches();
    if (std::chrono::steady_clock::now() - m_flushed >= flush_interval) flush();
}

void TensorBoardLog::validation(const ValidationSample& s) {
    if (!m_writer) return;
    for (size_t i = 0; i < s.first.size(); ++i) {
        const Translation& t = s.first[i];
        if (t.empty() || t.best().attention.empty()) continue;  // no attention (scoring none), or no output
        try {
            const Hypothesis& h = t.best();
            const RgbImage image = heatmap_image(h.attention.weights(), h.tokens, t.src_tokens);
            m_writer->image("attention/" + std::to_string(i), s.global_step, encode_png(image), image.width,
                            image.height);
        } catch (const FileError& e) {
            failed(e);
            return;
        } catch (const std::exception&) {
            // a map that cannot be drawn (no weights) is left out; the others still are
        }
    }
    std::vector<std::vector<std::string>> table{{"**source**", "**reference**", "**output**"}};
    for (size_t i = 0; i < s.hypotheses.size() && i < max_text_rows; ++i)
        table.push_back({tensorboard::markdown_literal(i < s.sources.size() ? s.sources[i] : std::string()),
                         tensorboard::markdown_literal(i < s.references.size() ? s.references[i] : std::string()),
                         tensorboard::markdown_literal(s.hypotheses[i])});
    try {
        m_writer->text("valid/translations", s.global_step, table);
    } catch (const std::exception& e) {
        failed(e);
    }
}

void TensorBoardLog::epoch(const EpochReport& r) {
    if (!m_writer) return;
    write_batches();  // the epoch's last batches, so that the curve reaches the validation
    if (std::isfinite(r.val_loss)) {  // NaN: no validation set (and nothing else measured)
        scalar("valid/loss", m_step, r.val_loss);
        scalar("valid/bleu", m_step, r.val_bleu);
        scalar("valid/accuracy", m_step, r.val_accuracy);
        scalar("valid/token_accuracy", m_step, r.val_token_accuracy);
        scalar("valid/alignment_accuracy", m_step, r.val_align_accuracy);
        scalar("valid/aer", m_step, r.val_aer);
    }
    flush();
}

}  // namespace attnviz
