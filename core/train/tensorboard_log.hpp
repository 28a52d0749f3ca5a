#pragma once
// A training run in TensorBoard: what TrainConfig::tensorboard asks for, written
// through core/io/tensorboard_writer.hpp into a new event file of that folder.
//
//   train/loss, train/lr, train/tokens_per_second   every TrainConfig::tensorboard_every
//                                                    batches (the loss: those batches' mean)
//   valid/loss, valid/bleu, valid/accuracy           at each validation; also valid/token_accuracy,
//   (valid/token_accuracy, alignment_accuracy, aer)  and where measured the alignment scores
//   attention/0, attention/1, attention/2            heatmaps of the first three validation
//                                                    sentences' greedy translations (Joey NMT's tags)
//   valid/translations                               the validation sample as a table: source,
//                                                    reference, output (its first 200 sentences)
//
// Steps are global steps (batches trained), so curves continue across resumed runs.
// The file is flushed after each validation and at least every 20 seconds while
// training, so TensorBoard shows a run live. A log that cannot write (a folder that
// cannot be created, a full disk) reports once through its warning callback and then
// writes nothing more; training goes on.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/config/config.hpp"
#include "core/config/history.hpp"
#include "core/train/train.hpp"

namespace attnviz {

namespace tensorboard {
class EventWriter;
}

class TensorBoardLog {
public:
    using Warn = std::function<void(const std::string& message)>;
    /// Rows of valid/translations at most (the sample may be far larger).
    static constexpr size_t max_text_rows = 200;

    /// Opens a new event file in config.tensorboard (created when missing); start_step is
    /// the global step the run starts from. Never throws: a failure goes to warn.
    TensorBoardLog(const TrainConfig& config, int64_t start_step, Warn warn);
    ~TensorBoardLog();

    void batch(const BatchReport& r);
    void validation(const ValidationSample& s);
    /// The validation's scores; then flushes.
    void epoch(const EpochReport& r);
    /// Writes what is queued now.
    void flush();

    /// Whether it still writes (false after a failure).
    bool ok() const { return m_writer != nullptr; }
    /// The event file ("" when it could not be created).
    const std::string& path() const { return m_path; }

private:
    void failed(const std::exception& e);
    /// train/* of the batches since the last write (their mean loss, the last one's lr and speed).
    void write_batches();
    void scalar(const std::string& tag, int64_t step, double value);

    std::unique_ptr<tensorboard::EventWriter> m_writer;
    Warn m_warn;
    std::string m_path;
    int m_every = 10;
    int64_t m_step = 0;              ///< the last batch's global step (the validations' step)
    double m_loss_sum = 0;           ///< losses of the batches not written yet
    int m_loss_count = 0;
    BatchReport m_last;              ///< the last batch (its lr and speed)
    std::chrono::steady_clock::time_point m_flushed;
};

}  // namespace attnviz
