// The beam search tree: navigation, partial hypotheses and JSON.
#include "core/decode/beam_tree.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "core/io/error.hpp"
#include "core/text/vocab.hpp"
#include "core/io/json_bounded.hpp"
#include "core/io/message.hpp"

namespace attnviz {

namespace {

constexpr const char* k_format = "attnviz-beam-tree";
constexpr int k_version = 1;

std::string level_name(TokenLevel l) { return to_string(l); }

/// Whether v holds a value of type E without conversion out of range: nlohmann's get<>()
/// converts numbers with static_cast, so an integer field given 1e69, or a float field
/// given 1e300, is undefined behaviour (found by fuzz_beam_tree), and 1.5 as an integer
/// is silently truncated. Integers must be JSON integers in E's range, floats in float's.
template <typename E>
bool holds(const nlohmann::json& v) {
    if constexpr (std::is_same_v<E, int64_t> || std::is_same_v<E, int>) {
        if (!v.is_number_integer()) return false;
        if (v.is_number_unsigned()) return v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<E>::max());
        const int64_t x = v.get<int64_t>();
        return x >= std::numeric_limits<E>::min() && x <= std::numeric_limits<E>::max();
    } else if constexpr (std::is_same_v<E, float>) {
        return v.is_number() && std::abs(v.get<double>()) <= double(std::numeric_limits<float>::max());
    } else {
        return true;  // strings, booleans, doubles: get<>() checks the type itself
    }
}

/// Reads j[key] as T, or throws FileError naming where and what was expected.
template <typename T>
T field(const nlohmann::json& j, const char* key, const std::string& where, const char* expected) {
    auto it = j.find(key);
    if (it == j.end()) throw FileError(where + ": missing \"" + key + "\" (" + expected + ")");
    auto wrong = [&] { return FileError(where + ": \"" + key + "\" is " + describe_json(*it) + ", expected " + expected); };
    if constexpr (std::is_same_v<T, std::vector<int64_t>> || std::is_same_v<T, std::vector<float>>) {
        if (!it->is_array() || !std::all_of(it->begin(), it->end(), holds<typename T::value_type>)) throw wrong();
    } else if (!holds<T>(*it)) {
        throw wrong();
    }
    try {
        return it->get<T>();
    } catch (const nlohmann::json::exception&) {
        throw wrong();
    }
}

BeamNode::Status parse_status(const std::string& s, const std::string& where) {
    for (auto st : {BeamNode::Status::kept, BeamNode::Status::pruned, BeamNode::Status::finished})
        if (s == to_string(st)) return st;
    throw FileError(where + ": \"status\" is " + quote(s) + ", expected kept, pruned or finished");
}

BeamNode node_from_json(const nlohmann::json& n, const std::string& where) {
    if (!n.is_object()) throw FileError(where + ": expected an object, got " + std::string(n.type_name()));
    BeamNode b;
    b.id = field<int64_t>(n, "id", where, "an integer");
    auto parent = n.find("parent");
    if (parent == n.end()) throw FileError(where + ": missing \"parent\" (a node id, or null for a first token)");
    b.parent = parent->is_null() ? -1 : field<int64_t>(n, "parent", where, "a node id or null");
    b.step = field<int64_t>(n, "step", where, "an integer");
    b.token = field<std::string>(n, "token", where, "a string");
    b.token_id = field<int64_t>(n, "token_id", where, "an integer");
    b.token_log_prob = field<float>(n, "token_log_prob", where, "a number");
    b.log_prob = field<double>(n, "log_prob", where, "a number");
    b.score = field<double>(n, "score", where, "a number");
    b.status = parse_status(field<std::string>(n, "status", where, "a string"), where);
    b.rank = field<int64_t>(n, "rank", where, "an integer");
    b.token_rank = field<int64_t>(n, "token_rank", where, "an integer");
    b.forced = field<bool>(n, "forced", where, "true or false");
    b.attention = field<std::vector<float>>(n, "attention", where, "an array of numbers");
    return b;
}

}  // namespace

std::string to_string(BeamNode::Status s) {
    switch (s) {
        case BeamNode::Status::kept: return "kept";
        case BeamNode::Status::pruned: return "pruned";
        case BeamNode::Status::finished: return "finished";
    }
    return "?";
}

const BeamNode& BeamTree::node(int64_t id) const {
    if (id < 0 || id >= static_cast<int64_t>(nodes.size()))
        throw Error("beam tree: no node " + std::to_string(id) + " (the tree has " + std::to_string(nodes.size()) +
                    ")");
    return nodes[static_cast<size_t>(id)];
}

std::vector<int64_t> BeamTree::children(int64_t id) const {
    std::vector<int64_t> out;
    for (const auto& n : nodes)
        if (n.parent == id) out.push_back(n.id);
    return out;
}

std::vector<int64_t> BeamTree::path(int64_t id) const {
    std::vector<int64_t> out;
    for (int64_t at = id; at >= 0; at = node(at).parent) out.push_back(at);
    std::reverse(out.begin(), out.end());
    return out;
}

int64_t BeamTree::steps() const {
    int64_t s = 0;
    for (const auto& n : nodes) s = std::max(s, n.step + 1);
    return s;
}

Hypothesis BeamTree::partial_hypothesis(int64_t id) const {
    Hypothesis h;
    for (int64_t at : path(id)) {
        const BeamNode& n = node(at);
        h.ids.push_back(n.token_id);
        h.tokens.push_back(n.token);
        h.step_log_prob.push_back(n.token_log_prob);
        h.rank.push_back(n.token_rank);
        if (n.forced) ++h.forced_steps;
        if (n.forced && n.token_rank > 0 && h.first_divergence < 0) h.first_divergence = n.step;
        if (attention_available) h.attention.at(attention_map).weights.push_back(n.attention);
    }
    h.log_prob = node(id).log_prob;
    h.score = node(id).score;
    std::vector<std::string> words;
    for (size_t i = 0; i < h.ids.size() && h.ids[i] != Vocab::eos_id; ++i) words.push_back(h.tokens[i]);
    h.text = detokenize(words, level);
    return h;
}

nlohmann::json BeamTree::to_json() const {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& n : nodes)
        all.push_back({{"id", n.id},
                       {"parent", n.parent < 0 ? nlohmann::json(nullptr) : nlohmann::json(n.parent)},
                       {"step", n.step},
                       {"token", n.token},
                       {"token_id", n.token_id},
                       {"token_log_prob", n.token_log_prob},
                       {"log_prob", n.log_prob},
                       {"score", n.score},
                       {"status", to_string(n.status)},
                       {"rank", n.rank},
                       {"token_rank", n.token_rank},
                       {"forced", n.forced},
                       {"attention", n.attention}});
    return {{"format", k_format},
            {"version", k_version},
            {"source", source},
            {"level", level_name(level)},
            {"beam_size", beam_size},
            {"num_hypotheses", num_hypotheses},
            {"length_penalty", length_penalty},
            {"attention_available", attention_available},
            {"finished", finished},
            {"nodes", std::move(all)}};
}

BeamTree BeamTree::from_json(const nlohmann::json& j) {
    const std::string where = "beam tree";
    if (!j.is_object()) throw FileError(where + ": expected a JSON object, got " + std::string(j.type_name()));
    if (field<std::string>(j, "format", where, "\"attnviz-beam-tree\"") != k_format)
        throw FileError(where + ": \"format\" is " + describe_json(j.at("format")) + ", expected \"" + k_format + "\"");
    if (field<int>(j, "version", where, "1") != k_version)
        throw FileError(where + ": version " + describe_json(j.at("version")) + " is not supported (this build reads " +
                        std::to_string(k_version) + ")");
    BeamTree t;
    t.source = field<std::vector<std::string>>(j, "source", where, "an array of tokens");
    const auto level = field<std::string>(j, "level", where, "\"word\", \"char\" or \"subword\"");
    if (level != "word" && level != "char" && level != "subword")
        throw FileError(where + ": \"level\" is " + quote(level) + ", expected \"word\", \"char\" or \"subword\"");
    t.level = token_level_from_string(level);
    t.beam_size = field<int64_t>(j, "beam_size", where, "an integer");
    t.num_hypotheses = field<int64_t>(j, "num_hypotheses", where, "an integer");
    t.length_penalty = field<double>(j, "length_penalty", where, "a number");
    t.attention_available = field<bool>(j, "attention_available", where, "true or false");
    t.finished = field<std::vector<int64_t>>(j, "finished", where, "an array of node ids");
    const auto& nodes = j.find("nodes");
    if (nodes == j.end() || !nodes->is_array()) throw FileError(where + ": missing \"nodes\" (an array)");

    for (size_t i = 0; i < nodes->size(); ++i) {
        const std::string at = where + " node " + std::to_string(i);
        BeamNode n = node_from_json((*nodes)[i], at);
        if (n.id != static_cast<int64_t>(i))
            throw FileError(at + ": \"id\" is " + std::to_string(n.id) + ", expected " + std::to_string(i) +
                            " (nodes are listed in id order)");
        if (n.parent >= n.id)
            throw FileError(at + ": parent " + std::to_string(n.parent) + " does not come before it");
        const int64_t parent_step = n.parent < 0 ? -1 : t.nodes[static_cast<size_t>(n.parent)].step;
        if (n.step != parent_step + 1)
            throw FileError(at + ": step " + std::to_string(n.step) + ", expected " + std::to_string(parent_step + 1) +
                            " (one more than its parent's)");
        if (n.parent >= 0 && t.nodes[static_cast<size_t>(n.parent)].status != BeamNode::Status::kept)
            throw FileError(at + ": its parent " + std::to_string(n.parent) + " is " +
                            to_string(t.nodes[static_cast<size_t>(n.parent)].status) + ", expected kept");
        const size_t expected_row = t.attention_available ? t.source.size() : 0;
        if (n.attention.size() != expected_row)
            throw FileError(at + ": " + std::to_string(n.attention.size()) + " attention weights, expected " +
                            std::to_string(expected_row) + " (one per source token)");
        t.nodes.push_back(std::move(n));
    }
    const auto finished_nodes = std::count_if(t.nodes.begin(), t.nodes.end(), [](const BeamNode& n) {
        return n.status == BeamNode::Status::finished;
    });
    if (finished_nodes != static_cast<std::ptrdiff_t>(t.finished.size()))
        throw FileError(where + ": " + std::to_string(finished_nodes) + " nodes are finished but \"finished\" lists " +
                        std::to_string(t.finished.size()));
    for (size_t i = 0; i < t.finished.size(); ++i) {
        const int64_t id = t.finished[i];
        const std::string at = where + " finished[" + std::to_string(i) + "]";
        if (id < 0 || id >= static_cast<int64_t>(t.nodes.size()))
            throw FileError(at + ": no node " + std::to_string(id));
        if (t.nodes[static_cast<size_t>(id)].status != BeamNode::Status::finished)
            throw FileError(at + ": node " + std::to_string(id) + " is " +
                            to_string(t.nodes[static_cast<size_t>(id)].status) + ", expected finished");
        if (i > 0 && t.nodes[static_cast<size_t>(id)].score > t.nodes[static_cast<size_t>(t.finished[i - 1])].score)
            throw FileError(at + ": node " + std::to_string(id) + " scores better than the one before it (expected best first)");
    }
    return t;
}

std::vector<BeamTree> parse_beam_trees(const std::string& text) {
    const nlohmann::json j = parse_json_bounded(text, "beam tree file");
    std::vector<BeamTree> out;
    if (!j.is_array()) {
        out.push_back(read_json_fields("beam tree file", [&] { return BeamTree::from_json(j); }));
        return out;
    }
    for (size_t i = 0; i < j.size(); ++i) {
        try {
            out.push_back(read_json_fields("beam tree file", [&] { return BeamTree::from_json(j[i]); }));
        } catch (const FileError& e) {
            throw FileError("entry " + std::to_string(i) + ": " + e.what());
        }
    }
    return out;
}

}  // namespace attnviz
