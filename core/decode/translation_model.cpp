// TranslationModel: the immutable bundle every translation goes through.
#include "core/decode/translation_model.hpp"

#include <algorithm>

#include "core/config/pretrained_config.hpp"
#include "core/decode/beam.hpp"
#include "core/decode/greedy.hpp"
#include "core/io/error.hpp"
#include "core/model/families.hpp"
#include "core/model/inference_precision.hpp"
#include "core/text/pretrained_tokenizer.hpp"

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

DecodeOptions TranslationModel::decode_defaults() const {
    DecodeOptions d;
    const auto& spec = config().pretrained;
    if (!spec || !m_tokenizer->pretrained()) return d;
    const GenerationConfig& g = spec->generation;
    // The model's ids -> attnviz's (core/config/pretrained_config.hpp's PretrainedSpec).
    const auto rows = m_tokenizer->pretrained_rows(/*target=*/true);
    std::vector<int64_t> to_attnviz(static_cast<size_t>(std::max<int64_t>(spec->model.target_vocab_size(), 1)), -1);
    for (size_t i = 0; i < rows.size(); ++i)
        if (rows[i] >= 0 && rows[i] < static_cast<int64_t>(to_attnviz.size()))
            to_attnviz[static_cast<size_t>(rows[i])] = static_cast<int64_t>(i);
    auto id = [&](int64_t model_id) {
        return model_id >= 0 && model_id < static_cast<int64_t>(to_attnviz.size()) ? to_attnviz[static_cast<size_t>(model_id)] : -1;
    };
    d.beam_size = std::min<int64_t>(g.num_beams, 100);
    d.num_hypotheses = std::min<int64_t>(g.num_return_sequences, d.beam_size);
    d.max_length = std::clamp<int64_t>(g.max_generated(spec->model), 1, max_decode_length);
    d.length_penalty = g.length_penalty;  // negative too, as generate()
    d.normalize_input = false;  // the model's tokenizer normalises as it was trained to
    GenerationRules& r = d.generation;
    r.transformers_search = true;
    r.early_stopping = g.early_stopping == EarlyStopping::heuristic ? 0 : g.early_stopping == EarlyStopping::on_full ? 1 : 2;
    r.forced_first = id(g.forced_bos_token_id);
    r.forced_last = id(g.forced_eos_token_id);
    // MinNewTokensLengthLogitsProcessor: min_new_tokens generated tokens, the start token before them.
    r.min_length = std::max(g.min_length, g.min_new_tokens > 0 ? g.min_new_tokens + 1 : 0);
    r.no_repeat_ngram = g.no_repeat_ngram_size;
    r.repetition_penalty = g.repetition_penalty;
    r.start_token = spec->decoder_start_row;
    for (const int64_t t : g.suppress_tokens)
        if (id(t) >= 0) r.suppress.push_back(id(t));
    for (const int64_t t : g.begin_suppress_tokens)
        if (id(t) >= 0) r.begin_suppress.push_back(id(t));
    // SuppressTokensAtBeginLogitsProcessor's begin_index: the step after a forced first token.
    r.begin_suppress_step = g.forced_bos_token_id >= 0 ? 1 : 0;
    for (const auto& words : g.bad_words_ids) {
        std::vector<int64_t> mapped;
        for (int64_t w : words) mapped.push_back(id(w));
        if (std::find(mapped.begin(), mapped.end(), -1) == mapped.end()) r.bad_words.push_back(std::move(mapped));
    }
    return d;
}

std::vector<std::string> TranslationModel::source_languages() const {
    return m_tokenizer->pretrained() ? m_tokenizer->pretrained()->source_languages() : std::vector<std::string>{};
}

std::vector<std::string> TranslationModel::target_languages() const {
    return m_tokenizer->pretrained() ? m_tokenizer->pretrained()->target_languages() : std::vector<std::string>{};
}

DecodeOptions TranslationModel::with_languages(std::vector<std::vector<std::string>>& sources,
                                               const DecodeOptions& options) const {
    const auto& pt = m_tokenizer->pretrained();
    if (!pt) {
        if (!options.source_lang.empty() || !options.target_lang.empty())
            throw ConfigError("this model translates one language pair: it has no languages to choose from");
        return options;
    }
    DecodeOptions d = options;
    if (pt->kind() == PretrainedTokenizerKind::marian) {
        if (!options.source_lang.empty()) pt->language_token(options.source_lang, false);  // says there is no choice
        if (!options.target_lang.empty()) {
            const std::string code = m_tokenizer->pretrained_name(pt->language_token(options.target_lang, true), false);
            for (auto& s : sources)
                if (!s.empty()) s.insert(s.begin(), code);
        }
        return d;
    }
    if (pt->kind() == PretrainedTokenizerKind::bart || pt->kind() == PretrainedTokenizerKind::t5) {
        // No languages (BART's tokenizer puts <s> first itself; T5's task prefix is typed text); a
        // language given is refused in one line.
        if (!options.source_lang.empty()) pt->language_token(options.source_lang, false);
        if (!options.target_lang.empty()) pt->language_token(options.target_lang, true);
        return d;
    }
    // M2M100 / NLLB / mBART-50: [source code] tokens </s>; the target's code is the first output token.
    const std::string src = !options.source_lang.empty() ? options.source_lang : pt->default_source_language();
    const std::string src_code = m_tokenizer->pretrained_name(pt->language_token(src, false), false);
    for (auto& s : sources)
        if (!s.empty()) s.insert(s.begin(), src_code);
    const std::string tgt = !options.target_lang.empty() ? options.target_lang : pt->default_target_language();
    if (!tgt.empty()) {
        d.generation.forced_first = m_tgt_vocab->id(m_tokenizer->pretrained_name(pt->language_token(tgt, true), true));
    } else if (d.generation.forced_first < 0) {
        const auto langs = pt->target_languages();
        throw ConfigError("this model translates into " + std::to_string(langs.size()) +
                          " languages: choose one with --target-lang (e.g. " + (langs.empty() ? std::string("fr") : langs.front()) + ")");
    }
    return d;
}

void TranslationModel::set_texts(std::vector<Translation>& results) const {
    if (!m_tokenizer->pretrained()) return;
    for (auto& t : results)
        for (auto& h : t.hypotheses) h.text = m_tokenizer->decode(until_eos(h.tokens));
}

std::vector<Translation> TranslationModel::translate(const std::vector<std::string>& sentences,
                                                     const DecodeOptions& options) const {
    std::vector<std::vector<std::string>> sources;
    sources.reserve(sentences.size());
    for (const auto& s : sentences) sources.push_back(m_tokenizer->encode(s, options.normalize_input));
    auto results = translate_tokens(sources, options);
    for (size_t i = 0; i < sentences.size(); ++i) results[i].input = sentences[i];
    return results;
}

std::vector<Translation> TranslationModel::translate_tokens(const std::vector<std::vector<std::string>>& sources_in,
                                                            const DecodeOptions& options_in) const {
    std::vector<std::vector<std::string>> sources = sources_in;
    const DecodeOptions options = with_languages(sources, options_in);
    const bool beam = options.beam_size > 1 || options.beam_tree;  // beam width 1 is greedy, with a tree
    auto results = beam ? beam_decode(search_model(), sources, options) : greedy_decode(search_model(), sources, options);
    set_texts(results);
    return results;
}

std::vector<Translation> TranslationModel::force(const std::vector<std::pair<std::string, std::string>>& pairs,
                                                 ForceMode mode, const DecodeOptions& options) const {
    std::vector<std::vector<std::string>> sources, targets;
    for (const auto& [source, target] : pairs) {
        sources.push_back(m_tokenizer->encode(source, options.normalize_input));
        targets.push_back(m_tokenizer->encode_target(target, options.normalize_input));
    }
    auto results = force_tokens(sources, targets, mode, options);
    for (size_t i = 0; i < pairs.size(); ++i) results[i].input = pairs[i].first;
    return results;
}

std::vector<Translation> TranslationModel::force_tokens(const std::vector<std::vector<std::string>>& sources_in,
                                                        const std::vector<std::vector<std::string>>& targets_in,
                                                        ForceMode mode, const DecodeOptions& options_in) const {
    std::vector<std::vector<std::string>> sources = sources_in, targets = targets_in;
    const DecodeOptions options = with_languages(sources, options_in);
    // M2M100 / NLLB: the target language's code is the first output token, given with the target.
    // (BART's <s>, forced first as well, is where its tokenizer put it already.)
    if (options.generation.forced_first >= 0)
        for (auto& t : targets)
            if (t.empty() || t.front() != m_tgt_vocab->token(options.generation.forced_first))
                t.insert(t.begin(), m_tgt_vocab->token(options.generation.forced_first));
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
    std::vector<Translation> results;
    if (mode == ForceMode::prefix && (options.beam_size > 1 || options.beam_tree)) {
        results = beam_decode(search_model(), sources, options, &given);
    } else {
        // A reference is one path: nothing to search.
        DecodeOptions greedy = options;
        greedy.beam_size = greedy.num_hypotheses = 1;
        greedy.beam_tree = false;
        results = greedy_decode(search_model(), sources, greedy, &given);
    }
    set_texts(results);
    return results;
}

Network TranslationModel::clone_network(const torch::Device& device) const {
    check_trainable_precision(*m_network, "training or fine-tuning");  // int8 / bf16 weights stay as they are
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

std::shared_ptr<const TranslationModel> TranslationModel::with_heads_masked(const std::vector<AttentionMapId>& off) const {
    HeadGates gates = HeadGates::mask(m_network->head_groups(), off);  // throws before anything is built
    Network shared = share_network(*m_network);
    if (!off.empty()) shared->set_head_gates(std::move(gates));
    return std::make_shared<const TranslationModel>(shared, m_src_vocab, m_tgt_vocab, m_tokenizer, m_trained_with,
                                                    m_history, m_corpus_name);
}

}  // namespace attnviz
