#pragma once
// The beam search tree: every candidate the search looked at, step by step,
// with its score and what became of it, so a view can draw the search as a
// tree and show, for any node, its partial hypothesis and heatmap.
//
// Which candidates are recorded (core/decode/beam.cpp): at each step the 2K best
// extensions (K = beam size) of a sentence's live beams, ranked by cumulative
// log-probability, are walked best first. A <eos> extension becomes a
// `finished` leaf; any other fills the next free beam and is `kept`; once K
// are kept the rest of the 2K are `pruned` (extensions outside the 2K best are
// not recorded: the search never looks at them). When a sentence reaches its
// length limit its kept nodes of the last step become `finished` too, as beam
// search finishes them (without <eos>). A sentence stops once K hypotheses
// have finished: nodes kept at that step stay `kept` without children.
// Prefix decoding (ForceMode::prefix) records one `forced` kept node per given
// token, rank 0, before the search proper starts.
//
// Invariant: `finished` lists the finished leaves best first, and its first
// num_hypotheses entries are Translation::hypotheses -- the same tokens, and
// bit for bit the same log_prob and score.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/decode/translation.hpp"
#include "core/text/text.hpp"

namespace attnviz {

/// One candidate: a token extending its parent's partial hypothesis.
struct BeamNode {
    enum class Status {
        kept,     ///< became one of the K live beams of the next step
        pruned,   ///< among the 2K best, but the K beams were already filled
        finished  ///< a complete hypothesis: ends with <eos>, or reached the length limit
    };
    int64_t id = 0;                ///< its index in BeamTree::nodes
    int64_t parent = -1;           ///< the node it extends; -1: a first token (its parent is <bos>)
    int64_t step = 0;              ///< 0-based output position, the depth in the tree
    int64_t token_id = 0;          ///< target vocabulary id
    std::string token;
    float token_log_prob = 0.0f;   ///< log P(token | source, tokens before it), as Hypothesis::step_log_prob
    double log_prob = 0.0;         ///< cumulative: the parent's log_prob + token_log_prob
    double score = 0.0;            ///< log_prob / (step + 1)^length_penalty, as beam search ranks finished ones
    Status status = Status::pruned;
    int64_t rank = 0;              ///< position among the step's candidates of its sentence (0: the best)
    int64_t token_rank = 0;        ///< rank of the token among all tokens at its parent, as Hypothesis::rank
    bool forced = false;           ///< prefix decoding: given, not chosen
    std::vector<float> attention;  ///< the attention row of its step over BeamTree::source (empty without attention)
};

std::string to_string(BeamNode::Status s);  ///< "kept", "pruned", "finished"

/// The search of one sentence. Nodes are in creation order: by step, then by
/// rank, so a parent always comes before its children.
struct BeamTree {
    std::vector<std::string> source;  ///< source tokens as the model saw them, "<eos>" last (Translation::src_tokens)
    TokenLevel level = TokenLevel::word;
    int64_t beam_size = 1;
    int64_t num_hypotheses = 1;       ///< how many finished leaves became Translation::hypotheses
    double length_penalty = 1.0;
    bool attention_available = true;  ///< false for Scoring::none: nodes carry no attention rows
    /// Which map the nodes' attention rows are of: the hypotheses' primary one (not kept in files:
    /// a tree read back has the RNN's, cross layer 0 head 0).
    AttentionMapId attention_map;
    std::vector<BeamNode> nodes;
    std::vector<int64_t> finished;    ///< finished node ids, best first (ties: in the order they finished)

    const BeamNode& node(int64_t id) const;  ///< throws Error for an id out of range
    /// The nodes extending `id` (-1: the first step's nodes), by rank.
    std::vector<int64_t> children(int64_t id) const;
    /// Node ids from the first token down to `id`.
    std::vector<int64_t> path(int64_t id) const;
    /// Number of steps recorded (the deepest node's step + 1).
    int64_t steps() const;
    /// The partial hypothesis ending at node `id`, as a Hypothesis a heatmap can
    /// show: tokens, ids, text, log_prob, score, step_log_prob, rank (token
    /// ranks), forced_steps, and one attention row per token of the attention_map
    /// map (no other map, raw scores, context norms or top-k: the tree does not keep them).
    Hypothesis partial_hypothesis(int64_t id) const;

    /// {"format": "attnviz-beam-tree", "version": 1, "source", "level", "beam_size",
    ///  "num_hypotheses", "length_penalty", "attention_available", "finished": [ids],
    ///  "nodes": [{"id", "parent" (null: a first token), "step", "token", "token_id",
    ///  "token_log_prob", "log_prob", "score", "status", "rank", "token_rank", "forced",
    ///  "attention"}]}. Numbers read back exactly.
    nlohmann::json to_json() const;
    /// Reads to_json's output back (other keys are ignored) and checks it: ids in
    /// order, parents before children one step up, finished ids finished and best
    /// first, attention rows as long as the source. Throws FileError naming the
    /// node and the field.
    static BeamTree from_json(const nlohmann::json& j);
};

/// Parses a beam-tree file: a JSON array of trees (as translate --beam-tree
/// writes it) or a single tree. Throws FileError on malformed JSON or trees.
std::vector<BeamTree> parse_beam_trees(const std::string& text);

}  // namespace attnviz
