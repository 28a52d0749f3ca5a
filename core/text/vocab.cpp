// The vocabulary: ids by frequency, JSON and files.
#include "core/text/vocab.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/io/atomic_file.hpp"
#include "core/io/error.hpp"
#include "core/io/file_read.hpp"
#include "core/io/json_bounded.hpp"
#include "core/io/message.hpp"

namespace attnviz {

const char* const Vocab::pad_token = "<pad>";
const char* const Vocab::bos_token = "<bos>";
const char* const Vocab::eos_token = "<eos>";
const char* const Vocab::unk_token = "<unk>";

Vocab::Vocab() {
    add(pad_token);
    add(bos_token);
    add(eos_token);
    add(unk_token);
}

void Vocab::add(const std::string& token) {
    if (m_index.count(token)) return;
    m_index.emplace(token, static_cast<int64_t>(m_tokens.size()));
    m_tokens.push_back(token);
}

Vocab Vocab::build(const std::vector<std::vector<std::string>>& sentences, int min_freq, size_t max_tokens) {
    std::unordered_map<std::string, int64_t> counts;
    for (const auto& sentence : sentences)
        for (const auto& token : sentence) ++counts[token];
    std::vector<std::pair<std::string, int64_t>> sorted(counts.begin(), counts.end());
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    Vocab vocab;
    for (const auto& [token, count] : sorted) {
        if (count < min_freq) break;  // sorted by count: the rest are rarer still
        if (max_tokens > 0 && vocab.size() - 4 >= max_tokens) break;
        if (!is_vocab_token(token)) continue;
        vocab.add(token);
    }
    return vocab;
}

int64_t Vocab::id(const std::string& token) const {
    const auto it = m_index.find(token);
    return it == m_index.end() ? unk_id : it->second;
}

bool Vocab::contains(const std::string& token) const { return m_index.count(token) > 0; }

const std::string& Vocab::token(int64_t id) const {
    if (id < 0 || id >= static_cast<int64_t>(m_tokens.size()))
        throw std::out_of_range("token id " + std::to_string(id) + " is outside the vocabulary (size " +
                                std::to_string(m_tokens.size()) + ")");
    return m_tokens[static_cast<size_t>(id)];
}

std::vector<int64_t> Vocab::encode(const std::vector<std::string>& tokens) const {
    std::vector<int64_t> ids;
    ids.reserve(tokens.size());
    for (const auto& t : tokens) ids.push_back(id(t));
    return ids;
}

std::vector<std::string> Vocab::decode(const std::vector<int64_t>& ids, bool stop_at_eos) const {
    std::vector<std::string> tokens;
    for (const int64_t i : ids) {
        if (i == eos_id && stop_at_eos) break;
        if (i == pad_id) continue;
        tokens.push_back(token(i));
    }
    return tokens;
}

nlohmann::json Vocab::to_json() const {
    return nlohmann::json{{"format", "attnviz-vocab"}, {"version", 1}, {"tokens", m_tokens}};
}

void Vocab::add_checked(size_t i, const std::string& token) {
    const char* specials[] = {pad_token, bos_token, eos_token, unk_token};
    if (i < 4) {
        if (token != specials[i])
            throw FileError("vocabulary token " + std::to_string(i) + " is " + quote(token) + ", expected '" + specials[i] +
                            "'");
        return;
    }
    if (!is_vocab_token(token))
        throw FileError("vocabulary token " + std::to_string(i) + " " + quote(token) +
                        (token.empty() ? " is empty"
                                       : " holds a control character (a line break, tab, escape, NEL, ...), a "
                                         "line separator, bytes that are not UTF-8 or \"|||\", which would break "
                                         "the output's one line per sentence or the terminal showing it"));
    if (contains(token)) throw FileError("vocabulary token " + std::to_string(i) + " " + quote(token) + " appears twice");
    add(token);
}

namespace {
void check_special_count(size_t n) {
    if (n < 4)
        throw FileError("vocabulary has " + std::to_string(n) +
                        " tokens, expected at least the 4 special tokens <pad> <bos> <eos> <unk>");
}
}  // namespace

Vocab Vocab::from_json(const nlohmann::json& j) {
    const char* expected = "expected a JSON object {\"format\": \"attnviz-vocab\", \"tokens\": [\"<pad>\", "
                           "\"<bos>\", \"<eos>\", \"<unk>\", ...]}";
    if (!j.is_object() || !j.contains("tokens") || !j["tokens"].is_array())
        throw FileError(std::string("not a vocabulary: ") + expected);
    if (j.contains("format") && j["format"] != "attnviz-vocab")
        throw FileError("not a vocabulary: \"format\" is " + describe_json(j["format"]) + ", expected \"attnviz-vocab\"");
    const auto& tokens = j["tokens"];
    check_special_count(tokens.size());
    Vocab vocab;
    vocab.reserve(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
        if (!tokens[i].is_string())
            throw FileError("vocabulary token " + std::to_string(i) + " is " + describe_json(tokens[i]) +
                            ", expected a string");
        vocab.add_checked(i, tokens[i].get_ref<const std::string&>());
    }
    return vocab;
}

Vocab Vocab::from_tokens(std::vector<std::string> tokens) {
    check_special_count(tokens.size());
    Vocab vocab;
    vocab.reserve(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) vocab.add_checked(i, tokens[i]);
    vocab.m_tokens = std::move(tokens);  // the same strings: the given ones kept, not a second copy
    return vocab;
}

void Vocab::reserve(size_t n) {
    m_tokens.reserve(n);
    m_index.reserve(n);
}

void Vocab::save(const std::string& path) const { write_file_atomic(path, to_json().dump(1) + "\n"); }

Vocab Vocab::load(const std::string& path) {
    // A vocabulary file is a list of tokens: 256 MiB is far more than any real one.
    const std::string text = read_regular_file(path, uint64_t(256) << 20, "vocabulary");
    const std::string what = "vocabulary " + quote(path, quote_path_max);
    const nlohmann::json j = parse_json_bounded(text, what);
    try {
        return from_json(j);
    } catch (const FileError& e) {
        throw FileError(what + ": " + e.what());
    } catch (const nlohmann::json::exception& e) {
        throw FileError(what + ": " + json_error_text(e));
    }
}

bool is_vocab_token(const std::string& token) {
    return !token.empty() && !has_control_characters(token) && token.find("|||") == std::string::npos;
}

std::vector<std::string> until_eos(const std::vector<std::string>& tokens) {
    const auto end = std::find(tokens.begin(), tokens.end(), Vocab::eos_token);
    return {tokens.begin(), end};
}

}  // namespace attnviz
