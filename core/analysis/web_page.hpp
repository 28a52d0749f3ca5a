#pragma once
// One self-contained web page to share what attnviz shows about translations:
// per sentence the attention heatmap and beside it an attribution heatmap (a
// method picked on the page), the top-k candidates of each step and how far
// attention and attribution agree; hovering an output token lights up its
// source weights. Everything is inline (CSS, script, data): no network access,
// no external script, font or image, so the file opens offline in any browser.
// Plain data, no LibTorch.
#include <string>
#include <vector>

#include "core/analysis/attribution_result.hpp"

namespace attnviz {

/// What the page says about where its sentences come from.
struct WebPageOptions {
    std::string title = "attnviz: attention and attribution";  ///< the page's title and heading
    std::string model;  ///< a line describing the model (e.g. its file and configuration); may be empty
};

/// The page (UTF-8 HTML) for these sentences, each with its attention and whatever
/// attributions were computed (none: the page shows attention and top-k alone). The data sits
/// in the page as JSON with '/', '<', '>' and '&' escaped, so no sentence can close a tag or
/// read as an address.
std::string web_page(const std::vector<SentenceAttribution>& sentences, const WebPageOptions& options = {});

}  // namespace attnviz
