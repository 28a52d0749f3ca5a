// Subword pieces merged into words: grouping, attention, the merged translation.
#include "core/analysis/subword_merge.hpp"

#include <cmath>

#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/text/text.hpp"
#include "core/text/unicode.hpp"
#include "core/text/vocab.hpp"

namespace attnviz {

const char* const merged_words_note = "words (columns summed, rows averaged)";

namespace {

const std::string k_boundary = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's space

bool starts_word(const std::string& piece) { return piece.compare(0, k_boundary.size(), k_boundary) == 0; }

/// A pretrained model's own markup token ("<s>" BART's source starts with, "<mask>", "<extra_id_0>"):
/// "<", an optional "/", a lower-case letter, letters, digits or "_", ">". Not a byte piece ("<0xE4>"),
/// which is part of a word.
bool is_markup(const std::string& t) {
    if (t.size() < 3 || t.front() != '<' || t.back() != '>') return false;
    size_t i = t[1] == '/' ? 2 : 1;
    if (i >= t.size() - 1 || t[i] < 'a' || t[i] > 'z') return false;
    for (; i < t.size() - 1; ++i)
        if (!((t[i] >= 'a' && t[i] <= 'z') || (t[i] >= '0' && t[i] <= '9') || t[i] == '_')) return false;
    return true;
}

/// A word of byte pieces (a byte-level BPE model's parts of one character are named by their bytes,
/// "\xE2" "\x98" "\x83"): the text they make together ("☃") when it is UTF-8 without control
/// characters, else the word as it was.
std::string joined_bytes(const std::string& w) {
    if (w.find("\\x") == std::string::npos) return w;
    auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f'); };
    std::string out;
    for (size_t i = 0; i < w.size(); ++i) {
        if (w[i] == '\\' && i + 3 < w.size() && w[i + 1] == 'x' && hex(w[i + 2]) && hex(w[i + 3])) {
            out += static_cast<char>(std::stoi(w.substr(i + 2, 2), nullptr, 16));
            i += 3;
        } else {
            out += w[i];
        }
    }
    return is_valid_utf8(out) && !has_control_characters(out) ? out : w;
}

bool is_special(const std::string& t) {
    return t == Vocab::pad_token || t == Vocab::bos_token || t == Vocab::eos_token || t == Vocab::unk_token ||
           is_markup(t);
}

}  // namespace

WordGroups group_subwords(const std::vector<std::string>& pieces, const std::vector<std::string>& unknown) {
    WordGroups g;
    size_t next_unknown = 0;
    bool open = false;  // the last group is a word that may go on
    for (size_t i = 0; i < pieces.size(); ++i) {
        const std::string& p = pieces[i];
        bool begins = true, can_continue = true;
        std::string text = p;
        if (p == Vocab::unk_token && next_unknown < unknown.size()) {
            begins = starts_word(unknown[next_unknown++]);  // what the <unk> stood for
        } else if (is_special(p)) {
            can_continue = false;  // a group of its own
        } else {
            begins = starts_word(p);
            if (begins) text = p.substr(k_boundary.size());
        }
        if (!begins && can_continue && open) {
            g.words.back() += text;
            g.members.back().push_back(i);
            continue;
        }
        g.words.push_back(text);
        g.members.push_back({i});
        open = can_continue;
    }
    for (auto& w : g.words) {
        if (w.empty()) w = k_boundary;  // a lone "▁" nothing followed: keep it visible
        w = joined_bytes(w);
    }
    return g;
}

std::vector<std::vector<float>> merge_attention(const std::vector<std::vector<float>>& attention,
                                                const WordGroups& target, const WordGroups& source) {
    size_t rows = 0, cols = 0;
    for (const auto& m : target.members) rows += m.size();
    for (const auto& m : source.members) cols += m.size();
    if (rows != attention.size())
        throw Error("merging attention: " + std::to_string(attention.size()) + " rows but the target groups cover " +
                    std::to_string(rows) + " pieces");
    std::vector<std::vector<float>> merged;
    merged.reserve(target.members.size());
    for (const auto& row_group : target.members) {
        std::vector<double> acc(source.members.size(), 0.0);
        for (const size_t r : row_group) {
            if (attention[r].size() != cols)
                throw Error("merging attention: row " + std::to_string(r) + " has " + std::to_string(attention[r].size()) +
                            " weights but the source groups cover " + std::to_string(cols) + " pieces");
            for (size_t c = 0; c < source.members.size(); ++c)
                for (const size_t s : source.members[c]) acc[c] += attention[r][s];
        }
        std::vector<float> row(acc.size());
        for (size_t c = 0; c < acc.size(); ++c) row[c] = static_cast<float>(acc[c] / static_cast<double>(row_group.size()));
        merged.push_back(std::move(row));
    }
    return merged;
}

namespace {

/// Decoder self-attention's keys are the decoder's inputs: key 0 is <bos>, key j is output piece
/// j-1. Grouped as the views label them: <bos>, then every output word but the last (its pieces'
/// keys are one place on). When the output ends inside a word (the length limit), the last word's
/// earlier pieces are keys too: one more group, after the others, that the caller drops.
WordGroups decoder_input_groups(const WordGroups& target, size_t steps) {
    WordGroups g;
    g.words.push_back(Vocab::bos_token);
    g.members.push_back({0});
    for (size_t w = 0; w < target.members.size(); ++w) {
        std::vector<size_t> keys;
        for (const size_t p : target.members[w])
            if (p + 1 < steps) keys.push_back(p + 1);
        if (keys.empty()) continue;
        g.words.push_back(target.words[w]);
        g.members.push_back(std::move(keys));
    }
    return g;
}

Hypothesis merge_hypothesis(const Hypothesis& h, const WordGroups& source) {
    const WordGroups target = group_subwords(h.tokens);
    Hypothesis m;
    m.tokens = target.words;
    m.log_prob = h.log_prob;
    m.score = h.score;
    m.text = h.text;
    for (const AttentionMap& map : h.attention.maps) {
        // Queries and keys are pieces of the output (target) or of the source, by kind.
        const bool queries_out = map.id.kind != AttentionKind::encoder_self;
        const bool keys_out = map.id.kind == AttentionKind::decoder_self;
        AttentionMatrix weights = map.weights;
        if (!keys_out) {
            m.attention.maps.push_back(
                AttentionMap{map.id, merge_attention(weights, queries_out ? target : source, source), {}});
            continue;
        }
        for (auto& row : weights) row.resize(h.tokens.size(), 0.0f);  // causal rows: later keys weigh 0
        auto merged = merge_attention(weights, target, decoder_input_groups(target, h.tokens.size()));
        for (auto& row : merged) row.resize(target.members.size());  // <bos> and the words before the last
        m.attention.maps.push_back(AttentionMap{map.id, std::move(merged), {}});
    }
    auto per_word = [&](const std::vector<float>& v, bool mean) {
        std::vector<float> out;
        if (v.size() != h.tokens.size()) return out;  // not recorded
        for (const auto& group : target.members) {
            double sum = 0;
            for (const size_t r : group) sum += v[r];
            out.push_back(static_cast<float>(mean ? sum / static_cast<double>(group.size()) : sum));
        }
        return out;
    };
    m.context_norm = per_word(h.context_norm, true);
    m.step_log_prob = per_word(h.step_log_prob, false);
    for (size_t w = 0; w < target.members.size(); ++w) {
        const auto last_piece = static_cast<int64_t>(target.members[w].back());
        if (last_piece < h.forced_steps) m.forced_steps = static_cast<int64_t>(w) + 1;
        if (h.first_divergence >= 0 && m.first_divergence < 0 && last_piece >= h.first_divergence)
            m.first_divergence = static_cast<int64_t>(w);
    }
    return m;
}

}  // namespace

Translation merge_subwords(const Translation& t) {
    const WordGroups source = group_subwords(t.src_tokens, t.unknown);
    Translation out;
    out.input = t.input;
    out.src_tokens = source.words;
    out.unknown = t.unknown;
    out.attention_available = t.attention_available;
    out.merged = merged_words_note;
    for (const Hypothesis& h : t.hypotheses) out.hypotheses.push_back(merge_hypothesis(h, source));
    return out;
}

SentenceAttribution merge_subwords(const SentenceAttribution& a, const std::vector<std::string>& unknown) {
    const WordGroups source = group_subwords(a.source, unknown);
    std::vector<std::string> pieces;
    pieces.reserve(a.steps.size());
    for (const StepAttribution& s : a.steps) pieces.push_back(s.token);
    const WordGroups target = group_subwords(pieces);
    SentenceAttribution out;
    out.input = a.input;
    out.source = source.words;
    out.output = target.words;
    out.text = a.text;
    out.attention_map = a.attention_map;
    out.methods = a.methods;
    out.ig_steps = a.ig_steps;
    out.ig_auto = a.ig_auto;
    out.ig_tolerance = a.ig_tolerance;
    out.ig_relative_error = a.ig_relative_error;
    out.ig_converged = a.ig_converged;
    out.ig_work_capped = a.ig_work_capped;
    auto merge_columns = [&](const std::vector<float>& row, bool norm) {
        std::vector<double> merged(source.members.size(), 0.0);
        for (size_t c = 0; c < source.members.size(); ++c)
            for (const size_t p : source.members[c]) {
                const double v = p < row.size() ? row[p] : 0.0;
                merged[c] += norm ? v * v : v;
            }
        if (norm)
            for (double& v : merged) v = std::sqrt(v);
        return merged;
    };
    for (size_t w = 0; w < target.members.size(); ++w) {
        StepAttribution step;
        step.token = target.words[w];
        const StepAttribution& first = a.steps[target.members[w].front()];
        step.id = first.id;
        bool attention = true;
        std::vector<std::vector<float>> attention_rows;
        for (const size_t p : target.members[w]) {
            const StepAttribution& piece = a.steps[p];
            step.log_prob += piece.log_prob;
            step.baseline_log_prob += piece.baseline_log_prob;
            step.completeness_error += piece.completeness_error;
            step.ig_steps = std::max(step.ig_steps, piece.ig_steps);
            attention = attention && !piece.attention.empty();
            attention_rows.push_back(piece.attention);
        }
        if (attention) {
            WordGroups one;  // the step's own pieces as one row group
            one.words = {step.token};
            one.members.emplace_back();
            for (size_t i = 0; i < attention_rows.size(); ++i) one.members.back().push_back(i);
            step.attention = merge_attention(attention_rows, one, source).front();
        }
        for (const AttributionMethod m : a.methods) {
            std::vector<double> sum(source.members.size(), 0.0);
            bool all = true;
            for (const size_t p : target.members[w]) {
                const AttributionScores* scores = a.steps[p].find(m);
                if (!scores) {
                    all = false;
                    break;
                }
                const auto merged = merge_columns(scores->source, m == AttributionMethod::saliency);
                for (size_t c = 0; c < sum.size(); ++c) sum[c] += merged[c];
            }
            if (!all) continue;
            AttributionScores scores;
            scores.source.assign(sum.begin(), sum.end());
            step.scores[m] = std::move(scores);
        }
        out.steps.push_back(std::move(step));
    }
    return out;
}

}  // namespace attnviz
