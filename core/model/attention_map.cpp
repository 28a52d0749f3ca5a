// Attention maps by name.
#include "core/model/attention_map.hpp"

#include "core/io/error.hpp"

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
    throw ConfigError("unknown attention kind '" + s + "' (expected one of: cross, encoder_self, decoder_self)");
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

}  // namespace attnviz
