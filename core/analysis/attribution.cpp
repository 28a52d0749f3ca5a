// Attribution per output step through the family seam: gradients from the embeddings
// (saliency, gradient x input, integrated gradients) and occlusion by forced decoding.
#include "core/analysis/attribution.hpp"

#include <algorithm>
#include <cmath>

#include "core/io/error.hpp"
#include "core/io/message.hpp"

namespace attnviz {

void AttributionOptions::validate() const {
    if (methods.empty()) throw ConfigError("attribution: no method asked for");
    if (ig_steps < 1 || ig_steps > 1024) throw ConfigError("attribution: integrated gradients' steps must be in 1..1024");
    if (max_rows < 1) throw ConfigError("attribution: max rows must be at least 1");
    for (const auto& [step, token] : contrast)
        if (step < 0) throw ConfigError("attribution: a contrast step must be >= 0");
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

/// Gradients of rows of embeddings: row r is the sentence with its embeddings scaled by
/// scale[r], its value taken at step steps[r]. Adds weight[r] x the gradients of row r to
/// grad_src[steps[r]] [T, S, E] and grad_tgt[steps[r]] [T, T, E], in chunks of max_rows.
void accumulate_gradients(EncoderDecoder& net, const Sentence& s, const torch::Tensor& src_emb,
                          const torch::Tensor& tgt_emb, const std::vector<int64_t>& steps,
                          const std::vector<double>& scale, const std::vector<double>& weight, int64_t max_rows,
                          torch::Tensor& grad_src, torch::Tensor& grad_tgt) {
    const auto dev = src_emb.device();
    const auto opts = src_emb.options();
    for (size_t start = 0; start < steps.size(); start += static_cast<size_t>(max_rows)) {
        const size_t end = std::min(steps.size(), start + static_cast<size_t>(max_rows));
        const auto R = static_cast<int64_t>(end - start);
        const std::vector<int64_t> chunk_steps(steps.begin() + static_cast<long>(start),
                                               steps.begin() + static_cast<long>(end));
        const auto a = torch::tensor(std::vector<double>(scale.begin() + static_cast<long>(start),
                                                         scale.begin() + static_cast<long>(end)),
                                     torch::kDouble).to(opts).view({R, 1, 1});
        auto src_rows = (src_emb * a).detach().requires_grad_(true);  // [R, S, E]
        auto tgt_rows = (tgt_emb * a).detach().requires_grad_(true);  // [R, T, E]
        const auto logits = net.forward_embedded(src_rows, s.src_len.expand({R}), tgt_rows);
        const auto value = values_at(logits, s, chunk_steps);
        const auto g = torch::autograd::grad({value.sum()}, {src_rows, tgt_rows});
        const auto w = torch::tensor(std::vector<double>(weight.begin() + static_cast<long>(start),
                                                         weight.begin() + static_cast<long>(end)),
                                     torch::kDouble).to(opts).view({R, 1, 1});
        const auto index = torch::tensor(chunk_steps, torch::kLong).to(dev);
        grad_src.index_add_(0, index, g[0] * w);
        grad_tgt.index_add_(0, index, g[1] * w);
    }
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
               torch::Tensor& target_drop) {
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
    }
    const auto v = torch::cat(values).to(torch::kCPU, torch::kDouble);
    source_drop = (v[0].unsqueeze(0) - v.narrow(0, 1, s.S)).t().contiguous();  // [T, S]
    if (target) target_drop = (v[0].unsqueeze(0) - v.narrow(0, 1 + s.S, s.T)).t().tril().contiguous();  // [T, T]
}

bool wants(const AttributionOptions& o, AttributionMethod m) {
    return std::find(o.methods.begin(), o.methods.end(), m) != o.methods.end();
}

}  // namespace

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
    const int64_t E = src_emb.size(2);
    auto set_scores = [&](AttributionMethod m, const torch::Tensor& src_scores, const torch::Tensor& tgt_scores) {
        for (int64_t t = 0; t < s.T; ++t) {
            AttributionScores& sc = out.steps[static_cast<size_t>(t)].scores[m];
            sc.source = row_of(src_scores, t, s.S);
            if (options.target && tgt_scores.defined()) sc.target = row_of(tgt_scores, t, t + 1);
        }
    };
    std::vector<int64_t> every_step;
    for (int64_t t = 0; t < s.T; ++t) every_step.push_back(t);

    if (wants(options, AttributionMethod::saliency) || wants(options, AttributionMethod::grad_input)) {
        auto g_src = torch::zeros({s.T, s.S, E}, src_emb.options());
        auto g_tgt = torch::zeros({s.T, s.T, E}, src_emb.options());
        const std::vector<double> ones(static_cast<size_t>(s.T), 1.0);
        accumulate_gradients(net, s, src_emb, tgt_emb, every_step, ones, ones, options.max_rows, g_src, g_tgt);
        if (wants(options, AttributionMethod::saliency))
            set_scores(AttributionMethod::saliency, g_src.norm(2, -1), g_tgt.norm(2, -1));
        if (wants(options, AttributionMethod::grad_input))
            set_scores(AttributionMethod::grad_input, (g_src * src_emb).sum(-1), (g_tgt * tgt_emb).sum(-1));
    }
    if (wants(options, AttributionMethod::integrated_gradients)) {
        const auto [nodes, weights] = gauss_legendre_01(options.ig_steps);
        std::vector<int64_t> steps;
        std::vector<double> scale, weight;
        for (int64_t t = 0; t < s.T; ++t)
            for (size_t k = 0; k < nodes.size(); ++k) {
                steps.push_back(t);
                scale.push_back(nodes[k]);
                weight.push_back(weights[k]);
            }
        auto g_src = torch::zeros({s.T, s.S, E}, src_emb.options());
        auto g_tgt = torch::zeros({s.T, s.T, E}, src_emb.options());
        accumulate_gradients(net, s, src_emb, tgt_emb, steps, scale, weight, options.max_rows, g_src, g_tgt);
        const auto a_src = (g_src * src_emb).sum(-1);  // [T, S]
        const auto a_tgt = (g_tgt * tgt_emb).sum(-1);  // [T, T]: the target embeddings move to 0 too
        std::vector<double> baseline;
        {
            torch::NoGradGuard no_grad;
            baseline = step_values(
                net.forward_embedded(torch::zeros_like(src_emb), s.src_len, torch::zeros_like(tgt_emb)), s);
        }
        const auto total = (a_src.sum(1) + a_tgt.sum(1)).to(torch::kCPU, torch::kDouble).contiguous();
        for (int64_t t = 0; t < s.T; ++t) {
            StepAttribution& st = out.steps[static_cast<size_t>(t)];
            st.baseline_log_prob = baseline[static_cast<size_t>(t)];
            st.completeness_error = total[t].item<double>() - (st.log_prob - st.baseline_log_prob);
        }
        set_scores(AttributionMethod::integrated_gradients, a_src, a_tgt);
        out.ig_steps = options.ig_steps;
    }
    if (wants(options, AttributionMethod::occlusion)) {
        torch::Tensor src_drop, tgt_drop;
        occlusion(net, s, options.target, options.max_rows, src_drop, tgt_drop);
        set_scores(AttributionMethod::occlusion, src_drop, tgt_drop);
    }
    return out;
}

std::vector<SentenceAttribution> attribute_sentences(const TranslationModel& model,
                                                     const std::vector<std::string>& sentences,
                                                     const AttributionOptions& options, const DecodeOptions& decode) {
    options.validate();
    std::vector<SentenceAttribution> out;
    for (const auto& t : model.translate(sentences, decode)) out.push_back(attribute(model, t, options));
    return out;
}

}  // namespace attnviz
