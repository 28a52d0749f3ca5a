#pragma once
// One self-contained web page to share what attnviz shows about translations:
// per sentence the attention heatmap and beside it an attribution heatmap (a
// method picked on the page), the top-k candidates of each step and how far
// attention and attribution agree; hovering an output token lights up its
// source weights. Everything is inline (CSS, script, data): no network access,
// no external script, font or image, so the file opens offline in any browser.
// Where erasure flip curves were run (core/analysis/erasure.hpp), each sentence also
// gets a table of how many source positions each order erased before the decision
// changed. Plain data, no LibTorch.
#include <cstdint>
#include <string>
#include <vector>

#include "core/analysis/attribution_result.hpp"
#include "core/analysis/erasure_result.hpp"
#include "core/model/attention_map.hpp"

namespace attnviz {

/// What the page says about where its sentences come from.
struct WebPageOptions {
    std::string title = "attnviz: attention and attribution";  ///< the page's title and heading
    std::string model;  ///< a line describing the model (its file and describe_model()); may be empty
    /// A line under it saying what the page leaves out and why (e.g. attribution methods past the
    /// work bound); may be empty.
    std::string note;
    /// The most the page's data may take while it is written (0: memory_bound(),
    /// core/model/memory_cost.hpp): a page beyond it (web_page_cost) is refused, ConfigError.
    int64_t memory_bound = 0;
};

/// What writing the page takes at its peak, by the numbers it holds (the attributions and,
/// for sentences with a head view, every map of every layer, each layer's mean and the rollouts;
/// the erasure tables' removals and tokens).
int64_t web_page_cost(const std::vector<SentenceAttribution>& sentences, const std::vector<AttentionRecord>& maps,
                      const std::vector<SentenceErasure>& erasures = {});

/// The page (UTF-8 HTML) for these sentences, each with its attention and whatever
/// attributions were computed (none: the page shows attention and top-k alone). The data sits
/// in the page as JSON with '/', '<', '>' and '&' escaped, so no sentence can close a tag or
/// read as an address.
///
/// `maps` (empty, or one per sentence): every map the sentence's translation recorded. Where a
/// record has more than one map (a Transformer, a pretrained model), the sentence gets
/// BertViz's head view offline: the reader chooses the kind, the layer and the head (or the
/// layer's mean, or a self-attention kind's rollout) of the attention shown, starting at the
/// record's primary map; the page's address can choose it too: `#s2=encoder_self:1:3`
/// (sentence 2, kind, layer, head or `mean`), `#s1=decoder_self:rollout`.
///
/// `erasures` (empty, or one per sentence): the sentence's erasure flip curves. A sentence whose
/// erasure has steps gets a table under its steps: a row per output step, a column per order
/// (the removals that changed the decision, or "never"), the mean removals per order in the
/// footer; the row of the step the reader points at lights up. One without steps shows nothing.
///
/// Throws ConfigError when `maps` or `erasures` does not match the sentences or the page would
/// take more than the bound.
std::string web_page(const std::vector<SentenceAttribution>& sentences, const WebPageOptions& options = {},
                     const std::vector<AttentionRecord>& maps = {},
                     const std::vector<SentenceErasure>& erasures = {});

}  // namespace attnviz
