// Head gates (core/model/head_gates.hpp).
#include "core/model/head_gates.hpp"

#include <cctype>

#include "core/io/error.hpp"
#include "core/io/message.hpp"

namespace attnviz {

const torch::Tensor& HeadGates::of(AttentionKind kind) const {
    switch (kind) {
    case AttentionKind::encoder_self: return encoder_self;
    case AttentionKind::decoder_self: return decoder_self;
    case AttentionKind::cross: break;
    }
    return cross;
}

torch::Tensor& HeadGates::of(AttentionKind kind) {
    return const_cast<torch::Tensor&>(static_cast<const HeadGates&>(*this).of(kind));
}

HeadGates HeadGates::ones(const std::vector<HeadGroup>& groups, bool requires_grad) {
    HeadGates g;
    for (const auto& group : groups)
        g.of(group.kind) = torch::ones({group.layers, group.heads}, torch::kFloat).set_requires_grad(requires_grad);
    return g;
}

HeadGates HeadGates::mask(const std::vector<HeadGroup>& groups, const std::vector<AttentionMapId>& off) {
    HeadGates g;
    for (const auto& id : off) {
        const HeadGroup* group = nullptr;
        for (const auto& candidate : groups)
            if (candidate.kind == id.kind) group = &candidate;
        const std::string item = quote(head_text(id));
        if (!group)
            throw ConfigError(item + ": this model has no " + to_string(id.kind) + " attention (it has " +
                              describe_heads(groups) + ")");
        if (id.layer < 0 || id.layer >= group->layers || id.head >= group->heads)
            throw ConfigError(item + ": out of range: this model's " + to_string(id.kind) + " attention has " +
                              count_of(group->layers, "layer", "layers") + " x " +
                              count_of(group->heads, "head", "heads") + " (layers 0.." +
                              std::to_string(group->layers - 1) + ", heads 0.." + std::to_string(group->heads - 1) +
                              ")");
        auto& t = g.of(id.kind);
        if (!t.defined()) t = torch::ones({group->layers, group->heads}, torch::kFloat);
        if (id.head < 0) t[id.layer].zero_();
        else t[id.layer][id.head] = 0.0f;
    }
    return g;
}

namespace {
/// A non-negative integer of at most 6 digits, or -1.
int head_list_int(const std::string& s) {
    if (s.empty() || s.size() > 6) return -1;
    for (char c : s)
        if (!std::isdigit(static_cast<unsigned char>(c))) return -1;
    return std::stoi(s);
}
}  // namespace

std::vector<AttentionMapId> parse_head_ids(const std::string& text) {
    std::vector<AttentionMapId> ids;
    const std::string form = "expected KIND:LAYER:HEAD with KIND cross, encoder_self or decoder_self (e.g. cross:0:3)";
    size_t start = 0;
    while (start <= text.size()) {
        const size_t end = text.find(',', start);
        const std::string item = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
        start = end == std::string::npos ? text.size() + 1 : end + 1;
        const size_t a = item.find(':');
        const size_t b = a == std::string::npos ? a : item.find(':', a + 1);
        if (b == std::string::npos || item.find(':', b + 1) != std::string::npos)
            throw ConfigError(quote(item) + ": " + form);
        std::string kind = item.substr(0, a);
        if (kind == "enc") kind = "encoder_self";
        if (kind == "dec") kind = "decoder_self";
        AttentionMapId id;
        if (kind != "cross" && kind != "encoder_self" && kind != "decoder_self")
            throw ConfigError(quote(item) + ": unknown kind " + quote(kind) + ": " + form);
        id.kind = attention_kind_from_string(kind);
        id.layer = head_list_int(item.substr(a + 1, b - a - 1));
        id.head = head_list_int(item.substr(b + 1));
        if (id.layer < 0 || id.head < 0)
            throw ConfigError(quote(item) + ": LAYER and HEAD must be non-negative integers: " + form);
        ids.push_back(id);
    }
    return ids;
}

std::string head_text(const AttentionMapId& id) {
    return to_string(id.kind) + ":" + std::to_string(id.layer) + ":" + std::to_string(id.head);
}

std::string describe_heads(const std::vector<HeadGroup>& groups) {
    if (groups.empty()) return "no attention heads";
    std::string s;
    for (const auto& g : groups) {
        if (!s.empty()) s += ", ";
        s += to_string(g.kind) + " " + count_of(g.layers, "layer", "layers") + " x " + count_of(g.heads, "head", "heads");
    }
    return s;
}

torch::Tensor gate_row(const HeadGates& gates, AttentionKind kind, int64_t layer, const torch::Tensor& keep,
                       const torch::Device& device) {
    const auto& g = gates.of(kind);
    torch::Tensor row;
    if (g.defined()) row = g[layer].to(device);
    if (keep.defined()) row = row.defined() ? row * keep.to(device) : keep.to(device);
    return row;
}

}  // namespace attnviz
