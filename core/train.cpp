// The training loop: runs on the caller's thread, reports through an observer,
// honours pause/stop between batches and publishes weight snapshots.
#include "core/train.hpp"

#include <chrono>
#include <cmath>

#include <nlohmann/json.hpp>

#include "core/adadelta.hpp"
#include "core/decode.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/metrics.hpp"

namespace attnviz {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

// --- history -----------------------------------------------------------------

namespace {
nlohmann::json finite_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }
double number_or_nan(const nlohmann::json& j, const char* key) {
    return j.contains(key) && j.at(key).is_number() ? j.at(key).get<double>() : std::nan("");
}

nlohmann::json epoch_to_json(const EpochReport& e) {
    return {{"epoch", e.epoch},
            {"train_loss", e.train_loss},
            {"val_loss", std::isfinite(e.val_loss) ? nlohmann::json(e.val_loss) : nlohmann::json(nullptr)},
            {"val_accuracy", finite_or_null(e.val_accuracy)},
            {"val_token_accuracy", e.val_token_accuracy},
            {"val_bleu", finite_or_null(e.val_bleu)},
            {"tokens_per_second", e.tokens_per_second},
            {"elapsed", e.elapsed}};
}
EpochReport epoch_from_json(const nlohmann::json& j) {
    EpochReport e;
    e.epoch = j.at("epoch").get<int>();
    e.train_loss = j.at("train_loss").get<double>();
    e.val_loss = j.at("val_loss").is_null() ? std::nan("") : j.at("val_loss").get<double>();
    e.val_accuracy = number_or_nan(j, "val_accuracy");
    e.val_token_accuracy = j.value("val_token_accuracy", 0.0);
    e.val_bleu = number_or_nan(j, "val_bleu");
    e.tokens_per_second = j.value("tokens_per_second", 0.0);
    e.elapsed = j.value("elapsed", 0.0);
    return e;
}
}  // namespace

nlohmann::json TrainHistory::to_json() const {
    nlohmann::json steps = nlohmann::json::array(), losses = nlohmann::json::array(),
                   epochs_j = nlohmann::json::array();
    for (const auto& [s, l] : batch_loss) {
        steps.push_back(s);
        losses.push_back(l);
    }
    for (const auto& e : epochs) epochs_j.push_back(epoch_to_json(e));
    return {{"batch_step", steps}, {"batch_loss", losses},       {"epochs", epochs_j},
            {"global_step", global_step}, {"epochs_done", epochs_done}, {"seconds", seconds}};
}

TrainHistory TrainHistory::from_json(const nlohmann::json& j) {
    TrainHistory h;
    const auto& steps = j.at("batch_step");
    const auto& losses = j.at("batch_loss");
    if (steps.size() != losses.size()) throw Error("training history: batch steps and losses differ in length");
    for (size_t i = 0; i < steps.size(); ++i) h.batch_loss.emplace_back(steps[i].get<int64_t>(), losses[i].get<double>());
    for (const auto& e : j.at("epochs")) h.epochs.push_back(epoch_from_json(e));
    h.global_step = j.value("global_step", int64_t{0});
    h.epochs_done = j.value("epochs_done", 0);
    h.seconds = j.value("seconds", 0.0);
    return h;
}

// --- data --------------------------------------------------------------------

TrainingData prepare_data(const Corpus& corpus, const TrainConfig& config) {
    config.validate();
    TrainingData d;
    d.name = corpus.name;
    d.level = corpus.level;
    d.skipped_lines = corpus.skipped.size();
    auto pairs = filter_by_length(corpus.pairs, static_cast<size_t>(config.max_length));
    if (pairs.empty())
        throw ConfigError("corpus '" + corpus.name + "': no pair is short enough for max length " +
                          std::to_string(config.max_length));
    std::tie(d.train, d.val) = split_train_val(pairs, config.val_fraction, config.seed, config.split_shuffle);
    if (d.train.empty()) throw ConfigError("corpus '" + corpus.name + "': no training pairs left after the split");
    std::vector<std::vector<std::string>> src, tgt;
    auto collect = [&](const std::vector<SentencePair>& ps) {
        for (const auto& p : ps) {
            src.push_back(p.src);
            tgt.push_back(p.tgt);
        }
    };
    collect(d.train);
    if (config.vocab_includes_val) collect(d.val);
    d.src_vocab = Vocab::build(src, config.min_freq);
    d.tgt_vocab = Vocab::build(tgt, config.min_freq);
    return d;
}

// --- trainer -----------------------------------------------------------------

namespace {
std::unique_ptr<torch::optim::Optimizer> make_optimizer(Seq2Seq& model, const TrainConfig& c) {
    auto params = model->parameters();
    switch (c.optimizer) {
    case OptimizerKind::sgd:
        return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(c.lr).momentum(c.momentum));
    case OptimizerKind::adadelta:
        return std::make_unique<Adadelta>(params, AdadeltaOptions(c.lr));
    case OptimizerKind::adam:
        break;
    }
    return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(c.lr));
}
}  // namespace

Trainer::Trainer(TrainingData data, ModelConfig model_config, TrainConfig train_config)
    : m_data(std::move(data)),
      m_model_config(model_config),
      m_train_config(train_config),
      m_device(resolve_device(train_config.device)) {
    m_train_config.validate();
    m_model_config.src_vocab = static_cast<int64_t>(m_data.src_vocab.size());
    m_model_config.tgt_vocab = static_cast<int64_t>(m_data.tgt_vocab.size());
    if (m_model_config.seed == 0) m_model_config.seed = m_train_config.seed;
    m_model = Seq2Seq(m_model_config);
    m_model->to(m_device);
    m_optimizer = make_optimizer(m_model, m_train_config);
}

Trainer::~Trainer() = default;

void Trainer::set_train_config(const TrainConfig& config) {
    config.validate();
    m_train_config = config;
    for (auto& group : m_optimizer->param_groups()) group.options().set_lr(config.lr);
}

void Trainer::pause() {
    m_paused = true;
}

void Trainer::resume() {
    {
        std::lock_guard<std::mutex> lock(m_pause_mutex);
        m_paused = false;
    }
    m_pause_cv.notify_all();
}

void Trainer::stop() {
    {
        std::lock_guard<std::mutex> lock(m_pause_mutex);
        m_stop = true;
    }
    m_pause_cv.notify_all();
}

bool Trainer::wait_if_paused() {
    std::unique_lock<std::mutex> lock(m_pause_mutex);
    m_pause_cv.wait(lock, [&] { return !m_paused.load() || m_stop.load(); });
    return !m_stop.load();
}

std::shared_ptr<Seq2Seq> Trainer::snapshot() const {
    std::lock_guard<std::mutex> lock(m_snapshot_mutex);
    return m_snapshot;
}

void Trainer::publish_snapshot() {
    {
        // Nobody else holds the previous snapshot (the CLI never reads one; the
        // GUI keeps each it shows): refresh its weights in place, which costs a
        // copy instead of building and initialising a whole model.
        std::lock_guard<std::mutex> lock(m_snapshot_mutex);
        if (m_snapshot && m_snapshot.use_count() == 1 && m_snapshot->ptr().use_count() == 1) {
            copy_weights(*m_snapshot, m_model);
            return;
        }
    }
    auto copy = std::make_shared<Seq2Seq>(clone_model(m_model, torch::kCPU));
    std::lock_guard<std::mutex> lock(m_snapshot_mutex);
    m_snapshot = std::move(copy);
}

double Trainer::train_batch(const Batch& cpu_batch, double* grad_norm, std::string* error) {
    auto batch = cpu_batch.to(m_device);
    auto logits = m_model->forward(batch.src, batch.src_len, batch.tgt_in, m_train_config.teacher_forcing);
    auto loss = masked_cross_entropy(logits, batch.tgt_out, Vocab::pad_id);
    const double value = loss.item<double>();
    if (!std::isfinite(value)) {
        *error = "the training loss became " + std::string(std::isnan(value) ? "NaN" : "infinite") +
                 "; training stopped and the last good weights were kept (try a lower learning rate "
                 "or gradient clipping)";
        return value;
    }
    m_optimizer->zero_grad();
    loss.backward();
    const double clip = m_train_config.grad_clip > 0 ? m_train_config.grad_clip : std::numeric_limits<double>::infinity();
    *grad_norm = torch::nn::utils::clip_grad_norm_(m_model->parameters(), clip);
    if (!std::isfinite(*grad_norm)) {
        *error = "the gradient became NaN or infinite; training stopped and the last good weights were kept "
                 "(try a lower learning rate or gradient clipping)";
        return std::nan("");
    }
    m_optimizer->step();
    return value;
}

EpochReport Trainer::evaluate(const std::vector<SentencePair>& pairs, size_t max_decode) {
    EpochReport r;
    r.val_loss = std::nan("");
    if (pairs.empty()) return r;
    const bool was_training = m_model->is_training();
    m_model->eval();
    {
        torch::NoGradGuard no_grad;
        BatchOptions opts;
        opts.batch_size = m_train_config.batch_size;
        opts.shuffle = false;
        opts.bucket_window = 0;
        opts.fixed_steps = m_train_config.fixed_steps;
        double loss_sum = 0, tokens = 0, correct = 0;
        for (const auto& cpu : make_epoch_batches(pairs, m_data.src_vocab, m_data.tgt_vocab, opts, 0, 0)) {
            auto b = cpu.to(m_device);
            auto logits = m_model->forward(b.src, b.src_len, b.tgt_in);
            const double n = static_cast<double>(cpu.target_tokens());
            loss_sum += masked_cross_entropy(logits, b.tgt_out, Vocab::pad_id).item<double>() * n;
            auto mask = b.tgt_out.ne(Vocab::pad_id);
            correct += logits.argmax(-1).eq(b.tgt_out).logical_and(mask).sum().item<double>();
            tokens += n;
        }
        r.val_loss = tokens > 0 ? loss_sum / tokens : std::nan("");
        r.val_token_accuracy = tokens > 0 ? correct / tokens : 0.0;
    }
    // Greedy decoding of a sample for exact match and BLEU.
    const size_t n = std::min(pairs.size(), max_decode);
    if (n == 0) {
        r.val_accuracy = r.val_bleu = std::nan("");
        if (was_training) m_model->train();
        return r;
    }
    std::vector<std::vector<std::string>> sources, refs, hyps;
    for (size_t i = 0; i < n; ++i) {
        sources.push_back(pairs[i].src);
        refs.push_back(pairs[i].tgt);
    }
    DecodeOptions dopts;
    dopts.max_length = 0;
    for (const auto& r_ : refs) dopts.max_length = std::max<int64_t>(dopts.max_length, static_cast<int64_t>(r_.size()));
    dopts.max_length = dopts.max_length * 2 + 2;
    dopts.batch_size = std::max<int64_t>(m_train_config.batch_size, 64);
    for (auto& t : greedy_decode(m_model, m_data.src_vocab, m_data.tgt_vocab, m_data.level, sources, dopts)) {
        std::vector<std::string> words;
        if (!t.empty())
            for (const auto& tok : t.best().tokens) {
                if (tok == Vocab::eos_token) break;
                words.push_back(tok);
            }
        hyps.push_back(std::move(words));
    }
    r.val_accuracy = exact_match(hyps, refs);
    r.val_bleu = corpus_bleu(hyps, refs).score;
    if (was_training) m_model->train();
    return r;
}

StopReason Trainer::run(TrainObserver* observer) {
    TrainObserver null_observer;
    TrainObserver& obs = observer ? *observer : null_observer;
    try {
        const auto& cfg = m_train_config;
        torch::manual_seed(cfg.seed + static_cast<uint64_t>(m_history.epochs_done));
        BatchOptions opts;
        opts.batch_size = cfg.batch_size;
        opts.shuffle = true;
        opts.bucket_window = cfg.bucket_window;
        opts.fixed_steps = cfg.fixed_steps;
        const double base_seconds = m_history.seconds;
        double active = 0;  // seconds of training in this run, pauses excluded
        int64_t run_batches = 0;
        double total_tokens = 0;
        const int64_t batches_per_epoch =
            (static_cast<int64_t>(m_data.train.size()) + cfg.batch_size - 1) / cfg.batch_size;
        const int64_t planned = static_cast<int64_t>(cfg.epochs - m_history.epochs_done) * batches_per_epoch;

        for (int epoch = m_history.epochs_done + 1; epoch <= cfg.epochs; ++epoch) {
            m_model->train();
            auto batches = make_epoch_batches(m_data.train, m_data.src_vocab, m_data.tgt_vocab, opts, cfg.seed, epoch);
            double epoch_loss = 0, epoch_tokens = 0, epoch_time = 0;
            size_t batches_done = 0;
            for (size_t bi = 0; bi < batches.size(); ++bi) {
                if (m_paused.load()) {
                    obs.on_paused(true);
                    if (!wait_if_paused()) break;
                    obs.on_paused(false);
                }
                if (m_stop.load()) break;
                const auto t0 = Clock::now();
                double grad_norm = 0;
                std::string error;
                const double loss = train_batch(batches[bi], &grad_norm, &error);
                if (!error.empty()) {
                    m_history.seconds = base_seconds + active;
                    publish_snapshot();
                    obs.on_finished(StopReason::diverged, error);
                    return StopReason::diverged;
                }
                const double dt = seconds_since(t0);
                active += dt;
                epoch_time += dt;
                const double tokens = static_cast<double>(batches[bi].target_tokens());
                epoch_loss += loss * tokens;
                epoch_tokens += tokens;
                total_tokens += tokens;
                ++run_batches;
                ++batches_done;
                ++m_history.global_step;
                m_history.batch_loss.emplace_back(m_history.global_step, loss);

                BatchReport br;
                br.epoch = epoch;
                br.batch = static_cast<int>(bi + 1);
                br.batches_per_epoch = static_cast<int>(batches.size());
                br.global_step = m_history.global_step;
                br.loss = loss;
                br.grad_norm = grad_norm;
                br.tokens_per_second = active > 0 ? total_tokens / active : 0;
                br.elapsed = active;
                const int64_t left = std::max<int64_t>(0, planned - run_batches);
                br.eta = run_batches > 0 ? active / static_cast<double>(run_batches) * static_cast<double>(left) : 0;
                obs.on_batch(br);
                if (cfg.snapshot_every > 0 && m_history.global_step % cfg.snapshot_every == 0) {
                    publish_snapshot();
                    obs.on_snapshot(epoch, m_history.global_step);
                }
                if (cfg.max_batches > 0 && run_batches >= cfg.max_batches) m_stop = true;
            }
            // A stopped, partial epoch is not an epoch: resuming starts it again.
            const bool complete_epoch = batches_done == batches.size();
            if (!complete_epoch) break;
            EpochReport er = evaluate(m_data.val, cfg.eval_sample);
            er.epoch = epoch;
            er.train_loss = epoch_tokens > 0 ? epoch_loss / epoch_tokens : std::nan("");
            er.tokens_per_second = epoch_time > 0 ? epoch_tokens / epoch_time : 0;
            er.elapsed = base_seconds + active;
            m_history.epochs.push_back(er);
            m_history.epochs_done = epoch;
            m_history.seconds = base_seconds + active;
            publish_snapshot();
            obs.on_epoch(er);
            obs.on_snapshot(epoch, m_history.global_step);
            if (m_stop.load()) break;
        }
        m_history.seconds = base_seconds + active;
        const bool stopped = m_stop.load() && m_history.epochs_done < cfg.epochs;
        m_stop = false;
        const StopReason reason = stopped ? StopReason::stopped : StopReason::finished;
        obs.on_finished(reason, stopped ? "training stopped" : "training finished");
        return reason;
    } catch (const std::exception& e) {
        std::string msg = e.what();
        if (auto pos = msg.find("\nException raised from"); pos != std::string::npos) msg.resize(pos);
        obs.on_finished(StopReason::error, "training failed: " + msg);
        return StopReason::error;
    }
}

}  // namespace attnviz
