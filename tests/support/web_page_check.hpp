#pragma once
// Checks of a web page attnviz writes (core/analysis/web_page.hpp): well-formed
// (every non-void element closed in order; script and style bodies skipped) and
// self-contained (nothing that could reach a network: no address, no src or href
// attribute, no CSS url() or @import).
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

namespace attnviz::testing {

/// What is wrong with the page ("" when nothing).
inline std::string web_page_problem(const std::string& page) {
    std::string lower = page;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    for (const char* bad : {"http", "//", "src=", "href=", "url(", "@import", "<link", "<iframe", "<img"})
        if (lower.find(bad) != std::string::npos) return std::string("holds '") + bad + "'";
    if (lower.rfind("<!doctype html>", 0) != 0) return "does not start with <!DOCTYPE html>";
    static const std::vector<std::string> void_tags{"meta", "br", "hr", "input", "link", "img", "col", "area", "base",
                                                    "wbr", "source", "track", "embed", "param"};
    std::vector<std::string> open;
    size_t i = lower.find('>') + 1;  // after the doctype
    while ((i = lower.find('<', i)) != std::string::npos) {
        const size_t end = lower.find('>', i);
        if (end == std::string::npos) return "a tag is not closed";
        std::string tag = lower.substr(i + 1, end - i - 1);
        i = end + 1;
        const bool closing = !tag.empty() && tag[0] == '/';
        if (closing) tag.erase(0, 1);
        const std::string name = tag.substr(0, tag.find_first_of(" \t\n/"));
        if (name.empty()) return "an empty tag";
        if (closing) {
            if (open.empty() || open.back() != name) return "</" + name + "> closes " + (open.empty() ? "nothing" : "<" + open.back() + ">");
            open.pop_back();
            continue;
        }
        if (std::find(void_tags.begin(), void_tags.end(), name) != void_tags.end()) continue;
        open.push_back(name);
        if (name == "script" || name == "style") {  // raw text up to its closing tag
            const size_t close = lower.find("</" + name, i);
            if (close == std::string::npos) return "<" + name + "> is not closed";
            i = close;
        }
    }
    if (!open.empty()) return "<" + open.back() + "> is not closed";
    return "";
}

}  // namespace attnviz::testing
