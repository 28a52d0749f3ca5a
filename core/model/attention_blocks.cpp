// Blocks the attention families share (core/model/attention_blocks.hpp).
#include "core/model/attention_blocks.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/model/row_gather.hpp"

namespace attnviz {

torch::Tensor key_bias(const torch::Tensor& mask) {
    return torch::zeros(mask.sizes(), torch::TensorOptions().dtype(torch::kFloat).device(mask.device()))
        .masked_fill(mask.logical_not(), -std::numeric_limits<float>::infinity())
        .unsqueeze(1)
        .unsqueeze(1);
}

void append_head_maps(std::vector<StepMap>& maps, AttentionKind kind, int64_t layer, const torch::Tensor& weights,
                      const torch::Tensor& scores) {
    const auto w = weights.select(2, 0);
    const auto s = scores.defined() ? scores.select(2, 0) : torch::Tensor();
    for (int64_t h = 0; h < w.size(1); ++h)
        maps.push_back(StepMap{AttentionMapId{kind, static_cast<int>(layer), static_cast<int>(h)}, w.select(1, h),
                               s.defined() ? s.select(1, h) : torch::Tensor()});
}

torch::Tensor heads_switched_off(const AttentionIntervention* intervention, AttentionKind kind, int64_t layer,
                                 int64_t heads) {
    if (!intervention) return {};
    torch::Tensor keep;
    for (const auto& off : intervention->heads_off) {
        if (off.kind != kind || off.layer != layer || off.head >= heads) continue;
        if (!keep.defined()) keep = torch::ones({heads});
        if (off.head < 0) keep.zero_();
        else keep[off.head] = 0;
    }
    return keep;
}

namespace {
bool recording_gradient(const torch::Tensor& a, const torch::Tensor& b) {
    return torch::GradMode::is_enabled() && ((a.defined() && a.requires_grad()) || (b.defined() && b.requires_grad()));
}
}  // namespace

GrowingSteps::GrowingSteps(const GrowingSteps& other) : m_steps(other.m_steps) {
    if (other.m_buffer.defined()) m_buffer = other.m_buffer.clone();
}

GrowingSteps& GrowingSteps::operator=(const GrowingSteps& other) {
    if (this != &other) *this = GrowingSteps(other);
    return *this;
}

torch::Tensor GrowingSteps::filled() const { return m_buffer.defined() ? m_buffer.narrow(2, 0, m_steps) : m_buffer; }

torch::Tensor GrowingSteps::append(const torch::Tensor& x) {
    const int64_t n = x.size(2);
    if (recording_gradient(x, m_buffer)) {
        m_buffer = m_steps > 0 ? torch::cat({filled(), x}, 2) : x;
        m_steps += n;
        return m_buffer;
    }
    const bool fits = m_buffer.defined() && m_steps + n <= m_buffer.size(2) && m_buffer.size(0) == x.size(0) &&
                      m_buffer.size(1) == x.size(1) && m_buffer.size(3) == x.size(3) &&
                      m_buffer.scalar_type() == x.scalar_type() && m_buffer.device() == x.device();
    if (!fits) {
        const int64_t need = m_steps + n;
        auto grown = torch::zeros({x.size(0), x.size(1), need + std::max<int64_t>(8, need / 4), x.size(3)}, x.options());
        if (m_steps > 0) grown.narrow(2, 0, m_steps).copy_(filled());
        m_buffer = std::move(grown);
    }
    m_buffer.narrow(2, m_steps, n).copy_(x);
    m_steps += n;
    return filled();
}

void GrowingSteps::select(const torch::Tensor& rows) {
    if (!m_buffer.defined()) return;
    if (recording_gradient(m_buffer, {})) {
        m_buffer = filled().index_select(0, rows);
        return;
    }
    if (!m_buffer.device().is_cpu() || !m_buffer.is_contiguous() || !rows.device().is_cpu()) {
        m_buffer = m_buffer.index_select(0, rows);
        return;
    }
    // On the CPU only the filled positions move, a head's run of them at a time: index_select
    // over the buffer copied its room too (with 4 filled positions and 8 of room, 3 times the cache).
    const auto r = rows.to(torch::kLong).contiguous();
    const int64_t* from = r.data_ptr<int64_t>();
    const int64_t n = r.numel(), B = m_buffer.size(0), heads = m_buffer.size(1);
    bool same = n == B;
    for (int64_t i = 0; i < n; ++i) {
        if (from[i] < 0 || from[i] >= B) throw std::out_of_range("GrowingSteps::select: row " + std::to_string(from[i]) +
                                                                 " of " + std::to_string(B));
        same = same && from[i] == i;
    }
    if (same) return;
    const auto head_bytes = static_cast<size_t>(m_buffer.stride(1) * m_buffer.element_size());
    const auto run_bytes = static_cast<size_t>(m_steps * m_buffer.stride(2) * m_buffer.element_size());
    if (n == B && m_buffer.storage().use_count() == 1) {
        // The same rows, and no view of the buffer held elsewhere: the rows that change move in place.
        reorder_runs_in_place(static_cast<char*>(m_buffer.data_ptr()), from, n, heads, head_bytes, run_bytes);
        return;
    }
    auto next = torch::empty({n, heads, m_buffer.size(2), m_buffer.size(3)}, m_buffer.options());
    gather_runs(static_cast<char*>(next.data_ptr()), static_cast<const char*>(m_buffer.data_ptr()), from, n, heads,
                head_bytes, run_bytes);
    m_buffer = std::move(next);
}

int64_t repeated_row_group(const torch::Tensor& map_rows) {
    if (!map_rows.defined() || map_rows.dim() != 1 || map_rows.size(0) < 2) return 1;
    const auto rows = map_rows.to(torch::kCPU, torch::kLong).contiguous();
    const int64_t R = rows.size(0);
    const int64_t* r = rows.data_ptr<int64_t>();
    int64_t g = 1;
    while (g < R && r[g] == r[0]) ++g;
    if (g == 1 || R % g != 0) return 1;
    for (int64_t i = 0; i < R; ++i)
        if (r[i] != i / g) return 1;
    return g;
}

torch::Tensor every_nth_row(const torch::Tensor& x, int64_t g) {
    if (g == 1) return x;
    return x.index_select(0, torch::arange(0, x.size(0), g, torch::TensorOptions().dtype(torch::kLong).device(x.device())));
}

torch::Tensor finish_logits(torch::Tensor logits, const torch::Tensor& bias, int64_t never, float floor) {
    const bool in_place = !torch::GradMode::is_enabled() || !logits.requires_grad();
    // A bias of zeros (BART's final_logits_bias as most checkpoints have it) is skipped where the
    // check reads less than the sum would write: logits of many rows.
    const bool add = bias.defined() && bias.numel() > 0 &&
                     (logits.numel() <= 8 * bias.numel() || bias.ne(0).any().item<bool>());
    if (add) {
        const auto b = bias.view({-1});
        // In place only where the sum keeps the logits' type (half logits plus a float bias are float).
        logits = in_place && logits.scalar_type() == at::result_type(logits, b) ? logits.add_(b) : logits + b;
    }
    const auto ids = torch::tensor({never}, torch::TensorOptions().dtype(torch::kLong).device(logits.device()));
    return in_place ? logits.index_fill_(-1, ids, floor) : logits.index_fill(-1, ids, floor);
}

torch::Tensor activate(Activation a, const torch::Tensor& x) {
    switch (a) {
    case Activation::relu: return torch::relu(x);
    case Activation::gelu: return torch::gelu(x);
    case Activation::gelu_tanh: return torch::gelu(x, "tanh");
    case Activation::silu: return torch::silu(x);
    case Activation::tanh: return torch::tanh(x);
    }
    return x;
}

namespace {

/// [R, a, 1, S] (a row's bias or given weights, a = 1 or h) as the grouped scores' [G, a, g, S];
/// one row for every row (broadcast) stays as it is.
torch::Tensor grouped_rows(const torch::Tensor& x, int64_t groups, int64_t group) {
    if (!x.defined() || x.dim() != 4 || x.size(0) == 1) return x;
    if (x.size(0) != groups * group || x.size(2) != 1)
        throw std::logic_error("attention over shared keys: a bias or weights of " + std::to_string(x.size(0)) +
                               " rows for " + std::to_string(groups * group) + " queries");
    return x.reshape({groups, group, x.size(1), x.size(3)}).transpose(1, 2);
}

/// [G, a, g, S] back to the rows' [G g, a, 1, S].
torch::Tensor ungrouped_rows(const torch::Tensor& x) {
    return x.transpose(1, 2).reshape({x.size(0) * x.size(2), x.size(1), 1, x.size(3)});
}

}  // namespace

namespace {

/// The most query positions and keys attend_few_queries takes: a decoder step's rows (a beam's
/// queries over one sentence's keys) over a typed sentence's keys. Longer sources (a 1,024-token
/// summary) keep ATen's vectorized softmax, which the per-key exp here would not match for speed.
constexpr int64_t k_few_queries = 16;
constexpr int64_t k_few_queries_keys = 256;

}  // namespace

bool attend_heads_in_loops(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                           const torch::Tensor& bias, bool dropping, const torch::Tensor& weights_given,
                           const torch::Tensor& keep_heads) {
    if (dropping || weights_given.defined()) return false;
    if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) return false;
    const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), dh = q.size(3), Tk = k.size(2);
    if (Tq < 1 || Tq > k_few_queries || Tk < 1 || Tk > k_few_queries_keys) return false;
    if (k.size(0) != B || v.size(0) != B || k.size(1) != H || v.size(1) != H || v.size(2) != Tk || k.size(3) != dh ||
        v.size(3) != dh)
        return false;
    for (const auto* t : {&q, &k, &v}) {
        if (!t->device().is_cpu() || t->scalar_type() != torch::kFloat || t->layout() != torch::kStrided) return false;
        if (t->stride(3) != 1 && t->size(3) > 1) return false;
    }
    if (torch::GradMode::is_enabled() &&
        (q.requires_grad() || k.requires_grad() || v.requires_grad() || (bias.defined() && bias.requires_grad())))
        return false;
    if (bias.defined()) {
        if (!bias.device().is_cpu() || bias.scalar_type() != torch::kFloat || bias.dim() > 4 ||
            bias.layout() != torch::kStrided)
            return false;
        // Broadcasts to the scores as they are: each of its sizes, from the right, 1 or the scores'.
        const int64_t scores[4] = {B, H, Tq, Tk};
        for (int64_t d = 1; d <= bias.dim(); ++d)
            if (bias.size(-d) != 1 && bias.size(-d) != scores[4 - d]) return false;
    }
    return !keep_heads.defined() || keep_heads.numel() == H;
}

namespace {

/// The dot product of a and b (n floats each), in eight running sums (the compiler's vectors).
inline float dot_product(const float* a, const float* b, int64_t n) {
    float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) part[j] += a[i + j] * b[i + j];
    float sum = ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
    for (; i < n; ++i) sum += a[i] * b[i];
    return sum;
}

/// attend_heads for a decoder step on the CPU in plain loops: per (row, head, query) the scores
/// over the keys, their softmax and the weighted values, written straight into the merged
/// layout. ATen's way is seven dispatched operations a layer's attention (two batched products,
/// the bias, the softmax, the heads' transpose and copy), ~20 us each on a typed sentence's few
/// keys, more than the arithmetic. The values are ATen's up to float rounding (the sums run in
/// another order); a row whose every key is masked gets NaN weights as softmax gives, or 0 with
/// zero_empty_rows.
AttendedHeads attend_few_queries(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                 double scaling, const torch::Tensor& bias, bool keep, const torch::Tensor& keep_heads,
                                 bool zero_empty_rows) {
    const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), dh = q.size(3), Tk = k.size(2);
    auto scores = torch::empty({B, H, Tq, Tk}, q.options());
    auto weights = torch::empty({B, H, Tq, Tk}, q.options());
    auto merged = torch::empty({B, Tq, H * dh}, q.options());
    const torch::Tensor expanded = bias.defined() ? bias.expand({B, H, Tq, Tk}) : torch::Tensor();
    const float* bp = expanded.defined() ? expanded.data_ptr<float>() : nullptr;
    const int64_t bs0 = bp ? expanded.stride(0) : 0, bs1 = bp ? expanded.stride(1) : 0,
                  bs2 = bp ? expanded.stride(2) : 0, bs3 = bp ? expanded.stride(3) : 0;
    std::vector<float> gate;
    if (keep_heads.defined()) {
        const auto g = keep_heads.to(torch::kCPU, torch::kFloat).contiguous();
        gate.assign(g.data_ptr<float>(), g.data_ptr<float>() + H);
    }
    const float* qp = q.data_ptr<float>();
    const float* kp = k.data_ptr<float>();
    const float* vp = v.data_ptr<float>();
    float* sp = scores.data_ptr<float>();
    float* wp = weights.data_ptr<float>();
    float* op = merged.data_ptr<float>();
    const float scale = static_cast<float>(scaling);
    const float empty_weight = zero_empty_rows ? 0.0F : std::numeric_limits<float>::quiet_NaN();
    for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h) {
            const float* keys = kp + b * k.stride(0) + h * k.stride(1);
            const float* values = vp + b * v.stride(0) + h * v.stride(1);
            for (int64_t i = 0; i < Tq; ++i) {
                const float* query = qp + b * q.stride(0) + h * q.stride(1) + i * q.stride(2);
                float* s = sp + ((b * H + h) * Tq + i) * Tk;
                float* w = wp + ((b * H + h) * Tq + i) * Tk;
                float top = -std::numeric_limits<float>::infinity();
                for (int64_t j = 0; j < Tk; ++j) {
                    float score = dot_product(query, keys + j * k.stride(2), dh);
                    if (scaling != 1.0) score *= scale;
                    if (bp) score += bp[b * bs0 + h * bs1 + i * bs2 + j * bs3];
                    s[j] = score;
                    top = std::max(top, score);
                }
                float* out = op + (b * Tq + i) * H * dh + h * dh;
                if (top == -std::numeric_limits<float>::infinity()) {
                    // Every key masked: softmax's NaN (or none, zero_empty_rows), as ATen's path.
                    for (int64_t j = 0; j < Tk; ++j) w[j] = empty_weight;
                    for (int64_t d = 0; d < dh; ++d) out[d] = empty_weight;
                } else {
                    float total = 0.0F;
                    for (int64_t j = 0; j < Tk; ++j) total += (w[j] = std::exp(s[j] - top));
                    for (int64_t j = 0; j < Tk; ++j) w[j] /= total;
                    for (int64_t d = 0; d < dh; ++d) out[d] = 0.0F;
                    for (int64_t j = 0; j < Tk; ++j) {
                        const float wj = w[j];
                        const float* value = values + j * v.stride(2);
                        for (int64_t d = 0; d < dh; ++d) out[d] += wj * value[d];
                    }
                }
                if (!gate.empty())
                    for (int64_t d = 0; d < dh; ++d) out[d] *= gate[static_cast<size_t>(h)];
            }
        }
    AttendedHeads result;
    result.merged = std::move(merged);
    if (keep) {
        result.weights = std::move(weights);
        result.scores = std::move(scores);
    }
    return result;
}

}  // namespace

AttendedHeads attend_heads(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scaling,
                           const torch::Tensor& bias, double dropout, bool training, bool keep,
                           const torch::Tensor& weights_given, const torch::Tensor& keep_heads, bool zero_empty_rows) {
    if (k.size(0) != q.size(0)) {
        // Rows sharing keys (a beam's K rows of one sentence, PretrainedCache::cross_group): each
        // group's one-position queries as the rows of one product with its keys, read once.
        const int64_t G = k.size(0), R = q.size(0);
        if (G <= 0 || R % G != 0 || q.size(2) != 1)
            throw std::logic_error("attention over shared keys: " + std::to_string(R) + " queries of " +
                                   std::to_string(q.size(2)) + " positions for " + std::to_string(G) + " key rows");
        const int64_t g = R / G;
        const auto qg = q.reshape({G, g, q.size(1), q.size(3)}).transpose(1, 2);  // [G, h, g, dh]
        auto out = attend_heads(qg, k, v, scaling, grouped_rows(bias, G, g), dropout, training, keep,
                                grouped_rows(weights_given, G, g), keep_heads, zero_empty_rows);
        out.merged = out.merged.reshape({R, 1, -1});  // [G, g, h dh]: row by row
        if (keep) {
            out.weights = ungrouped_rows(out.weights);
            out.scores = ungrouped_rows(out.scores);
        }
        return out;
    }
    if (attend_heads_in_loops(q, k, v, bias, dropout > 0 && training, weights_given, keep_heads))
        return attend_few_queries(q, k, v, scaling, bias, keep, keep_heads, zero_empty_rows);
    auto scores = torch::matmul(q, k.transpose(2, 3));  // [B, h, Tq, Tk]
    // In place: the same values without two more [B, h, Tq, Tk] tensors (50 MB a layer for a
    // 1,024-token source of 12 heads); the product's backward needs q and k, not its output.
    if (scaling != 1.0) scores.mul_(scaling);
    if (bias.defined()) {
        const bool fits = bias.scalar_type() == scores.scalar_type() &&
                          at::infer_size(scores.sizes(), bias.sizes()) == scores.sizes().vec();
        if (fits) scores.add_(bias);
        else scores = scores + bias;  // a bias of more dimensions or another type widens the scores
    }
    auto w = weights_given.defined() ? weights_given.expand_as(scores).contiguous() : torch::softmax(scores, -1);
    if (zero_empty_rows && !weights_given.defined()) w = torch::nan_to_num(w, 0.0);  // every key erased: none
    auto wd = dropout > 0 && training ? torch::dropout(w, dropout, true) : w;
    auto o = torch::matmul(wd, v);  // [B, h, Tq, dh]
    if (keep_heads.defined()) o = o * keep_heads.to(o.scalar_type()).view({1, -1, 1, 1});
    AttendedHeads out;
    out.merged = o.transpose(1, 2).reshape({q.size(0), q.size(2), -1});
    if (keep) {
        out.weights = w;
        out.scores = scores;
    }
    return out;
}

torch::Tensor sampled_forward(EncoderDecoder& model, const torch::Tensor& src, const torch::Tensor& src_len,
                              const torch::Tensor& tgt_in, double teacher_forcing) {
    auto enc = model.encode(src, src_len, /*keep_maps=*/false);
    auto cache = model.start(*enc);
    std::vector<torch::Tensor> logits;
    torch::Tensor prev;
    for (int64_t t = 0; t < tgt_in.size(1); ++t) {
        const bool own = t > 0 && torch::rand({1}).item<double>() >= teacher_forcing;
        logits.push_back(model.step(own ? prev : tgt_in.select(1, t), *cache, *enc).logits);
        prev = logits.back().argmax(-1);
    }
    return torch::stack(logits, 1);
}

}  // namespace attnviz
