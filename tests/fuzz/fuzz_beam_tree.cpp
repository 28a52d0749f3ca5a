// Fuzzes parse_beam_trees (core/decode/beam_tree.cpp): the beam-tree JSON that
// `translate --beam-tree` writes and the GUI reads back, then walks every tree
// the way the view does (children, paths, partial hypotheses) and writes it again.
#include <nlohmann/json.hpp>

#include "core/decode/beam_tree.hpp"
#include "core/io/error.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        for (const auto& tree : attnviz::parse_beam_trees(attnviz_fuzz::as_text(data, size))) {
            FUZZ_CHECK(tree.steps() >= 0);
            for (const auto& n : tree.nodes) {
                const auto path = tree.path(n.id);
                FUZZ_CHECK(!path.empty() && path.back() == n.id);
                FUZZ_CHECK(static_cast<int64_t>(path.size()) == n.step + 1);
                const auto h = tree.partial_hypothesis(n.id);
                FUZZ_CHECK(h.tokens.size() == path.size());
            }
            (void)tree.children(-1);
            (void)tree.to_json().dump();
        }
    } catch (const attnviz::Error&) {
    }
    return 0;
}
