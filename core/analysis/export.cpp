// Attention export (CSV, JSON) and the CSV reader.
#include "core/analysis/export.hpp"

#include <charconv>

#include <nlohmann/json.hpp>

#include "core/analysis/alignment.hpp"
#include "core/io/error.hpp"
#include "core/io/message.hpp"

namespace attnviz {

namespace {

const Hypothesis& pick(const Translation& t, size_t hypothesis) {
    if (hypothesis >= t.hypotheses.size())
        throw Error("no hypothesis " + std::to_string(hypothesis) + " to export: the translation has " +
                    std::to_string(t.hypotheses.size()));
    return t.hypotheses[hypothesis];
}

// RFC 4180: quote fields with a comma, quote or line break (and, so that
// spreadsheets keep them, fields with leading or trailing spaces).
std::string csv_field(const std::string& s) {
    const bool quote = s.find_first_of(",\"\r\n") != std::string::npos ||
                       (!s.empty() && (s.front() == ' ' || s.back() == ' '));
    if (!quote) return s;
    std::string out = "\"";
    for (const char c : s) {
        if (c == '"') out += '"';
        out += c;
    }
    return out + "\"";
}

// Shortest text that reads back as the same float.
std::string format_float(float v) {
    char buf[32];
    const auto res = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, res.ptr);
}

}  // namespace

std::string attention_csv(const Translation& t, size_t hypothesis) {
    const Hypothesis& h = pick(t, hypothesis);
    const AttentionMatrix& weights = h.attention.weights();
    if (!t.attention_available || weights.size() != h.tokens.size())
        throw Error("no attention weights to export: the hypothesis has " + std::to_string(h.tokens.size()) +
                    " tokens but " + std::to_string(weights.size()) + " attention rows");
    for (size_t r = 0; r < h.tokens.size(); ++r)
        if (weights[r].size() != t.src_tokens.size())
            throw Error("attention row " + std::to_string(r) + " has " + std::to_string(weights[r].size()) +
                        " weights for " + std::to_string(t.src_tokens.size()) + " source tokens");
    const AttentionStats stats = attention_stats(weights);
    std::string out = t.merged.empty() ? std::string() : csv_field("merged: " + t.merged);
    for (const auto& s : t.src_tokens) out += "," + csv_field(s);
    out += ",entropy,max_weight\n";
    for (size_t r = 0; r < h.tokens.size(); ++r) {
        out += csv_field(h.tokens[r]);
        for (const float w : weights[r]) out += "," + format_float(w);
        out += "," + format_float(stats.entropy[r]) + "," + format_float(stats.max_weight[r]) + "\n";
    }
    out += "coverage";
    for (size_t s = 0; s < t.src_tokens.size(); ++s)
        out += "," + format_float(s < stats.coverage.size() ? stats.coverage[s] : 0.0f);
    return out + ",,\n";
}

namespace {

/// attention_json without "attention_maps" (every map: the bulk of it).
nlohmann::json attention_json_head(const Translation& t, size_t hypothesis, const nlohmann::json& model_settings,
                                   const nlohmann::json& decode_settings) {
    const Hypothesis& h = pick(t, hypothesis);
    nlohmann::json j{
        {"format", "attnviz-attention"},
        {"version", 1},
        {"input", t.input},
        {"source", t.src_tokens},
        {"unknown", t.unknown},
        {"hypothesis", hypothesis},
        {"output", h.tokens},
        {"text", h.text},
        {"log_prob", h.log_prob},
        {"score", h.score},
        {"attention_available", t.attention_available},
        {"weights", h.attention.weights()},
        {"raw_scores", h.attention.scores()},
        {"context_norm", h.context_norm},
        {"model", model_settings.is_null() ? nlohmann::json::object() : model_settings},
        {"decode", decode_settings.is_null() ? nlohmann::json::object() : decode_settings},
    };
    // "Why this word?": per-step log-probability and rank, the candidates, the forced part.
    if (!h.step_log_prob.empty()) j["step_log_prob"] = h.step_log_prob;
    if (!h.rank.empty()) j["rank"] = h.rank;
    if (!h.top_k.empty()) {
        nlohmann::json steps = nlohmann::json::array();
        for (const auto& cands : h.top_k) {
            nlohmann::json row = nlohmann::json::array();
            for (const auto& c : cands) row.push_back({{"token", c.token}, {"id", c.id}, {"prob", c.prob}});
            steps.push_back(std::move(row));
        }
        j["top_k"] = std::move(steps);
    }
    const AttentionMatrix& weights = h.attention.weights();
    if (t.attention_available && !weights.empty() && weights.size() == h.tokens.size()) {
        const AttentionStats stats = attention_stats(weights);
        j["entropy"] = stats.entropy;
        j["max_weight"] = stats.max_weight;
        j["coverage"] = stats.coverage;
        // The primary map's links: the model's default (the RNN's map, a Transformer's last-layer
        // mean: what translate --alignment-out writes), or the cross map a view put first.
        const AttentionMapId& primary = h.attention.primary().id;
        if (primary.kind == AttentionKind::cross) {
            HardAlignmentOptions options;
            options.heads.layer = primary.layer;
            if (primary.head >= 0) options.heads.heads = {primary.head};
            nlohmann::json links = nlohmann::json::array();
            const AlignmentLinks argmax = hard_alignment(t, hypothesis, options);
            for (const auto& l : argmax.links()) links.push_back({l.src, l.tgt});
            j["alignment"] = std::move(links);
        }
    }
    if (!t.merged.empty()) j["merged"] = t.merged;
    if (h.forced_steps > 0) {
        j["forced_steps"] = h.forced_steps;
        j["first_divergence"] = h.first_divergence >= 0 ? nlohmann::json(h.first_divergence) : nlohmann::json(nullptr);
    }
    return j;
}

/// Which map it is, as "attention_maps" names it: kind, layer and head.
nlohmann::json map_id_json(const AttentionMap& m) {
    return {{"kind", to_string(m.id.kind)}, {"layer", m.id.layer}, {"head", m.id.head}};
}

/// A matrix as a JSON array of arrays, one row converted at a time (the numbers as nlohmann
/// writes them).
void write_matrix(const AttentionMatrix& rows, const std::function<void(const std::string&)>& out) {
    out("[");
    for (size_t r = 0; r < rows.size(); ++r) out((r ? "," : "") + nlohmann::json(rows[r]).dump());
    out("]");
}

}  // namespace

nlohmann::json attention_json(const Translation& t, size_t hypothesis, const nlohmann::json& model_settings,
                              const nlohmann::json& decode_settings) {
    nlohmann::json j = attention_json_head(t, hypothesis, model_settings, decode_settings);
    // Every map by name: the primary one again, and any other a family records.
    nlohmann::json maps = nlohmann::json::array();
    for (const AttentionMap& m : pick(t, hypothesis).attention.maps) {
        nlohmann::json e = map_id_json(m);
        e["weights"] = m.weights;
        if (!m.scores.empty()) e["raw_scores"] = m.scores;
        maps.push_back(std::move(e));
    }
    j["attention_maps"] = std::move(maps);
    return j;
}

void write_attention_json(const Translation& t, size_t hypothesis, const nlohmann::json& model_settings,
                          const nlohmann::json& decode_settings, const nlohmann::json& extra,
                          const std::function<void(const std::string&)>& out) {
    nlohmann::json head = attention_json_head(t, hypothesis, model_settings, decode_settings);
    for (const auto& [key, value] : extra.items()) head[key] = value;
    std::string text = head.dump();
    text.pop_back();  // the closing brace: "attention_maps" follows
    out(text + ",\"attention_maps\":[");
    const auto& maps = pick(t, hypothesis).attention.maps;
    for (size_t i = 0; i < maps.size(); ++i) {
        const AttentionMap& m = maps[i];
        std::string opening = map_id_json(m).dump();
        opening.pop_back();
        out((i ? "," : "") + opening + ",\"weights\":");
        write_matrix(m.weights, out);
        if (!m.scores.empty()) {
            out(",\"raw_scores\":");
            write_matrix(m.scores, out);
        }
        out("}");
    }
    out("]}");
}

AttentionTable parse_attention_csv(const std::string& csv) {
    // RFC 4180 records; line numbers are those where each record starts.
    std::vector<std::pair<size_t, std::vector<std::string>>> records;
    std::vector<std::string> fields;
    std::string field;
    size_t line = 1, record_line = 1, i = csv.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;  // BOM
    bool in_record = false;
    auto end_field = [&] { fields.push_back(std::move(field)), field.clear(); };
    auto end_record = [&] {
        end_field();
        if (fields.size() > 1 || !fields[0].empty())  // blank lines are skipped
            records.emplace_back(record_line, std::move(fields));
        fields.clear();
        in_record = false;
    };
    while (i < csv.size()) {
        const char c = csv[i];
        if (!in_record) record_line = line, in_record = true;
        if (c == '"' && field.empty()) {
            const size_t open_line = line;
            ++i;
            while (true) {
                if (i >= csv.size())
                    throw FileError("attention CSV line " + std::to_string(open_line) +
                                    ": a quoted field is not closed (expected a closing '\"')");
                if (csv[i] == '"') {
                    if (i + 1 < csv.size() && csv[i + 1] == '"') {
                        field += '"', i += 2;
                        continue;
                    }
                    ++i;
                    break;
                }
                if (csv[i] == '\n') ++line;
                field += csv[i++];
            }
            if (i < csv.size() && csv[i] != ',' && csv[i] != '\n' && csv[i] != '\r')
                throw FileError("attention CSV line " + std::to_string(line) +
                                ": expected ',' or end of line after a quoted field");
            continue;
        }
        if (c == ',') {
            end_field(), ++i;
        } else if (c == '\r' || c == '\n') {
            end_record();
            i += (c == '\r' && i + 1 < csv.size() && csv[i + 1] == '\n') ? 2 : 1;
            ++line;
        } else {
            field += c, ++i;
        }
    }
    if (in_record) end_record();

    AttentionTable table;
    if (records.empty()) throw FileError("attention CSV is empty: expected a header row ',source tokens...'");
    const auto& header = records.front().second;
    const std::string merged_prefix = "merged: ";
    if (header.front().compare(0, merged_prefix.size(), merged_prefix) == 0)
        table.merged = header.front().substr(merged_prefix.size());
    else if (!header.front().empty())
        throw FileError("attention CSV line 1: the first header cell is " + quote(header.front()) +
                        ", expected it empty or \"merged: ...\" (header: ,source tokens...)");
    // The statistics: two trailing columns and a last row "coverage" whose two trailing
    // cells are empty -- which no plain table has (its weights cannot be empty).
    const auto& last = records.back().second;
    const bool stats = records.size() >= 2 && header.size() >= 3 && header[header.size() - 2] == "entropy" &&
                       header.back() == "max_weight" && last.size() == header.size() && last.front() == "coverage" &&
                       last[last.size() - 2].empty() && last.back().empty();
    const size_t extra = stats ? 2 : 0;
    table.source.assign(header.begin() + 1, header.end() - static_cast<std::ptrdiff_t>(extra));
    auto number = [](const std::string& where, const std::string& what, const std::string& cell) {
        float w = 0.0f;
        const char* b = cell.data();
        const char* e = b + cell.size();
        const auto res = std::from_chars(b, e, w);
        if (res.ec != std::errc() || res.ptr != e || cell.empty())
            throw FileError(where + what + " is " + quote(cell) + ", expected a number");
        return w;
    };
    const size_t rows_end = records.size() - (stats ? 1 : 0);
    for (size_t r = 1; r < rows_end; ++r) {
        const auto& [at, row] = records[r];
        const std::string where = "attention CSV line " + std::to_string(at) + ": ";
        if (row.size() != table.source.size() + 1 + extra)
            throw FileError(where + "expected an output token and " + std::to_string(table.source.size()) + " weights" +
                            (stats ? " plus entropy and max_weight" : "") + ", found " + std::to_string(row.size()) +
                            " fields");
        table.output.push_back(row[0]);
        std::vector<float> weights;
        for (size_t k = 1; k <= table.source.size(); ++k)
            weights.push_back(number(where, "weight " + std::to_string(k), row[k]));
        table.weights.push_back(std::move(weights));
        if (stats) {
            table.entropy.push_back(number(where, "entropy", row[row.size() - 2]));
            table.max_weight.push_back(number(where, "max_weight", row.back()));
        }
    }
    if (stats) {
        const std::string where = "attention CSV line " + std::to_string(records.back().first) + ": ";
        for (size_t k = 1; k <= table.source.size(); ++k)
            table.coverage.push_back(number(where, "coverage " + std::to_string(k), last[k]));
    }
    return table;
}

}  // namespace attnviz
