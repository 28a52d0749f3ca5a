// The trainer: its model and optimiser, pause/stop between batches, weight
// snapshots, a batch's step and validation (the loop itself: train_run.cpp).
#include "core/train/train.hpp"

#include <cmath>

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include "core/analysis/alignment.hpp"
#include "core/analysis/alignment_eval.hpp"
#include "core/analysis/heads.hpp"
#include "core/config/pretrained_config.hpp"
#include "core/config/registry.hpp"
#include "core/persist/checkpoint.hpp"
#include "core/persist/network_check.hpp"
#include "core/decode/translation.hpp"
#include "core/model/device.hpp"
#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/model/families.hpp"
#include "core/model/memory_bound.hpp"
#include "core/optim/fused_adam.hpp"
#include "core/analysis/metrics.hpp"
#include "core/optim/optimizer_state.hpp"
#include "core/text/text.hpp"
#include "core/train/split_step.hpp"

namespace attnviz {


// --- trainer -----------------------------------------------------------------


Trainer::Trainer(TrainingData data, ModelConfig model_config, TrainConfig train_config)
    : m_data(std::move(data)),
      m_model_config(model_config),
      m_train_config(train_config),
      m_device(resolve_device(train_config.device)),
      m_step_memory_bound(memory_bound()) {
    m_train_config.validate();
    validate_train_for_model(m_train_config, m_model_config);  // --precision bf16 trains a Transformer only
    cross_heads(m_model_config, m_train_config.alignment_layer, m_train_config.alignment_heads);  // refuses a layer or head the model lacks
    if (m_model_config.seed == 0) m_model_config.seed = m_train_config.seed;
    if (!m_data.tokenizer) m_data.tokenizer = Tokenizer::for_level(m_data.level);
    init_model();
}

Trainer::Trainer(const Checkpoint& c, TrainingData data, TrainConfig train_config)
    : m_data(std::move(data)),
      m_model_config(c.model->config()),
      m_train_config(train_config),
      m_device(resolve_device(train_config.device)),
      m_step_memory_bound(memory_bound()) {
    m_train_config.validate();
    validate_train_for_model(m_train_config, m_model_config);
    cross_heads(m_model_config, m_train_config.alignment_layer, m_train_config.alignment_heads);
    m_data.src_vocab = c.model->src_vocab();  // a resumed model keeps its vocabularies
    m_data.tgt_vocab = c.model->tgt_vocab();
    m_data.level = c.model->level();
    m_data.tokenizer = c.model->tokenizer_ptr();  // and its subword model: pass it to prepare_data too
    // A multilingual pretrained model learns from its language codes as transformers' tokenizer puts
    // them: [src] source </s> in, [tgt] target </s> out (core/data/training_data.hpp).
    add_language_codes(m_data.train, *m_data.tokenizer);
    init_model();
    const Network& saved = c.model->network();
    // copy_ would broadcast a tensor of another shape (a scalar, [3H, 1]) without a word.
    check_network_parameters(*saved, "checkpoint");
    copy_weights(*m_model, *saved);
    // The state belongs to one optimiser; another one starts afresh. Its options
    // (learning rate, momentum) are this run's TrainConfig's.
    if (!c.optimizer_state.empty() && c.optimizer_state.kind == m_train_config.optimizer)
        restore_optimizer_state(c.optimizer_state, *m_optimizer, *m_model);
    m_history = c.model->history();
}

void Trainer::init_model() {
    m_src_vocab = std::make_shared<const Vocab>(m_data.src_vocab);
    m_tgt_vocab = std::make_shared<const Vocab>(m_data.tgt_vocab);
    m_model_config.src_vocab = static_cast<int64_t>(m_data.src_vocab.size());
    m_model_config.tgt_vocab = static_cast<int64_t>(m_data.tgt_vocab.size());
    m_model = build_network(m_model_config);
    check_pairs_fit_bound();
    m_model->to(m_device);
    m_optimizer = make_optimizer(*m_model, m_train_config);
}

Trainer::~Trainer() = default;

void Trainer::check_pairs_fit_bound() const {
    // A pair too long to train within the memory bound is refused now, naming it (a step
    // on it would otherwise abort the process); batches are cut into chunks that fit.
    check_pairs_fit(m_data.train, training_cost(*m_model), m_train_config.fixed_steps, m_model_config.source_steps,
                    m_data.name, "training pair", m_step_memory_bound);
    // Validation runs without gradients (evaluate): its pairs are asked what that costs.
    check_pairs_fit(m_data.val, evaluation_cost(*m_model), m_train_config.fixed_steps, m_model_config.source_steps,
                    m_data.name, "validation pair", m_step_memory_bound);
    // A Marian model places no token past its position table: a longer pair is refused now,
    // naming it, not when its batch comes ("position 96 is past the model's 64 positions").
    const int64_t table = position_limit(m_model->config());
    if (table == 0) return;
    for (const auto* part : {&m_data.train, &m_data.val})
        for (size_t i = 0; i < part->size(); ++i) {
            const SentencePair& p = (*part)[i];
            // The source with </s>; the decoder's inputs: the start token and the target.
            const auto s = static_cast<int64_t>(p.src.size()) + 1, t = static_cast<int64_t>(p.tgt.size()) + 1;
            if (s <= table && t <= table) continue;
            const std::string what = part == &m_data.train ? "training pair" : "validation pair";
            throw ConfigError((p.line > 0 ? m_data.name + ", line " + std::to_string(p.line)
                                          : m_data.name + ": " + what + " " + std::to_string(i + 1)) +
                              ": a pair of " + std::to_string(p.src.size()) + " source and " +
                              std::to_string(p.tgt.size()) + " target pieces is longer than the model's " +
                              std::to_string(table) + " positions (max_position_embeddings); leave such pairs out " +
                              "with a maximum length (--max-length; in the app: Max length)");
        }
}

void Trainer::set_step_memory_bound(int64_t bytes) {
    m_step_memory_bound = bytes;
    check_pairs_fit_bound();
}

void Trainer::set_train_config(const TrainConfig& config) {
    config.validate();
    cross_heads(m_model_config, config.alignment_layer, config.alignment_heads);
    m_train_config = config;
    set_learning_rate(config.lr);
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

void Trainer::wake() {
    {
        std::lock_guard<std::mutex> lock(m_pause_mutex);
        m_wake = true;
    }
    m_pause_cv.notify_all();
}

void Trainer::between_batches() {
    m_wake = false;
    if (m_between) m_between();
    m_heap_releaser.maybe_release();
}

bool Trainer::wait_if_paused() {
    std::unique_lock<std::mutex> lock(m_pause_mutex);
    while (m_paused.load() && !m_stop.load()) {
        m_pause_cv.wait(lock, [&] { return !m_paused.load() || m_stop.load() || m_wake.load(); });
        if (m_wake.load()) {
            lock.unlock();
            between_batches();  // e.g. a save asked for while paused
            lock.lock();
        }
    }
    return !m_stop.load();
}

TranslationModelPtr Trainer::snapshot() const {
    std::lock_guard<std::mutex> lock(m_snapshot_mutex);
    return m_snapshot;
}

void Trainer::publish_snapshot() {
    auto wrap = [&](Network network) {
        return std::make_shared<TranslationModel>(network, m_src_vocab, m_tgt_vocab, m_data.tokenizer, m_train_config,
                                                  m_history, m_data.name);
    };
    {
        // Nobody else holds the previous snapshot (the CLI never reads one; the
        // GUI keeps each it shows): reuse its network, which costs a copy of the
        // weights instead of building and initialising a whole model. Replaced under
        // the lock: a reader on another thread never finds no snapshot (it did, between
        // a reset and the new one, and translated through a null model) nor a network
        // half copied.
        std::lock_guard<std::mutex> lock(m_snapshot_mutex);
        if (m_snapshot && m_snapshot.use_count() == 1) {
            Network held = m_snapshot->network();
            if (held.use_count() == 2) {  // the snapshot's and `held`
                copy_weights(*held, *m_model);
                m_snapshot = wrap(held);
                return;
            }
        }
    }
    auto copy = wrap(clone_network(*m_model, torch::kCPU));
    std::lock_guard<std::mutex> lock(m_snapshot_mutex);
    m_snapshot = std::move(copy);
}

Checkpoint Trainer::checkpoint() const {
    Checkpoint c;
    c.model = std::make_shared<TranslationModel>(clone_network(*m_model, torch::kCPU), m_src_vocab,
                                                 m_tgt_vocab, m_data.tokenizer, m_train_config, m_history, m_data.name);
    c.optimizer_state = capture_optimizer_state(*m_optimizer, *m_model, m_train_config.optimizer);
    return c;
}

double Trainer::train_batch(const Batch& cpu_batch, double* grad_norm, std::string* error) {
    const double tf = m_train_config.teacher_forcing;
    m_optimizer->zero_grad();
    // A batch whose attention would not fit the step's memory bound runs in chunks, one after
    // the other, each weighted by its share of the target tokens: the gradient is the whole
    // batch's (core/model/memory_bound.hpp).
    const auto chunks = split_batch(cpu_batch, training_cost(*m_model), m_model_config.source_steps, m_step_memory_bound);
    const double tokens = static_cast<double>(cpu_batch.target_tokens());
    double value = 0;
    for (const Batch& chunk : chunks) {
        const auto batch = chunk.to(m_device);
        const double share = chunks.size() == 1 ? 1.0 : static_cast<double>(chunk.target_tokens()) / tokens;
        // On several CPU threads, parts of the batch train at once (core/train/split_step.hpp).
        const int parts = split_step_parts(*m_model, m_device, batch.src.size(0), tf, at::get_num_threads());
        value += share * split_loss_backward(*m_model, batch, tf, parts, share, m_train_config.precision);
        if (!std::isfinite(value)) break;
    }
    if (!std::isfinite(value)) {
        // The weights are those of the last step; a step from a bad optimiser state or a huge
        // learning rate may have made them NaN already, and then there are no good ones to keep.
        bool finite = true;
        for (const auto& p : m_model->parameters()) finite = finite && torch::isfinite(p).all().item<bool>();
        *error = "the training loss became " + std::string(std::isnan(value) ? "NaN" : "infinite") +
                 (finite ? "; training stopped and the last good weights were kept"
                         : "; training stopped: the weights are no longer finite, so they cannot be saved (a "
                           "checkpoint on disk is left as it was)") +
                 " (try a lower learning rate or gradient clipping)";
        return value;
    }
    const double clip = m_train_config.grad_clip > 0 ? m_train_config.grad_clip : std::numeric_limits<double>::infinity();
    // Adam clips and steps in one pass (core/optim/fused_adam.hpp); a non-finite norm changes nothing.
    *grad_norm = clip_and_step(*m_optimizer, m_model->parameters(), clip);
    if (!std::isfinite(*grad_norm)) {
        *error = "the gradient became NaN or infinite; training stopped and the last good weights were kept "
                 "(try a lower learning rate or gradient clipping)";
        return std::nan("");
    }
    return value;
}

namespace {
/// Which heads matter, on a fixed sample (the validation set's first config.head_stats pairs):
/// Michel's importance and Voita's confidence of every head (core/analysis/heads.hpp). None when
/// off or the model has no heads.
std::vector<HeadSnapshot> head_snapshots(const TranslationModel& view, const std::vector<SentencePair>& pairs,
                                         const TrainConfig& config, int64_t bound) {
    std::vector<HeadSnapshot> out;
    if (config.head_stats == 0 || view.network()->head_groups().empty()) return out;
    const std::vector<SentencePair> sample(
        pairs.begin(), pairs.begin() + static_cast<std::ptrdiff_t>(std::min(pairs.size(), config.head_stats)));
    HeadStatsOptions h;
    h.batch_size = config.batch_size;
    h.fixed_steps = config.fixed_steps;
    h.memory_bound = bound;
    for (const auto& s : head_stats(view, sample, h).heads)
        out.push_back({to_string(s.id.kind), s.id.layer, s.id.head, s.importance, s.confidence});
    return out;
}
}  // namespace

EpochReport Trainer::evaluate(const std::vector<SentencePair>& pairs, size_t max_decode) {
    return evaluate(pairs, max_decode, nullptr);
}

EpochReport Trainer::evaluate(const std::vector<SentencePair>& pairs, size_t max_decode, ValidationSample* sample) {
    EpochReport r;
    r.val_loss = std::nan("");
    if (pairs.empty()) return r;
    const bool was_training = m_model->is_training();
    m_model->eval();
    // A multilingual pretrained model is teacher-forced on the pairs with their language codes, as it
    // trains; decoding (below) puts the source's code itself and forces the target's first, so the
    // references start with it as the outputs do.
    std::vector<SentencePair> coded;
    if (m_model_config.is_pretrained() && m_data.tokenizer) {
        coded = pairs;
        add_language_codes(coded, *m_data.tokenizer);
    }
    const std::vector<SentencePair>& forced = coded.empty() ? pairs : coded;
    {
        // Teacher-forced, in file order, in chunks within the step memory bound, as training runs.
        const ValidationSums sums = validation_sums(*m_model, forced, m_data.src_vocab, m_data.tgt_vocab,
                                                    m_train_config.batch_size, m_train_config.fixed_steps, m_device,
                                                    m_step_memory_bound);
        r.val_loss = sums.tokens > 0 ? sums.loss / sums.tokens : std::nan("");
        r.val_token_accuracy = sums.tokens > 0 ? sums.correct / sums.tokens : 0.0;
    }
    // Greedy decoding of a sample for exact match and BLEU.
    const size_t n = std::min(pairs.size(), max_decode);
    if (n == 0) {
        r.val_accuracy = r.val_bleu = std::nan("");
        r.heads = head_snapshots(TranslationModel(m_model, m_src_vocab, m_tgt_vocab, m_data.tokenizer), pairs,
                                 m_train_config, m_step_memory_bound);
        if (was_training) m_model->train();
        return r;
    }
    std::vector<std::vector<std::string>> sources, refs, hyps;
    for (size_t i = 0; i < n; ++i) {
        sources.push_back(pairs[i].src);
        refs.push_back(forced[i].tgt);
    }
    DecodeOptions dopts;
    dopts.max_length = 0;
    for (const auto& r_ : refs) dopts.max_length = std::max<int64_t>(dopts.max_length, static_cast<int64_t>(r_.size()));
    // Twice the longest reference, within what decoding allows: a corpus with longer
    // targets still trains (their exact match and BLEU count the truncated output).
    dopts.max_length = std::min<int64_t>(dopts.max_length * 2 + 2, max_decode_length);
    // A Marian model cannot place a token past its position table (transformers cannot either):
    // its validation output stops there, as its generate() does at max_position_embeddings.
    if (const int64_t table = position_limit(m_model->config()); table > 0)
        dopts.max_length = std::min<int64_t>(dopts.max_length, table);
    dopts.batch_size = std::max<int64_t>(m_train_config.batch_size, 64);
    dopts.memory_bound = m_step_memory_bound;
    // Exact match and BLEU read the tokens only, a log's heatmaps the primary map of the first
    // few (ValidationSample); the alignment below the cross maps.
    DecodeOptions text_only = dopts;
    text_only.maps = sample ? MapsKept::primary : MapsKept::none;
    dopts.maps = MapsKept::cross;
    // A view of the live network (no copy); it switches the network to eval mode, restored below.
    const TranslationModel view(m_model, m_src_vocab, m_tgt_vocab, m_data.tokenizer);
    std::vector<Translation> translations = view.translate_tokens(sources, text_only);
    for (auto& t : translations) hyps.push_back(t.empty() ? std::vector<std::string>{} : until_eos(t.best().tokens));
    r.val_accuracy = exact_match(hyps, refs);
    r.val_bleu = corpus_bleu(hyps, refs).score;
    if (sample) {  // what a log shows of this decoding: no second one
        const auto text = [&](const std::vector<std::string>& tokens) {
            return m_data.tokenizer ? m_data.tokenizer->decode(tokens) : detokenize(tokens, m_data.level);
        };
        for (size_t i = 0; i < n; ++i) {
            sample->sources.push_back(text(sources[i]));
            sample->references.push_back(text(refs[i]));
            sample->hypotheses.push_back(text(hyps[i]));
        }
        const size_t kept = std::min(n, ValidationSample::kept_translations);
        sample->first.assign(std::make_move_iterator(translations.begin()),
                             std::make_move_iterator(translations.begin() + static_cast<std::ptrdiff_t>(kept)));
    }
    translations.clear();
    // Where the pairs know their true alignment (built-in tasks): how well the attention aligns.
    const std::vector<SentencePair> sample_pairs(pairs.begin(), pairs.begin() + static_cast<std::ptrdiff_t>(n));
    const AlignmentScore align =
        evaluate_alignment(view, sample_pairs, dopts, 0.0f,
                           cross_heads(m_model_config, m_train_config.alignment_layer, m_train_config.alignment_heads));
    r.val_align_accuracy = align.accuracy();
    r.val_aer = align.aer();
    r.heads = head_snapshots(view, pairs, m_train_config, m_step_memory_bound);
    if (was_training) m_model->train();
    return r;
}

}  // namespace attnviz
