// TranslationModel: the immutable bundle every translation goes through.
#include "core/decode/translation_model.hpp"

#include "core/decode/beam.hpp"
#include "core/decode/greedy.hpp"
#include "core/io/error.hpp"
#include "core/model/families.hpp"

namespace attnviz {

TranslationModel::TranslationModel(Network network, std::shared_ptr<const Vocab> src_vocab,
                                   std::shared_ptr<const Vocab> tgt_vocab, TokenLevel level, TrainConfig trained_with,
                                   TrainHistory history, std::string corpus_name)
    : TranslationModel(std::move(network), std::move(src_vocab), std::move(tgt_vocab), Tokenizer::for_level(level),
                       std::move(trained_with), std::move(history), std::move(corpus_name)) {}

TranslationModel::TranslationModel(Network network, std::shared_ptr<const Vocab> src_vocab,
                                   std::shared_ptr<const Vocab> tgt_vocab, TokenizerPtr tokenizer,
                                   TrainConfig trained_with, TrainHistory history, std::string corpus_name)
    : m_network(std::move(network)),
      m_src_vocab(std::move(src_vocab)),
      m_tgt_vocab(std::move(tgt_vocab)),
      m_tokenizer(std::move(tokenizer)),
      m_trained_with(std::move(trained_with)),
      m_history(std::move(history)),
      m_corpus_name(std::move(corpus_name)) {
    if (!m_network || !m_src_vocab || !m_tgt_vocab) throw ConfigError("translation model: network or vocabulary missing");
    if (!m_tokenizer) throw ConfigError("translation model: tokenizer missing");
    if (config().src_vocab != static_cast<int64_t>(m_src_vocab->size()) ||
        config().tgt_vocab != static_cast<int64_t>(m_tgt_vocab->size()))
        throw ConfigError("translation model: the network's vocabulary sizes (" + std::to_string(config().src_vocab) +
                          " / " + std::to_string(config().tgt_vocab) + ") differ from the vocabularies' (" +
                          std::to_string(m_src_vocab->size()) + " / " + std::to_string(m_tgt_vocab->size()) + ")");
    m_network->eval();
}

torch::Device TranslationModel::device() const {
    auto params = m_network->parameters();
    return params.empty() ? torch::Device(torch::kCPU) : params.front().device();
}

int64_t TranslationModel::parameter_count() const { return count_parameters(*m_network); }

std::vector<Translation> TranslationModel::translate(const std::vector<std::string>& sentences,
                                                     const DecodeOptions& options) const {
    std::vector<std::vector<std::string>> sources;
    sources.reserve(sentences.size());
    for (const auto& s : sentences) sources.push_back(m_tokenizer->encode(s, options.normalize_input));
    auto results = translate_tokens(sources, options);
    for (size_t i = 0; i < sentences.size(); ++i) results[i].input = sentences[i];
    return results;
}

std::vector<Translation> TranslationModel::translate_tokens(const std::vector<std::vector<std::string>>& sources,
                                                            const DecodeOptions& options) const {
    const bool beam = options.beam_size > 1 || options.beam_tree;  // beam width 1 is greedy, with a tree
    return beam ? beam_decode(search_model(), sources, options) : greedy_decode(search_model(), sources, options);
}

std::vector<Translation> TranslationModel::force(const std::vector<std::pair<std::string, std::string>>& pairs,
                                                 ForceMode mode, const DecodeOptions& options) const {
    std::vector<std::vector<std::string>> sources, targets;
    for (const auto& [source, target] : pairs) {
        sources.push_back(m_tokenizer->encode(source, options.normalize_input));
        targets.push_back(m_tokenizer->encode(target, options.normalize_input));
    }
    auto results = force_tokens(sources, targets, mode, options);
    for (size_t i = 0; i < pairs.size(); ++i) results[i].input = pairs[i].first;
    return results;
}

std::vector<Translation> TranslationModel::force_tokens(const std::vector<std::vector<std::string>>& sources,
                                                        const std::vector<std::vector<std::string>>& targets,
                                                        ForceMode mode, const DecodeOptions& options) const {
    if (sources.size() != targets.size())
        throw ConfigError("forced decoding: " + std::to_string(sources.size()) + " sources but " +
                          std::to_string(targets.size()) + " targets");
    std::vector<std::vector<int64_t>> given;
    for (const auto& target : targets) {
        // A given target is decoded step by step, each keeping its attention row: no longer
        // than decoding's own longest output.
        if (static_cast<int64_t>(target.size()) >= max_decode_length)
            throw ConfigError("forced decoding: target " + std::to_string(given.size() + 1) + " has " +
                              std::to_string(target.size()) + " tokens; a given target may have at most " +
                              std::to_string(max_decode_length - 1) + " (with its <eos>, the " +
                              std::to_string(max_decode_length) + " steps decoding runs at most)");
        std::vector<int64_t> ids = m_tgt_vocab->encode(target);
        for (auto id : ids)
            if (id == Vocab::pad_id || id == Vocab::bos_id)
                throw ConfigError("forced decoding: the target holds " + m_tgt_vocab->token(id) +
                                  ", which is never an output token");
        if (mode == ForceMode::reference) ids.push_back(Vocab::eos_id);
        given.push_back(std::move(ids));
    }
    if (mode == ForceMode::prefix && (options.beam_size > 1 || options.beam_tree))
        return beam_decode(search_model(), sources, options, &given);
    // A reference is one path: nothing to search.
    DecodeOptions greedy = options;
    greedy.beam_size = greedy.num_hypotheses = 1;
    greedy.beam_tree = false;
    return greedy_decode(search_model(), sources, greedy, &given);
}

Network TranslationModel::clone_network(const torch::Device& device) const {
    Network copy = attnviz::clone_network(*m_network, device);
    copy->train();
    return copy;
}

std::shared_ptr<const TranslationModel> TranslationModel::on_device(const torch::Device& device) const {
    if (device == this->device()) {
        if (auto self = weak_from_this().lock()) return self;
    }
    Network moved = clone_network(device);
    return std::make_shared<const TranslationModel>(moved, m_src_vocab, m_tgt_vocab, m_tokenizer, m_trained_with, m_history,
                                                    m_corpus_name);
}

}  // namespace attnviz
