// Attribution per output step through the family seam: gradients from the embeddings
// (saliency, gradient x input, integrated gradients) and occlusion by forced decoding.
#include "core/analysis/attribution.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/io/process_memory.hpp"
#include "core/model/inference_precision.hpp"
#include "core/model/memory_bound.hpp"
#include "core/model/work_cost.hpp"

namespace attnviz {

void AttributionOptions::validate() const {
    if (methods.empty()) throw ConfigError("attribution: no method asked for");
    if (ig_steps < 0 || ig_steps > 1024)
        throw ConfigError("attribution: integrated gradients' steps must be in 1..1024, or 0 (automatic)");
    if (ig_max_steps < 1 || ig_max_steps > 1024)
        throw ConfigError("attribution: integrated gradients' most steps must be in 1..1024");
    if (ig_start_steps < 1 || ig_start_steps > ig_max_steps)
        throw ConfigError("attribution: integrated gradients' first steps must be in 1.." + std::to_string(ig_max_steps));
    if (!(ig_tolerance >= 0 && ig_tolerance <= 1))
        throw ConfigError("attribution: integrated gradients' tolerance must be in 0..1");
    if (max_rows < 1) throw ConfigError("attribution: max rows must be at least 1");
    if (memory_bound < 0) throw ConfigError("attribution: the memory bound must be >= 0");
    if (work_bound < 0) throw ConfigError("attribution: the work bound must be >= 0");
    for (const auto& [step, token] : contrast)
        if (step < 0) throw ConfigError("attribution: a contrast step must be >= 0");
}

double relative_completeness_error(double error, double log_prob, double baseline_log_prob) {
    return std::fabs(error) / std::max(std::fabs(log_prob - baseline_log_prob), 0.01);
}

std::pair<std::vector<double>, std::vector<double>> gauss_legendre_01(int64_t n) {
    // Newton's method on the Legendre polynomial P_n from Tricomi's first guesses.
    std::vector<double> nodes(static_cast<size_t>(n)), weights(static_cast<size_t>(n));
    const double pi = std::acos(-1.0);
    for (int64_t i = 0; i < n; ++i) {
        double x = std::cos(pi * (static_cast<double>(i) + 0.75) / (static_cast<double>(n) + 0.5));
        double derivative = 1;
        for (int iter = 0; iter < 100; ++iter) {
            double p0 = 1, p1 = x;  // P_0, P_1
            for (int64_t k = 2; k <= n; ++k) {
                const double p2 = ((2.0 * k - 1.0) * x * p1 - (k - 1.0) * p0) / static_cast<double>(k);
                p0 = p1;
                p1 = p2;
            }
            if (n == 1) p0 = 1;  // P_0 for the derivative below
            derivative = static_cast<double>(n) * (x * p1 - p0) / (x * x - 1.0);
            const double dx = p1 / derivative;
            x -= dx;
            if (std::fabs(dx) < 1e-15) break;
        }
        // x runs from near 1 down: node i of [0, 1] ascending is (1 - x) / 2.
        nodes[static_cast<size_t>(i)] = (1.0 - x) / 2.0;
        weights[static_cast<size_t>(i)] = 1.0 / ((1.0 - x * x) * derivative * derivative);  // (2 / ...) / 2
    }
    return {nodes, weights};
}

namespace {

/// One sentence as tensors: the source ids [1, S], the decoder's inputs [1, T] (<bos> and the
/// outputs but the last), the outputs and, per step, a contrast token (-1: none).
struct Sentence {
    torch::Tensor src, src_len, tgt_in;
    std::vector<int64_t> outputs, contrast;
    int64_t S = 0, T = 0;
};

/// Per row r of logits [R, T, V]: the value at step steps[r] -- log p(output) or, with a
/// contrast, log p(output) - log p(contrast). -> [R]
torch::Tensor values_at(const torch::Tensor& logits, const Sentence& s, const std::vector<int64_t>& steps) {
    const auto dev = logits.device();
    std::vector<int64_t> out, con, has;
    for (int64_t t : steps) {
        out.push_back(s.outputs[static_cast<size_t>(t)]);
        const int64_t c = s.contrast[static_cast<size_t>(t)];
        con.push_back(std::max<int64_t>(c, 0));
        has.push_back(c >= 0 ? 1 : 0);
    }
    const auto R = static_cast<int64_t>(steps.size());
    auto rows = torch::arange(R, torch::TensorOptions().dtype(torch::kLong).device(dev));
    auto at = logits.index({rows, torch::tensor(steps, torch::kLong).to(dev)});  // [R, V]
    auto lp = torch::log_softmax(at, -1);
    auto a = lp.gather(1, torch::tensor(out, torch::kLong).to(dev).unsqueeze(1)).squeeze(1);
    auto b = lp.gather(1, torch::tensor(con, torch::kLong).to(dev).unsqueeze(1)).squeeze(1);
    return a - b * torch::tensor(has, torch::kLong).to(dev).to(a.scalar_type());
}

/// The values of every step of teacher-forced logits [R, T, V] -> [R, T]: row r, step t holds
/// log p(output t) (minus log p(contrast t) where there is one) as row r's inputs give it.
torch::Tensor all_step_values(const torch::Tensor& logits, const Sentence& s) {
    const auto dev = logits.device();
    const int64_t R = logits.size(0);
    std::vector<int64_t> con, has;
    for (int64_t c : s.contrast) {
        con.push_back(std::max<int64_t>(c, 0));
        has.push_back(c >= 0 ? 1 : 0);
    }
    auto index = [&](const std::vector<int64_t>& v) {
        return torch::tensor(v, torch::kLong).to(dev).view({1, s.T, 1}).expand({R, s.T, 1});
    };
    const auto lp = torch::log_softmax(logits, -1);
    const auto a = lp.gather(2, index(s.outputs)).squeeze(2);
    const auto b = lp.gather(2, index(con)).squeeze(2);
    return a - b * torch::tensor(has, torch::kLong).to(dev).to(a.scalar_type()).unsqueeze(0);
}

/// all_step_values of one row [1, T, V], on the host.
std::vector<double> step_values(const torch::Tensor& logits, const Sentence& s) {
    auto v = all_step_values(logits, s)[0].to(torch::kCPU, torch::kDouble).contiguous();
    return {v.data_ptr<double>(), v.data_ptr<double>() + v.numel()};
}

/// How the rows of a sentence's attribution run within the memory bound: a pass of n rows
/// whose steps reach step t costs n x row_bytes(t + 1) (the teacher-forced target read up
/// to t + 1 positions), at most max_rows rows and `budget` bytes.
struct PassPlan {
    int64_t max_rows = 1;
    int64_t budget = 0;
    std::function<int64_t(int64_t)> row_bytes;
    /// Whether n rows reaching `width` target positions fit (one row always runs: attribute()
    /// refused a sentence whose row cannot fit before any work).
    bool fits(int64_t n, int64_t width) const { return n <= 1 || (n <= max_rows && bytes_times(n, row_bytes(width)) <= budget); }
};

/// What the gradient methods read of the rows' gradients, per step: the sum over its rows of
/// weight x (gradient . embedding) per position, and of weight x |gradient| (saliency: one row
/// of weight 1 per step). Reduced as each pass ends: never [T, S, E] at once.
struct StepGradients {
    torch::Tensor dot_src, dot_tgt;    ///< [T, S], [T, T]
    torch::Tensor norm_src, norm_tgt;  ///< [T, S], [T, T] (when asked for)
};

/// Gradients of rows of embeddings: row r is the sentence with its embeddings scaled by
/// scale[r], its value taken at step steps[r], weighted by weight[r]; in passes as `plan`
/// says. A pass reads the target only up to its last step: the logits of step t read the
/// decoder's inputs 0..t alone (causal attention, a recurrent state), so the rest adds
/// nothing to its gradients.
StepGradients accumulate_gradients(EncoderDecoder& net, const Sentence& s, const torch::Tensor& src_emb,
                                   const torch::Tensor& tgt_emb, const std::vector<int64_t>& steps,
                                   const std::vector<double>& scale, const std::vector<double>& weight,
                                   const PassPlan& plan, bool norms, const std::function<void(double)>& on_pass = {}) {
    const auto dev = src_emb.device();
    const auto opts = src_emb.options();
    StepGradients out;
    out.dot_src = torch::zeros({s.T, s.S}, opts);
    out.dot_tgt = torch::zeros({s.T, s.T}, opts);
    if (norms) {
        out.norm_src = torch::zeros({s.T, s.S}, opts);
        out.norm_tgt = torch::zeros({s.T, s.T}, opts);
    }
    size_t start = 0;
    while (start < steps.size()) {
        size_t end = start + 1;
        int64_t width = steps[start] + 1;
        while (end < steps.size() && plan.fits(static_cast<int64_t>(end - start) + 1, std::max(width, steps[end] + 1)))
            width = std::max(width, steps[end++] + 1);
        const auto R = static_cast<int64_t>(end - start);
        const std::vector<int64_t> chunk_steps(steps.begin() + static_cast<long>(start),
                                               steps.begin() + static_cast<long>(end));
        const auto a = torch::tensor(std::vector<double>(scale.begin() + static_cast<long>(start),
                                                         scale.begin() + static_cast<long>(end)),
                                     torch::kDouble).to(opts).view({R, 1, 1});
        const auto tgt_part = tgt_emb.narrow(1, 0, width);
        auto src_rows = (src_emb * a).detach().requires_grad_(true);   // [R, S, E]
        auto tgt_rows = (tgt_part * a).detach().requires_grad_(true);  // [R, width, E]
        const auto logits = net.forward_embedded(src_rows, s.src_len.expand({R}), tgt_rows);
        const auto value = values_at(logits, s, chunk_steps);
        const auto g = torch::autograd::grad({value.sum()}, {src_rows, tgt_rows});
        const auto w = torch::tensor(std::vector<double>(weight.begin() + static_cast<long>(start),
                                                         weight.begin() + static_cast<long>(end)),
                                     torch::kDouble).to(opts).view({R, 1});
        const auto index = torch::tensor(chunk_steps, torch::kLong).to(dev);
        out.dot_src.index_add_(0, index, (g[0] * src_emb).sum(-1) * w);
        out.dot_tgt.narrow(1, 0, width).index_add_(0, index, (g[1] * tgt_part).sum(-1) * w);
        if (norms) {
            out.norm_src.index_add_(0, index, g[0].norm(2, -1) * w);
            out.norm_tgt.narrow(1, 0, width).index_add_(0, index, g[1].norm(2, -1) * w);
        }
        start = end;
        if (on_pass) on_pass(static_cast<double>(end) / static_cast<double>(steps.size()));
        // Between passes the heap's free pages go back: each pass frees blocks of its own
        // sizes, and the holes they left (kept resident) added half a pass to the peak of
        // the next (tests/core/test_memory_bound.cpp). Milliseconds beside a pass.
        if (start < steps.size()) release_free_heap();
    }
    return out;
}

/// Row t of a [T, N] host tensor, its first n entries.
std::vector<float> row_of(const torch::Tensor& m, int64_t t, int64_t n) {
    const auto r = m[t].narrow(0, 0, n).to(torch::kCPU, torch::kFloat).contiguous();
    return {r.data_ptr<float>(), r.data_ptr<float>() + r.numel()};
}

/// Occlusion: the sentence once as it is, once per source token replaced by <unk> and (target)
/// once per prefix token replaced by <unk>, all in one teacher-forced batch. -> per step, the
/// value drops [T][S] and [T][T] (prefix positions <= t; the others 0).
void occlusion(EncoderDecoder& net, const Sentence& s, bool target, int64_t max_rows, torch::Tensor& source_drop,
               torch::Tensor& target_drop, const std::function<void(double)>& on_pass) {
    // max_rows: what the caller's plan lets one pass of T-wide rows without gradients run.
    torch::NoGradGuard no_grad;
    const int64_t rows = 1 + s.S + (target ? s.T : 0);
    auto src = s.src.expand({rows, s.S}).clone();
    auto tgt = s.tgt_in.expand({rows, s.T}).clone();
    for (int64_t i = 0; i < s.S; ++i) src[1 + i][i] = Vocab::unk_id;
    if (target)
        for (int64_t j = 0; j < s.T; ++j) tgt[1 + s.S + j][j] = Vocab::unk_id;
    std::vector<torch::Tensor> values;  // [rows, T]
    for (int64_t start = 0; start < rows; start += max_rows) {
        const int64_t n = std::min(max_rows, rows - start);
        const auto logits = net.forward(src.narrow(0, start, n), s.src_len.expand({n}), tgt.narrow(0, start, n));
        values.push_back(all_step_values(logits, s));
        if (on_pass) on_pass(static_cast<double>(start + n) / static_cast<double>(rows));
    }
    const auto v = torch::cat(values).to(torch::kCPU, torch::kDouble);
    source_drop = (v[0].unsqueeze(0) - v.narrow(0, 1, s.S)).t().contiguous();  // [T, S]
    if (target) target_drop = (v[0].unsqueeze(0) - v.narrow(0, 1 + s.S, s.T)).t().tril().contiguous();  // [T, T]
}

/// A sentence's attribution within the memory bound: how its rows run.
struct Budget {
    int64_t bound = 0;
    int64_t need = 0;  ///< one row of the gradient methods (or occlusion) beside the results
    PassPlan plan;
    int64_t occlusion_rows = 1;
};

/// The budget of a sentence of S source positions and T output steps (<eos> included): the
/// results it keeps (a source and a target row per step and method, the attention row, the
/// per-step sums, occlusion's values per row and step in double) and the rows beside them.
Budget budget_for(const EncoderDecoder& net, int64_t S, int64_t T, const AttributionOptions& options) {
    const MemoryCost cost = net.memory_cost();
    Budget b;
    b.bound = options.memory_bound > 0 ? options.memory_bound : memory_bound();
    const auto methods = static_cast<int64_t>(options.methods.size());
    // An int8 network's gradient passes multiply by float32 copies of its weights, all kept for the
    // backward pass (gradient_pass_weight_bytes): whatever the rows, beside the tables.
    const int64_t fixed = bytes_plus(cost.fixed, gradient_pass_weight_bytes(net));
    const int64_t kept = bytes_plus(bytes_times(4 * (methods + 5), bytes_times(T, S + T)),
                                    bytes_plus(bytes_times(16, bytes_times(T, 1 + S + T)), fixed));
    b.need = bytes_plus(kept, std::max(cost.attribution.per_row(S, T), cost.evaluation.per_row(S, T)));
    b.plan.max_rows = options.max_rows;
    // Half of what is left plans the passes: the other half is what the heap holds beside the
    // tensors counted (blocks one pass frees that the next does not reuse at once). Integrated
    // gradients' passes measured 1.3-1.45x their tensors' bytes (tests/core/test_memory_bound.cpp).
    b.plan.budget = (b.bound - std::min(kept, b.bound)) / 2;
    const ShapeCost row = cost.attribution;
    b.plan.row_bytes = [row, S](int64_t width) { return row.per_row(S, width); };
    b.occlusion_rows = std::clamp<int64_t>(b.plan.budget / std::max<int64_t>(cost.evaluation.per_row(S, T), 1), 1,
                                           options.max_rows);
    return b;
}

/// Throws ConfigError when one row of a sentence's attribution cannot fit the bound.
void check_budget(const Budget& b, int64_t S, int64_t T) {
    if (b.need <= b.bound) return;
    throw ConfigError("attribution: a sentence of " + std::to_string(S) + " source and " + std::to_string(T) +
                      " output tokens (<eos> included) would need about " + memory_text(b.need) +
                      " to attribute one output step, more than the " + memory_text(b.bound) +
                      " attribution may use; attribute shorter sentences (or a shorter maximum length)");
}

bool wants(const AttributionOptions& o, AttributionMethod m) {
    return std::find(o.methods.begin(), o.methods.end(), m) != o.methods.end();
}

/// What a sentence's attribution costs in operations (core/model/work_cost.hpp), method by
/// method, as attribute() runs it: the gradient methods one row per step (its forward pass
/// reading the target up to the step, and its backward pass), integrated gradients that per
/// point, occlusion a full teacher-forced forward pass per token replaced.
struct Work {
    ShapeCost forward;  ///< the network's forward_work()
    int64_t S = 0, T = 0;
    int64_t bound = 0;

    /// A gradient row of step t: forward and backward over the target up to t.
    int64_t gradient_row(int64_t t) const {
        return bytes_times(1 + k_backward_factor, forward.per_row(S, t + 1));
    }
    /// One gradient row for each of `steps`.
    int64_t gradient_rows(const std::vector<int64_t>& steps) const {
        int64_t w = 0;
        for (int64_t t : steps) w = bytes_plus(w, gradient_row(t));
        return w;
    }
    /// One gradient row for every step (work_for sums them once).
    int64_t every = 0;
    int64_t every_step() const { return every; }
    /// The forward passes every attribution makes: the values, integrated gradients' baseline.
    int64_t values() const { return bytes_times(2, forward.per_row(S, T)); }
    int64_t occlusion(bool target) const { return bytes_times(1 + S + (target ? T : 0), forward.per_row(S, T)); }
};

Work work_for(const EncoderDecoder& net, int64_t S, int64_t T, const AttributionOptions& options) {
    Work w;
    w.forward = net.forward_work();
    w.S = S;
    w.T = T;
    w.bound = options.work_bound > 0 ? options.work_bound : work_bound();
    for (int64_t t = 0; t < T; ++t) w.every = bytes_plus(w.every, w.gradient_row(t));
    return w;
}

/// The work of everything but automatic integrated gradients' doublings (which attribute() fits
/// into what is left): the gradient methods, occlusion, a fixed number of integrated gradients'
/// points or automatic's one point at least. Throws ConfigError naming each method's share when
/// that passes the bound.
int64_t check_work(const Work& w, const AttributionOptions& options) {
    int64_t total = w.values();
    std::vector<std::string> parts;
    auto add = [&](const std::string& what, int64_t ops) {
        total = bytes_plus(total, ops);
        parts.push_back(what + " " + work_text(ops));
    };
    if (wants(options, AttributionMethod::saliency) || wants(options, AttributionMethod::grad_input))
        add("the gradient methods", w.every_step());
    if (wants(options, AttributionMethod::integrated_gradients)) {
        const int64_t points = options.ig_steps > 0 ? options.ig_steps : 1;
        add("integrated gradients at " + std::to_string(points) + (points == 1 ? " point" : " points"),
            bytes_times(points, w.every_step()));
    }
    if (wants(options, AttributionMethod::occlusion)) add("occlusion", w.occlusion(options.target));
    if (total <= w.bound) return total;
    std::string shares;
    for (size_t i = 0; i < parts.size(); ++i) shares += (i ? ", " : "") + parts[i];
    throw ConfigError("attribution: a sentence of " + std::to_string(w.S) + " source and " + std::to_string(w.T) +
                      " output tokens (<eos> included) would take about " + work_text(total) + " (" + shares +
                      "), more than the " + work_text(w.bound) +
                      " one sentence's attribution may take (ATTNVIZ_WORK_BOUND); attribute it by cheaper methods "
                      "(saliency, grad-input), with fewer integrated-gradients points, or shorten it");
}

}  // namespace

std::string AttributionWork::text() const {
    std::string shares;
    for (const auto& m : methods) shares += (shares.empty() ? "" : ", ") + m.name + " " + work_text(m.operations);
    if (repeats > 1) shares += (shares.empty() ? "" : ", ") + std::string("each ") + std::to_string(repeats) + " times";
    return "about " + work_text(total) + (shares.empty() ? "" : " (" + shares + ")");
}

int64_t AttributionWork::sentence_bound(size_t i) const {
    const int64_t mine = i < sentences.size() ? sentences[i] : 0;
    const int64_t rounds = std::max<int64_t>(repeats, 1);
    const int64_t once = total / rounds, allowed = bound / rounds;
    if (once <= 0 || allowed <= once) return std::max<int64_t>(mine, 1);
    const double share = static_cast<double>(mine) / static_cast<double>(once);
    return bytes_plus(mine, static_cast<int64_t>(share * static_cast<double>(allowed - once)));
}

AttributionWork count_attribution_work(const TranslationModel& model, const std::vector<Translation>& translations,
                                       const AttributionOptions& options, int64_t repeats) {
    AttributionWork w;
    w.repeats = std::max<int64_t>(repeats, 1);
    w.bound = options.work_bound > 0 ? options.work_bound : work_bound();
    const bool saliency = wants(options, AttributionMethod::saliency), grad_input = wants(options, AttributionMethod::grad_input);
    const int64_t points = options.ig_steps > 0 ? options.ig_steps : 1;
    int64_t gradient = 0, integrated = 0, occluded = 0;
    for (const Translation& t : translations) {
        if (t.empty() || t.hypotheses.empty() || t.best().ids.empty()) {
            w.sentences.push_back(0);
            continue;
        }
        const Work k = work_for(*model.network(), static_cast<int64_t>(t.src_tokens.size()),
                                static_cast<int64_t>(t.best().ids.size()), options);
        int64_t mine = k.values();
        w.values = bytes_plus(w.values, k.values());
        if (saliency || grad_input) {
            gradient = bytes_plus(gradient, k.every_step());
            mine = bytes_plus(mine, k.every_step());
        }
        if (wants(options, AttributionMethod::integrated_gradients)) {
            integrated = bytes_plus(integrated, bytes_times(points, k.every_step()));
            mine = bytes_plus(mine, bytes_times(points, k.every_step()));
        }
        if (wants(options, AttributionMethod::occlusion)) {
            occluded = bytes_plus(occluded, k.occlusion(options.target));
            mine = bytes_plus(mine, k.occlusion(options.target));
        }
        w.sentences.push_back(mine);
    }
    int64_t total = w.values;
    auto add = [&](AttributionMethod m, const std::string& name, int64_t ops) {
        w.methods.push_back({m, name, ops});
        total = bytes_plus(total, ops);
    };
    if (saliency || grad_input)
        add(saliency ? AttributionMethod::saliency : AttributionMethod::grad_input,
            saliency && grad_input ? "the gradient methods" : cli_name(saliency ? AttributionMethod::saliency : AttributionMethod::grad_input),
            gradient);
    if (wants(options, AttributionMethod::integrated_gradients))
        add(AttributionMethod::integrated_gradients,
            "integrated gradients at " + std::to_string(points) + (points == 1 ? " point" : " points"), integrated);
    if (wants(options, AttributionMethod::occlusion)) add(AttributionMethod::occlusion, "occlusion", occluded);
    w.total = bytes_times(total, w.repeats);
    w.most = w.total;
    if (wants(options, AttributionMethod::integrated_gradients) && options.ig_steps == 0 && w.total < w.bound) {
        const int64_t first_round = std::min(options.ig_start_steps, options.ig_max_steps) - 1;  // beside the one counted
        w.most = bytes_plus(w.total, std::min(w.bound - w.total, bytes_times(bytes_times(first_round, integrated), w.repeats)));
    }
    return w;
}

void check_attribution_work(const AttributionWork& work, const std::string& what, const std::string& advice) {
    if (work.fits()) return;
    throw ConfigError(what + " would take " + work.text() + ", more than the " + work_text(work.bound) +
                      " a command's attribution may take (ATTNVIZ_WORK_BOUND); " + advice);
}

AttributionOptions fit_attribution_work(const TranslationModel& model, const std::vector<Translation>& translations,
                                        const AttributionOptions& options, std::vector<AttributionMethod>& left_out) {
    AttributionOptions fit = options;
    left_out.clear();
    const AttributionWork asked = count_attribution_work(model, translations, options);
    for (;;) {
        const AttributionWork w = count_attribution_work(model, translations, fit);
        if (w.fits()) return fit;
        const AttributionWork::Method* costliest = nullptr;
        for (const auto& m : w.methods)
            if ((m.method == AttributionMethod::integrated_gradients || m.method == AttributionMethod::occlusion) &&
                (!costliest || m.operations > costliest->operations))
                costliest = &m;
        if (!costliest || fit.methods.size() == 1)
            check_attribution_work(asked, "the attribution of " + std::to_string(translations.size()) +
                                              (translations.size() == 1 ? " sentence" : " sentences"),
                                   "attribute fewer or shorter sentences (or a shorter maximum length)");
        const AttributionMethod drop = costliest ? costliest->method : fit.methods.front();
        fit.methods.erase(std::remove(fit.methods.begin(), fit.methods.end(), drop), fit.methods.end());
        left_out.push_back(drop);
    }
}

int64_t attribution_work(const EncoderDecoder& network, int64_t S, int64_t T, const AttributionOptions& options) {
    return check_work(work_for(network, S, T, options), options);
}

SentenceAttribution attribute(const TranslationModel& model, const Translation& translation,
                              const AttributionOptions& options, size_t hypothesis) {
    options.validate();
    SentenceAttribution out;
    out.input = translation.input;
    out.source = translation.src_tokens;
    for (auto m : all_attribution_methods())
        if (wants(options, m)) out.methods.push_back(m);
    if (translation.empty()) return out;
    const Hypothesis& h = translation.hypotheses.at(hypothesis);
    out.output = h.tokens;
    out.text = h.text;
    out.top_k = h.top_k;
    const AttentionMap* map = nullptr;
    AttentionMap layer_mean;  // a layer's mean of heads, where the record keeps only its heads
    if (!h.attention.empty()) {
        map = options.attention_map ? h.attention.find(*options.attention_map) : &h.attention.primary();
        if (!map && options.attention_map->head == -1) {
            HeadSelection heads;
            heads.kind = options.attention_map->kind;
            heads.layer = options.attention_map->layer;
            layer_mean = AttentionMap{*options.attention_map, h.attention.select(heads), {}};  // throws naming what exists
            map = &layer_mean;
        }
        if (!map) throw ConfigError("attribution: the hypothesis has no " + describe(*options.attention_map) + " map");
        out.attention_map = describe(map->id);
    }
    if (h.ids.empty()) return out;

    // Autograd on, whatever the caller's mode: the weights are only read.
    c10::InferenceMode not_inference(false);
    torch::AutoGradMode grad_on(true);
    EncoderDecoder& net = *model.network();
    const auto dev = model.device();
    const auto ids = torch::TensorOptions().dtype(torch::kLong).device(dev);
    Sentence s;
    s.S = static_cast<int64_t>(translation.src_tokens.size());
    s.T = static_cast<int64_t>(h.ids.size());
    std::vector<int64_t> src_ids;
    for (const auto& tok : translation.src_tokens) src_ids.push_back(model.src_vocab().id(tok));
    s.src = torch::tensor(src_ids, torch::kLong).to(dev).unsqueeze(0);
    s.src_len = torch::full({1}, s.S, ids);
    std::vector<int64_t> tgt_in{Vocab::bos_id};
    tgt_in.insert(tgt_in.end(), h.ids.begin(), h.ids.end() - 1);
    s.tgt_in = torch::tensor(tgt_in, torch::kLong).to(dev).unsqueeze(0);
    s.outputs = h.ids;
    s.contrast.assign(static_cast<size_t>(s.T), -1);
    for (const auto& [step, token] : options.contrast) {
        if (step >= s.T) continue;  // a step the output does not reach
        if (!model.tgt_vocab().contains(token))
            throw ConfigError("attribution: the contrast token " + quote(token) + " is not in the target vocabulary");
        s.contrast[static_cast<size_t>(step)] = model.tgt_vocab().id(token);
    }

    // Within the memory bound: the rows in passes that fit (core/model/memory_cost.hpp).
    const Budget budget = budget_for(net, s.S, s.T, options);
    check_budget(budget, s.S, s.T);
    // Within the work bound: refused before any pass when the methods would pass it; what is
    // left is automatic integrated gradients' to spend on more points.
    const Work work = work_for(net, s.S, s.T, options);
    const int64_t committed = check_work(work, options);
    const PassPlan& plan = budget.plan;
    const int64_t occlusion_rows = budget.occlusion_rows;

    torch::Tensor src_emb, tgt_emb;
    {
        torch::NoGradGuard no_grad;
        src_emb = net.embed_source(s.src);     // [1, S, E]
        tgt_emb = net.embed_target(s.tgt_in);  // [1, T, E]
    }
    std::vector<double> value;
    {
        torch::NoGradGuard no_grad;
        value = step_values(net.forward_embedded(src_emb, s.src_len, tgt_emb), s);
    }
    out.steps.resize(static_cast<size_t>(s.T));
    for (int64_t t = 0; t < s.T; ++t) {
        StepAttribution& st = out.steps[static_cast<size_t>(t)];
        st.id = h.ids[static_cast<size_t>(t)];
        st.token = h.tokens.at(static_cast<size_t>(t));
        st.log_prob = value[static_cast<size_t>(t)];
        if (s.contrast[static_cast<size_t>(t)] >= 0)
            st.contrast = model.tgt_vocab().token(s.contrast[static_cast<size_t>(t)]);
        if (map && static_cast<size_t>(t) < map->weights.size()) st.attention = map->weights[static_cast<size_t>(t)];
    }
    auto set_scores = [&](AttributionMethod m, const torch::Tensor& src_scores, const torch::Tensor& tgt_scores) {
        for (int64_t t = 0; t < s.T; ++t) {
            AttributionScores& sc = out.steps[static_cast<size_t>(t)].scores[m];
            sc.source = row_of(src_scores, t, s.S);
            if (options.target && tgt_scores.defined()) sc.target = row_of(tgt_scores, t, t + 1);
        }
    };
    std::vector<int64_t> every_step;
    for (int64_t t = 0; t < s.T; ++t) every_step.push_back(t);

    auto starting = [&](AttributionMethod m) {
        if (options.on_method) options.on_method(m);
    };
    const auto passes = [&](AttributionMethod m, int64_t points) -> std::function<void(double)> {
        if (!options.on_pass) return {};
        return [&options, m, points](double done) { options.on_pass(m, points, done); };
    };
    if (wants(options, AttributionMethod::saliency) || wants(options, AttributionMethod::grad_input)) {
        starting(wants(options, AttributionMethod::saliency) ? AttributionMethod::saliency : AttributionMethod::grad_input);
        const std::vector<double> ones(static_cast<size_t>(s.T), 1.0);
        const bool saliency = wants(options, AttributionMethod::saliency);
        const StepGradients g = accumulate_gradients(net, s, src_emb, tgt_emb, every_step, ones, ones, plan, saliency,
                                                     passes(saliency ? AttributionMethod::saliency : AttributionMethod::grad_input, 0));
        if (saliency) set_scores(AttributionMethod::saliency, g.norm_src, g.norm_tgt);
        if (wants(options, AttributionMethod::grad_input)) set_scores(AttributionMethod::grad_input, g.dot_src, g.dot_tgt);
    }
    if (wants(options, AttributionMethod::integrated_gradients)) {
        starting(AttributionMethod::integrated_gradients);
        // Each step's path integral on its own rows: a fixed number of points, or (automatic)
        // the steps still above the tolerance again with twice the points. Gauss-Legendre's
        // nodes of n and 2n points do not nest, so a doubling recomputes the step's rows.
        std::vector<double> baseline;
        {
            torch::NoGradGuard no_grad;
            baseline = step_values(
                net.forward_embedded(torch::zeros_like(src_emb), s.src_len, torch::zeros_like(tgt_emb)), s);
        }
        const bool automatic = options.ig_steps == 0;
        int64_t n = automatic ? options.ig_start_steps : options.ig_steps;
        // Automatic: the work left beside the other methods (check_work counted one point of
        // it); a first round that would pass it starts with fewer points.
        int64_t left = automatic ? work.bound - committed + work.every_step() : 0;
        bool capped = false;
        if (automatic)
            while (n > 1 && bytes_times(n, work.every_step()) > left) {
                n /= 2;
                capped = true;
            }
        torch::Tensor a_src = torch::zeros({s.T, s.S}, src_emb.options());  // [T, S]
        torch::Tensor a_tgt = torch::zeros({s.T, s.T}, src_emb.options());  // [T, T]: the target embeddings move to 0 too
        std::vector<int64_t> pending = every_step;
        out.ig_auto = automatic;
        out.ig_tolerance = automatic ? options.ig_tolerance : 0.0;
        while (!pending.empty()) {
            const auto [nodes, weights] = gauss_legendre_01(n);
            std::vector<int64_t> steps;
            std::vector<double> scale, weight;
            for (int64_t t : pending)
                for (size_t k = 0; k < nodes.size(); ++k) {
                    steps.push_back(t);
                    scale.push_back(nodes[k]);
                    weight.push_back(weights[k]);
                }
            left -= bytes_times(n, work.gradient_rows(pending));
            const StepGradients g = accumulate_gradients(net, s, src_emb, tgt_emb, steps, scale, weight, plan, false,
                                                         passes(AttributionMethod::integrated_gradients, n));
            const auto index = torch::tensor(pending, torch::kLong).to(dev);
            a_src.index_copy_(0, index, g.dot_src.index_select(0, index));
            a_tgt.index_copy_(0, index, g.dot_tgt.index_select(0, index));
            const auto total = (g.dot_src.sum(1) + g.dot_tgt.sum(1)).to(torch::kCPU, torch::kDouble).contiguous();
            std::vector<int64_t> again;
            for (int64_t t : pending) {
                StepAttribution& st = out.steps[static_cast<size_t>(t)];
                st.baseline_log_prob = baseline[static_cast<size_t>(t)];
                st.completeness_error = total[t].item<double>() - (st.log_prob - st.baseline_log_prob);
                st.ig_steps = n;
                if (automatic &&
                    relative_completeness_error(st.completeness_error, st.log_prob, st.baseline_log_prob) >
                        options.ig_tolerance)
                    again.push_back(t);
            }
            if (again.empty() || 2 * n > options.ig_max_steps) break;
            if (bytes_times(2 * n, work.gradient_rows(again)) > left) {  // the next round would pass the work bound
                capped = true;
                break;
            }
            pending = std::move(again);
            n *= 2;
            release_free_heap();
        }
        for (const StepAttribution& st : out.steps) {
            out.ig_steps = std::max(out.ig_steps, st.ig_steps);
            out.ig_relative_error =
                std::max(out.ig_relative_error,
                         relative_completeness_error(st.completeness_error, st.log_prob, st.baseline_log_prob));
        }
        out.ig_converged = out.ig_relative_error <= options.ig_tolerance;
        out.ig_work_capped = automatic && capped && !out.ig_converged;
        set_scores(AttributionMethod::integrated_gradients, a_src, a_tgt);
    }
    if (wants(options, AttributionMethod::occlusion)) {
        starting(AttributionMethod::occlusion);
        torch::Tensor src_drop, tgt_drop;
        occlusion(net, s, options.target, occlusion_rows, src_drop, tgt_drop, passes(AttributionMethod::occlusion, 0));
        set_scores(AttributionMethod::occlusion, src_drop, tgt_drop);
    }
    return out;
}

MapsKept maps_for_attribution(const AttributionOptions& options) {
    if (!options.attention_map) return MapsKept::primary;
    return options.attention_map->kind == AttentionKind::cross ? MapsKept::cross : MapsKept::all;
}

namespace {

/// Runs f, a ConfigError's "attribution: " replaced by "sentence N: ".
template <class F>
auto naming_sentence(size_t index, F&& f) {
    try {
        return f();
    } catch (const ConfigError& e) {
        const std::string what = e.what();
        const std::string prefix = "attribution: ";
        throw ConfigError("sentence " + std::to_string(index + 1) + ": " +
                          (what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what));
    }
}

}  // namespace

SentenceAttribution attribute_sentence(const TranslationModel& model, const Translation& translation,
                                       const AttributionOptions& options, size_t index) {
    return naming_sentence(index, [&] { return attribute(model, translation, options); });
}

void check_attribution_fits(const TranslationModel& model, const std::vector<Translation>& translations,
                            const AttributionOptions& options) {
    for (size_t i = 0; i < translations.size(); ++i) {
        const Translation& t = translations[i];
        if (t.empty() || t.hypotheses.empty() || t.best().ids.empty()) continue;
        const auto S = static_cast<int64_t>(t.src_tokens.size()), T = static_cast<int64_t>(t.best().ids.size());
        naming_sentence(i, [&] {
            check_budget(budget_for(*model.network(), S, T, options), S, T);
            check_work(work_for(*model.network(), S, T, options), options);
            return 0;
        });
    }
}

std::vector<SentenceAttribution> attribute_sentences(const TranslationModel& model,
                                                     const std::vector<std::string>& sentences,
                                                     const AttributionOptions& options, const DecodeOptions& decode,
                                                     std::vector<Translation>* translations_out,
                                                     const std::function<void(size_t, size_t)>& on_sentence) {
    options.validate();
    // The translations keep only the map attribution reads; dropped unless the caller wants them.
    DecodeOptions d = decode;
    d.maps = maps_for_attribution(options);
    if (d.memory_bound == 0) d.memory_bound = options.memory_bound;
    std::vector<SentenceAttribution> out;
    auto translations = model.translate(sentences, d);
    check_attribution_fits(model, translations, options);  // before any is attributed
    // The work bound holds the sentences together, not each alone (issue 46).
    const AttributionWork work = count_attribution_work(model, translations, options);
    check_attribution_work(work,
                           "the attribution of " + std::to_string(translations.size()) +
                               (translations.size() == 1 ? " sentence" : " sentences"),
                           "attribute fewer or shorter sentences, by cheaper methods (saliency, grad-input) or with "
                           "fewer integrated-gradients points");
    for (size_t i = 0; i < translations.size(); ++i) {
        if (on_sentence && work.shows_progress()) on_sentence(i, translations.size());
        AttributionOptions mine = options;
        mine.work_bound = work.sentence_bound(i);  // its share: automatic integrated gradients' points
        out.push_back(attribute_sentence(model, translations[i], mine, i));
    }
    if (translations_out) *translations_out = std::move(translations);
    return out;
}

}  // namespace attnviz
