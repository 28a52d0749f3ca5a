// Attention maps by name.
#include "core/model/attention_map.hpp"

#include <algorithm>

#include "core/config/config.hpp"
#include "core/io/error.hpp"
#include "core/io/message.hpp"

namespace attnviz {

namespace {
const AttentionMatrix k_empty;
}

std::string to_string(AttentionKind kind) {
    switch (kind) {
    case AttentionKind::encoder_self: return "encoder_self";
    case AttentionKind::decoder_self: return "decoder_self";
    case AttentionKind::cross: break;
    }
    return "cross";
}

AttentionKind attention_kind_from_string(const std::string& s) {
    for (const auto kind : {AttentionKind::cross, AttentionKind::encoder_self, AttentionKind::decoder_self})
        if (to_string(kind) == s) return kind;
    throw ConfigError("unknown attention kind " + quote(s) + " (expected one of: cross, encoder_self, decoder_self)");
}

std::string describe(const AttentionMapId& id) {
    return to_string(id.kind) + ", layer " + std::to_string(id.layer) + ", " +
           (id.head < 0 ? std::string("mean of heads") : "head " + std::to_string(id.head));
}

const AttentionMatrix& AttentionRecord::weights() const { return maps.empty() ? k_empty : maps.front().weights; }

const AttentionMatrix& AttentionRecord::scores() const { return maps.empty() ? k_empty : maps.front().scores; }

const AttentionMap* AttentionRecord::find(const AttentionMapId& id) const {
    for (const auto& m : maps)
        if (m.id == id) return &m;
    return nullptr;
}

AttentionMap* AttentionRecord::find(const AttentionMapId& id) {
    for (auto& m : maps)
        if (m.id == id) return &m;
    return nullptr;
}

AttentionMap& AttentionRecord::at(const AttentionMapId& id) {
    if (AttentionMap* m = find(id)) return *m;
    maps.push_back(AttentionMap{id, {}, {}});
    return maps.back();
}

// --- selections and aggregates -------------------------------------------------

HeadSelection HeadSelection::parse(int layer, const std::string& heads, AttentionKind kind) {
    HeadSelection s;
    s.kind = kind;
    s.layer = layer;
    s.heads = parse_head_list(heads);
    return s;
}

std::string HeadSelection::describe() const {
    std::string list;
    for (int h : heads) list += (list.empty() ? "" : ",") + std::to_string(h);
    return to_string(kind) + ", " + (layer < 0 ? std::string("last layer") : "layer " + std::to_string(layer)) + ", " +
           (heads.empty() ? std::string("mean of heads") : (heads.size() == 1 ? "head " : "heads ") + list);
}

int AttentionRecord::layer_count(AttentionKind kind) const {
    int n = 0;
    for (const auto& m : maps)
        if (m.id.kind == kind) n = std::max(n, m.id.layer + 1);
    return n;
}

int AttentionRecord::head_count(AttentionKind kind) const {
    int n = 0;
    for (const auto& m : maps)
        if (m.id.kind == kind) n = std::max(n, m.id.head + 1);
    return n;
}

namespace {
/// sum += w (rows of different lengths: the longer one wins, the rest counts as 0).
void add_into(AttentionMatrix& sum, const AttentionMatrix& w) {
    if (sum.size() < w.size()) sum.resize(w.size());
    for (size_t r = 0; r < w.size(); ++r) {
        if (sum[r].size() < w[r].size()) sum[r].resize(w[r].size(), 0.0f);
        for (size_t c = 0; c < w[r].size(); ++c) sum[r][c] += w[r][c];
    }
}
}  // namespace

AttentionMatrix AttentionRecord::select(const HeadSelection& s) const {
    const int layers = layer_count(s.kind), heads = head_count(s.kind);
    const int layer = s.layer < 0 ? layers - 1 : s.layer;
    const auto missing = [&](const std::string& what) {
        return ConfigError("attention: no " + to_string(s.kind) + " " + what + " (this model records " +
                           count_of(layers, "layer", "layers") + " of " + count_of(heads, "head", "heads") + ")");
    };
    if (layers == 0 || layer >= layers) throw missing("layer " + std::to_string(layer));
    if (s.heads.empty()) {
        if (const AttentionMap* mean = find({s.kind, layer, -1})) return mean->weights;
        if (heads == 1) {
            if (const AttentionMap* only = find({s.kind, layer, 0})) return only->weights;
        }
    } else if (s.heads.size() == 1) {
        if (const AttentionMap* one = find({s.kind, layer, s.heads.front()})) return one->weights;
        throw missing("head " + std::to_string(s.heads.front()) + " in layer " + std::to_string(layer));
    }
    std::vector<int> chosen = s.heads;
    if (chosen.empty())
        for (int h = 0; h < heads; ++h) chosen.push_back(h);
    AttentionMatrix sum;
    for (int h : chosen) {
        const AttentionMap* m = find({s.kind, layer, h});
        if (!m) throw missing("head " + std::to_string(h) + " in layer " + std::to_string(layer));
        add_into(sum, m->weights);
    }
    const float scale = 1.0f / static_cast<float>(chosen.size());
    for (auto& row : sum)
        for (auto& w : row) w *= scale;
    return sum;
}

AttentionMatrix AttentionRecord::rollout(AttentionKind kind) const {
    if (kind == AttentionKind::cross)
        throw ConfigError("attention rollout follows self-attention through the layers; cross-attention has none");
    AttentionMatrix r;
    for (int l = 0; l < layer_count(kind); ++l) {
        HeadSelection mean;
        mean.kind = kind;
        mean.layer = l;
        const AttentionMatrix a = select(mean);
        const size_t n = a.size();
        // A' = (A + I) / 2 (causal rows are shorter: their missing keys are 0).
        AttentionMatrix step(n, std::vector<float>(n, 0.0f));
        for (size_t q = 0; q < n; ++q) {
            for (size_t k = 0; k < std::min(n, a[q].size()); ++k) step[q][k] = 0.5f * a[q][k];
            step[q][q] += 0.5f;
        }
        if (r.empty()) {
            r = std::move(step);
            continue;
        }
        AttentionMatrix next(n, std::vector<float>(n, 0.0f));  // step · r: the upper layer reads the lower one's mix
        for (size_t q = 0; q < n; ++q)
            for (size_t m = 0; m < n; ++m)
                if (step[q][m] != 0.0f)
                    for (size_t k = 0; k < n && m < r.size() && k < r[m].size(); ++k) next[q][k] += step[q][m] * r[m][k];
        r = std::move(next);
    }
    return r;
}

}  // namespace attnviz
